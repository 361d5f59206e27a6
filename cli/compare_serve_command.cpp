// psw compare-serve: the server's measured mechanisms beside the simulator's prediction
// (xval/compare.hpp); options and output only.
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/xval/compare.hpp"

namespace psw::cli {

namespace {

struct CompareServeOptions {
  std::string measured_dir;
  std::string predicted_path;
  std::string out_path;
  std::string format;  // default: csv into --out, markdown on standard output
};

void run_compare_serve(const CompareServeOptions& o) {
  std::string format = o.format.empty() ? (o.out_path.empty() ? "markdown" : "csv") : o.format;
  if (format != "csv" && format != "markdown") {
    throw InputError("unknown --format '" + o.format + "': expected csv or markdown");
  }
  const auto measured = xval::load_measured_serve(o.measured_dir);
  const auto predicted = xval::load_predicted_sweep(o.predicted_path);
  const auto rows = xval::compare_serve(measured, predicted);
  const std::string text = format == "csv" ? xval::comparison_csv(rows) : xval::comparison_markdown(rows);
  if (o.out_path.empty()) {
    std::cout << text;
    return;
  }
  // Written under a temporary name and renamed (StagedFile): the table is whole or the earlier one stays.
  StagedFile file(o.out_path);
  save_text(file.path(), text);
  file.commit();
  const xval::ComparisonSummary s = xval::summarize(rows);
  std::printf("compare-serve: %zu rows, %zu compared (%zu within 5%%, %zu within 15%%), %zu without a prediction, "
              "%zu without a measurement -> %s\n",
              s.rows, s.compared, s.within_5_percent, s.within_15_percent, s.no_prediction, s.no_measurement,
              o.out_path.c_str());
}

}  // namespace

Action add_compare_serve_command(CLI::App& app) {
  auto options = std::make_shared<CompareServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare-serve", "The server's measured mechanisms (psw bench-serve) beside the simulator's prediction (psw sweep)");
  cmd->add_option("--measured", options->measured_dir,
                  "Folder of psw bench-serve reports named mechanism-<name>.json (scripts/gpu-serve.sh)")
      ->required();
  cmd->add_option("--predicted", options->predicted_path,
                  "A sweep folder (its sweep.csv) or a sweep CSV, one point per mechanism and model "
                  "(configs/experiments/h200-serve.yaml)")
      ->required();
  cmd->add_option("--out", options->out_path, "Write the table here (default: standard output)");
  cmd->add_option("--format", options->format, "csv | markdown (default: csv into --out, markdown on standard output)");
  return [options] { run_compare_serve(*options); };
}

}  // namespace psw::cli
