#include "psw/sim/sweep.hpp"

#include <atomic>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/sim/simulation.hpp"

namespace psw::sim {

namespace fs = std::filesystem;

namespace {

struct Fnv1a {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  void add(std::string_view text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 0x100000001b3ULL;
    }
    hash ^= 0xff;  // separator: ("ab", "c") and ("a", "bc") differ
    hash *= 0x100000001b3ULL;
  }
};

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string manifest_text(const std::string& name, std::uint64_t fingerprint, std::size_t points,
                          const std::optional<Shard>& shard) {
  nlohmann::json m = {{"name", name}, {"fingerprint", hex(fingerprint)}, {"points", points}};
  if (shard) m["shard"] = {{"index", shard->index}, {"count", shard->count}};
  return m.dump(2) + "\n";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot read the file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// CSV records (a quoted field may hold a newline), each without its final newline.
std::vector<std::string> csv_records(const std::string& text) {
  std::vector<std::string> records;
  std::string current;
  bool quoted = false;
  for (char c : text) {
    if (c == '"') quoted = !quoted;
    if (c == '\n' && !quoted) {
      records.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) records.push_back(std::move(current));
  return records;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InputError("--shard '" + text + "': " + why + " (expected K/N with 1 <= K <= N, e.g. 2/8)");
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw bad("no '/'");
  auto parse = [&](std::string_view part, const char* what) {
    int v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size()) {
      throw bad(std::string(what) + " '" + std::string(part) + "' is not a whole number");
    }
    return v;
  };
  const std::string_view all(text);
  Shard shard;
  shard.index = parse(all.substr(0, slash), "K");
  shard.count = parse(all.substr(slash + 1), "N");
  if (shard.count < 1) throw bad("N must be at least 1");
  if (shard.index < 1 || shard.index > shard.count) throw bad("K must be in 1.." + std::to_string(shard.count));
  return shard;
}

std::uint64_t sweep_fingerprint(const SweepConfig& sweep) {
  Fnv1a h;
  h.add(sweep.name);
  for (const auto& k : sweep.keys) h.add(k);
  // Profiles are hashed once each (many points share them), by content.
  std::map<std::string, bool> seen;
  for (const auto& p : sweep.points) {
    for (const auto& [k, v] : p.overrides) {
      h.add(k);
      h.add(v);
    }
    h.add(std::to_string(p.seed));
    h.add(resolved_yaml(p.config));
    std::string hardware = to_yaml(p.config.hardware);
    if (!seen.emplace(hardware, true).second) hardware = "(as before)";
    h.add(hardware);
    for (const auto& m : p.config.models) {
      std::string model = to_yaml(m);
      if (!seen.emplace(model, true).second) model = "(as before)";
      h.add(model);
    }
  }
  return h.hash;
}

SweepRow sweep_row(const SweepConfig& sweep, std::size_t point, const SimulationSummary& s) {
  SweepRow r;
  r.point = point;
  for (const auto& [k, v] : sweep.points.at(point).overrides) r.values.push_back(v);
  r.seed = sweep.points[point].seed;
  r.mechanism = s.mechanism;
  r.hardware = s.hardware;
  r.requests = s.requests;
  r.mean_ms = s.latency.mean_ms;
  r.min_ms = s.latency.min_ms;
  r.p50_ms = s.latency.p50_ms;
  r.p90_ms = s.latency.p90_ms;
  r.p99_ms = s.latency.p99_ms;
  r.p999_ms = s.latency.p999_ms;
  r.max_ms = s.latency.max_ms;
  r.slo_attainment = s.slo_attainment;
  r.throughput_rps = s.throughput_rps;
  r.gpu_busy_fraction = s.gpu_busy_fraction;
  r.training_iterations_per_s = s.training_iterations_per_s;
  r.switches = s.switches;
  r.training_switch_ins = s.training_switch_ins;
  r.startup_overhead_ms = s.startup_overhead_mean_ms;
  r.total_overhead_ms = s.total_overhead_mean_ms;
  return r;
}

std::string sweep_csv_header(const SweepConfig& sweep) {
  std::string out = "point";
  for (const auto& k : sweep.keys) {
    out += ',';
    out += csv_field(k);
  }
  out +=
      ",seed,mechanism,hardware,requests,mean_ms,min_ms,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,slo_attainment,"
      "throughput_rps,gpu_busy_fraction,training_iterations_per_s,switches,training_switch_ins,startup_overhead_ms,total_overhead_ms\n";
  return out;
}

std::string sweep_csv_row(const SweepRow& r) {
  std::string out = std::to_string(r.point);
  for (const auto& v : r.values) {
    out += ',';
    out += csv_field(v);
  }
  out += "," + std::to_string(r.seed) + "," + r.mechanism + "," + r.hardware + "," + std::to_string(r.requests);
  for (double v : {r.mean_ms, r.min_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms, r.slo_attainment,
                   r.throughput_rps, r.gpu_busy_fraction, r.training_iterations_per_s}) {
    out += ',';
    out += shortest_number(v);
  }
  out += "," + std::to_string(r.switches) + "," + std::to_string(r.training_switch_ins) + "," +
         shortest_number(r.startup_overhead_ms) + "," + shortest_number(r.total_overhead_ms) +
         "\n";
  return out;
}

std::string sweep_csv(const SweepConfig& sweep, const std::vector<SweepRow>& rows) {
  std::string out = sweep_csv_header(sweep);
  for (const auto& r : rows) out += sweep_csv_row(r);
  return out;
}

std::string sweep_csv_name(const std::optional<Shard>& shard) {
  if (!shard) return "sweep.csv";
  return "sweep.shard-" + std::to_string(shard->index) + "-of-" + std::to_string(shard->count) + ".csv";
}

std::string point_folder_name(std::size_t point) {
  char name[32];
  std::snprintf(name, sizeof name, "point-%04zu", point);
  return name;
}

std::string sweep_manifest(const SweepConfig& sweep, std::uint64_t fingerprint, const std::optional<Shard>& shard) {
  return manifest_text(sweep.name, fingerprint, sweep.points.size(), shard);
}

void throw_point_error(const SweepConfig& sweep, const fs::path& config_path, std::size_t point,
                       const std::string& what, bool input_error) {
  std::string where;
  for (const auto& [k, v] : sweep.points.at(point).overrides) where += " " + k + "=" + v;
  const std::string message = config_path.string() + ": point " + std::to_string(point) + where + ": " + what;
  if (input_error) throw InputError(message);
  throw Error(message);
}

SweepResult run_sweep(const SweepConfig& sweep, const fs::path& config_path, const SweepOptions& options) {
  PSW_CHECK(!options.out_dir.empty(), "a sweep needs an output folder");
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    if (!options.shard || options.shard->contains(i)) mine.push_back(i);
  }
  SweepResult result;
  result.fingerprint = sweep_fingerprint(sweep);
  StagedFolder folder(options.out_dir, "sweep.json");  // Note [Atomic output folders]

  const std::size_t n = mine.size();
  std::vector<SweepRow> rows(n);
  std::vector<std::string> errors(n);
  std::vector<char> input_errors(n, 0);
  std::atomic<std::size_t> next{0};
  std::size_t finished = 0;
  std::mutex progress_mutex;
  auto worker = [&] {
    while (true) {
      const std::size_t k = next.fetch_add(1);
      if (k >= n) return;
      const std::size_t i = mine[k];
      try {
        SimulationOptions sim_options;
        sim_options.out_dir = folder.path() / point_folder_name(i);
        rows[k] = sweep_row(sweep, i, run_simulation(sweep.points[i].config, sim_options).summary);
      } catch (const InputError& e) {
        errors[k] = e.what();
        input_errors[k] = 1;
      } catch (const std::exception& e) {
        errors[k] = e.what();
      }
      std::lock_guard<std::mutex> lock(progress_mutex);
      ++finished;
      if (options.on_point_done) options.on_point_done({i, finished, n});
    }
  };
  const unsigned jobs = options.jobs > 0 ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<std::size_t>(jobs, n); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < n; ++k) {
    if (!errors[k].empty()) throw_point_error(sweep, config_path, mine[k], errors[k], input_errors[k] != 0);
  }

