#include "psw/sim/mechanism.hpp"

#include <algorithm>

#include "psw/common/error.hpp"
#include "psw/common/parallel.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"

namespace psw::sim {

namespace {

bool is_pipelined(Mechanism m) { return traits(m).pipeswitch_family; }

double percent_factor(int percent) { return static_cast<double>(percent) / 100.0; }

Duration scale(Duration d, double factor) {
  return Duration::from_ns_truncated(static_cast<double>(d.ns()) * factor + 0.5);
}

}  // namespace

const MechanismModel::PerModel& MechanismModel::costs_of(std::uint32_t model, Task task) const {
  const PerModel& pm = per_model_.at(model * 2 + (task == Task::Training ? 1 : 0));
  if (!pm.available) {
    // The constructor skipped it: make_switch_costs names the first layer without a backward time.
    throw InputError("model '" + pm.name + "' cannot be simulated as a training task: its measured profile has " +
                     "no backward times (psw profile --train measures them)");
  }
  return pm;
}

EagerCopies eager_copies_of(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  if (t.allocation == Allocation::PerTensorMalloc) return EagerCopies::PerTensor;
  if (t.host_memory == HostMemory::Pageable) return EagerCopies::Pageable;
  return EagerCopies::Enqueued;
}

// Note [Eager switch in the simulator].
EagerSwitchTimes eager_switch_times(const SwitchCosts& costs, const Grouping& groups, const EagerHostTimes& host,
                                   EagerCopies copies, Duration gpu_free) {
  validate_grouping(groups, costs.num_layers(), "eager switch");
  const auto layers = static_cast<std::int64_t>(costs.num_layers());
  // `part` of `whole` of a duration, in integers (a product of ns and bytes overflows 64 bits;
  // `__extension__` keeps -Wpedantic quiet about the 128-bit intermediate, as in units.hpp).
  __extension__ using Wide = __int128;
  auto share = [](Duration d, std::int64_t part, std::int64_t whole) {
    return nanoseconds(static_cast<std::int64_t>(static_cast<Wide>(d.ns()) * part / whole));
  };
  const bool by_bytes = copies == EagerCopies::Pageable && costs.total_bytes() > 0;
  const std::int64_t weight_total = by_bytes ? costs.total_bytes() : layers;
  std::vector<Duration> arrival;
  arrival.reserve(groups.size());
  std::int64_t weight_done = 0;
  Duration copy_end = Duration::zero();
  for (const LayerGroup& g : groups) {
    weight_done += by_bytes ? costs.bytes(g.first, g.last) : static_cast<std::int64_t>(g.last - g.first + 1);
    const Duration enqueued = share(host.prepare, weight_done, weight_total);
    const Duration copy = costs.transfer_time(g.first, g.last);
    copy_end = copies == EagerCopies::Pageable ? max(enqueued, copy_end + copy) : max(enqueued, copy_end) + copy;
    arrival.push_back(copy_end);
  }
  if (copies == EagerCopies::PerTensor) arrival.assign(groups.size(), copy_end);
  const Duration prepared = host.prepare;
  auto called = [&](std::int64_t layer) { return prepared + share(host.forward, layer, layers); };
  EagerSwitchTimes out;
  Duration end = gpu_free;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const LayerGroup& g = groups[gi];
    for (std::size_t l = g.first; l <= g.last; ++l) {
      const auto layer = static_cast<std::int64_t>(l);
      Duration start = max(end, called(layer));
      if (l == g.first) start = max(start, max(arrival[gi], end) + costs.group_sync());
      if (l == 0) out.startup = start;
      end = max(start + costs.layer_compute(l), called(layer + 1));
    }
  }
  out.total = end + costs.tail();
  return out;
}

