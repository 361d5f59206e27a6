#include "psw/runtime/validation_run.hpp"

#include <chrono>
#include <sstream>

#include "psw/common/error.hpp"
#include "psw/runtime/client.hpp"
#include "psw/runtime/service.hpp"
#include "psw/sim/compare.hpp"
#include "psw/sim/gpu_server.hpp"

namespace psw::runtime {

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

namespace {

// Note [Validating the same case]: the mechanism and the training job.
void check_same_case(const ExperimentConfig& config, Client& client) {
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
  const TrainingStatus training = client.training_status("");
  if (config.training_model) {
    const std::string& model = config.models[*config.training_model].name;
    if (training.model != model || !training.running) {
      throw InputError(where + ": training: the simulator trains " + model +
                       " throughout, but the server's training job " +
                       (training.model.empty() ? std::string("does not exist")
                        : training.model != model ? "is of " + training.model
                                                  : std::string("is not running")) +
                       "; start it first (psw client --train-start) or remove training from the config");
    }
  } else if (training.running) {
    throw InputError(where + ": the config has no training job, but the server's job of " + training.model +
                     " is running; stop it first (psw client --train-stop) or add training to the config");
  }
}

}  // namespace

ValidationRun run_validation(const ExperimentConfig& config, const LoadOptions& options,
                             const std::filesystem::path& sim_out) {
  if (options.time_scale != 1.0) {
    throw InputError("psw validate sends the workload at its own times (time scale 1): the simulator predicts those");
  }
  check_load_workload(config);  // before contacting the server
  Client client(options.target);
  client.set_timeout(std::chrono::milliseconds(options.timeout_ms));
  try {
    check_same_case(config, client);
  } catch (const ServiceError& e) {  // the transport's or the server's failure, not the config's
    throw Error(std::string("psw validate: ") + e.what());
  }

  ValidationRun run;
  sim::SimulationOptions sim_options;
  sim_options.out_dir = sim_out;
  if (options.progress) options.progress("simulating " + config.name);
  run.simulated = sim::run_simulation(config, sim_options).summary;

  const std::string training_model = config.training_model ? config.models[*config.training_model].name : "";
  auto completed_steps = [&] {
    try {
      return client.training_status(training_model).completed_steps;
    } catch (const ServiceError& e) {
      throw Error("psw validate: the training job's progress: " + std::string(e.what()));
    }
  };
  const std::int64_t steps_before = training_model.empty() ? 0 : completed_steps();
  run.measured = run_load(config, options);
  if (!training_model.empty()) {
    run.training = sim::MeasuredTraining{completed_steps() - steps_before, run.measured.wall_seconds};
  }
  std::vector<std::string> models;
  for (const auto& m : config.models) models.push_back(m.name);
  run.report = sim::compare_summaries(config.name, config.mechanism, models, run.simulated, run.measured.summary,
                                      run.training);
  return run;
}

ValidationRun revalidate(const ExperimentConfig& config, const std::filesystem::path& recorded,
                         const std::filesystem::path& sim_out) {
  const std::string folder = recorded.string();
  const nlohmann::json validation = sim::read_json_object(recorded / "validation.json", "psw validate's validation.json");
  const nlohmann::json measured = sim::read_json_object(recorded / "measured" / "summary.json", "psw load's summary.json");
  if (!validation.contains("mechanism") || !validation["mechanism"].is_string()) {
    throw InputError(folder + "/validation.json: no string 'mechanism'");
  }
  const std::string mechanism = validation["mechanism"].get<std::string>();
  if (mechanism != to_string(config.mechanism)) {
    throw InputError(folder + ": measured under " + mechanism + ", but " + config.source.string() + " simulates " +
                     to_string(config.mechanism) + " (Note [Validating again])");
  }
  ValidationRun run;
  run.recorded = recorded;
  const bool measured_training = validation.contains("training");
  if (measured_training != config.training_model.has_value()) {
    throw InputError(folder + (measured_training ? ": measured beside a training job, but " : ": measured without training, but ") +
                     config.source.string() + (measured_training ? " has none" : " has one") + " (Note [Validating again])");
  }
  if (measured_training) {
    const nlohmann::json& t = validation["training"];
    if (!t.is_object() || !t.contains("measured_steps") || !t["measured_steps"].is_number_integer() ||
        !t.contains("measured_seconds") || !t["measured_seconds"].is_number()) {
      throw InputError(folder + "/validation.json: 'training' needs integer measured_steps and number measured_seconds");
    }
    run.training = sim::MeasuredTraining{t["measured_steps"].get<std::int64_t>(), t["measured_seconds"].get<double>()};
  }
  sim::SimulationOptions sim_options;
  sim_options.out_dir = sim_out;
  run.simulated = sim::run_simulation(config, sim_options).summary;
  if (!measured.contains("generated") || !measured["generated"].is_number_integer()) {
    throw InputError(folder + "/measured/summary.json: no integer 'generated' (not psw load's summary)");
  }
  const std::int64_t sent = measured["generated"].get<std::int64_t>();
  const std::int64_t simulated = run.simulated.value("requests", std::int64_t{-1});
  if (sent != simulated) {
    throw InputError(detail::concat(folder, ": the measured run sent ", sent, " requests, but the workload of ",
                                    config.source.string(), " has ", simulated, " (Note [Validating again])"));
  }
  run.measured.summary = measured;
  std::vector<std::string> models;
  for (const auto& m : config.models) models.push_back(m.name);
  run.report = sim::compare_summaries(config.name, config.mechanism, models, run.simulated, measured, run.training);
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
      if (std::filesystem::exists(from)) save_text(measured / name, sim::read_input(from, "a file of psw load's"));
    }
  } else {
    write_load_outputs(config, run.measured, folder_.path() / "measured");
  }
  save_text(folder_.path() / "config.resolved.yaml", resolved_yaml(config));
  save_text(folder_.path() / "validation.csv", sim::validation_csv(run.report));
  nlohmann::json json = sim::validation_json(run.report);
  if (run.training) {
    json["training"] = {{"measured_steps", run.training->steps}, {"measured_seconds", run.training->seconds}};
  }
  save_text(folder_.path() / "validation.json", json.dump(2) + "\n");
  folder_.commit();
}

}  // namespace psw::runtime
