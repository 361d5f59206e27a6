// psw calibrate: one estimated cost of a hardware profile fitted to a recorded psw validate run
// (Note [Calibrating a cost], sim/calibration.hpp); options and printing only.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/output.hpp"
#include "psw/sim/calibration.hpp"
#include "psw/sim/compare.hpp"

namespace psw::cli {

namespace {

struct CalibrateOptions {
  std::string config_path;
  std::string recorded;
  std::string cost;
  std::string hardware_path;
  std::string out_path;
};

}  // namespace

Action add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  std::string costs;
  for (const auto& c : sim::calibratable_costs()) {
    costs += (costs.empty() ? "" : ", ") + c.name + " (" + to_string(c.paid_by) + ")";
  }
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Fit one estimated cost of a hardware profile to a recorded psw validate run of the mechanism that "
                   "pays it, and write the profile with the fitted value");
  cmd->add_option("--config", o->config_path, "The run's experiment config (as psw validate's; its mechanism the cost's)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--measured", o->recorded, "A psw validate folder of that config (its measured/summary.json)")
      ->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--cost", o->cost, "The cost: " + costs)->required();
  cmd->add_option("--hardware", o->hardware_path,
                  "Start from this hardware profile instead of the config's (to chain fits of several costs)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out_path, "Write the hardware profile with the fitted value here (YAML)");
  return [o] {
    const sim::CalibratableCost& cost = sim::calibratable_cost(o->cost);
    ExperimentConfig config = load_experiment_config(o->config_path);
    if (!o->hardware_path.empty()) config.hardware = load_hardware_profile(o->hardware_path);
    const std::string summary_path = o->recorded + "/measured/summary.json";
    const sim::CostFit fit =
        sim::fit_cost(config, cost, sim::read_json_object(summary_path, "psw load's summary.json"), summary_path);
    std::printf("%s: %.6g -> %.6g (%d simulations)\n", fit.cost.c_str(), fit.initial, fit.fitted, fit.simulations);
    std::printf("  %s mean over the run: measured %.4f ms; simulated %.4f ms before, %.4f ms fitted\n",
                sim::to_string(fit.measure).c_str(), fit.measured_ms, fit.simulated_initial_ms, fit.simulated_fitted_ms);
    if (!o->out_path.empty()) {
      HardwareProfile hardware = fit.hardware;
      hardware.source.note += detail::concat("; ", fit.cost, " fitted by psw calibrate to ", o->recorded, " (",
                                             sim::to_string(fit.measure), " mean ", fit.measured_ms, " ms, was ",
                                             fit.initial, ")");
      save_text(o->out_path, "# Written by `psw calibrate`; do not edit by hand (Note [Calibrating a cost]).\n" +
                                 to_yaml(hardware));
      std::printf("  wrote %s\n", o->out_path.c_str());
    }
  };
}

}  // namespace psw::cli
