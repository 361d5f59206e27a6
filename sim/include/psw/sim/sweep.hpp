#pragma once
// Sweeps: every point of a SweepConfig simulated (in parallel threads, in one shard of the
// points, or across MPI ranks), one CSV row per point.
//
// Outputs of a sweep into folder DIR (written as one staged folder: Note [Atomic output
// folders] in psw/common/output.hpp):
//   point-NNNN/   each point's run (requests.csv, summary.json, config.resolved.yaml)
//   sweep.csv     one row per point, in point order (a shard: sweep.shard-K-of-N.csv)
//   sweep.json    the manifest: name, fingerprint, number of points, and the shard
//
// Note [Sweep shards]
// ~~~~~~~~~~~~~~~~~~~
// Shard K of N (1-based) runs the points i with i % N == K - 1 (round robin, so that the
// slow points of a grid, which tend to sit together, spread over the shards). Its CSV holds
// exactly the rows the single-process sweep.csv holds for those points, byte for byte, so
// merging is putting rows in point order under the shared header. The fingerprint (FNV-1a
// over the sweep's name, keys, and every point's overrides, seed, resolved config, hardware
// and model profiles) tells whether shards ran the same sweep.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/experiment_config.hpp"
#include "psw/sim/summary.hpp"

namespace psw::sim {

struct Shard {
  int index = 1;  // K, 1-based
  int count = 1;  // N
  bool contains(std::size_t point) const {
    return point % static_cast<std::size_t>(count) == static_cast<std::size_t>(index - 1);
  }
};
// "K/N" with 1 <= K <= N; InputError naming --shard otherwise.
Shard parse_shard(const std::string& text);

// One point's summary, as sweep.csv shows it.
struct SweepRow {
  std::size_t point = 0;
  std::vector<std::string> values;  // the grid values (YAML text), in key order
  std::uint64_t seed = 0;
  std::string mechanism;
  std::string hardware;
  std::int64_t requests = 0;
  double mean_ms = 0, min_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
  double slo_attainment = 0;
  double throughput_rps = 0;
  double gpu_busy_fraction = 0;
  double training_iterations_per_s = 0;
  std::int64_t switches = 0;             // inference switches (Note [Switch counts])
  std::int64_t training_switch_ins = 0;  // switches that brought training back in
  double startup_overhead_ms = 0;
  double total_overhead_ms = 0;
};

struct SweepProgress {
  std::size_t point = 0;     // the point just finished (index in the sweep)
  std::size_t finished = 0;  // points finished so far
  std::size_t total = 0;     // points this process runs
};

struct SweepOptions {
  std::filesystem::path out_dir;  // required
  unsigned jobs = 0;              // parallel simulations; 0: every core
  std::optional<Shard> shard;
  // Called after each point (from worker threads, one call at a time).
  std::function<void(const SweepProgress&)> on_point_done;
};

struct SweepResult {
  std::vector<SweepRow> rows;    // the points run, in point order
  std::filesystem::path csv;     // the CSV written
  std::uint64_t fingerprint = 0;
  int mpi_ranks = 0;             // over MPI: the ranks (rank 0 dispatching); else 0
};

// Runs the points (all, or the shard's) and writes the folder; throws InputError naming the
// first failed point after every point ran, and then leaves no folder behind.
SweepResult run_sweep(const SweepConfig& sweep, const std::filesystem::path& config_path, const SweepOptions& options);

std::uint64_t sweep_fingerprint(const SweepConfig& sweep);
SweepRow sweep_row(const SweepConfig& sweep, std::size_t point, const SimulationSummary& summary);
std::string sweep_csv_header(const SweepConfig& sweep);
std::string sweep_csv_row(const SweepRow& row);
// Header and rows (in the order given).
std::string sweep_csv(const SweepConfig& sweep, const std::vector<SweepRow>& rows);
// "sweep.csv", or "sweep.shard-K-of-N.csv".
std::string sweep_csv_name(const std::optional<Shard>& shard);
// "point-0007".
std::string point_folder_name(std::size_t point);
// The manifest sweep.json.
std::string sweep_manifest(const SweepConfig& sweep, std::uint64_t fingerprint, const std::optional<Shard>& shard);
// Throws "<config>: point I k=v ...: <what>" for a failed point: InputError when the point
// failed on its input, Error otherwise (a write that failed).
[[noreturn]] void throw_point_error(const SweepConfig& sweep, const std::filesystem::path& config_path,
                                    std::size_t point, const std::string& what, bool input_error);

// Merges shard folders (each written by run_sweep with a shard) into `out_dir`: checks that
// they share one fingerprint, that every shard 1..N is there once and that every point is
// there exactly once, in the shard it belongs to; writes sweep.csv (byte-identical to a
// single-process run) and sweep.json. Point folders stay in the shard folders.
struct MergeResult {
  std::string name;
  std::size_t points = 0;
  std::filesystem::path csv;
};
MergeResult merge_sweep_shards(const std::vector<std::filesystem::path>& shard_dirs, const std::filesystem::path& out_dir);

#ifdef PSW_WITH_MPI
// Whether this process was started by mpirun with more than one rank (from the launcher's
// environment, without initialising MPI).
bool launched_by_mpi();
// The sweep across MPI ranks (Note [Sweep over MPI] in sweep_mpi.cpp): rank 0 hands out
// points one at a time and writes sweep.csv; the others run points. Returns the result on
// rank 0, nullopt on the others.
std::optional<SweepResult> run_sweep_mpi(const SweepConfig& sweep, const std::filesystem::path& config_path,
                                         const SweepOptions& options);
#endif

}  // namespace psw::sim
