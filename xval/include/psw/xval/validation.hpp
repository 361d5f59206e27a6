#pragma once
// psw validate (DESIGN.md §4): the simulator's prediction beside the live server's
// measurement of one workload. Both sides are summary.json objects (psw sim writes one, psw load
// the other), read into the one type they share (ServedSummary, Note [Served summary]), so the
// comparison is a join on it: one row per scope (every request, then each model in the config's
// order) and measure.
//
// Note [Validation tolerances]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The cross-validation targets: the simulator's mean latency within 5% of the measurement for
// ready, PipeSwitch, stop-and-start and the ablations; within 15% for MPS, time-sliced sharing and
// unified memory, whose costs depend on contention the hardware profile holds as one number;
// the training job's progress within 5%. The same latency tolerance is applied to every latency
// measure and to throughput: a row beyond it is `outside`, which the report says, never hides.
// A measure one side lacks (a model the server answered no request of; no training on one side)
// is a row of its own, `one-sided`, without an error. Per model, where a side reports it, the
// engine's part alone (engine_mean_ms, engine_p50_ms; Note [Request path]) under the same
// tolerance: the timeline's prediction beside the worker's measurement, without the protocol.
//
// Note [Latency parts]
// ~~~~~~~~~~~~~~~~~~~~
// A missed target must say which cost is wrong and by how much. A request's latency
// is the server's time (arrival at the server to its answer: queue, switch, engine and the
// server's own steps) plus the protocol's (what the client pays beyond it: gRPC, copies). psw
// load writes both per model from each response's psw_server_ns (`server_latency`,
// `protocol_latency`); psw sim writes them where a serving profile gives the request path (the
// protocol it drew, and arrival to the server's answer). Where both sides have them, each is a
// row under the same tolerance (server_mean_ms, server_p50_ms, server_p99_ms and the same for
// protocol), beside the engine's rows: a latency row outside splits into the part that moved.
// Both sides count the protocol as the latency less the server's time, so a late send's wait
// (psw load's late_sends, ~0.2 ms on the H200) is in it, as in the profile it is drawn from
// (psw profile-serving --from-load); psw validate --measured counts it so again from the
// recorded requests.csv (psw load once counted it from the send). A p99 of a part is that
// part's own tail, not its share of the latency's p99.
//
// Note [Training share]
// ~~~~~~~~~~~~~~~~~~~~~
// training_steps_per_s compares absolute rates: the simulator's comes from the serving
// profile's step, measured on one machine, and the server's from whichever machine validation
// runs on. Lent H200s of the same kind differ there: profile-serving measured ResNet-152's
// step (batch 8) at 49.0 ms on one machine (2026-12-01) and 45.0 ms on another (2026-12-02),
// so that row mixes the step's calibration with the simulator's model of how requests slow the
// job. training_share separates the second: the rate the job keeps beside the requests as a
// fraction of its rate alone, both measured on the same server (psw validate counts the steps
// of a window with no requests just before the workload and another just after it, each from
// one step's completion to another's, and adds them) and, on the simulator's side, its rate
// over 1 / its step. Two windows around the workload, not one before it: on 2026-12-02 one
// H200 ran the same job alone at 18.5 to 35.8 steps/s in 5 s windows minutes apart, so a
// single window may be far from the rate the job would have had during the workload. The row
// appears only where the alone window was measured (not in runs recorded before it was) and,
// as training_steps_per_s, where a side has a value (a job that completed no step has none).
//
// Note [Training held]
// ~~~~~~~~~~~~~~~~~~~~
// A share below the simulator's can be either of two costs, which need different models: the
// job held for longer than simulated per request (stopped at a layer boundary to running again),
// or the job slower than alone while it runs between requests. Where the server reports its
// time held (TrainingStatus::held_ns, summed over the workload) and the simulator its own
// (training_held_ms), two rows split the share: training_held_fraction, the workload's time the
// job was held, and training_running_share, its rate over the time it was not held as a fraction
// of its rate alone (the simulator's is 1 for a mechanism that stops the job, and the
// concurrent rate for one that does not). The share is (1 - held fraction) x running share,
// up to the time the job spends stopping (counted as running on both sides). The rows appear
// where the server counted its hold (the runs from raw-serve-2026-12-02-held-a, 2026-12-02
// 13:40 UTC, on).
//
// Note [Worker start rows]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Under stop-and-start and two processes the simulator charges each task a fresh process:
// startup.process_start_ns + cuda_context_ns + framework_start_ns of the hardware profile and
// one memory.cuda_malloc_ns (MechanismModel::switch_in). Where psw load's summary has the
// server's own split of the starts in the workload (`worker_starts`, Note [Worker starts
// measured] in psw/runtime/client/load_generator.hpp), four rows (scope all) compare them:
// worker_start_ms (the whole start), worker_start_process_ms (spawn to the worker's main),
// worker_start_context_ms (the CUDA context and backend) and worker_start_framework_ms (the
// rest: the shared regions, the models, the training job, the last steps, against the
// framework start and the cudaMalloc), so that a stop-and-start row outside says which part of
// the start is wrong and by how much.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/units.hpp"
#include "psw/sim/simulation.hpp"

