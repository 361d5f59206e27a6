#include "psw/xval/validation.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "psw/common/error.hpp"
#include "psw/common/served_summary.hpp"
#include "psw/runtime/client/load_summary.hpp"

namespace psw::xval {

using sim::SimulationOptions;

namespace {

// A measure of a latency summary a side has (nullopt where it has none).
std::optional<double> measure_of(const std::optional<LatencySummary>& latency, const std::string& measure) {
  if (!latency) return std::nullopt;
  if (measure == "mean_ms") return latency->mean_ms;
  if (measure == "p50_ms") return latency->p50_ms;
  if (measure == "p99_ms") return latency->p99_ms;
  throw Error("no latency measure '" + measure + "'");
}

// A model's latency (or a part of it) on one side, nullopt where it answered none.
std::optional<LatencySummary> model_part(const ServedSummary& summary, const std::string& model,
                                         std::optional<LatencySummary> ServedModelSummary::*part) {
  const auto it = summary.models.find(model);
  return it == summary.models.end() ? std::nullopt : it->second.*part;
}

std::string cell(const std::optional<double>& value) {
  if (!value) return "";
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", *value);
  return text;
}

}  // namespace

std::string to_string(ValidationStatus status) {
  switch (status) {
    case ValidationStatus::Within: return "within";
    case ValidationStatus::Outside: return "outside";
    case ValidationStatus::OneSided: return "one-sided";
  }
  return "?";
}

std::optional<double> ValidationRow::relative_error() const {
  if (!simulated || !measured || *measured == 0) return std::nullopt;
  return (*simulated - *measured) / *measured;
}

ValidationStatus ValidationRow::status() const {
  const auto error = relative_error();
  if (!error) return ValidationStatus::OneSided;
  return std::abs(*error) <= tolerance ? ValidationStatus::Within : ValidationStatus::Outside;
}

std::int64_t ValidationReport::within() const {
  std::int64_t n = 0;
  for (const auto& row : rows) n += row.status() == ValidationStatus::Within;
  return n;
}

std::int64_t ValidationReport::outside() const {
  std::int64_t n = 0;
  for (const auto& row : rows) n += row.status() == ValidationStatus::Outside;
  return n;
}

double latency_tolerance(Mechanism mechanism) {
  switch (mechanism) {
    case Mechanism::Mps:
    case Mechanism::TimeSliced:
    case Mechanism::UnifiedMemory: return 0.15;
    default: return 0.05;
  }
}

std::optional<SimulatedWorkerStart> simulated_worker_start(Mechanism mechanism, const HardwareProfile& hardware) {
  if (traits(mechanism).process != ProcessModel::FreshProcess) return std::nullopt;
  return SimulatedWorkerStart{hardware.process_start, hardware.cuda_context_create,
                              hardware.framework_start + hardware.cuda_malloc, hardware.process_kill};
}

std::optional<MeasuredWorkerStart> measured_worker_start(const nlohmann::json& summary, const std::string& origin) {
  // Note [Load summary]: the key read by the summary's own reader.
  const std::optional<runtime::WorkerStartMeans> starts = runtime::worker_starts_of(summary, origin);
  if (!starts) return std::nullopt;
  auto mean_of = [&](const char* phase) {
    const auto it = starts->mean_ms.find(phase);
    if (it == starts->mean_ms.end()) throw InputError(origin + ": worker_starts.mean_ms has no number '" + phase + "'");
    return it->second;
  };
  return MeasuredWorkerStart{starts->count, mean_of("process"), mean_of("context"),
                             mean_of("memory") + mean_of("models") + mean_of("training") + mean_of("other"),
                             starts->kill_mean_ms};
}

SimulationOptions simulation_options_of_run(const nlohmann::json& measured_summary, const std::string& origin) {
  SimulationOptions options;
  if (const auto fresh = runtime::fresh_standby_workers_of(measured_summary, origin)) {
    if (*fresh < 0 || *fresh > 1024) {
      throw InputError(origin + ": fresh_standby_workers must be a count of workers (an integer from 0 to 1024)");
    }
    options.fresh_standby_processes = static_cast<int>(*fresh);
  } else if (const auto warmup = runtime::warmup_per_model_of(measured_summary, origin); warmup && *warmup > 0) {
    options.fresh_standby_processes = 0;
  }
  return options;
}

ValidationReport compare_summaries(const std::string& experiment, Mechanism mechanism,
                                   const std::vector<std::string>& models, const nlohmann::json& simulated,
                                   const nlohmann::json& measured, const std::optional<MeasuredTraining>& training,
                                   std::optional<Duration> simulated_step,
                                   std::optional<SimulatedWorkerStart> worker_start) {
  ValidationReport report;
  report.experiment = experiment;
  report.mechanism = mechanism;
  const double tolerance = latency_tolerance(mechanism);
  std::vector<std::string> scopes{"all"};
  scopes.insert(scopes.end(), models.begin(), models.end());
  // Note [Served summary]: both sides read once, by one checked reader.
  const ServedSummary sim = served_summary_from_json(simulated, "the simulated summary");
  const ServedSummary meas = served_summary_from_json(measured, "the measured summary");
  for (const std::string& scope : scopes) {
    const auto sim_latency = scope == "all" ? sim.latency : model_part(sim, scope, &ServedModelSummary::latency);
    const auto measured_latency = scope == "all" ? meas.latency : model_part(meas, scope, &ServedModelSummary::latency);
    for (const char* measure : {"mean_ms", "p50_ms", "p99_ms"}) {
      report.rows.push_back(
          {scope, measure, measure_of(sim_latency, measure), measure_of(measured_latency, measure), tolerance});
    }
    // The engine alone (Note [Request path]), where a side has it: the timeline's prediction
    // against the worker's own measurement, apart from the protocol and the server's steps.
    if (scope == "all") continue;
    const auto sim_engine = model_part(sim, scope, &ServedModelSummary::engine_latency);
    const auto measured_engine = model_part(meas, scope, &ServedModelSummary::engine_latency);
    if (sim_engine || measured_engine) {
      for (const char* measure : {"mean_ms", "p50_ms"}) {
        report.rows.push_back({scope, std::string("engine_") + measure, measure_of(sim_engine, measure),
                               measure_of(measured_engine, measure), tolerance});
      }
    }
    // Note [Latency parts]: the server's time and the protocol's, where both sides split them;
    // decoding requests' first token, where both sides have some (Note [Generate requests]).
    const std::pair<const char*, std::optional<LatencySummary> ServedModelSummary::*> parts[] = {
        {"server", &ServedModelSummary::server_latency},
        {"protocol", &ServedModelSummary::protocol_latency},
        {"first_token", &ServedModelSummary::first_token_latency}};
    for (const auto& [part, member] : parts) {
      const auto sim_part = model_part(sim, scope, member);
      const auto measured_part = model_part(meas, scope, member);
      if (!sim_part || !measured_part) continue;
      for (const char* measure : {"mean_ms", "p50_ms", "p99_ms"}) {
        std::string name = part;
        name.append("_").append(measure);
        report.rows.push_back(
            {scope, std::move(name), measure_of(sim_part, measure), measure_of(measured_part, measure), tolerance});
      }
    }
  }
  // Note [Worker start rows]: where the server split the starts of the workload.
  const std::optional<MeasuredWorkerStart> measured_start =
      worker_start ? measured_worker_start(measured, "the measured summary") : std::nullopt;
  if (measured_start) {
    const MeasuredWorkerStart& m = *measured_start;
    auto ms = [](Duration d) { return static_cast<double>(d.ns()) / 1e6; };
    report.rows.push_back({"all", "worker_start_ms", ms(worker_start->total()),
                           m.process_ms + m.context_ms + m.framework_ms, tolerance});
    report.rows.push_back({"all", "worker_start_process_ms", ms(worker_start->process), m.process_ms, tolerance});
    report.rows.push_back({"all", "worker_start_context_ms", ms(worker_start->context), m.context_ms, tolerance});
    report.rows.push_back({"all", "worker_start_framework_ms", ms(worker_start->framework), m.framework_ms, tolerance});
    if (m.kill_ms) report.rows.push_back({"all", "worker_kill_ms", ms(worker_start->kill), *m.kill_ms, tolerance});
  }
  report.rows.push_back({"all", "throughput_rps", sim.throughput_rps, meas.throughput_rps, tolerance});
  // Training: the simulator's rate when its config has a job; the server's when it trains.
  std::optional<double> sim_training;
  if (sim.training_iterations_per_s && *sim.training_iterations_per_s > 0) sim_training = sim.training_iterations_per_s;
  std::optional<double> measured_training;
  if (training && training->seconds > 0 && training->steps > 0) {
    measured_training = static_cast<double>(training->steps) / training->seconds;
  }
  if (sim_training || measured_training) {
    report.rows.push_back({"all", "training_steps_per_s", sim_training, measured_training, kTrainingTolerance});
  }
  // Note [Training share]: where the server's job was also measured alone.
  if (training && training->alone_steps > 0 && training->alone_seconds > 0) {
    const double alone_rate = static_cast<double>(training->alone_steps) / training->alone_seconds;
    std::optional<double> measured_share;
    if (measured_training) measured_share = *measured_training / alone_rate;
    std::optional<double> sim_share;
    if (sim_training && simulated_step && *simulated_step > Duration::zero()) {
      sim_share = *sim_training * simulated_step->seconds();
    }
    if (sim_share || measured_share) {
      report.rows.push_back({"all", "training_share", sim_share, measured_share, kTrainingTolerance});
    }
    // Note [Training held]: the share split into the time held and the rate while not held.
    std::optional<double> sim_held;
    if (sim_share && sim.training_held_ms && sim.makespan_s > 0) {
      sim_held = *sim.training_held_ms / 1000.0 / sim.makespan_s;
    }
    std::optional<double> measured_held;
    if (measured_share && training->held_seconds && training->seconds > 0) {
      measured_held = *training->held_seconds / training->seconds;
    }
    // Only where the server counted its hold: the simulator's alone compares with nothing.
    if (measured_held) {
      auto running_share = [](const std::optional<double>& share, const std::optional<double>& held) {
        return share && held && *held < 1.0 ? std::optional<double>(*share / (1.0 - *held)) : std::nullopt;
      };
      report.rows.push_back({"all", "training_held_fraction", sim_held, measured_held, kTrainingTolerance});
      report.rows.push_back({"all", "training_running_share", running_share(sim_share, sim_held),
                             running_share(measured_share, measured_held), kTrainingTolerance});
    }
  }
  return report;
}

std::string validation_csv(const ValidationReport& report) {
  std::string text = "scope,measure,simulated,measured,relative_error,tolerance,status\n";
  for (const auto& row : report.rows) {
    text += row.scope + "," + row.measure + "," + cell(row.simulated) + "," + cell(row.measured) + "," +
            cell(row.relative_error()) + "," + cell(row.tolerance) + "," + to_string(row.status()) + "\n";
  }
  return text;
}

nlohmann::json validation_json(const ValidationReport& report) {
  auto value = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : report.rows) {
    rows.push_back({{"scope", row.scope},
                    {"measure", row.measure},
                    {"simulated", value(row.simulated)},
                    {"measured", value(row.measured)},
                    {"relative_error", value(row.relative_error())},
                    {"tolerance", row.tolerance},
                    {"status", to_string(row.status())}});
  }
  return {{"experiment", report.experiment},
          {"mechanism", to_string(report.mechanism)},
          {"within", report.within()},
          {"outside", report.outside()},
          {"rows", rows}};
}

}  // namespace psw::xval
