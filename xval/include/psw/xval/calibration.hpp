#pragma once
// Fitting one estimated cost of a hardware profile to a recorded run of the live server
// (the cross-validation's calibration; psw calibrate).
//
// Note [Calibrating a cost]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Beyond the link and the layers, most of a hardware profile's costs are estimates: cudaMalloc,
// an IPC handle's open, the pageable link, unified memory's page faults, MPS's slowdown, the
// time-sliced inference's share of the GPU, a new process's framework start. Each one shows in
// the measurement of the mechanism that pays it: the ablation without the memory pool pays a
// cudaMalloc per layer, the one without the IPC optimisation a handle per group, and so on (the
// mechanism table, common/mechanism.hpp). fit_cost finds the value of one cost for which the simulator's mean
// over a recorded `psw validate` run equals the measured mean, all requests of all models
// together:
//  - the measure is the engine's time (the input on the device to the forward's end, Note
//    [Request path]) where the cost is paid inside it, and the client's latency where it is paid
//    before the engine starts (a new process: stop-and-start);
//  - the simulated mean never decreases as a cost grows (never increases as a bandwidth or a
//    share grows), so bisection on the value's logarithm within the cost's range finds it to
//    0.1%, or proves that no value in the range does (then another cost is wrong: an InputError
//    says so, with the simulated means at both ends);
//  - a step function (a whole number of pages, a whole percent) may have no exact solution: the
//    fit is the value where the simulated mean crosses the measured one.
// One run fits; psw validate --measured on another run of the same case validates the fitted
// profile (calibrate on one set of runs, validate on another: scripts/calibrate-h200.sh).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/experiment_config.hpp"
#include "psw/common/hardware_profile.hpp"
#include "psw/common/mechanism.hpp"

