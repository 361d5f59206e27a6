// The sweep across MPI ranks. Compiled only with -DPSW_WITH_MPI=ON (sim/CMakeLists.txt).
//
// Note [Sweep over MPI]
// ~~~~~~~~~~~~~~~~~~~~~
// `mpirun -n N psw sweep --config X --out DIR`: every rank loads the sweep; rank 0 checks
// that all ranks loaded the same one (the fingerprint, Note [Sweep shards]), stages DIR (Note
// [Atomic output folders]) and tells the others where. Then rank 0 only dispatches: each
// worker sends a message (empty at first, then the result of its last point) and gets the
// next point's index, or -1 when none is left, so fast and slow points balance themselves.
// A result is the point's summary as JSON (doubles print and parse back exactly), so rank 0
// builds the same rows, and the same sweep.csv byte for byte, as a single process. Workers
// write their point folders into the staged folder: DIR must be on a filesystem every rank
// sees (as on a cluster's shared home or scratch). A point that fails is reported like in a
// single process, after every point ran, and the staged folder is removed.
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/sim/sweep.hpp"

namespace psw::sim {

namespace {

constexpr int kTagResult = 1;  // worker -> rank 0: the last result (or nothing), asks for work
constexpr int kTagWork = 2;    // rank 0 -> worker: a point index, or -1: stop

class MpiSession {
 public:
  MpiSession() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiSession() { MPI_Finalize(); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Rank 0's string to everyone.
std::string broadcast(std::string text) {
  long long length = static_cast<long long>(text.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  text.resize(static_cast<std::size_t>(length));
  MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

void work(const SweepConfig& sweep, const std::filesystem::path& staging) {
  std::string message;  // empty: the first request
  while (true) {
    MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, kTagResult, MPI_COMM_WORLD);
    long long point = -1;
    MPI_Recv(&point, 1, MPI_LONG_LONG, 0, kTagWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (point < 0) return;
    const auto i = static_cast<std::size_t>(point);
    nlohmann::json result = {{"point", i}};
    try {
      SimulationOptions options;
      options.out_dir = staging / point_folder_name(i);
      result["summary"] = to_json(run_simulation(sweep.points.at(i).config, options).summary);
    } catch (const InputError& e) {
      result["error"] = e.what();
      result["input_error"] = true;
    } catch (const std::exception& e) {
      result["error"] = e.what();
      result["input_error"] = false;
    }
    message = result.dump();
  }
}

}  // namespace

bool launched_by_mpi() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && std::atoi(value) > 1) return true;
  }
  return false;
}

std::optional<SweepResult> run_sweep_mpi(const SweepConfig& sweep, const std::filesystem::path& config_path,
                                         const SweepOptions& options) {
  PSW_CHECK(!options.out_dir.empty(), "a sweep needs an output folder");
  PSW_CHECK(!options.shard, "a sweep over MPI is not sharded");
  MpiSession mpi;
  const std::uint64_t fingerprint = sweep_fingerprint(sweep);
  unsigned long long root_fingerprint = fingerprint;
  MPI_Bcast(&root_fingerprint, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  int mismatch = root_fingerprint != fingerprint ? 1 : 0;
  int any_mismatch = 0;
  MPI_Allreduce(&mismatch, &any_mismatch, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_mismatch) {
    if (mpi.rank() != 0) return std::nullopt;
    throw InputError(config_path.string() + ": the MPI ranks loaded different sweeps (fingerprints differ): do "
                     "they all see the same config and profiles?");
  }

  if (mpi.rank() != 0) {
    const std::string staging = broadcast("");
    if (!staging.empty()) work(sweep, staging);
    return std::nullopt;
  }

  std::optional<StagedFolder> folder;
  try {
    folder.emplace(options.out_dir, "sweep.json");
  } catch (...) {
    broadcast("");  // the workers stop; rank 0 reports
    throw;
  }
  broadcast(folder->path().string());

  const std::size_t n = sweep.points.size();
  std::vector<SweepRow> rows(n);
  std::vector<std::string> errors(n);
  std::vector<char> input_errors(n, 0);
  std::size_t next = 0;
  std::size_t finished = 0;
  int active = mpi.size() - 1;
  while (active > 0) {
    MPI_Status status;
    MPI_Probe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &status);
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string message(static_cast<std::size_t>(length), '\0');
    MPI_Recv(message.data(), length, MPI_CHAR, status.MPI_SOURCE, kTagResult, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!message.empty()) {
      const nlohmann::json result = nlohmann::json::parse(message);
      const auto i = result.at("point").get<std::size_t>();
      if (result.contains("error")) {
        errors[i] = result.at("error").get<std::string>();
        input_errors[i] = result.at("input_error").get<bool>() ? 1 : 0;
      } else {
        rows[i] = sweep_row(sweep, i, simulation_summary_from_json(result.at("summary"), "the summary of point " + std::to_string(i)));
      }
      ++finished;
      if (options.on_point_done) options.on_point_done({i, finished, n});
    }
    const long long assign = next < n ? static_cast<long long>(next++) : -1;
    MPI_Send(&assign, 1, MPI_LONG_LONG, status.MPI_SOURCE, kTagWork, MPI_COMM_WORLD);
    if (assign < 0) --active;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!errors[i].empty()) throw_point_error(sweep, config_path, i, errors[i], input_errors[i] != 0);
  }
  save_text(folder->path() / sweep_csv_name(std::nullopt), sweep_csv(sweep, rows));
  save_text(folder->path() / "sweep.json", sweep_manifest(sweep, fingerprint, std::nullopt));
  folder->commit();
  SweepResult result;
  result.rows = std::move(rows);
  result.csv = folder->target() / sweep_csv_name(std::nullopt);
  result.fingerprint = fingerprint;
  result.mpi_ranks = mpi.size();
  return result;
}

}  // namespace psw::sim