namespace psw::xval {

enum class ValidationStatus {
  Within,     // |relative error| <= tolerance
  Outside,    // beyond it
  OneSided,   // one side has no value: nothing to compare
};
std::string to_string(ValidationStatus status);

struct ValidationRow {
  std::string scope;    // "all" or a model's name
  // mean_ms, p50_ms, p99_ms, engine_mean_ms, engine_p50_ms, server_{mean,p50,p99}_ms,
  // protocol_{mean,p50,p99}_ms (Note [Latency parts]), throughput_rps, training_steps_per_s,
  // training_share, training_held_fraction, training_running_share
  std::string measure;
  std::optional<double> simulated;
  std::optional<double> measured;
  double tolerance = 0;  // Note [Validation tolerances]
  // (simulated - measured) / measured; nullopt when a side is missing or measured is 0.
  std::optional<double> relative_error() const;
  ValidationStatus status() const;
};

// Measured training progress: the server's completed steps over the workload's wall time, and
// over the windows with no requests around it (Note [Training share]).
struct MeasuredTraining {
  std::int64_t steps = 0;
  double seconds = 0;
  std::int64_t alone_steps = 0;  // 0: the alone windows were not measured
  double alone_seconds = 0;
  // Of `seconds`, the job's time stopped for requests (Note [Training held]); nullopt: not
  // measured (a server or a recording from before the count).
  std::optional<double> held_seconds{};
};

struct ValidationReport {
  std::string experiment;
  Mechanism mechanism = Mechanism::PipeSwitch;
  std::vector<ValidationRow> rows;
  std::int64_t within() const;
  std::int64_t outside() const;
};

double latency_tolerance(Mechanism mechanism);  // Note [Validation tolerances]
inline constexpr double kTrainingTolerance = 0.05;

// Joins psw sim's summary with psw load's. `models` is the config's model list (the order of
// the rows). InputError when a summary lacks a key both must have (latency, throughput_rps).
// `simulated_step`: the simulator's step of the training job alone (training_step in
// simulation.hpp), for training_share.
// `worker_start`: what the simulator charges a fresh process (Note [Worker start rows]).
struct SimulatedWorkerStart {
  Duration process;
  Duration context;
  Duration framework;  // framework_start and one cudaMalloc
  Duration kill;       // Note [Worker kill]: before the start, not part of it
  Duration total() const { return process + context + framework; }
};
// The charge of `hardware` under `mechanism`, or nothing for a mechanism without fresh processes.
std::optional<SimulatedWorkerStart> simulated_worker_start(Mechanism mechanism, const HardwareProfile& hardware);

// psw load's `worker_starts` of a summary (Note [Worker starts measured]) in the simulator's
// three parts: the framework part is every phase after the context. Nothing when the summary
// has no such key; InputError naming `origin` when it lacks the count or a phase.
struct MeasuredWorkerStart {
  std::int64_t starts = 0;
  double process_ms = 0;
  double context_ms = 0;
  double framework_ms = 0;  // memory + models + training + other
  // Note [Worker kill]: the mean kill where the server counted kills in the span.
  std::optional<double> kill_ms;
};
std::optional<MeasuredWorkerStart> measured_worker_start(const nlohmann::json& summary, const std::string& origin);

// The simulation options that replay a measured run as its server stood when the workload
// began (Note [Processes a server starts with]): psw load's `fresh_standby_workers`; for a run
// recorded before the server counted them, none where it sent a warm-up (every such server had
// one standby process beside its training job, which the first warm-up request took), and as a
// server starts where it sent none. InputError naming `origin` for a value that is not a count.
sim::SimulationOptions simulation_options_of_run(const nlohmann::json& measured_summary, const std::string& origin);

ValidationReport compare_summaries(const std::string& experiment, Mechanism mechanism,
                                   const std::vector<std::string>& models, const nlohmann::json& simulated,
                                   const nlohmann::json& measured, const std::optional<MeasuredTraining>& training,
                                   std::optional<Duration> simulated_step = std::nullopt,
                                   std::optional<SimulatedWorkerStart> worker_start = std::nullopt);

// validation.csv (scope,measure,simulated,measured,relative_error,tolerance,status; empty cells
// for missing values) and validation.json (the same rows, with the experiment and totals).
std::string validation_csv(const ValidationReport& report);
nlohmann::json validation_json(const ValidationReport& report);

}  // namespace psw::xval
