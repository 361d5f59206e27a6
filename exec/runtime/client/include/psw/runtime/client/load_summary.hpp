#pragma once
// Note [Load summary]
// ~~~~~~~~~~~~~~~~~~~
// What one psw load run reports, typed: its summary.json is the JSON form (to_json), written
// once by write_load_outputs, and read back by one checked reader (load_summary_from_json) that
// psw validate --measured, psw calibrate and psw profile-serving use on recorded runs. The keys
// it shares with psw sim's summary (`requests`, `latency`, `slo_attainment`, `throughput_rps`,
// `makespan_s`, per model `latency` and its parts) are those of Note [Served summary], which
// psw validate joins. Keys added since the first recorded runs are optional in the reader: a
// run before `connections`, `warmup_per_model` or `inputs` (raw) reads as it ran.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "psw/common/metrics.hpp"

namespace psw::runtime {

// Sends that started later than kLateSendThreshold after their scheduled time.
struct LateSends {
  std::int64_t count = 0;
  double threshold_ms = 0;
  double mean_ms = 0;  // over every send
  double max_ms = 0;

  bool operator==(const LateSends&) const = default;
};

struct ModelLoadSummary {
  psw::LatencySummary latency;  // the answered requests of the model
  std::int64_t errors = 0;
  // Note [Request path], [Latency parts]: where the server reported every answered request's times.
  std::optional<psw::LatencySummary> engine_latency;
  std::optional<psw::LatencySummary> server_latency;
  std::optional<psw::LatencySummary> protocol_latency;
  // Note [Generate requests]: from each decoding request's scheduled time to its first token
  // (psw sim's key of the same name); absent when none of the model's requests decoded.
  std::optional<psw::LatencySummary> first_token_latency;

  bool operator==(const ModelLoadSummary&) const = default;
};

// Note [Worker starts measured] (load_generator.hpp): the worker processes started during the
// workload, as the server split their starts: count, mean per phase (WorkerStartPhase's names)
// and in total; Note [Worker kill]: the kills of the same span, where the server counted some.
struct WorkerStartMeans {
  std::int64_t count = 0;
  std::map<std::string, double> mean_ms;
  double total_mean_ms = 0;
  std::int64_t kills = 0;               // 0: none in the span, or a server that counts none
  std::optional<double> kill_mean_ms;   // where kills > 0

  bool operator==(const WorkerStartMeans&) const = default;
};

// Note [Eager switches measured] (load_generator.hpp): one model's eager switches during the
// workload, their count and the mean host time of their two parts.
struct EagerSwitchMeans {
  std::int64_t count = 0;
  double prepare_mean_ms = 0;
  double forward_mean_ms = 0;

  bool operator==(const EagerSwitchMeans&) const = default;
};

struct LoadSummary {
  std::string name;
  std::string target;
  std::uint64_t seed = 1;
  double time_scale = 1;
  std::int64_t senders = 0;
  std::optional<std::string> inputs;  // Note [Shared memory senders]; absent: a run before it (raw)
  std::optional<std::int64_t> connections;
  std::optional<std::int64_t> warmup_per_model;
  std::int64_t generated = 0;
  std::int64_t requests = 0;  // answered without error (as psw sim's `requests`)
  std::int64_t errors = 0;
  psw::LatencySummary latency;  // from each request's scheduled time to its answer
  double slo_attainment = 1;
  double throughput_rps = 0;
  double makespan_s = 0;
  LateSends late_sends;
  std::map<std::string, ModelLoadSummary> models;  // the models requested
  std::optional<WorkerStartMeans> worker_starts;         // nullopt: none started
  std::map<std::string, EagerSwitchMeans> eager_switches;  // the models switched eagerly
  std::optional<std::int64_t> fresh_standby_workers;  // Note [Processes a server starts with]

  bool operator==(const LoadSummary&) const = default;
};

nlohmann::json to_json(const LoadSummary& s);
// InputError naming `origin` and the key for a summary that is not psw load's.
LoadSummary load_summary_from_json(const nlohmann::json& j, const std::string& origin);

// The keys of a summary.json that psw validate and psw calibrate read from a recorded run, by
// the readers load_summary_from_json uses: from psw load's summary, or from psw sim's, which
// has none of them (nullopt, empty). InputError naming `origin` and the key for a value of
// another shape.
std::optional<WorkerStartMeans> worker_starts_of(const nlohmann::json& summary, const std::string& origin);
std::map<std::string, EagerSwitchMeans> eager_switches_of(const nlohmann::json& summary, const std::string& origin);
std::optional<std::int64_t> fresh_standby_workers_of(const nlohmann::json& summary, const std::string& origin);
std::optional<std::int64_t> warmup_per_model_of(const nlohmann::json& summary, const std::string& origin);

}  // namespace psw::runtime
