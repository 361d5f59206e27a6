#pragma once
// Switching mechanisms: what it costs to make a model run on the GPU, for each way of
// sharing the GPU that the paper compares (PAPER.md §9, Figures 5-9). Every cost comes
// from the hardware or model profiles; none is a literal here.
//
// A switch-in is measured from the moment the controller dispatches a request (t = 0).
// The old task releases the GPU at `stop` (it finishes its current layer). Transfers may
// start at `prep` (after whatever set-up the mechanism needs on the critical path), and
// the new task computes once the GPU is free and its groups have arrived.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "psw/common/experiment_config.hpp"
#include "psw/common/hardware_profile.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/parallel.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/units.hpp"

namespace psw::sim {

using psw::Mechanism;
using psw::all_mechanisms;
using psw::parse_mechanism;
using psw::to_string;


struct SwitchInCost {
  Duration startup;  // the new task's first layer starts
  Duration finish;   // the new task's work is done (reply)
  bool switched = true;
  // A fresh process (stop-and-start, two processes) ready to take the task, its start done, or
  // under one-process the worker done with the training step it abandoned (Note [Training
  // abort]): a live server hands it the request only then, so its engine's clock starts there
  // (Note [Worker start rows] in xval/validation.hpp). Zero for the other mechanisms.
  Duration worker_ready = Duration::zero();
};

// Note [Eager switch in the simulator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// psw serve runs three of PipeSwitch's ablations call by call, not from a captured graph
// (switches_eagerly_in_server): per-group handles (no-ipc-optimization), per-tensor
// allocations (no-memory-management), pageable copies (no-pinned-memory). There the host, not
// the device, sets the pace: the engine opens or allocates and enqueues every group's copies
// (its prepare), then calls the forward layer by layer, and a kernel cannot start before its
// call. The analytic costs (one cudaMalloc per layer, one handle open per group on the
// compute path, a pipelined copy over the pageable link) did not say that: fitted to one run,
// they missed another by -44% to +113% per model (2026-12-02-c), because the host's time
// follows the model's tensors, not its groups or bytes. So where the hardware profile has the
// server's measured host times of a model under the mechanism (`eager_switch`), the switch is
// this timeline, per layer:
//   - the prepare is spread over the groups in order, by layers (by bytes for pageable
//     copies); group g's copies are enqueued when its share is done, at H_g;
//   - copies: enqueued ones run on the copy stream, C_g = max(H_g, C_{g-1}) + copy_g; pageable
//     ones are done when the host returns from them, C_g = max(H_g, C_{g-1} + copy_g); per
//     tensor (no-memory-management) they run on the compute stream, so every layer waits for
//     the last, C_{G-1};
//   - the forward's calls start at the prepare's end P and are spread evenly over the layers:
//     layer l is called at P + forward * l / L and cannot end before its last call, P +
//     forward * (l + 1) / L; it starts once called, its group arrived (plus the group sync) and
//     the GPU free (the previous layer, the old task's stop).
// With no host time (prepare = forward = 0) it is evaluate_timeline's pipeline exactly (a test
// says so). Training switches, and models without an entry, keep the analytic costs. One process
// switches so too (per tensor, on its one worker, after the training's abort: Note [Training
// abort]): its host times are measured and adopted the same way.
enum class EagerCopies { Enqueued, Pageable, PerTensor };
struct EagerSwitchTimes {
  Duration startup;  // the first layer starts
  Duration total;    // the last layer ends (plus the costs' tail)
};
EagerCopies eager_copies_of(Mechanism mechanism);
// `costs` with the plain group sync; `gpu_free`: when the GPU is free for the first layer.
EagerSwitchTimes eager_switch_times(const SwitchCosts& costs, const Grouping& groups, const EagerHostTimes& host,
                                   EagerCopies copies, Duration gpu_free);

// Precomputed per-model costs of one mechanism on one hardware profile.
class MechanismModel {
 public:
  // `placement` applies to PipeSwitch itself (Note [Placement]); every other mechanism,
  // the ablations included, copies every layer. `parallel` applies to pipeswitch-parallel
  // alone (Note [Parallel paths]): its switch is planned by plan_parallel over
  // parallel.gpus - 1 helpers, and with one GPU it is PipeSwitch's exactly.
  MechanismModel(Mechanism mechanism, const HardwareProfile& hardware,
                 const std::vector<ModelProfile>& models, Strategy planner,
                 Placement placement = Placement::Copy, ParallelSpec parallel = {});

