#include "psw/xval/validation_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "psw/common/error.hpp"
#include "psw/common/input_file.hpp"
#include "psw/common/json_fields.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/ipc/service.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/common/metrics.hpp"

namespace psw::xval {

// psw validate drives the live server through the runtime's client and psw load.
using runtime::check_load_workload;
using runtime::check_serving_inputs;
using runtime::Client;
using runtime::LoadOptions;
using runtime::read_answered_requests;
using runtime::recorded_inputs;
using runtime::run_load;
using runtime::ServiceError;
using runtime::TrainingStatus;

std::map<std::string, std::string> metric_labels(const std::string& metrics_text, const std::string& name) {
  std::istringstream lines(metrics_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    std::map<std::string, std::string> labels;
    std::size_t at = name.size() + 1;
    // key="value" pairs separated by commas, up to the closing brace; values as the exposition
    // format escapes them (\" \\ \n).
    while (at < line.size() && line[at] != '}') {
      const std::size_t eq = line.find('=', at);
      if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
      const std::string key = line.substr(at, eq - at);
      std::string value;
      std::size_t i = eq + 2;
      for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i];
        } else {
          value += line[i];
        }
      }
      labels[key] = value;
      at = i + 1;
      if (at < line.size() && line[at] == ',') ++at;
    }
    return labels;
  }
  return {};
}

