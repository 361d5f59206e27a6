// psw sim: one simulation; psw sweep: a grid of them in parallel.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "commands.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/sim/gpu_server.hpp"

namespace psw::cli {

namespace {

struct SimOptions {
  std::string config_path;
  std::string out_dir;
  std::int64_t seed = -1;
  std::string trace_out;
  std::vector<std::string> sets;
};

std::vector<std::pair<std::string, std::string>> parse_sets(const std::vector<std::string>& sets) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--set '" + s + "': expected KEY=VALUE");
    out.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  return out;
}

void print_summary(const nlohmann::json& s) {
  const auto& l = s.at("latency");
  std::printf("%-22s %s on %s (seed %llu)\n", "experiment", s.at("name").get<std::string>().c_str(),
              s.at("hardware").get<std::string>().c_str(),
              static_cast<unsigned long long>(s.at("seed").get<std::uint64_t>()));
  std::printf("%-22s %s\n", "mechanism", s.at("mechanism").get<std::string>().c_str());
  std::printf("%-22s %lld\n", "requests", static_cast<long long>(s.at("requests").get<std::int64_t>()));
  std::printf("%-22s mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", "latency (ms)",
              l.at("mean_ms").get<double>(), l.at("p50_ms").get<double>(), l.at("p90_ms").get<double>(),
              l.at("p99_ms").get<double>(), l.at("p999_ms").get<double>(), l.at("max_ms").get<double>());
  std::printf("%-22s %.4f\n", "SLO attainment", s.at("slo_attainment").get<double>());
  std::printf("%-22s %.3f req/s\n", "throughput", s.at("throughput_rps").get<double>());
  std::printf("%-22s %.4f\n", "GPU busy fraction", s.at("gpu_busy_fraction").get<double>());
  std::printf("%-22s %lld (%.3f/s)\n", "training iterations",
              static_cast<long long>(s.at("training_iterations").get<std::int64_t>()),
              s.at("training_iterations_per_s").get<double>());
  std::printf("%-22s %lld (standby waits %lld)\n", "switches", static_cast<long long>(s.at("switches").get<std::int64_t>()),
              static_cast<long long>(s.at("standby_waits").get<std::int64_t>()));
  std::printf("%-22s startup %.3f ms, total %.3f ms (means)\n", "overheads",
              s.at("startup_overhead_ms").at("mean").get<double>(), s.at("total_overhead_ms").at("mean").get<double>());
}

void run_sim(const SimOptions& o) {
  auto overrides = parse_sets(o.sets);
  if (o.seed >= 0) overrides.emplace_back("seed", std::to_string(o.seed));
  const ExperimentConfig config = load_experiment_config(o.config_path, overrides);
  sim::SimulationOptions options;
  options.out_dir = o.out_dir;
  options.chrome_trace = o.trace_out;
  const sim::SimulationResult result = sim::run_simulation(config, options);
  print_summary(result.summary);
  std::printf("%-22s %.3f s wall, %llu events (%.2f M events/s)\n", "simulation", result.wall_seconds,
              static_cast<unsigned long long>(result.events),
              result.wall_seconds > 0 ? static_cast<double>(result.events) / result.wall_seconds / 1e6 : 0.0);
  if (!o.out_dir.empty()) std::printf("%-22s %s\n", "written", o.out_dir.c_str());
}

struct SweepOptions {
  std::string config_path;
  int jobs = 0;
  std::string out_dir;
};

std::string csv_escape(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void run_sweep(const SweepOptions& o) {
  const SweepConfig sweep = load_sweep_config(o.config_path);
  const std::size_t n = sweep.points.size();
  const unsigned jobs = o.jobs > 0 ? static_cast<unsigned>(o.jobs) : std::max(1u, std::thread::hardware_concurrency());
  const std::filesystem::path out = o.out_dir.empty() ? std::filesystem::path("out") / sweep.name : std::filesystem::path(o.out_dir);
  std::vector<nlohmann::json> summaries(n);
  std::vector<std::string> errors(n);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex print_mutex;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto started = std::chrono::steady_clock::now();
  auto progress = [&](std::size_t finished, std::size_t index) {
    std::lock_guard<std::mutex> lock(print_mutex);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (tty) {
      constexpr int kWidth = 40;
      const int filled = static_cast<int>(kWidth * finished / n);
      std::fprintf(stderr, "\r[%s%s] %zu/%zu  %.1f s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                   std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), finished, n, elapsed);
      if (finished == n) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "sweep %s: point %zu/%zu done (%zu finished, %.1f s)\n", sweep.name.c_str(), index + 1, n,
                   finished, elapsed);
    }
  };
  auto worker = [&] {
    while (true) {
      const std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        char name[32];
        std::snprintf(name, sizeof name, "point-%04zu", i);
        sim::SimulationOptions options;
        options.out_dir = out / name;
        summaries[i] = sim::run_simulation(sweep.points[i].config, options).summary;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      progress(done.fetch_add(1) + 1, i);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<unsigned>(jobs, static_cast<unsigned>(n)); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < n; ++i) {
    if (!errors[i].empty()) {
      std::string where;
      for (const auto& [k, v] : sweep.points[i].overrides) where += " " + k + "=" + v;
      throw InputError(o.config_path + ": point " + std::to_string(i) + where + ": " + errors[i]);
    }
  }
  std::ostringstream csv;
  csv << "point";
  for (const auto& k : sweep.keys) csv << "," << csv_escape(k);
  csv << ",seed,mechanism,hardware,requests,mean_ms,min_ms,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,slo_attainment,"
         "throughput_rps,gpu_busy_fraction,training_iterations_per_s,switches,startup_overhead_ms,total_overhead_ms\n";
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = summaries[i];
    const auto& l = s.at("latency");
    csv << i;
    for (const auto& [k, v] : sweep.points[i].overrides) csv << "," << csv_escape(v);
    csv << "," << sweep.points[i].seed << "," << s.at("mechanism").get<std::string>() << ","
        << s.at("hardware").get<std::string>() << "," << s.at("requests") << "," << l.at("mean_ms") << ","
        << l.at("min_ms") << "," << l.at("p50_ms") << "," << l.at("p90_ms") << "," << l.at("p99_ms") << "," << l.at("p999_ms") << ","
        << l.at("max_ms") << "," << s.at("slo_attainment") << "," << s.at("throughput_rps") << ","
        << s.at("gpu_busy_fraction") << "," << s.at("training_iterations_per_s") << "," << s.at("switches") << ","
        << s.at("startup_overhead_ms").at("mean") << "," << s.at("total_overhead_ms").at("mean") << "\n";
  }
  save_text(out / "sweep.csv", csv.str());
  std::printf("sweep %s: %zu points -> %s\n", sweep.name.c_str(), n, (out / "sweep.csv").c_str());
}

}  // namespace

Action add_sim_command(CLI::App& app) {
  auto options = std::make_shared<SimOptions>();
  CLI::App* cmd = app.add_subcommand("sim", "Run one simulation from an experiment config");
  cmd->add_option("--config", options->config_path, "Experiment YAML (configs/experiments/)")->required();
  cmd->add_option("--out", options->out_dir, "Folder for requests.csv, summary.json, config.resolved.yaml");
  cmd->add_option("--seed", options->seed, "Override the config's seed")->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62));
  cmd->add_option("--trace-out", options->trace_out, "Write a Chrome trace of every transfer, compute and switch");
  cmd->add_option("--set", options->sets, "Override a config key: KEY=VALUE (dotted keys, YAML values)");
  return [options] { run_sim(*options); };
}

Action add_sweep_command(CLI::App& app) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand("sweep", "Run a YAML grid of simulations in parallel, one CSV row per point");
  cmd->add_option("--config", options->config_path, "Sweep YAML (base + grid + seeds)")->required();
  cmd->add_option("--jobs", options->jobs, "Parallel simulations (default: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--out", options->out_dir, "Output folder (default out/<sweep name>)");
  return [options] { run_sweep(*options); };
}

}  // namespace psw::cli