  Mechanism mechanism() const { return mechanism_; }

  // Running `model` for `task` when it is not the active model; the GPU is released by
  // the old task at `stop`, and `previous` (if any) is the model that was active. Under MPS
  // nothing is switched: the model alone on the GPU (see resident_run for the slowdown).
  // `prompt_tokens` (inference of a decoder whose profile has a prefill curve; 0: the
  // profile's prompt) scales the forward's compute, not its transfers (Note [Prefill curve]).
  // `process_started_ago` (stop-and-start, two processes): a fresh process started that long
  // ago for another task serves this one, which waits only for the rest of its start (Note
  // [Fresh processes] in the runtime's controller.cpp).
  SwitchInCost switch_in(std::uint32_t model, Task task, Duration stop,
                         std::optional<std::uint32_t> previous, std::int64_t prompt_tokens = 0,
                         Duration process_started_ago = Duration::zero()) const;
  // Running `model` when it is already active on the GPU. Under MPS an inference beside a
  // training job that is resident and running is slowed down by the profile's factor
  // (Note [MPS slowdown] in mechanism.cpp); alone on the GPU it runs at the ready speed.
  Duration resident_run(std::uint32_t model, Task task, bool beside_training = false,
                        std::int64_t prompt_tokens = 0) const;
  // The ready model's time: the work alone on the GPU, every parameter resident.
  Duration ready_run(std::uint32_t model, Task task, std::int64_t prompt_tokens = 0) const;

  // Whether stopping the running task waits for its current layer to finish (PipeSwitch
  // and the in-process mechanisms) or kills it at once (stop-and-start).
  bool stops_at_layer_boundary() const;
  // Whether stopping training kills its process, so that the training iteration in progress
  // is lost (stop-and-start, two processes; Note [Killed training] in simulated_server.cpp).
  bool kills_training() const;
  // Whether a request pauses the training job in place, in a worker of its own, so that the job
  // goes on without a switch once the request is answered (Note [Paused in place] in simulated_server.cpp).
  bool pauses_training_in_place() const;
  // What a request waits, after the training job's stop at a layer boundary, for the worker
  // that trains to abandon the step and take the request: the hardware profile's
  // training_abort under one-process (Note [Training abort]), else nothing.
  Duration training_abort() const;
  // Stop-and-start, two processes: killing the old process and starting a fresh one, up to its
  // device memory (what a switch pays unless its process started `process_started_ago` before).
  Duration process_start() const;
  // MPS: tasks run concurrently instead of being switched.
  // Time slicing: the same, taking turns on the GPU (Note [Time slicing]).
  bool concurrent() const { return mechanism_ == Mechanism::Mps || mechanism_ == Mechanism::TimeSliced; }
  // Whether an inference model stays active between requests (no switch when the next
  // request is for the same model and nothing else ran).
  bool uses_standby_workers() const;
  // Ready / MPS / unified memory keep every model in GPU memory.
  bool keeps_models_resident() const;

  // Off the critical path: the old worker drops its state and becomes standby again.
  Duration cleanup_time(std::uint32_t model) const;
  // What a worker does after a task before it can serve the next in psw serve (Note [After the
  // task] in exec/pipeline.hpp): closing the per-group handles where the mechanism opens one
  // per group (the profile's worker_cleanup stands for it), else nothing.
  Duration after_task_time(std::uint32_t model) const;
  // The background training job (its model's name and its batch), which MPS's slowdown of an
  // inference depends on (Note [MPS contention]); without one, the profile's one number.
  void set_training_job(const std::string& model, int batch);
  // MPS slowdowns as factors (>= 1): of an inference of `model` beside the training job.
  double mps_inference_slowdown(std::uint32_t model) const;
  double mps_training_slowdown() const;
  // An inference of `work` alone on the GPU, time-sliced with a training job (Note [Time slicing]).
  Duration time_sliced_latency(Duration work) const;
  // The training job's rate, relative to alone, while an inference runs beside it.
  double concurrent_training_rate() const;

