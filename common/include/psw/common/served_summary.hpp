#pragma once
// Note [Served summary]
// ~~~~~~~~~~~~~~~~~~~~~
// What psw sim's summary.json (SimulationSummary) and psw load's share where both describe the
// requests a server answered: every request's latency, throughput, per model the latency and
// its parts (the engine's, the server's, the protocol's; Note [Latency parts]) and, where requests
// decode, their first token's, and on the simulator's side the training job's rate and hold. psw
// validate joins the two through this one type, read by one checked reader from either file,
// instead of looking up keys of each.
// A model that answered nothing, or a part a side does not report, is absent (nullopt).

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "psw/common/metrics.hpp"

namespace psw {

struct ServedModelSummary {
  std::optional<LatencySummary> latency;
  std::optional<LatencySummary> engine_latency;
  std::optional<LatencySummary> server_latency;
  std::optional<LatencySummary> protocol_latency;
  // Decoding requests' time to their first token (Note [Decode in the simulator]; psw load's
  // Note [Generate requests]).
  std::optional<LatencySummary> first_token_latency;
};

struct ServedSummary {
  std::optional<LatencySummary> latency;  // nullopt: nothing answered (a count of 0)
  double throughput_rps = 0;
  double makespan_s = 0;  // 0 where a summary has none
  std::optional<double> training_iterations_per_s;  // psw sim's, where its config trains
  std::optional<double> training_held_ms;           // psw sim's (Note [Training held])
  std::map<std::string, ServedModelSummary> models;
};

// From a psw sim or psw load summary.json; `side` names it in errors ("the measured summary"):
// InputError for a summary without a latency object or a number throughput_rps, or a latency
// object that is not a whole LatencySummary.
ServedSummary served_summary_from_json(const nlohmann::json& summary, const std::string& side);

}  // namespace psw