TrainingStatus wait_while_between_tasks(const std::function<TrainingStatus()>& status, std::chrono::milliseconds patience,
                                        const std::function<void(const std::string&)>& progress) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  bool said = false;
  for (;;) {
    TrainingStatus now = status();
    if (!now.active || now.running || std::chrono::steady_clock::now() >= deadline) return now;
    if (!said && progress) {
      progress(detail::concat("waiting up to ", std::chrono::duration_cast<std::chrono::seconds>(patience).count(),
                              " s for the server's training job of ", now.model, " to resume"));
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

namespace {

// Note [Validating the same case]: the mechanism and the training job.
void check_same_case(const ExperimentConfig& config, Client& client,
                     const std::function<void(const std::string&)>& progress) {
  const std::string where = config.source.string();
  const auto info = metric_labels(client.metrics(), "psw_server_info");
  const auto mechanism = info.find("mechanism");
  if (mechanism == info.end()) {
    throw InputError("the server at " + client.target() +
                     " does not say which mechanism it runs (no psw_server_info metric): is it a psw serve?");
  }
  if (mechanism->second != to_string(config.mechanism)) {
    throw InputError(where + ": mechanism: " + to_string(config.mechanism) + ", but the server at " + client.target() +
                     " runs " + mechanism->second + "; validate against a server of the same mechanism");
  }
  if (config.training_model) {
    const TrainingStatus training = wait_while_between_tasks([&] { return client.training_status(""); },
                                                             kTrainingResumePatience, progress);
    const std::string& model = config.models[*config.training_model].name;
    if (training.model != model || !training.running) {
      throw InputError(where + ": training: the simulator trains " + model +
                       " throughout, but the server's training job " +
                       (training.model.empty() ? std::string("does not exist")
                        : training.model != model ? "is of " + training.model
                        : training.stopped        ? std::string("is stopped")
                        : training.active ? detail::concat("has not resumed in ", kTrainingResumePatience.count(), " s")
                                          : std::string("is not started")) +
                       "; start it first (psw client --train-start) or remove training from the config");
    }
  } else if (const TrainingStatus training = client.training_status(""); training.running || training.active) {
    // Between tasks it will train during the workload all the same.
    throw InputError(where + ": the config has no training job, but the server's job of " + training.model +
                     " is running; stop it first (psw client --train-stop) or add training to the config");
  }
}

// Note [Training share]: the job's steps over `window` with no requests, from one step's
// completion to another's (polling its counter each millisecond), so that the count has no
// rounding of a partial step. `when`: "before the workload" or "after it", for the progress.
struct AloneWindow {
  std::int64_t steps = 0;
  double seconds = 0;
};

AloneWindow measure_training_alone(const std::function<std::int64_t()>& completed_steps,
                                   std::chrono::milliseconds window, const char* when,
                                   const std::function<void(const std::string&)>& progress) {
  // A job that makes no step in this long is stuck or far too slow to measure.
  const auto patience = std::max<std::chrono::milliseconds>(window, std::chrono::seconds(60));
  auto next_step = [&](const char* which) {
    const std::int64_t from = completed_steps();
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
      const std::int64_t now = completed_steps();
      const auto at = std::chrono::steady_clock::now();
      if (now != from) return std::pair{now, at};
      if (at > deadline) {
        throw Error(detail::concat("psw validate: the training job completed no step in ",
                                   std::chrono::duration_cast<std::chrono::seconds>(patience).count(),
                                   " s with no requests (", which, " of the alone window, --training-alone)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  if (progress) progress(detail::concat("training alone for ", window.count(), " ms (no requests), ", when));
  const auto [first_steps, first_at] = next_step("start");
  std::this_thread::sleep_until(first_at + window);
  const auto [last_steps, last_at] = next_step("end");
  const AloneWindow measured{last_steps - first_steps, std::chrono::duration<double>(last_at - first_at).count()};
  if (progress) {
    progress(detail::concat("training alone ", when, ": ", measured.steps, " steps in ", measured.seconds, " s (",
                            static_cast<double>(measured.steps) / measured.seconds, " steps/s)"));
  }
  return measured;
}

}  // namespace

// Named, not anonymous: the unity build compiles this file with the rest of psw_xval.
namespace validation_run_detail {

// A run's simulated and measured summaries compared, per model in the config's order.
ValidationReport compare_run(const ExperimentConfig& config, const ValidationRun& run) {
  std::vector<std::string> models;
  for (const auto& m : config.models) models.push_back(m.name);
  return compare_summaries(config.name, config.mechanism, models, run.simulated, to_json(run.measured.summary),
                           run.training, sim::training_step(config),
                           simulated_worker_start(config.mechanism, config.hardware));
}

}  // namespace validation_run_detail
using validation_run_detail::compare_run;

ValidationRun run_validation(const ExperimentConfig& config, const LoadOptions& options,
                             const std::filesystem::path& sim_out, std::chrono::milliseconds training_alone) {
  if (options.time_scale != 1.0) {
    throw InputError("psw validate sends the workload at its own times (time scale 1): the simulator predicts those");
  }
  check_load_workload(config);  // before contacting the server
  check_serving_inputs(config, options.inputs, "this run");
  Client client = runtime::connect_to_server(options);
  try {
    check_same_case(config, client, options.progress);
  } catch (const ServiceError& e) {  // the transport's or the server's failure, not the config's
    throw Error(std::string("psw validate: ") + e.what());
  }

  ValidationRun run;
  // Simulated first, so that a case the simulator refuses fails before the server is sent anything.
  sim::SimulationOptions sim_options;
  sim_options.out_dir = sim_out;
  if (options.progress) options.progress("simulating " + config.name);
  run.simulated = sim::to_json(sim::run_simulation(config, sim_options).summary);

  const std::string training_model = config.training_model ? config.models[*config.training_model].name : "";
  auto training_status = [&] {
    try {
      return client.training_status(training_model);
    } catch (const ServiceError& e) {
      throw Error("psw validate: the training job's progress: " + std::string(e.what()));
    }
  };
  auto completed_steps = [&] { return training_status().completed_steps; };
  if (training_model.empty()) {
    run.measured = run_load(config, options);
  } else {
    MeasuredTraining training;
    // Note [Training share]: one window alone before the workload and one after, added.
    auto add_alone_window = [&](const char* when) {
      const AloneWindow alone = measure_training_alone(completed_steps, training_alone, when, options.progress);
      training.alone_steps += alone.steps;
      training.alone_seconds += alone.seconds;
    };
    if (training_alone.count() > 0) add_alone_window("before the workload");
    // The workload's steps: from its clock's start (after the connections and the warm-up,
    // whose requests are not the workload's) to its last answer, over the same wall time.
    // Note [Training held]: the job's time held for requests over the same span.
    TrainingStatus at_start;
    LoadOptions counted = options;
    counted.at_clock_start = [&] { at_start = training_status(); };
    counted.at_last_answer = [&] {
      const TrainingStatus at_end = training_status();
      training.steps = at_end.completed_steps - at_start.completed_steps;
      training.held_seconds = static_cast<double>(at_end.held_ns - at_start.held_ns) * 1e-9;
    };
    run.measured = run_load(config, counted);
    training.seconds = run.measured.wall_seconds;
    if (training_alone.count() > 0) add_alone_window("after the workload");
    run.training = training;
  }
  // Again where the server did not stand as a fresh one when the clock started (Note [Processes
  // a server starts with]: a warm-up took the process it started with).
  if (config.serving && traits(config.mechanism).process == ProcessModel::FreshProcess) {
    const sim::SimulationOptions as_run = simulation_options_of_run(to_json(run.measured.summary), "psw load's summary");
    if (as_run.fresh_standby_processes) {
      sim_options.fresh_standby_processes = as_run.fresh_standby_processes;
      if (options.progress) options.progress("simulating " + config.name + " again, as the server stood");
      run.simulated = sim::to_json(sim::run_simulation(config, sim_options).summary);
    }
  }
  run.report = compare_run(config, run);
  return run;
}

// validation.json's `training`, written and read here only (Note [Validating again]).
namespace recorded_training {

nlohmann::json to_json(const MeasuredTraining& t) {
  nlohmann::json json = {{"measured_steps", t.steps}, {"measured_seconds", t.seconds}};
  if (t.held_seconds) json["held_seconds"] = *t.held_seconds;
  if (t.alone_steps > 0) {
    json["alone_steps"] = t.alone_steps;
    json["alone_seconds"] = t.alone_seconds;
  }
  return json;
}

MeasuredTraining from_json(const nlohmann::json& t, const std::string& origin) {
  if (!t.is_object() || !t.contains("measured_steps") || !t["measured_steps"].is_number_integer() ||
      !t.contains("measured_seconds") || !t["measured_seconds"].is_number()) {
    throw InputError(origin + ": 'training' needs integer measured_steps and number measured_seconds");
  }
  MeasuredTraining training{t["measured_steps"].get<std::int64_t>(), t["measured_seconds"].get<double>()};
  // Note [Training share]: recorded since the alone window was measured; both or neither.
  const bool alone_steps = t.contains("alone_steps");
  if (alone_steps != t.contains("alone_seconds") ||
      (alone_steps && (!t["alone_steps"].is_number_integer() || !t["alone_seconds"].is_number() ||
                       t["alone_steps"].get<std::int64_t>() <= 0 || t["alone_seconds"].get<double>() <= 0))) {
    throw InputError(origin + ": 'training' needs both alone_steps (a positive integer) and "
                              "alone_seconds (a positive number), or neither");
  }
  if (alone_steps) {
    training.alone_steps = t["alone_steps"].get<std::int64_t>();
    training.alone_seconds = t["alone_seconds"].get<double>();
  }
  // Note [Training held]: recorded since the server counts it.
  if (t.contains("held_seconds")) {
    if (!t["held_seconds"].is_number() || t["held_seconds"].get<double>() < 0) {
      throw InputError(origin + ": training.held_seconds must be a number of at least 0");
    }
    training.held_seconds = t["held_seconds"].get<double>();
  }
  return training;
}

}  // namespace recorded_training

RecordedValidation read_recorded_validation(const std::filesystem::path& folder) {
  const std::string origin = (folder / "validation.json").string();
  const nlohmann::json validation = read_json_object(folder / "validation.json", "psw validate's validation.json");
  RecordedValidation recorded;
  recorded.mechanism = json_fields::text(validation, "mechanism", origin);
  if (const auto t = validation.find("training"); t != validation.end()) {
    recorded.training = recorded_training::from_json(*t, origin);
  }
  return recorded;
}

TrainingStepCost training_step_alone(const RecordedValidation& recorded, const std::string& origin,
                                     const std::string& model, int batch) {
  if (!recorded.training) {
    throw InputError(origin + ": no 'training' (a psw validate run of a server with a training job)");
  }
  const MeasuredTraining& t = *recorded.training;
  if (t.alone_steps < 1 || !(t.alone_seconds > 0)) {
    throw InputError(origin + ": training.alone_steps (at least 1) and training.alone_seconds (positive) are needed: "
                              "the run measured its job alone (psw validate --training-alone)");
  }
  const double step_ns = t.alone_seconds * 1e9 / static_cast<double>(t.alone_steps);
  return {model, batch, nanoseconds(static_cast<std::int64_t>(std::llround(step_ns)))};
}

ValidationRun revalidate(const ExperimentConfig& config, const std::filesystem::path& recorded,
                         const std::filesystem::path& sim_out) {
  const std::string folder = recorded.string();
  const RecordedValidation validation = read_recorded_validation(recorded);
  const nlohmann::json measured_json =
      read_json_object(recorded / "measured" / "summary.json", "psw load's summary.json");
  const std::string& mechanism = validation.mechanism;
  if (mechanism != to_string(config.mechanism)) {
    throw InputError(folder + ": measured under " + mechanism + ", but " + config.source.string() + " simulates " +
                     to_string(config.mechanism) + " (Note [Validating again])");
  }
  ValidationRun run;
  run.recorded = recorded;
  const bool measured_training = validation.training.has_value();
  if (measured_training != config.training_model.has_value()) {
    throw InputError(folder + (measured_training ? ": measured beside a training job, but " : ": measured without training, but ") +
                     config.source.string() + (measured_training ? " has none" : " has one") + " (Note [Validating again])");
  }
  run.training = validation.training;
  // Note [Load summary]: the recorded summary, read whole.
  const std::string summary_path = folder + "/measured/summary.json";
  run.measured.summary = runtime::load_summary_from_json(measured_json, summary_path);
  check_serving_inputs(config, recorded_inputs(run.measured.summary, summary_path), folder);
  sim::SimulationOptions sim_options = simulation_options_of_run(measured_json, summary_path);
  sim_options.out_dir = sim_out;
  const sim::SimulationSummary simulated_summary = sim::run_simulation(config, sim_options).summary;
  run.simulated = sim::to_json(simulated_summary);
  const std::int64_t sent = run.measured.summary.generated;
  const std::int64_t simulated = simulated_summary.requests;
  // A closed loop's count is the server's pace, not the workload's (Note [Closed-loop cycles]).
  if (sent != simulated && config.workload.kind != WorkloadKind::Cycles) {
    throw InputError(detail::concat(folder, ": the measured run sent ", sent, " requests, but the workload of ",
                                    config.source.string(), " has ", simulated, " (Note [Validating again])"));
  }
  // Note [Latency parts]: psw load's protocol_latency was once counted from the send; from the
  // recorded requests, each model's part again as it is counted now (the send's lateness
  // included), so that recordings of either kind compare alike. The files under measured/ stay
  // as recorded.
  const std::filesystem::path requests = recorded / "measured" / "requests.csv";
  if (std::filesystem::exists(requests)) {
    std::map<std::string, LatencyHistogram> protocol;
    for (const runtime::AnsweredRequest& a :
         read_answered_requests(read_input(requests, "psw load's requests.csv"), requests.string())) {
      protocol[a.model].add(nanoseconds(a.latency - a.server));
    }
    for (auto& [model, entry] : run.measured.summary.models) {
      const auto found = protocol.find(model);
      if (entry.protocol_latency && found != protocol.end()) entry.protocol_latency = summarize(found->second);
    }
  }
  run.report = compare_run(config, run);
  return run;
}

ValidationOutput::ValidationOutput(const std::filesystem::path& out_dir) : folder_(out_dir, "validation.json") {}

std::filesystem::path ValidationOutput::simulated_dir() const { return folder_.path() / "simulated"; }

void ValidationOutput::write(const ExperimentConfig& config, const ValidationRun& run) {
  if (run.recorded) {
    // Note [Validating again]: the measurement as it was recorded, file for file.
    const std::filesystem::path measured = folder_.path() / "measured";
    std::filesystem::create_directories(measured);
    for (const char* name : {"requests.csv", "summary.json", "config.resolved.yaml"}) {
      const std::filesystem::path from = *run.recorded / "measured" / name;
      if (std::filesystem::exists(from)) save_text(measured / name, read_input(from, "a file of psw load's"));
    }
  } else {
    write_load_outputs(config, run.measured, folder_.path() / "measured");
  }
  save_text(folder_.path() / "config.resolved.yaml", resolved_yaml(config, folder_.path() / "config.resolved.yaml"));
  save_text(folder_.path() / "validation.csv", validation_csv(run.report));
  nlohmann::json json = validation_json(run.report);
  if (run.training) json["training"] = recorded_training::to_json(*run.training);
  save_text(folder_.path() / "validation.json", json.dump(2) + "\n");
  folder_.commit();
}

}  // namespace psw::xval
