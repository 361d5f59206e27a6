// psw sim: one simulation; psw sweep: a grid of them (sim/sweep.hpp); psw sweep-merge: its shards joined.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <functional>
#include <sstream>

#include "commands.hpp"
#include "overrides.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/sim/sweep.hpp"

namespace psw::cli {

namespace {

struct SimOptions {
  std::string config_path;
  std::string out_dir;
  std::int64_t seed = -1;
  std::string trace_out;
  std::string decisions;
  std::vector<std::string> sets;
};

void print_summary(const sim::SimulationSummary& s) {
  const LatencySummary& l = s.latency;
  std::printf("%-22s %s on %s (seed %llu)\n", "experiment", s.name.c_str(), s.hardware.c_str(),
              static_cast<unsigned long long>(s.seed));
  std::printf("%-22s %s\n", "mechanism", s.mechanism.c_str());
  std::printf("%-22s %lld\n", "requests", static_cast<long long>(s.requests));
  std::printf("%-22s mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", "latency (ms)", l.mean_ms,
              l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms);
  // Note [Decode in the simulator]: where requests decode, `latency` is the last token's.
  for (const auto& [name, m] : s.models) {
    if (!m.first_token_latency) continue;
    const LatencySummary& f = *m.first_token_latency;
    std::printf("%-22s mean %.3f  p50 %.3f  p99 %.3f  (%s, %lld requests that decode)\n", "first token (ms)", f.mean_ms,
                f.p50_ms, f.p99_ms, name.c_str(), static_cast<long long>(f.count));
  }
  std::printf("%-22s %.4f\n", "SLO attainment", s.slo_attainment);
  std::printf("%-22s %.3f req/s\n", "throughput", s.throughput_rps);
  // Note [GPU busy and GPU work] in sim/src/simulated_server.cpp: time with work, and the work done.
  std::printf("%-22s %.4f (work %.4f per second)\n", "GPU busy fraction", s.gpu_busy_fraction, s.gpu_work_fraction);
  std::printf("%-22s %lld (%.3f/s)\n", "training iterations", static_cast<long long>(s.training_iterations),
              s.training_iterations_per_s);
  std::printf("%-22s %lld inference, %lld training switch-ins (standby waits %lld)\n", "switches",
              static_cast<long long>(s.switches), static_cast<long long>(s.training_switch_ins),
              static_cast<long long>(s.standby_waits));
  if (s.training_requests > 0 || s.training_lost_ms > 0) {
    std::printf("%-22s %lld training requests, %.3f ms of training lost to kills\n", "training work",
                static_cast<long long>(s.training_requests), s.training_lost_ms);
  }
  std::printf("%-22s startup %.3f ms, total %.3f ms (means)\n", "overheads", s.startup_overhead_mean_ms,
              s.total_overhead_mean_ms);
}

void run_sim(const SimOptions& o) {
  auto overrides = parse_sets(o.sets);
  if (o.seed >= 0) overrides.emplace_back("seed", std::to_string(o.seed));
  const ExperimentConfig config = load_experiment_config(o.config_path, overrides);
  sim::SimulationOptions options;
  options.out_dir = o.out_dir;
  options.chrome_trace = o.trace_out;
  options.decisions = o.decisions;
  const sim::SimulationResult result = sim::run_simulation(config, options);
  print_summary(result.summary);
  std::printf("%-22s %.3f s wall, %llu events (%.2f M events/s)\n", "simulation", result.wall_seconds,
              static_cast<unsigned long long>(result.events),
              result.wall_seconds > 0 ? static_cast<double>(result.events) / result.wall_seconds / 1e6 : 0.0);
  if (!o.out_dir.empty()) std::printf("%-22s %s\n", "written", o.out_dir.c_str());
}

struct SweepCommandOptions {
  std::string config_path;
  int jobs = 0;
  std::string out_dir;
  std::string shard;
};

// Progress on stderr: a bar on a terminal, one line per point otherwise (logs).
std::function<void(const sim::SweepProgress&)> progress_printer(const std::string& name) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto started = std::chrono::steady_clock::now();
  return [tty, started, name](const sim::SweepProgress& p) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (tty) {
      constexpr int kWidth = 40;
      const int filled = static_cast<int>(kWidth * p.finished / p.total);
      std::fprintf(stderr, "\r[%s%s] %zu/%zu  %.1f s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                   std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), p.finished, p.total, elapsed);
      if (p.finished == p.total) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "sweep %s: point %zu done (%zu/%zu finished, %.1f s)\n", name.c_str(), p.point, p.finished,
                   p.total, elapsed);
    }
  };
}

