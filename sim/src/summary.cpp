#include "psw/sim/summary.hpp"

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw::sim {

nlohmann::json to_json(const SimulationSummary& s) {
  using nlohmann::json;
  json models = json::object();
  for (const auto& [name, m] : s.models) {
    json& entry = models[name];
    entry = {{"latency", to_json(m.latency)}, {"engine_latency", to_json(m.engine_latency)}, {"switches", m.switches}};
    if (m.server_latency) entry["server_latency"] = to_json(*m.server_latency);
    if (m.protocol_latency) entry["protocol_latency"] = to_json(*m.protocol_latency);
    if (m.parallel) {
      const ParallelSwitchSummary& p = *m.parallel;
      entry["parallel"] = {{"gpus", p.gpus},
                           {"helpers", p.helpers_training ? "training" : "idle"},
                           {"groups", p.groups},
                           {"bytes", p.bytes},
                           {"via_helpers_bytes", p.via_helpers_bytes},
                           {"switch_ms", p.switch_ms},
                           {"bound_ms", p.bound_ms},
                           {"single_gpu_ms", p.single_gpu_ms}};
    }
  }
  return {{"name", s.name},
          {"mechanism", s.mechanism},
          {"hardware", s.hardware},
          {"seed", s.seed},
          {"requests", s.requests},
          {"latency", to_json(s.latency)},
          {"slo_attainment", s.slo_attainment},
          {"throughput_rps", s.throughput_rps},
          {"makespan_s", s.makespan_s},
          {"gpu_busy_fraction", s.gpu_busy_fraction},
          {"gpu_work_fraction", s.gpu_work_fraction},
          {"training_iterations", s.training_iterations},
          {"training_iterations_per_s", s.training_iterations_per_s},
          {"switches", s.switches},
          {"training_switch_ins", s.training_switch_ins},
          {"training_preemptions", s.training_preemptions},
          {"training_requests", s.training_requests},
          {"training_lost_ms", s.training_lost_ms},
          {"training_held_ms", s.training_held_ms},
          {"standby_waits", s.standby_waits},
          {"startup_overhead_ms", {{"mean", s.startup_overhead_mean_ms}}},
          {"total_overhead_ms", {{"mean", s.total_overhead_mean_ms}}},
          {"models", models}};
}

// Named, not anonymous: the unity build compiles this file with the rest of psw_sim.
namespace summary_json {

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object()) throw InputError(where + ": expected an object");
  const auto it = j.find(key);
  if (it == j.end()) throw InputError(where + ": no '" + key + "'");
  return *it;
}
double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = member(j, key, where);
  if (!v.is_number()) throw InputError(where + ": '" + key + "' must be a number");
  return v.get<double>();
}
std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = member(j, key, where);
  if (!v.is_number_integer()) throw InputError(where + ": '" + key + "' must be an integer");
  return v.get<std::int64_t>();
}
std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = member(j, key, where);
  if (!v.is_string()) throw InputError(where + ": '" + key + "' must be a string");
  return v.get<std::string>();
}
LatencySummary latency(const nlohmann::json& j, const char* key, const std::string& where) {
  return latency_summary_from_json(member(j, key, where), where + "." + key);
}

}  // namespace summary_json

SimulationSummary simulation_summary_from_json(const nlohmann::json& j, const std::string& where) {
  namespace sj = summary_json;
  SimulationSummary s;
  s.name = sj::text(j, "name", where);
  s.mechanism = sj::text(j, "mechanism", where);
  s.hardware = sj::text(j, "hardware", where);
  const auto& seed = sj::member(j, "seed", where);
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<std::int64_t>() >= 0)) {
    throw InputError(where + ": 'seed' must be a non-negative integer");
  }
  s.seed = seed.get<std::uint64_t>();
  s.requests = sj::integer(j, "requests", where);
  s.latency = sj::latency(j, "latency", where);
  s.slo_attainment = sj::number(j, "slo_attainment", where);
  s.throughput_rps = sj::number(j, "throughput_rps", where);
  s.makespan_s = sj::number(j, "makespan_s", where);
  s.gpu_busy_fraction = sj::number(j, "gpu_busy_fraction", where);
  s.gpu_work_fraction = sj::number(j, "gpu_work_fraction", where);
  s.training_iterations = sj::integer(j, "training_iterations", where);
  s.training_iterations_per_s = sj::number(j, "training_iterations_per_s", where);
  s.switches = sj::integer(j, "switches", where);
  s.training_switch_ins = sj::integer(j, "training_switch_ins", where);
  s.training_preemptions = sj::integer(j, "training_preemptions", where);
  s.training_requests = sj::integer(j, "training_requests", where);
  s.training_lost_ms = sj::number(j, "training_lost_ms", where);
  s.training_held_ms = sj::number(j, "training_held_ms", where);
  s.standby_waits = sj::integer(j, "standby_waits", where);
  s.startup_overhead_mean_ms = sj::number(sj::member(j, "startup_overhead_ms", where), "mean", where + ".startup_overhead_ms");
  s.total_overhead_mean_ms = sj::number(sj::member(j, "total_overhead_ms", where), "mean", where + ".total_overhead_ms");
  const auto& models = sj::member(j, "models", where);
  if (!models.is_object()) throw InputError(where + ": 'models' must be an object");
  for (const auto& [name, m] : models.items()) {
    const std::string at = where + ".models." + name;
    ModelSimulationSummary model;
    model.latency = sj::latency(m, "latency", at);
    model.engine_latency = sj::latency(m, "engine_latency", at);
    model.switches = sj::integer(m, "switches", at);
    if (m.contains("server_latency")) model.server_latency = sj::latency(m, "server_latency", at);
    if (m.contains("protocol_latency")) model.protocol_latency = sj::latency(m, "protocol_latency", at);
    if (m.contains("parallel")) {
      const auto& p = m.at("parallel");
      const std::string pat = at + ".parallel";
      ParallelSwitchSummary ps;
      ps.gpus = static_cast<int>(sj::integer(p, "gpus", pat));
      const std::string helpers = sj::text(p, "helpers", pat);
      if (helpers != "training" && helpers != "idle") throw InputError(pat + ": 'helpers' must be training or idle");
      ps.helpers_training = helpers == "training";
      ps.groups = sj::integer(p, "groups", pat);
      ps.bytes = sj::integer(p, "bytes", pat);
      ps.via_helpers_bytes = sj::integer(p, "via_helpers_bytes", pat);
      ps.switch_ms = sj::number(p, "switch_ms", pat);
      ps.bound_ms = sj::number(p, "bound_ms", pat);
      ps.single_gpu_ms = sj::number(p, "single_gpu_ms", pat);
      model.parallel = ps;
    }
    s.models.emplace(name, std::move(model));
  }
  return s;
}

}  // namespace psw::sim