MechanismModel::MechanismModel(Mechanism mechanism, const HardwareProfile& hardware,
                               const std::vector<ModelProfile>& models, Strategy planner, Placement placement,
                               ParallelSpec parallel)
    : mechanism_(mechanism), hardware_(hardware), parallel_(parallel) {
  if (planner == Strategy::Fixed) throw InputError("the simulator plans with single, per-layer, pipeswitch or optimal");
  // Note [Mechanism table] (common/mechanism.hpp): host memory and grouping per mechanism.
  const HostMemory memory = traits(mechanism).host_memory;
  const Strategy strategy = grouping_strategy(mechanism, planner);
  // Without the IPC optimisation every group's arrival also opens a CUDA IPC handle. (The
  // server opens all of a switch's handles before its forward: the same total, a later
  // startup; Note [Per-group handles] in exec/include/psw/exec/pipeline.hpp.)
  const Duration sync = hardware.group_sync +
                        (traits(mechanism).ipc_handle_per_group ? hardware.ipc_handle_open : Duration::zero());
  effective_sync_ = sync;
  for (const auto& model : models) {
    for (Task task : {Task::Inference, Task::Training}) {
      if (task == Task::Training && !has_training_times(model)) {
        PerModel unavailable;
        unavailable.available = false;
        unavailable.name = model.name;
        per_model_.push_back(std::move(unavailable));
        continue;
      }
      const std::vector<bool> host_mapped =
          mechanism == Mechanism::PipeSwitch ? choose_placement(placement, model, hardware, task, strategy, memory)
                                             : std::vector<bool>{};
      SwitchCosts base = make_switch_costs(model, hardware, task, memory, host_mapped);
      std::vector<Bytes> bytes;
      std::vector<Duration> compute;
      for (std::size_t i = 0; i < base.num_layers(); ++i) {
        bytes.push_back(base.layer_bytes(i));
        compute.push_back(base.layer_compute(i));
      }
      const SwitchCosts costs(bytes, compute, base.link(), sync);  // no tail: added per switch
      PerModel pm;
      pm.name = model.name;
      // Note [Ablation grouping]: an ablation changes one mechanism of PipeSwitch and keeps
      // the rest, including its grouping (the artifact's ablations use the same groups), so
      // the grouping is planned on PipeSwitch's own costs: pinned link, plain group sync.
      const SwitchCosts planning_costs(bytes, compute, is_pipelined(mechanism) ? hardware.pinned : base.link(),
                                       is_pipelined(mechanism) ? hardware.group_sync : sync);
      Timeline timeline;
      if (traits(mechanism).peer_paths) {
        // Note [Parallel paths]: the groups and their splits planned jointly
        // (Note [Parallel planner]); the timeline's per-group view is all the switch needs.
        const ParallelCosts parallel_costs =
            make_parallel_costs(costs, hardware, parallel.gpus, parallel.helpers_training);
        ParallelPlanResult planned = plan_parallel(parallel_costs);
        const ParallelTimeline parallel_timeline = evaluate_parallel_timeline(parallel_costs, planned.plan);
        for (const auto& g : parallel_timeline.groups) timeline.groups.push_back(g.timing);
        timeline.total = parallel_timeline.total;
        pm.groups = std::move(planned.plan.groups);
        pm.splits = std::move(planned.plan.splits);
        pm.parallel_bound = parallel_pipeline_bound(parallel_costs);
        pm.single_gpu_total = planned.single_gpu_total;
      } else {
        pm.groups = make_plan(strategy, planning_costs).groups;
        timeline = evaluate_timeline(costs, pm.groups);
      }
      if (task == Task::Inference && !model.prefill_curve.empty()) {
        pm.costs = costs;
        pm.prompt_tokens = model.prompt_tokens;
        pm.prefill_curve = model.prefill_curve;
      }
      pm.num_layers = model.num_layers();
      pm.bytes = costs.total_bytes();
      pm.forward = costs.total_compute();
      pm.backward = base.tail();
      pm.first_arrival = timeline.groups.front().transfer_end;
      if (const auto first = hardware.first_forward.find(model.name); first != hardware.first_forward.end()) {
        pm.first_forward = first->second;
      }
      if (task == Task::Inference) {  // Note [Eager switch in the simulator]
        if (const auto eager = hardware.eager_switch.find({model.name, to_string(mechanism)});
            eager != hardware.eager_switch.end()) {
          pm.eager = eager->second;
          pm.eager_costs = SwitchCosts(bytes, compute, base.link(), hardware.group_sync);
        }
      }
      pm.pipelined_total = timeline.total;
      pm.compute_and_sync = costs.total_compute() + sync * static_cast<std::int64_t>(pm.groups.size());
      pm.sequential_copies = Duration::zero();
      for (std::size_t i = 0; i < costs.num_layers(); ++i) pm.sequential_copies += costs.transfer_time(i, i);
      pm.single_copy = costs.link().copy_time(costs.total_bytes());
      const auto& um = hardware.unified_memory;
      pm.um_migration = Duration::zero();
      pm.first_layer_fault = Duration::zero();
      for (std::size_t i = 0; i < costs.num_layers(); ++i) {
        const Bytes b = costs.layer_bytes(i);
        const std::int64_t pages = (b + um.page_bytes - 1) / um.page_bytes;
        const Duration fault = um.page_fault * pages + um.migration_bandwidth.transfer_time(b);
        pm.um_migration += fault;
        if (i == 0) pm.first_layer_fault = fault;
      }
      per_model_.push_back(std::move(pm));
    }
  }
  for (PerModel& pm : per_model_) pm.mps_slowdown = percent_factor(hardware.mps.inference_slowdown_percent);
}