void run_sweep_command(const SweepCommandOptions& o) {
  sim::SweepOptions options;
  if (!o.shard.empty()) options.shard = sim::parse_shard(o.shard);  // before the (slow) config load
  const SweepConfig sweep = load_sweep_config(o.config_path);
  options.out_dir = o.out_dir.empty() ? std::filesystem::path("out") / sweep.name : std::filesystem::path(o.out_dir);
  options.jobs = static_cast<unsigned>(o.jobs);
  options.on_point_done = progress_printer(sweep.name);
#ifdef PSW_WITH_MPI
  if (sim::launched_by_mpi()) {
    if (options.shard) throw InputError("--shard: not with mpirun (the ranks share the points already)");
    const auto result = sim::run_sweep_mpi(sweep, o.config_path, options);
    if (result) {
      std::printf("sweep %s: %zu points over %d MPI ranks -> %s\n", sweep.name.c_str(), result->rows.size(),
                  result->mpi_ranks, result->csv.c_str());
    }
    return;
  }
#endif
  const sim::SweepResult result = sim::run_sweep(sweep, o.config_path, options);
  std::printf("sweep %s: %zu points%s -> %s\n", sweep.name.c_str(), result.rows.size(),
              options.shard ? (" (shard " + o.shard + ")").c_str() : "", result.csv.c_str());
}

struct MergeOptions {
  std::string out_dir;
  std::vector<std::string> shard_dirs;
};

void run_sweep_merge(const MergeOptions& o) {
  const std::vector<std::filesystem::path> dirs(o.shard_dirs.begin(), o.shard_dirs.end());
  const sim::MergeResult result = sim::merge_sweep_shards(dirs, o.out_dir);
  std::printf("sweep %s: %zu points from %zu shards -> %s\n", result.name.c_str(), result.points, dirs.size(),
              result.csv.c_str());
}

}  // namespace

Action add_sim_command(CLI::App& app) {
  auto options = std::make_shared<SimOptions>();
  CLI::App* cmd = app.add_subcommand("sim", "Run one simulation from an experiment config");
  cmd->add_option("--config", options->config_path, "Experiment YAML (configs/experiments/)")->required();
  cmd->add_option("--out", options->out_dir, "Folder for requests.csv, summary.json, config.resolved.yaml");
  cmd->add_option("--seed", options->seed, "Override the config's seed")->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62));
  cmd->add_option("--trace-out", options->trace_out, "Write a Chrome trace of every transfer, compute and switch");
  cmd->add_option("--decisions", options->decisions,
                  "Write the server policy's events and actions, one JSON line each (psw replay-decisions reads it)");
  cmd->add_option("--set", options->sets, "Override a config key: KEY=VALUE (dotted keys, YAML values)");
  return [options] { with_range_context(options->config_path, [&] { run_sim(*options); }); };
}

Action add_sweep_command(CLI::App& app) {
  auto options = std::make_shared<SweepCommandOptions>();
  CLI::App* cmd = app.add_subcommand("sweep", "Run a YAML grid of simulations in parallel, one CSV row per point");
  cmd->add_option("--config", options->config_path, "Sweep YAML (base + grid + seeds)")->required();
  cmd->add_option("--jobs", options->jobs, "Parallel simulations (default: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--out", options->out_dir,
                  "Output folder (default out/<sweep name>); written whole or not at all, replacing an earlier sweep");
  cmd->add_option("--shard", options->shard,
                  "K/N: run only the points i with i % N == K-1 (1-based K), into sweep.shard-K-of-N.csv; "
                  "join the shards with psw sweep-merge");
  return [options] { run_sweep_command(*options); };
}

Action add_sweep_merge_command(CLI::App& app) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* cmd = app.add_subcommand("sweep-merge", "Join the shard folders of one sweep (psw sweep --shard) into one sweep.csv");
  cmd->add_option("--out", options->out_dir, "Output folder for sweep.csv and sweep.json")->required();
  cmd->add_option("shards", options->shard_dirs, "The shard folders (every shard 1..N once)")->required();
  return [options] { run_sweep_merge(*options); };
}

}  // namespace psw::cli
