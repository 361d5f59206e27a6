#pragma once
// The server's measurement beside the simulator's prediction of the same case (the H200
// serving case of configs/experiments/h200-serve.yaml): one row per mechanism and model.
//
//   measured   the JSON reports of `psw bench-serve` in a folder, one file per mechanism,
//              named mechanism-<name>.json (scripts/gpu-serve.sh, part `mechanisms`): the
//              client-observed latency of the cold requests per model (cold_latency_ms)
//   predicted  a sweep's sweep.csv (psw sweep) with one point per mechanism and model: the
//              model is the one name of the point's `workload.models` column
//
// A mechanism and model on one side only is a row of its own (status no-prediction or
// no-measurement), never dropped. Malformed input is an InputError naming the file, and the
// line where there is one.

#include <cstdint>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace psw::xval {

// One model's cold requests under one mechanism, as `psw bench-serve` measured them (ms).
struct MeasuredLatency {
  std::string mechanism;
  std::string model;
  std::int64_t requests = 0;
  double median_ms = 0;
  double p99_ms = 0;
  std::filesystem::path source;  // the JSON file
};

// One sweep point's latency summary (ms).
struct PredictedLatency {
  std::string mechanism;
  std::string model;
  std::int64_t requests = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  std::filesystem::path source;  // the CSV file
  std::size_t line = 0;          // its row's line in that file
};

enum class ComparisonStatus {
  Both,            // measured and predicted
  NoPrediction,    // measured only: the sweep has no point for it
  NoMeasurement,   // predicted only: no measurement (the server did not run it, or it failed)
};
std::string to_string(ComparisonStatus status);

struct ComparisonRow {
  std::string mechanism;
  std::string model;
  std::optional<MeasuredLatency> measured;
  std::optional<PredictedLatency> predicted;

  ComparisonStatus status() const;
  // (predicted p50 - measured median) / measured median; nullopt unless both sides are there
  // and the measured median is positive.
  std::optional<double> p50_relative_error() const;
};

// One bench-serve report. `mechanism` is the name its file gives (mechanism-<name>.json); a
// top-level "mechanism" field, where a report has one, must agree with it. A model with no
// cold requests (count 0) is not a measurement and is left out (its row shows no-measurement).
std::vector<MeasuredLatency> parse_bench_serve_report(const std::string& text, const std::filesystem::path& path,
                                                      const std::string& mechanism);
// Every mechanism-<name>.json of `dir`, in name order; InputError when there is none.
std::vector<MeasuredLatency> load_measured_serve(const std::filesystem::path& dir);

// A sweep.csv: needs the columns mechanism, workload.models (one model per point), requests,
// mean_ms, p50_ms and p99_ms; one point per mechanism and model.
std::vector<PredictedLatency> parse_sweep_predictions(const std::string& text, const std::filesystem::path& path);
// `path` is a sweep folder (its sweep.csv is read) or a CSV file.
std::vector<PredictedLatency> load_predicted_sweep(const std::filesystem::path& path);

// Joins the two sides on (mechanism, model). Order: mechanisms and models as they first
// appear in the predictions (the sweep's grid order), then those only measured, by name.
// InputError when a side has the same mechanism and model twice.
std::vector<ComparisonRow> compare_serve(const std::vector<MeasuredLatency>& measured,
                                         const std::vector<PredictedLatency>& predicted);

// How many compared rows have |p50 relative error| within each bound.
struct ComparisonSummary {
  std::size_t rows = 0;
  std::size_t compared = 0;  // rows with both sides
  std::size_t within_5_percent = 0;
  std::size_t within_15_percent = 0;
  std::size_t no_prediction = 0;
  std::size_t no_measurement = 0;
};
ComparisonSummary summarize(const std::vector<ComparisonRow>& rows);

// The table as CSV (for scripts: a header, full-precision numbers, empty cells for a missing
// side) and as Markdown (for people: ms to 3 decimals, the error in percent, a summary line).
std::string comparison_csv(const std::vector<ComparisonRow>& rows);
std::string comparison_markdown(const std::vector<ComparisonRow>& rows);

}  // namespace psw::xval
