#include "psw/sim/summary.hpp"

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "psw/common/json_fields.hpp"

namespace psw::sim {

nlohmann::json to_json(const SimulationSummary& s) {
  using nlohmann::json;
  json models = json::object();
  for (const auto& [name, m] : s.models) {
    json& entry = models[name];
    entry = {{"latency", to_json(m.latency)}, {"engine_latency", to_json(m.engine_latency)}, {"switches", m.switches}};
    if (m.server_latency) entry["server_latency"] = to_json(*m.server_latency);
    if (m.protocol_latency) entry["protocol_latency"] = to_json(*m.protocol_latency);
    if (m.first_token_latency) entry["first_token_latency"] = to_json(*m.first_token_latency);
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

LatencySummary latency(const nlohmann::json& j, const char* key, const std::string& where) {
  return latency_summary_from_json(json_fields::member(j, key, where), where + "." + key);
}

}  // namespace summary_json

SimulationSummary simulation_summary_from_json(const nlohmann::json& j, const std::string& where) {
  namespace sj = summary_json;
  namespace jf = json_fields;
  SimulationSummary s;
  s.name = jf::text(j, "name", where);
  s.mechanism = jf::text(j, "mechanism", where);
  s.hardware = jf::text(j, "hardware", where);
  const auto& seed = jf::member(j, "seed", where);
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<std::int64_t>() >= 0)) {
    throw InputError(where + ": 'seed' must be a non-negative integer");
  }
  s.seed = seed.get<std::uint64_t>();
  s.requests = jf::integer(j, "requests", where);
  s.latency = sj::latency(j, "latency", where);
  s.slo_attainment = jf::number(j, "slo_attainment", where);
  s.throughput_rps = jf::number(j, "throughput_rps", where);
  s.makespan_s = jf::number(j, "makespan_s", where);
  s.gpu_busy_fraction = jf::number(j, "gpu_busy_fraction", where);
  s.gpu_work_fraction = jf::number(j, "gpu_work_fraction", where);
  s.training_iterations = jf::integer(j, "training_iterations", where);
  s.training_iterations_per_s = jf::number(j, "training_iterations_per_s", where);
  s.switches = jf::integer(j, "switches", where);
  s.training_switch_ins = jf::integer(j, "training_switch_ins", where);
  s.training_preemptions = jf::integer(j, "training_preemptions", where);
  s.training_requests = jf::integer(j, "training_requests", where);
  s.training_lost_ms = jf::number(j, "training_lost_ms", where);
  s.training_held_ms = jf::number(j, "training_held_ms", where);
  s.standby_waits = jf::integer(j, "standby_waits", where);
  s.startup_overhead_mean_ms = jf::number(jf::member(j, "startup_overhead_ms", where), "mean", where + ".startup_overhead_ms");
  s.total_overhead_mean_ms = jf::number(jf::member(j, "total_overhead_ms", where), "mean", where + ".total_overhead_ms");
  const auto& models = jf::member(j, "models", where);
  if (!models.is_object()) throw InputError(where + ": 'models' must be an object");
  for (const auto& [name, m] : models.items()) {
    const std::string at = where + ".models." + name;
    ModelSimulationSummary model;
    model.latency = sj::latency(m, "latency", at);
    model.engine_latency = sj::latency(m, "engine_latency", at);
    model.switches = jf::integer(m, "switches", at);
    if (m.contains("server_latency")) model.server_latency = sj::latency(m, "server_latency", at);
    if (m.contains("protocol_latency")) model.protocol_latency = sj::latency(m, "protocol_latency", at);
    if (m.contains("first_token_latency")) model.first_token_latency = sj::latency(m, "first_token_latency", at);
    if (m.contains("parallel")) {
      const auto& p = m.at("parallel");
      const std::string pat = at + ".parallel";
      ParallelSwitchSummary ps;
      ps.gpus = static_cast<int>(jf::integer(p, "gpus", pat));
      const std::string helpers = jf::text(p, "helpers", pat);
      if (helpers != "training" && helpers != "idle") throw InputError(pat + ": 'helpers' must be training or idle");
      ps.helpers_training = helpers == "training";
      ps.groups = jf::integer(p, "groups", pat);
      ps.bytes = jf::integer(p, "bytes", pat);
      ps.via_helpers_bytes = jf::integer(p, "via_helpers_bytes", pat);
      ps.switch_ms = jf::number(p, "switch_ms", pat);
      ps.bound_ms = jf::number(p, "bound_ms", pat);
      ps.single_gpu_ms = jf::number(p, "single_gpu_ms", pat);
      model.parallel = ps;
    }
    s.models.emplace(name, std::move(model));
  }
  return s;
}

}  // namespace psw::sim
