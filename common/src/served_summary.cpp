#include "psw/common/served_summary.hpp"

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw {

// Named, not anonymous: the unity build compiles this file with the rest of psw_core.
namespace served_summary_json {

// A latency object that counted something, or nullopt (absent, or a count of 0).
std::optional<LatencySummary> counted(const nlohmann::json& parent, const char* key, const std::string& where) {
  const auto it = parent.find(key);
  if (it == parent.end()) return std::nullopt;
  const LatencySummary s = latency_summary_from_json(*it, where + "." + key);
  if (s.count == 0) return std::nullopt;
  return s;
}

std::optional<double> number_if_any(const nlohmann::json& summary, const char* key, const std::string& side) {
  const auto it = summary.find(key);
  if (it == summary.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw InputError(side + ": '" + key + "' must be a number");
  return it->get<double>();
}

}  // namespace served_summary_json

ServedSummary served_summary_from_json(const nlohmann::json& summary, const std::string& side) {
  namespace sj = served_summary_json;
  if (!summary.is_object()) throw InputError(side + " is not a JSON object");
  if (!summary.contains("latency") || !summary["latency"].is_object()) {
    throw InputError(side + " has no latency object");
  }
  ServedSummary s;
  s.latency = sj::counted(summary, "latency", side);
  const auto throughput = sj::number_if_any(summary, "throughput_rps", side);
  if (!throughput) throw InputError(side + " has no number 'throughput_rps'");
  s.throughput_rps = *throughput;
  s.makespan_s = sj::number_if_any(summary, "makespan_s", side).value_or(0.0);
  s.training_iterations_per_s = sj::number_if_any(summary, "training_iterations_per_s", side);
  s.training_held_ms = sj::number_if_any(summary, "training_held_ms", side);
  if (const auto models = summary.find("models"); models != summary.end()) {
    if (!models->is_object()) throw InputError(side + ": 'models' must be an object");
    for (const auto& [name, m] : models->items()) {
      if (!m.is_object()) throw InputError(side + ": models." + name + " must be an object");
      const std::string where = side + ": models." + name;
      ServedModelSummary& model = s.models[name];
      model.latency = sj::counted(m, "latency", where);
      model.engine_latency = sj::counted(m, "engine_latency", where);
      model.server_latency = sj::counted(m, "server_latency", where);
      model.protocol_latency = sj::counted(m, "protocol_latency", where);
      model.first_token_latency = sj::counted(m, "first_token_latency", where);
    }
  }
  return s;
}

}  // namespace psw