  // The plan each model is switched in with for `task` (for reports, traces and tests).
  const Grouping& grouping(std::uint32_t model, Task task) const {
    return costs_of(model, task).groups;
  }
  // pipeswitch-parallel's switch of `model` for `task` alone, with the GPU free at once
  // (Note [Parallel paths]), for reports: beside its bound and the single-GPU plan.
  struct ParallelSwitch {
    int gpus = 1;
    bool helpers_training = false;
    std::size_t groups = 0;
    Bytes bytes = 0;
    Bytes via_helpers = 0;     // of `bytes`, through helper GPUs
    Duration total;            // the plan's timeline total
    Duration bound;            // parallel_pipeline_bound
    Duration single_gpu_total; // the single-GPU planner's total on the direct link alone
  };
  ParallelSwitch parallel_switch(std::uint32_t model, Task task) const;

  // pipeswitch-parallel: per group, the bytes over each path (empty for other mechanisms).
  const std::vector<PathSplit>& splits(std::uint32_t model, Task task) const {
    return per_model_.at(model * 2 + (task == Task::Training ? 1 : 0)).splits;
  }

 private:
  struct PerModel {
    Grouping groups;
    std::vector<PathSplit> splits;  // pipeswitch-parallel only
    Duration parallel_bound;        // pipeswitch-parallel only: parallel_pipeline_bound
    Duration single_gpu_total;      // pipeswitch-parallel only: the plan on the direct link alone
    std::size_t num_layers = 0;
    Bytes bytes = 0;
    Duration forward;          // inference compute, resident, never slowed down
    Duration backward;         // training tail
    Duration first_arrival;    // first group's transfer end from transfer start
    Duration pipelined_total;  // timeline total with the GPU free at 0 (inference, no tail)
    Duration compute_and_sync; // sum of compute plus one sync per group
    Duration sequential_copies;  // per-layer copies back to back (NoOptimization)
    Duration single_copy;        // one copy of the whole model on the mechanism's link
    Duration um_migration;       // unified memory: page faults and migration of the model
    Duration first_layer_fault;  // unified memory: faults before the first layer can run
    // Note [Prefill curve]: the per-layer costs the compute of another prompt scales (on the
    // mechanism's link, the plain sync added per switch), and the curve.
    std::optional<SwitchCosts> costs;
    std::int64_t prompt_tokens = 0;
    std::vector<PrefillPoint> prefill_curve;
    // False for the training entry of a model whose measured profile has no backward times
    // (psw profile without --train): it can be served, not trained (costs_of refuses).
    bool available = true;
    std::string name;  // the model's (for that message, and Note [MPS contention])
    // Note [MPS contention]: the inference's slowdown factor beside the training job (set once
    // by set_training_job, not looked up per request); the profile's one number without one.
    double mps_slowdown = 1.0;
    Duration first_forward;  // Note [First forward in a fresh process]: fresh processes only
    // Note [Eager switch in the simulator]: the server's host times and the costs with the
    // plain group sync (inference under an eager mechanism, where the profile has them).
    std::optional<EagerHostTimes> eager;
    std::optional<SwitchCosts> eager_costs;
  };
  const PerModel& costs_of(std::uint32_t model, Task task) const;
  // What a prompt's length changes in a switch (Note [Prefill curve]): pm's own values for
  // training, for tokens 0 and without a curve.
  struct ComputeCosts {
    Duration forward;
    Duration compute_and_sync;
    Duration pipelined_total;
  };
  ComputeCosts compute_costs(const PerModel& pm, Task task, std::int64_t prompt_tokens) const;

  Mechanism mechanism_;
  const HardwareProfile& hardware_;
  Duration effective_sync_;  // per-group sync, plus an IPC handle open without the IPC optimisation
  ParallelSpec parallel_;
  std::vector<PerModel> per_model_;
};

}  // namespace psw::sim
