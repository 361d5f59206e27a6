// psw load: drive a running psw serve with the workload of a simulator experiment config
// (exec/runtime/load_generator.hpp); options and printing only.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "load_options.hpp"
#include "validators.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/client/load_generator.hpp"

namespace psw::cli {

namespace {

struct LoadCommandOptions : LoadTargetOptions {
  std::string config_path;
  std::string out_dir;
};

void print_summary(const runtime::LoadSummary& s) {
  const LatencySummary& l = s.latency;
  const runtime::LateSends& late = s.late_sends;
  std::printf("%-22s %s against %s\n", "experiment", s.name.c_str(), s.target.c_str());
  std::printf("%-22s %lld generated, %lld answered, %lld errors\n", "requests", static_cast<long long>(s.generated),
              static_cast<long long>(s.requests), static_cast<long long>(s.errors));
  std::printf("%-22s mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", "latency (ms)", l.mean_ms, l.p50_ms,
              l.p90_ms, l.p99_ms, l.max_ms);
  std::printf("%-22s %.4f\n", "SLO attainment", s.slo_attainment);
  std::printf("%-22s %.3f req/s over %.3f s\n", "throughput", s.throughput_rps, s.makespan_s);
  std::printf("%-22s %lld over %.3f ms (mean %.3f ms, max %.3f ms)\n", "late sends", static_cast<long long>(late.count),
              late.threshold_ms, late.mean_ms, late.max_ms);
}

}  // namespace

Action add_load_command(CLI::App& app) {
  auto o = std::make_shared<LoadCommandOptions>();
  CLI::App* cmd = app.add_subcommand("load", "Drive a running psw serve with the workload of a simulator experiment "
                                             "config (open loop; the simulator's arrivals)");
  cmd->add_option("--config", o->config_path, "Experiment config (as psw sim's); its workload: is sent")
      ->required()->check(CLI::ExistingFile);
  add_load_target_options(cmd, *o);
  cmd->add_option("--out", o->out_dir, "Write requests.csv, summary.json, config.resolved.yaml here (as psw sim --out)");
  cmd->add_option("--time-scale", o->load.time_scale, "Multiplies every arrival time (0.1: ten times faster)")
      ->check(finite_range(1e-6, 1e6))->capture_default_str();
  return [o] {
    const ExperimentConfig config = load_experiment_config(o->config_path);
    resolve_load_target(*o, config, "load");
    const runtime::LoadReport report = runtime::run_load(config, o->load);
    if (!o->out_dir.empty()) runtime::write_load_outputs(config, report, o->out_dir);
    print_summary(report.summary);
  };
}

}  // namespace psw::cli