  save_text(folder.path() / sweep_csv_name(options.shard), sweep_csv(sweep, rows));
  save_text(folder.path() / "sweep.json", sweep_manifest(sweep, result.fingerprint, options.shard));
  folder.commit();
  result.rows = std::move(rows);
  result.csv = folder.target() / sweep_csv_name(options.shard);
  return result;
}

MergeResult merge_sweep_shards(const std::vector<fs::path>& shard_dirs, const fs::path& out_dir) {
  if (shard_dirs.empty()) throw InputError("sweep-merge: no shard folders given");
  struct ShardInfo {
    fs::path dir;
    std::string name;
    std::string fingerprint;
    std::size_t points = 0;
    Shard shard;
  };
  std::vector<ShardInfo> shards;
  std::error_code ec;
  const fs::path out_canonical = fs::weakly_canonical(out_dir, ec);
  for (const auto& dir : shard_dirs) {
    if (fs::weakly_canonical(dir, ec) == out_canonical) {
      throw InputError(dir.string() + ": --out is one of the shard folders; merge into another folder");
    }
    const fs::path manifest_path = dir / "sweep.json";
    if (!fs::exists(manifest_path)) throw InputError(dir.string() + ": not a sweep shard folder (no sweep.json)");
    nlohmann::json m;
    try {
      m = nlohmann::json::parse(read_file(manifest_path));
      ShardInfo info;
      info.dir = dir;
      info.name = m.at("name").get<std::string>();
      info.fingerprint = m.at("fingerprint").get<std::string>();
      info.points = m.at("points").get<std::size_t>();
      if (!m.contains("shard")) {
        throw InputError(manifest_path.string() + ": a whole sweep, not a shard (it has no 'shard')");
      }
      info.shard.index = m.at("shard").at("index").get<int>();
      info.shard.count = m.at("shard").at("count").get<int>();
      shards.push_back(info);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(manifest_path.string() + ": not a sweep manifest: " + e.what());
    }
  }
  const ShardInfo& first = shards.front();
  std::map<int, const ShardInfo*> by_index;
  for (const auto& s : shards) {
    if (s.fingerprint != first.fingerprint || s.name != first.name || s.points != first.points ||
        s.shard.count != first.shard.count) {
      throw InputError(s.dir.string() + ": a shard of another sweep (" + s.name + ", fingerprint " + s.fingerprint +
                       ", " + std::to_string(s.shard.count) + " shards) than " + first.dir.string() + " (" +
                       first.name + ", fingerprint " + first.fingerprint + ", " +
                       std::to_string(first.shard.count) + " shards)");
    }
    const auto [it, fresh] = by_index.emplace(s.shard.index, &s);
    if (!fresh) {
      throw InputError("shard " + std::to_string(s.shard.index) + "/" + std::to_string(s.shard.count) +
                       " given twice: " + it->second->dir.string() + " and " + s.dir.string());
    }
  }
  for (int k = 1; k <= first.shard.count; ++k) {
    if (!by_index.count(k)) {
      throw InputError("shard " + std::to_string(k) + "/" + std::to_string(first.shard.count) + " of sweep " +
                       first.name + " is missing");
    }
  }

  std::string header;
  std::vector<std::string> rows(first.points);
  std::vector<char> present(first.points, 0);
  for (const auto& [index, s] : by_index) {
    const fs::path csv = s->dir / sweep_csv_name(s->shard);
    const std::vector<std::string> records = csv_records(read_file(csv));
    if (records.empty()) throw InputError(csv.string() + ": empty");
    if (header.empty()) header = records[0];
    if (records[0] != header) throw InputError(csv.string() + ": its header differs from the other shards'");
    for (std::size_t r = 1; r < records.size(); ++r) {
      const std::string& record = records[r];
      std::size_t point = 0;
      const auto [ptr, errc] = std::from_chars(record.data(), record.data() + record.size(), point);
      if (errc != std::errc() || ptr == record.data() || *ptr != ',' || point >= first.points) {
        throw InputError(csv.string() + ": row " + std::to_string(r + 1) + ": no point number of this sweep");
      }
      if (!s->shard.contains(point)) {
        throw InputError(csv.string() + ": point " + std::to_string(point) + " does not belong to shard " +
                         std::to_string(s->shard.index) + "/" + std::to_string(s->shard.count));
      }
      if (present[point]) throw InputError(csv.string() + ": point " + std::to_string(point) + " appears twice");
      present[point] = 1;
      rows[point] = record;
    }
  }
  for (std::size_t i = 0; i < first.points; ++i) {
    if (!present[i]) {
      throw InputError("point " + std::to_string(i) + " of sweep " + first.name + " is missing from its shard (" +
                       by_index.at(static_cast<int>(i % static_cast<std::size_t>(first.shard.count)) + 1)->dir.string() +
                       ")");
    }
  }

  std::string csv = header + "\n";
  for (const auto& r : rows) csv += r + "\n";
  StagedFolder folder(out_dir, "sweep.json");
  save_text(folder.path() / "sweep.csv", csv);
  std::uint64_t fingerprint = 0;
  std::from_chars(first.fingerprint.data(), first.fingerprint.data() + first.fingerprint.size(), fingerprint, 16);
  save_text(folder.path() / "sweep.json", manifest_text(first.name, fingerprint, first.points, std::nullopt));
  folder.commit();
  return {first.name, first.points, folder.target() / "sweep.csv"};
}

}  // namespace psw::sim