void MechanismModel::set_training_job(const std::string& model, int batch) {
  for (PerModel& pm : per_model_) {
    pm.mps_slowdown = mps_inference_slowdown_percent(hardware_.mps, pm.name, model, batch) / 100.0;
  }
}

MechanismModel::ComputeCosts MechanismModel::compute_costs(const PerModel& pm, Task task,
                                                          std::int64_t prompt_tokens) const {
  ComputeCosts out{pm.forward, pm.compute_and_sync, pm.pipelined_total};
  if (task != Task::Inference || !pm.costs) return out;
  const double factor = prefill_scale(pm.prompt_tokens, pm.prefill_curve, prompt_tokens);
  if (factor == 1.0) return out;
  // Note [Prefill curve]: every layer's compute scaled, the transfers as they were; the
  // timeline evaluated again over the same groups (the plan is the profile's prompt's).
  const SwitchCosts scaled = pm.costs->with_compute_scaled(factor);
  out.forward = scaled.total_compute();
  out.compute_and_sync = out.forward + effective_sync_ * static_cast<std::int64_t>(pm.groups.size());
  if (traits(mechanism_).peer_paths) {
    const ParallelCosts parallel = make_parallel_costs(scaled, hardware_, parallel_.gpus, parallel_.helpers_training);
    out.pipelined_total = evaluate_parallel_timeline(parallel, ParallelPlan{pm.groups, pm.splits}).total;
  } else {
    out.pipelined_total = evaluate_timeline(scaled, pm.groups).total;
  }
  return out;
}

