#pragma once
// Note [Simulation summary]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// What one simulation reports, typed: summary.json is its JSON form (to_json), and everything
// that reads a simulation's results (psw sim's printout, sweep.csv's rows, the MPI sweep's
// ranks) reads this type, not summary.json's keys (simulation_summary_from_json, the one
// reader). The keys are the ones psw load's summary shares where the two measure the same thing
// (`requests`, `latency`, `slo_attainment`, `throughput_rps`, `makespan_s`, per model `latency`,
// `engine_latency`, `server_latency`, `protocol_latency`; Note [Latency parts]), so that psw
// validate compares the two side by side.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "psw/common/metrics.hpp"
#include "psw/common/units.hpp"

namespace psw::sim {

// Note [Parallel paths]: a model's switch through helper GPUs, its bound and the one-GPU plan.
struct ParallelSwitchSummary {
  int gpus = 1;
  bool helpers_training = false;  // `helpers`: "training" or "idle"
  std::int64_t groups = 0;
  Bytes bytes = 0;
  Bytes via_helpers_bytes = 0;
  double switch_ms = 0;
  double bound_ms = 0;
  double single_gpu_ms = 0;

  bool operator==(const ParallelSwitchSummary&) const = default;
};

struct ModelSimulationSummary {
  LatencySummary latency;
  LatencySummary engine_latency;  // Note [Request path]: the engine's part alone
  std::int64_t switches = 0;
  // Note [Latency parts]: with a serving profile, the server's whole time and the protocol's.
  std::optional<LatencySummary> server_latency;
  std::optional<LatencySummary> protocol_latency;
  // Note [Decode in the simulator]: where requests decode, their time to first token (`latency`
  // is then the last token's).
  std::optional<LatencySummary> first_token_latency;
  std::optional<ParallelSwitchSummary> parallel;  // pipeswitch-parallel

  bool operator==(const ModelSimulationSummary&) const = default;
};

struct SimulationSummary {
  std::string name;
  std::string mechanism;
  std::string hardware;
  std::uint64_t seed = 0;
  std::int64_t requests = 0;  // inference requests answered
  LatencySummary latency;
  double slo_attainment = 1;
  double throughput_rps = 0;
  double makespan_s = 0;
  double gpu_busy_fraction = 0;  // Note [GPU busy and GPU work]
  double gpu_work_fraction = 0;
  std::int64_t training_iterations = 0;
  double training_iterations_per_s = 0;
  std::int64_t switches = 0;  // Note [Switch counts]
  std::int64_t training_switch_ins = 0;
  std::int64_t training_preemptions = 0;
  std::int64_t training_requests = 0;  // Note [Training requests]
  double training_lost_ms = 0;         // Note [Killed training]
  double training_held_ms = 0;
  std::int64_t standby_waits = 0;
  double startup_overhead_mean_ms = 0;  // summary.json: startup_overhead_ms.mean
  double total_overhead_mean_ms = 0;    // summary.json: total_overhead_ms.mean
  std::map<std::string, ModelSimulationSummary> models;  // the models requested

  bool operator==(const SimulationSummary&) const = default;
};

nlohmann::json to_json(const SimulationSummary& s);
// InputError naming `where` and the key for a missing key or a value of the wrong type.
SimulationSummary simulation_summary_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace psw::sim
