#include "psw/runtime/client/load_summary.hpp"

#include "psw/common/error.hpp"
#include "psw/common/json_fields.hpp"

namespace psw::runtime {

nlohmann::json to_json(const LoadSummary& s) {
  nlohmann::json models = nlohmann::json::object();
  for (const auto& [name, m] : s.models) {
    nlohmann::json& entry = models[name];
    entry = {{"latency", to_json(m.latency)}, {"errors", m.errors}};
    if (m.engine_latency) entry["engine_latency"] = to_json(*m.engine_latency);
    if (m.server_latency) entry["server_latency"] = to_json(*m.server_latency);
    if (m.protocol_latency) entry["protocol_latency"] = to_json(*m.protocol_latency);
    if (m.first_token_latency) entry["first_token_latency"] = to_json(*m.first_token_latency);
  }
  nlohmann::json j = {{"name", s.name},
                      {"target", s.target},
                      {"seed", s.seed},
                      {"time_scale", s.time_scale},
                      {"senders", s.senders},
                      {"generated", s.generated},
                      {"requests", s.requests},
                      {"errors", s.errors},
                      {"latency", to_json(s.latency)},
                      {"slo_attainment", s.slo_attainment},
                      {"throughput_rps", s.throughput_rps},
                      {"makespan_s", s.makespan_s},
                      {"late_sends",
                       {{"count", s.late_sends.count},
                        {"threshold_ms", s.late_sends.threshold_ms},
                        {"mean_ms", s.late_sends.mean_ms},
                        {"max_ms", s.late_sends.max_ms}}},
                      {"models", models}};
  if (s.inputs) j["inputs"] = *s.inputs;
  if (s.connections) j["connections"] = *s.connections;
  if (s.warmup_per_model) j["warmup_per_model"] = *s.warmup_per_model;
  if (s.worker_starts) {
    const WorkerStartMeans& w = *s.worker_starts;
    j["worker_starts"] = {{"count", w.count}, {"mean_ms", w.mean_ms}, {"total_mean_ms", w.total_mean_ms}};
    if (w.kills > 0) {
      j["worker_starts"]["kills"] = w.kills;
      if (w.kill_mean_ms) j["worker_starts"]["kill_mean_ms"] = *w.kill_mean_ms;
    }
  }
  if (!s.eager_switches.empty()) {
    nlohmann::json& eager = j["eager_switches"];
    for (const auto& [model, e] : s.eager_switches) {
      eager[model] = {{"count", e.count}, {"prepare_mean_ms", e.prepare_mean_ms}, {"forward_mean_ms", e.forward_mean_ms}};
    }
  }
  if (s.fresh_standby_workers) j["fresh_standby_workers"] = *s.fresh_standby_workers;
  return j;
}

// Named, not anonymous: the unity build compiles this file with the rest of psw_client.
namespace load_summary_json {

std::optional<psw::LatencySummary> optional_latency(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return latency_summary_from_json(*it, where + "." + key);
}

}  // namespace load_summary_json

std::optional<WorkerStartMeans> worker_starts_of(const nlohmann::json& summary, const std::string& origin) {
  namespace jf = json_fields;
  const auto it = summary.find("worker_starts");
  if (it == summary.end()) return std::nullopt;
  const std::string at = origin + ".worker_starts";
  const nlohmann::json& j = *it;
  if (!j.is_object()) throw InputError(at + ": expected an object");
  WorkerStartMeans w;
  w.count = jf::integer(j, "count", at);
  const auto& mean = jf::member(j, "mean_ms", at);
  if (!mean.is_object()) throw InputError(at + ".mean_ms: expected an object of phases");
  for (const auto& [phase, ms] : mean.items()) w.mean_ms[phase] = jf::number(mean, phase.c_str(), at + ".mean_ms");
  w.total_mean_ms = jf::number(j, "total_mean_ms", at);
  w.kills = jf::optional_integer(j, "kills", at).value_or(0);
  if (j.contains("kill_mean_ms")) w.kill_mean_ms = jf::number(j, "kill_mean_ms", at);
  return w;
}

std::map<std::string, EagerSwitchMeans> eager_switches_of(const nlohmann::json& summary, const std::string& origin) {
  namespace jf = json_fields;
  std::map<std::string, EagerSwitchMeans> out;
  const auto it = summary.find("eager_switches");
  if (it == summary.end()) return out;
  if (!it->is_object()) throw InputError(origin + ".eager_switches: expected an object of models");
  for (const auto& [model, e] : it->items()) {
    const std::string at = origin + ".eager_switches." + model;
    if (!e.is_object()) throw InputError(at + ": expected an object");
    out.emplace(model, EagerSwitchMeans{jf::integer(e, "count", at), jf::number(e, "prepare_mean_ms", at),
                                        jf::number(e, "forward_mean_ms", at)});
  }
  return out;
}

std::optional<std::int64_t> fresh_standby_workers_of(const nlohmann::json& summary, const std::string& origin) {
  return json_fields::optional_integer(summary, "fresh_standby_workers", origin);
}

std::optional<std::int64_t> warmup_per_model_of(const nlohmann::json& summary, const std::string& origin) {
  return json_fields::optional_integer(summary, "warmup_per_model", origin);
}

LoadSummary load_summary_from_json(const nlohmann::json& j, const std::string& origin) {
  namespace lj = load_summary_json;
  namespace jf = json_fields;
  if (!j.is_object()) throw InputError(origin + ": not a JSON object (not psw load's summary)");
  LoadSummary s;
  s.name = jf::text(j, "name", origin);
  s.target = jf::text(j, "target", origin);
  const auto& seed = jf::member(j, "seed", origin);
  if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<std::int64_t>() < 0)) {
    throw InputError(origin + ": 'seed' must be a non-negative integer");
  }
  s.seed = seed.get<std::uint64_t>();
  s.time_scale = jf::number(j, "time_scale", origin);
  s.senders = jf::integer(j, "senders", origin);
  if (const auto it = j.find("inputs"); it != j.end()) {
    if (!it->is_string()) throw InputError(origin + ": 'inputs' is " + it->dump() + ", expected \"raw\" or \"shared-memory\"");
    s.inputs = it->get<std::string>();
  }
  s.connections = jf::optional_integer(j, "connections", origin);
  s.warmup_per_model = warmup_per_model_of(j, origin);
  s.generated = jf::integer(j, "generated", origin);
  s.requests = jf::integer(j, "requests", origin);
  s.errors = jf::integer(j, "errors", origin);
  s.latency = latency_summary_from_json(jf::member(j, "latency", origin), origin + ".latency");
  s.slo_attainment = jf::number(j, "slo_attainment", origin);
  s.throughput_rps = jf::number(j, "throughput_rps", origin);
  s.makespan_s = jf::number(j, "makespan_s", origin);
  const auto& late = jf::member(j, "late_sends", origin);
  const std::string late_at = origin + ".late_sends";
  if (!late.is_object()) throw InputError(late_at + ": expected an object");
  s.late_sends = {jf::integer(late, "count", late_at), jf::number(late, "threshold_ms", late_at),
                  jf::number(late, "mean_ms", late_at), jf::number(late, "max_ms", late_at)};
  const auto& models = jf::member(j, "models", origin);
  if (!models.is_object()) throw InputError(origin + ": 'models' must be an object");
  for (const auto& [name, m] : models.items()) {
    const std::string at = origin + ".models." + name;
    if (!m.is_object()) throw InputError(at + ": expected an object");
    ModelLoadSummary model;
    model.latency = latency_summary_from_json(jf::member(m, "latency", at), at + ".latency");
    model.errors = jf::integer(m, "errors", at);
    model.engine_latency = lj::optional_latency(m, "engine_latency", at);
    model.server_latency = lj::optional_latency(m, "server_latency", at);
    model.protocol_latency = lj::optional_latency(m, "protocol_latency", at);
    model.first_token_latency = lj::optional_latency(m, "first_token_latency", at);
    s.models.emplace(name, std::move(model));
  }
  s.worker_starts = worker_starts_of(j, origin);
  s.eager_switches = eager_switches_of(j, origin);
  s.fresh_standby_workers = fresh_standby_workers_of(j, origin);
  return s;
}

}  // namespace psw::runtime