SwitchInCost MechanismModel::switch_in(std::uint32_t model, Task task, Duration stop,
                                       std::optional<std::uint32_t> previous, std::int64_t prompt_tokens,
                                       Duration process_started_ago) const {
  const PerModel& pm = costs_of(model, task);
  const ComputeCosts work = compute_costs(pm, task, prompt_tokens);
  const Duration tail = task == Task::Training ? pm.backward : Duration::zero();
  const Duration sync = hardware_.group_sync;
  switch (mechanism_) {
    case Mechanism::Ready:
      return {stop, stop + work.forward + tail, false};
    case Mechanism::Mps:  // nothing to switch; the server applies the slowdown beside training
    case Mechanism::TimeSliced:
      return {Duration::zero(), work.forward + tail, false};
    case Mechanism::NoOptimization: {
      const Duration start = max(pm.sequential_copies, stop) + sync;
      return {start, start + work.forward + tail, true};
    }
    case Mechanism::UnifiedMemory:
      return {stop + pm.first_layer_fault, stop + pm.um_migration + work.forward + tail, true};
    case Mechanism::StopAndStart:
    case Mechanism::TwoProcesses: {
      // Note [Worker kill] (the runtime's controller.cpp): the process it replaces is killed
      // and reaped first.
      const Duration prep = max(Duration::zero(), process_start() - process_started_ago);
      const Duration start = max(stop, prep + pm.single_copy) + sync;
      // Note [First forward in a fresh process]: measured for requests; a training job's first
      // step in its fresh process is not (its resumption pays its layers' times only).
      const Duration first = task == Task::Inference ? pm.first_forward : Duration::zero();
      return {start, start + first + work.forward + tail, true, prep};
    }
    case Mechanism::OneProcess: {
      // One worker trains and serves: it takes the task only once the old one has stopped (with
      // the training job's abort, Note [Training abort]), so the switch follows the stop instead
      // of overlapping it, and the engine's clock starts there (`worker_ready`).
      if (pm.eager) {
        // Note [Eager switch in the simulator]: psw serve's one process allocates and copies
        // tensor by tensor on the host's time, as no-memory-management does; the training
        // model's memory stays where it is (the runtime's controller.cpp, Note [Residency]).
        const EagerSwitchTimes t = eager_switch_times(*pm.eager_costs, pm.groups, *pm.eager, EagerCopies::PerTensor,
                                                      Duration::zero());
        return {stop + t.startup, stop + t.total + tail, true, stop};
      }
      Duration prep = hardware_.cuda_malloc * static_cast<std::int64_t>(pm.num_layers);
      if (previous) {
        // The paper's baseline: the old model leaves the GPU on the critical path, copied back
        // and freed.
        const PerModel& old = per_model_.at(*previous * 2);
        prep += hardware_.pinned.copy_time(old.bytes) +
                hardware_.cuda_free * static_cast<std::int64_t>(old.num_layers);
      }
      const Duration start = stop + prep + pm.single_copy + sync;
      return {start, start + work.forward + tail, true, stop};
    }
    default:
      break;
  }
  PSW_CHECK(is_pipelined(mechanism_), "unhandled mechanism ", to_string(mechanism_));
  if (pm.eager) {  // Note [Eager switch in the simulator]: the GPU free once the old task stopped
    SwitchCosts costs = *pm.eager_costs;
    if (pm.costs) {  // Note [Prefill curve]: another prompt's compute, the same host times
      const double factor = prefill_scale(pm.prompt_tokens, pm.prefill_curve, prompt_tokens);
      if (factor != 1.0) costs = costs.with_compute_scaled(factor);
    }
    const EagerSwitchTimes t = eager_switch_times(costs, pm.groups, *pm.eager, eager_copies_of(mechanism_), stop);
    return {t.startup, t.total + tail, true};
  }
  Duration prep = Duration::zero();
  if (mechanism_ == Mechanism::NoMemoryManagement) {
    prep = hardware_.cuda_malloc * static_cast<std::int64_t>(pm.num_layers);
    if (previous) prep += hardware_.cuda_free * static_cast<std::int64_t>(per_model_.at(*previous * 2).num_layers);
  }
  // Note [Shifted timeline]: with transfers starting at `prep` and the GPU free at
  // gpu_free, the last compute ends at max(gpu_free + sum(sync + compute), prep + T0),
  // where T0 is the timeline total with the GPU free at time 0; the first compute starts
  // at max(prep + first arrival, gpu_free) + sync. O(1) per switch.
  const Duration gpu_free = max(stop, prep);
  const Duration startup = max(prep + pm.first_arrival, gpu_free) + effective_sync_;
  const Duration finish = max(gpu_free + work.compute_and_sync, prep + work.pipelined_total) + tail;
  return {startup, finish, true};
}

MechanismModel::ParallelSwitch MechanismModel::parallel_switch(std::uint32_t model, Task task) const {
  PSW_CHECK(traits(mechanism_).peer_paths, "parallel_switch of mechanism ", to_string(mechanism_));
  const PerModel& pm = per_model_.at(model * 2 + (task == Task::Training ? 1 : 0));
  ParallelSwitch out;
  out.gpus = parallel_.gpus;
  out.helpers_training = parallel_.helpers_training;
  out.groups = pm.groups.size();
  out.bytes = pm.bytes;
  for (const PathSplit& split : pm.splits) {
    for (std::size_t p = 1; p < split.size(); ++p) out.via_helpers += split[p];
  }
  out.total = pm.pipelined_total;
  out.bound = pm.parallel_bound;
  out.single_gpu_total = pm.single_gpu_total;
  return out;
}

