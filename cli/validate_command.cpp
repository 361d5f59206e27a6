// psw validate: the simulator and a live psw serve on one experiment config, compared
// (xval/validation_run.hpp, xval/validation.hpp); options and printing only.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "load_options.hpp"
#include "overrides.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/xval/validation_run.hpp"

namespace psw::cli {

namespace {

struct ValidateCommandOptions : LoadTargetOptions {
  std::string config_path;
  std::string out_dir;
  std::string recorded;  // Note [Validating again]
  double training_alone_s = 5;  // Note [Training share]
  std::vector<std::string> sets;
};

std::string number(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char text[64];
  std::snprintf(text, sizeof text, format, *v);
  return text;
}

void print_report(const xval::ValidationReport& report, const std::string& out_dir) {
  std::printf("%-14s %-22s %12s %12s %10s %9s  %s\n", "scope", "measure", "simulated", "measured", "error", "tolerance",
              "status");
  for (const auto& row : report.rows) {
    const auto error = row.relative_error();
    std::printf("%-14s %-22s %12s %12s %10s %8.0f%%  %s\n", row.scope.c_str(), row.measure.c_str(),
                number(row.simulated, "%.4f").c_str(), number(row.measured, "%.4f").c_str(),
                error ? number(*error * 100.0, "%+.1f%%").c_str() : "-", row.tolerance * 100.0,
                xval::to_string(row.status()).c_str());
  }
  std::printf("%lld within tolerance, %lld outside; written to %s\n", static_cast<long long>(report.within()),
              static_cast<long long>(report.outside()), out_dir.c_str());
}

}  // namespace

Action add_validate_command(CLI::App& app) {
  auto o = std::make_shared<ValidateCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Run an experiment config's workload on the simulator and on a running psw serve, and compare them");
  cmd->add_option("--config", o->config_path, "Experiment config (as psw sim's); the server must run its mechanism")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", o->sets, "Override a config key: KEY=VALUE (dotted keys, YAML values), as psw sim --set");
  add_load_target_options(cmd, *o);
  cmd->add_option("--measured", o->recorded,
                  "Compare with the measurement of an earlier psw validate folder instead of a live server "
                  "(after a recalibration, or a profile fitted on another run)")
      ->check(CLI::ExistingDirectory)
      ->excludes("--socket")
      ->excludes("--server")
      ->excludes("--senders")
      ->excludes("--connections")
      ->excludes("--warmup")
      ->excludes("--timeout-ms");
  cmd->add_option("--training-alone", o->training_alone_s,
                  "Seconds of the server's training job measured with no requests before the workload and again "
                  "after it, for the training_share row (0: not measured)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str()
      ->excludes("--measured");
  cmd->add_option("--out", o->out_dir,
                  "Write simulated/, measured/, validation.csv and validation.json here "
                  "(default: results/validation/<the config's name>)");
  return [o] {
    const ExperimentConfig config = load_experiment_config(o->config_path, parse_sets(o->sets));
    resolve_load_target(*o, config, "validate");
    const std::string out_dir = o->out_dir.empty() ? "results/validation/" + config.name : o->out_dir;
    if (!o->recorded.empty() && std::filesystem::weakly_canonical(o->recorded) == std::filesystem::weakly_canonical(out_dir)) {
      throw InputError("--out " + out_dir + " is the --measured folder; write the new comparison elsewhere");
    }
    xval::ValidationOutput output(out_dir);
    const xval::ValidationRun run = o->recorded.empty()
                                        ? xval::run_validation(config, o->load, output.simulated_dir(),
                                                                  std::chrono::milliseconds(std::llround(
                                                                      o->training_alone_s * 1000.0)))
                                        : xval::revalidate(config, o->recorded, output.simulated_dir());
    output.write(config, run);
    print_report(run.report, out_dir);
  };
}

}  // namespace psw::cli
