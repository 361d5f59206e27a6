// psw calibrate: one estimated cost of a hardware profile fitted to a recorded psw validate run
// (Note [Calibrating a cost], xval/calibration.hpp); options and printing only.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "overrides.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/input_file.hpp"
#include "psw/common/output.hpp"
#include "psw/xval/calibration.hpp"

namespace psw::cli {

namespace {

struct CalibrateOptions {
  std::string config_path;
  std::vector<std::string> sets;
  std::vector<std::string> recorded;  // Note [Pooled runs]: several only where the cost pools them
  std::string cost;
  std::string hardware_path;
  std::string out_path;
};

}  // namespace

Action add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  std::string costs;
  for (const auto& c : xval::calibratable_costs()) {
    costs += (costs.empty() ? "" : ", ") + c.name + " (" + to_string(c.paid_by) + ")";
  }
  costs += std::string(", ") + xval::kMpsContentionCost + " (mps: one point per model beside the config's training job)";
  costs += std::string(", ") + xval::kWorkerStartCost +
           " (stop-and-start or two-processes: process start, context and framework start adopted from the server's "
           "split of its starts)";
  costs += std::string(", ") + xval::kEagerSwitchCost +
           " (no-memory-management, no-ipc-optimization, no-pinned-memory or one-process: each model's host time "
           "of an eager switch adopted from the server's measurement)";
  costs += std::string(", ") + xval::kUnifiedMemoryCost +
           " (unified-memory: page_fault_ns and migration_bandwidth_bytes_per_s fitted together to the models' "
           "engine means)";
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Fit one estimated cost of a hardware profile to a recorded psw validate run of the mechanism that "
                   "pays it, and write the profile with the fitted value");
  cmd->add_option("--config", o->config_path, "The run's experiment config (as psw validate's; its mechanism the cost's)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", o->sets, "Override a config key as the run did: KEY=VALUE (dotted keys, YAML values)");
  cmd->add_option("--measured", o->recorded,
                  "A psw validate folder of that config (its measured/summary.json); repeated, runs of the same "
                  "case pooled (the eager host times and the fitted costs; Note [Pooled runs])")
      ->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--cost", o->cost, "The cost: " + costs)->required();
  cmd->add_option("--hardware", o->hardware_path,
                  "Start from this hardware profile instead of the config's (to chain fits of several costs)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out_path, "Write the hardware profile with the fitted value here (YAML)");
  return [o] {
    ExperimentConfig config = load_experiment_config(o->config_path, parse_sets(o->sets));
    if (!o->hardware_path.empty()) config.hardware = load_hardware_profile(o->hardware_path);
    std::vector<xval::RecordedRun> runs;
    std::string recorded;  // the folders, as the profile's note names them
    for (const std::string& folder : o->recorded) {
      const std::string path = folder + "/measured/summary.json";
      runs.push_back({read_json_object(path, "psw load's summary.json"), path});
      recorded += (recorded.empty() ? "" : " and ") + folder;
    }
    const std::string& summary_path = runs.front().origin;
    auto one_run = [&]() -> const nlohmann::json& {
      if (runs.size() > 1) {
        throw InputError("--cost " + o->cost + " is taken from one run; --measured was given " +
                         std::to_string(runs.size()) + " times");
      }
      return runs.front().summary;
    };
    auto write_profile = [&](HardwareProfile hardware, const std::string& what) {
      if (o->out_path.empty()) return;
      hardware.source.note += "; " + what;
      save_text(o->out_path, "# Written by `psw calibrate`; do not edit by hand (Note [Calibrating a cost]).\n" +
                                 to_yaml(hardware));
      std::printf("  wrote %s\n", o->out_path.c_str());
    };
    if (o->cost == xval::kMpsContentionCost) {  // Note [MPS contention]
      const xval::ContentionFit fit =
          xval::fit_mps_contention(config, one_run(), summary_path);
      std::printf("%s beside %s at training batch %d:\n", xval::kMpsContentionCost, fit.training_model.c_str(),
                  fit.training_batch);
      std::string fitted;
      for (const auto& p : fit.points) {
        std::printf("  %s: %d%%; engine mean measured %.4f ms; simulated %.4f ms before, %.4f ms ready, %.4f ms fitted\n",
                    p.model.c_str(), p.percent, p.measured_ms, p.simulated_initial_ms, p.simulated_ready_ms,
                    p.simulated_fitted_ms);
        fitted += detail::concat(fitted.empty() ? "" : ", ", p.model, " ", p.percent, "% (engine mean ", p.measured_ms,
                                 " ms)");
      }
      write_profile(fit.hardware, detail::concat(xval::kMpsContentionCost, " beside ", fit.training_model, " at batch ",
                                                 fit.training_batch, " fitted by psw calibrate to ", recorded, ": ",
                                                 fitted));
      return;
    }
    if (o->cost == xval::kWorkerStartCost) {  // Note [Adopting a worker start]
      const xval::WorkerStartAdoption a =
          xval::adopt_worker_start(config, one_run(), summary_path);
      std::printf("%s over %lld starts: process %.1f ms, context %.1f ms, framework %.1f ms (cudaMalloc included)\n",
                  xval::kWorkerStartCost, static_cast<long long>(a.starts), a.process_ms, a.context_ms, a.framework_ms);
      std::string firsts;
      for (const auto& f : a.first_forwards) {
        std::printf("  %s first forward: %.1f ms (engine mean measured %.4f ms, simulated %.4f ms without it)\n",
                    f.model.c_str(), f.first_forward_ms, f.measured_engine_ms, f.simulated_engine_ms);
        firsts += detail::concat(firsts.empty() ? "" : ", ", f.model, " ", f.first_forward_ms, " ms");
      }
      if (a.kill_ms) std::printf("  kill of the process replaced (Note [Worker kill]): %.1f ms\n", *a.kill_ms);
      std::printf("  latency mean over the run: measured %.4f ms; simulated %.4f ms before, %.4f ms adopted\n",
                  a.measured_latency_ms, a.simulated_initial_ms, a.simulated_adopted_ms);
      write_profile(a.hardware,
                    detail::concat("startup.process_start_ns, cuda_context_ns, framework_start_ns",
                                   a.kill_ms ? ", process_kill_ns" : "",
                                   " and first_forward adopted by psw calibrate from the server's split of ", a.starts,
                                   " worker starts in ", recorded, " (process ", a.process_ms, " ms, context ",
                                   a.context_ms, " ms, the rest ", a.framework_ms, " ms, first forward ", firsts,
                                   a.kill_ms ? detail::concat(", kill ", *a.kill_ms, " ms") : std::string(), ")"));
      return;
    }
    if (o->cost == xval::kEagerSwitchCost) {  // Note [Adopting eager host times]
      const xval::EagerSwitchAdoption a = xval::adopt_eager_switch(config, runs);
      std::printf("%s under %s, per model over its eager switches:\n", xval::kEagerSwitchCost,
                  to_string(config.mechanism).c_str());
      std::string adopted;
      for (const auto& m : a.models) {
        std::printf("  %s: prepare %.3f ms, forward %.3f ms (%lld switches); engine mean measured %.4f ms; simulated "
                    "%.4f ms before, %.4f ms adopted\n",
                    m.model.c_str(), m.prepare_ms, m.forward_ms, static_cast<long long>(m.switches),
                    m.measured_engine_ms, m.simulated_initial_ms, m.simulated_adopted_ms);
        adopted += detail::concat(adopted.empty() ? "" : ", ", m.model, " prepare ", m.prepare_ms, " ms forward ",
                                  m.forward_ms, " ms");
      }
      write_profile(a.hardware, detail::concat(xval::kEagerSwitchCost, " under ", to_string(config.mechanism),
                                               " adopted by psw calibrate from ", recorded, " (", adopted, ")"));
      return;
    }
    if (o->cost == xval::kUnifiedMemoryCost) {  // Note [Unified memory's two costs]
      const xval::UnifiedMemoryFit fit = xval::fit_unified_memory(config, runs);
      std::printf("%s: page_fault_ns %.6g -> %.6g, migration_bandwidth_bytes_per_s %.6g -> %.6g (%d simulations)\n",
                  xval::kUnifiedMemoryCost, fit.initial_page_fault_ns, fit.fitted_page_fault_ns, fit.initial_bandwidth,
                  fit.fitted_bandwidth, fit.simulations);
      std::string means;
      for (const auto& m : fit.models) {
        std::printf("  %s: engine mean measured %.4f ms (%lld requests); simulated %.4f ms before, %.4f ms fitted\n",
                    m.model.c_str(), m.measured_ms, static_cast<long long>(m.requests), m.simulated_initial_ms,
                    m.simulated_fitted_ms);
        means += detail::concat(means.empty() ? "" : ", ", m.model, " ", m.measured_ms, " ms");
      }
      write_profile(fit.hardware,
                    detail::concat("unified_memory.page_fault_ns and migration_bandwidth_bytes_per_s fitted by psw "
                                   "calibrate to ", recorded, " (together, least squares over the models' engine means: ",
                                   means, "; was ", fit.initial_page_fault_ns, " ns and ", fit.initial_bandwidth,
                                   " bytes/s)"));
      return;
    }
    const xval::CalibratableCost& cost = xval::calibratable_cost(o->cost);
    const xval::CostFit fit = xval::fit_cost(config, cost, runs);
    std::printf("%s: %.6g -> %.6g (%d simulations)\n", fit.cost.c_str(), fit.initial, fit.fitted, fit.simulations);
    std::printf("  %s mean over the %s: measured %.4f ms; simulated %.4f ms before, %.4f ms fitted\n",
                xval::to_string(fit.measure).c_str(), runs.size() > 1 ? "runs" : "run", fit.measured_ms,
                fit.simulated_initial_ms, fit.simulated_fitted_ms);
    write_profile(fit.hardware, detail::concat(fit.cost, " fitted by psw calibrate to ", recorded, " (",
                                               xval::to_string(fit.measure), " mean ", fit.measured_ms, " ms, was ",
                                               fit.initial, ")"));
  };
}

}  // namespace psw::cli