// Note [MPS slowdown]
// ~~~~~~~~~~~~~~~~~~~
// The hardware profile's `mps.inference_slowdown_percent` (or its `contention` point of the
// inference model beside the training job, Note [MPS contention]) is what an inference loses to
// a training job running beside it in another MPS client (the artifact's Figure 5 measures it
// with training running). With no training on the GPU, nothing competes for the SMs, so the
// inference runs at its ready speed. The server knows whether a training job is resident and
// running (its background job under MPS is never stopped, so: configured and not idle), and
// passes it as `beside_training`. The training job's own slowdown
// (`training_slowdown_percent`) applies while inference runs beside it (advance_training).
Duration MechanismModel::resident_run(std::uint32_t model, Task task, bool beside_training,
                                      std::int64_t prompt_tokens) const {
  const PerModel& pm = costs_of(model, task);
  const Duration work =
      compute_costs(pm, task, prompt_tokens).forward + (task == Task::Training ? pm.backward : Duration::zero());
  if (task != Task::Inference || !beside_training) return work;
  if (mechanism_ == Mechanism::Mps) return scale(work, mps_inference_slowdown(model));
  if (mechanism_ == Mechanism::TimeSliced) return time_sliced_latency(work);
  return work;
}

// Note [Time slicing] in hardware_profile.hpp.
Duration MechanismModel::time_sliced_latency(Duration work) const {
  PSW_CHECK(hardware_.time_slicing.has_value(), "time-sliced without the hardware's time_slicing");
  const TimeSlicingModel& ts = *hardware_.time_slicing;
  return ts.context_switch + nanoseconds(work.ns() * 100 / ts.inference_share_percent);
}

double MechanismModel::concurrent_training_rate() const {
  if (mechanism_ == Mechanism::TimeSliced) {  // Note [Time slicing]
    PSW_CHECK(hardware_.time_slicing.has_value(), "time-sliced without the hardware's time_slicing");
    return static_cast<double>(100 - hardware_.time_slicing->inference_share_percent) / 100.0;
  }
  return 1.0 / mps_training_slowdown();
}

Duration MechanismModel::ready_run(std::uint32_t model, Task task, std::int64_t prompt_tokens) const {
  const PerModel& pm = costs_of(model, task);
  return compute_costs(pm, task, prompt_tokens).forward + (task == Task::Training ? pm.backward : Duration::zero());
}

bool MechanismModel::stops_at_layer_boundary() const {
  switch (mechanism_) {
    case Mechanism::Ready:
    case Mechanism::Mps:
    case Mechanism::TimeSliced:
    case Mechanism::StopAndStart:
    case Mechanism::TwoProcesses:
      return false;
    default:
      return true;
  }
}

bool MechanismModel::kills_training() const {
  return mechanism_ == Mechanism::StopAndStart || mechanism_ == Mechanism::TwoProcesses;
}

Duration MechanismModel::process_start() const {
  return hardware_.process_kill + hardware_.process_start + hardware_.framework_start +
         hardware_.cuda_context_create + hardware_.cuda_malloc;
}

Duration MechanismModel::training_abort() const {
  return mechanism_ == Mechanism::OneProcess ? hardware_.training_abort : Duration::zero();
}

bool MechanismModel::pauses_training_in_place() const {
  return uses_standby_workers() && stops_at_layer_boundary() && !kills_training();
}

bool MechanismModel::uses_standby_workers() const {
  return is_pipelined(mechanism_) || mechanism_ == Mechanism::NoOptimization;
}

bool MechanismModel::keeps_models_resident() const {
  return mechanism_ == Mechanism::Ready || mechanism_ == Mechanism::Mps || mechanism_ == Mechanism::TimeSliced ||
         mechanism_ == Mechanism::UnifiedMemory;
}

Duration MechanismModel::after_task_time(std::uint32_t model) const {
  return traits(mechanism_).ipc_handle_per_group ? cleanup_time(model) : Duration::zero();
}

Duration MechanismModel::cleanup_time(std::uint32_t /*model*/) const {
  // The daemon owns the memory, so a worker's cleanup is dropping its references and
  // resetting its state; off the critical path unless no standby worker is left.
  return hardware_.worker_cleanup;
}

double MechanismModel::mps_inference_slowdown(std::uint32_t model) const {
  return costs_of(model, Task::Inference).mps_slowdown;
}

double MechanismModel::mps_training_slowdown() const {
  return percent_factor(hardware_.mps.training_slowdown_percent);
}

}  // namespace psw::sim