namespace psw::xval {

enum class FitMeasure { Engine, Latency };
std::string to_string(FitMeasure measure);

struct CalibratableCost {
  std::string name;     // its key in the hardware YAML, e.g. "memory.ipc_handle_open_ns"
  Mechanism paid_by;    // the mechanism whose run fits it
  FitMeasure measure;
  double lower = 0;     // the search range, in the YAML's unit
  double upper = 0;
  bool falls_as_it_grows = false;  // the simulated mean falls as it grows (a bandwidth, a share)
  std::function<double(const HardwareProfile&)> get;
  std::function<void(HardwareProfile&, double)> set;  // rounds to the field's integer unit
};

// Every cost psw calibrate fits, in a fixed order.
const std::vector<CalibratableCost>& calibratable_costs();
// InputError naming the known costs for an unknown name.
const CalibratableCost& calibratable_cost(const std::string& name);

struct CostFit {
  std::string cost;
  FitMeasure measure = FitMeasure::Engine;
  double initial = 0;  // the config's hardware profile's value
  double fitted = 0;
  double measured_ms = 0;  // the run's mean over every request of every model
  double simulated_initial_ms = 0;
  double simulated_fitted_ms = 0;
  int simulations = 0;
  HardwareProfile hardware;  // the config's, with the fitted value
};

// The mean over every request of a summary (psw sim's or psw load's): the engine's part
// (weighted over the models' engine_latency) or the client's latency. InputError naming
// `origin` when the summary lacks it.
double summary_mean_ms(const nlohmann::json& summary, FitMeasure measure, const std::string& origin);

// `config` is the recorded run's case (its mechanism must be cost.paid_by: InputError
// otherwise), `measured_summary` its psw load summary.json. Note [Calibrating a cost].
CostFit fit_cost(const ExperimentConfig& config, const CalibratableCost& cost, const nlohmann::json& measured_summary,
                 const std::string& origin);

// Note [Pooled runs]
// ~~~~~~~~~~~~~~~~~~
// A run of the figures' case has five requests per model, and a host-bound switch (one process,
// the eager ablations) moves by 20-40% from one such run to the next (2026-12-03: one process's
// ResNet-152 engine 15.8 to 27.6 ms over four runs, two of them one call apart). A cost fitted
// to one run carries that run's draw. So fit_cost and adopt_eager_switch also take several recorded runs of
// the same case: the measured mean is over all their requests (each run weighted by its count),
// an eager model's host times are the means over all its switches, and the simulation, one
// workload, is compared with that. The runs must have stood alike (the same
// simulation_options_of_run: InputError otherwise).
struct RecordedRun {
  nlohmann::json summary;  // its psw load summary.json
  std::string origin;      // where it came from, for messages
};
CostFit fit_cost(const ExperimentConfig& config, const CalibratableCost& cost, const std::vector<RecordedRun>& runs);

// Note [MPS contention] (hardware_profile.hpp): the name psw calibrate knows this fit by.
inline constexpr const char* kMpsContentionCost = "mps.contention";

// Note [MPS contention]: from a recorded run of mps beside `config`'s training job, one point per
// requested model: the slowdown for which the model's simulated engine mean equals its
// measured one. A resident model's engine under MPS is its ready work times the slowdown, so
// one simulation with no slowdown gives each model's ready engine and the fit is the ratio; a
// second simulation with the points checks it (simulated_fitted_ms). InputError for a config
// that is not mps or has no training job, or a model measured faster than its ready engine.
struct ContentionFit {
  struct Point {
    std::string model;
    double measured_ms = 0;            // the model's engine mean in the run
    double simulated_initial_ms = 0;   // with the config's profile
    double simulated_ready_ms = 0;     // with no slowdown
    double simulated_fitted_ms = 0;    // with the fitted point
    int percent = 100;
  };
  std::string training_model;
  int training_batch = 0;
  std::vector<Point> points;
  HardwareProfile hardware;  // the config's, its points of this training job and batch replaced
};
ContentionFit fit_mps_contention(const ExperimentConfig& config, const nlohmann::json& measured_summary,
                                 const std::string& origin);

// Note [Unified memory's two costs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under unified memory a switch copies nothing: the forward touches the model's managed pages
// and they migrate (Note [Managed memory] in exec/backend.hpp). The simulator charges each layer
// a page fault per page it spans (page_fault_ns) and its bytes at migration_bandwidth, before the
// forward. Fitted alone, the fault on one run's mean with the bandwidth at the base's 25 GB/s
// estimate, one number left the models apart on every H200 run (engine, ResNet-152 /
// Inception-v3 / BERT-base: +1 / +13 / -23% on 2026-12-03-b, -5 / +28 / -24% on the figures'
// run): Inception-v3 has 212 such pages in 109 MB, BERT-base 290 in 438 MB, so the two costs
// weigh its models otherwise, and only the measurements can say how. So fit_unified_memory fits
// both from each model's engine mean: a model's simulated engine is affine in the fault and in
// the migration's time per byte (the inverse bandwidth), so three simulations (the profile's
// values, then each moved alone) give every model's response, and the two costs are the least
// squares over the models' relative errors, each model weighted by its measured requests; a
// fourth simulation checks them. A fault below zero is held at zero and the bandwidth fitted
// alone; engines that no positive bandwidth reaches (at or below the forward) are refused, as is
// a run whose models cannot part the two (one model). Runs of one case pool (Note [Pooled runs]).
inline constexpr const char* kUnifiedMemoryCost = "unified_memory";
struct UnifiedMemoryFit {
  struct PerModel {
    std::string model;
    std::int64_t requests = 0;  // over every run
    double measured_ms = 0;     // its engine mean over every run
    double simulated_initial_ms = 0;
    double simulated_fitted_ms = 0;
  };
  std::vector<PerModel> models;
  double initial_page_fault_ns = 0;
  double initial_bandwidth = 0;  // bytes per second
  double fitted_page_fault_ns = 0;
  double fitted_bandwidth = 0;
  int simulations = 0;
  HardwareProfile hardware;  // the config's, with the two costs fitted
};
// InputError for a config of another mechanism, or the cases above.
UnifiedMemoryFit fit_unified_memory(const ExperimentConfig& config, const std::vector<RecordedRun>& runs);

// Note [Adopting a worker start]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A fresh process's start is measured by the server itself, phase by phase (Note [Worker
// start], Note [Worker starts measured]), so it is adopted rather than fitted: from a recorded
// run of stop-and-start or two processes whose summary has `worker_starts`, process_start_ns is
// the process phase's mean, cuda_context_ns the context phase's, and framework_start_ns the
// rest (shared regions, models, training job, last steps) less one memory.cuda_malloc_ns, which
// the simulator adds (Note [Worker start rows]). Then per model the first forward in the fresh
// process (Note [First forward in a fresh process]): the run's engine mean less the simulated
// engine (the copy and the layers' times, the start adopted), none where that is negative. What
// neither covers (the stop of the old task, the kill of its process) stays the simulator's own,
// so the latency is checked by simulating the run before and after.
inline constexpr const char* kWorkerStartCost = "startup.worker_start";
struct WorkerStartAdoption {
  std::int64_t starts = 0;  // the run's starts the means are over
  double process_ms = 0;
  double context_ms = 0;
  double framework_ms = 0;  // the measured rest, cudaMalloc included
  std::optional<double> kill_ms;  // Note [Worker kill]: adopted where the run counted kills
  struct FirstForward {
    std::string model;
    double measured_engine_ms = 0;
    double simulated_engine_ms = 0;  // the start adopted, no first forward
    double first_forward_ms = 0;     // adopted: the difference, or 0
  };
  std::vector<FirstForward> first_forwards;
  double measured_latency_ms = 0;
  double simulated_initial_ms = 0;
  double simulated_adopted_ms = 0;
  HardwareProfile hardware;  // the config's, with the three costs and the first forwards adopted
};
// InputError for a config of another mechanism, a summary without worker_starts, or a measured
// rest below the cudaMalloc.
WorkerStartAdoption adopt_worker_start(const ExperimentConfig& config, const nlohmann::json& measured_summary,
                                       const std::string& origin);

// Note [Adopting eager host times]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The host's time of an eager switch is measured by the server per model (Note [Eager switches
// measured]), so it is adopted, not fitted: from a recorded run of no-memory-management,
// no-ipc-optimization or no-pinned-memory whose summary has `eager_switches`, each model's mean
// prepare and forward become its `eager_switch` entry under that mechanism (Note [Eager switch
// in the simulator]), replacing an earlier one. The device's part (the copies, the layers)
// stays the profiles', so each model's engine mean is simulated before and after beside the
// measured one.
inline constexpr const char* kEagerSwitchCost = "eager_switch.host";
struct EagerSwitchAdoption {
  struct PerModel {
    std::string model;
    std::int64_t switches = 0;
    double prepare_ms = 0;
    double forward_ms = 0;
    double measured_engine_ms = 0;
    double simulated_initial_ms = 0;  // engine mean with the profile as it was
    double simulated_adopted_ms = 0;  // engine mean with the host times adopted
  };
  std::vector<PerModel> models;
  HardwareProfile hardware;  // the config's, with the run's models' entries under its mechanism
};
// InputError for a config of a mechanism the server does not run eagerly, a summary without
// eager_switches, or a model in it that the config's workload does not request.
EagerSwitchAdoption adopt_eager_switch(const ExperimentConfig& config, const nlohmann::json& measured_summary,
                                       const std::string& origin);
// Note [Pooled runs]: each model's host times over every switch of every run (`switches` their
// total), its measured engine over every request.
EagerSwitchAdoption adopt_eager_switch(const ExperimentConfig& config, const std::vector<RecordedRun>& runs);

}  // namespace psw::xval
