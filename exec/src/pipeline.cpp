#include "psw/exec/pipeline.hpp"

#include <algorithm>
#include <chrono>

#include "psw/common/error.hpp"

namespace psw::exec {

namespace {

// Mark slots of Note [Measured trace], above the engine's and the profiler's.
constexpr std::size_t kTraceCopyBegin = 1024;
std::size_t trace_copy_end(std::size_t group) { return kTraceCopyBegin + 1 + 3 * group; }
std::size_t trace_compute_start(std::size_t group) { return kTraceCopyBegin + 2 + 3 * group; }
std::size_t trace_compute_end(std::size_t group) { return kTraceCopyBegin + 3 + 3 * group; }

torch::Tensor view_as(const torch::Tensor& region, Bytes offset, Bytes bytes, torch::Dtype dtype,
                      c10::IntArrayRef sizes) {
  return region.narrow(0, offset, static_cast<std::int64_t>(bytes)).view(dtype).view(sizes);
}

}  // namespace

PipelineEngine::PipelineEngine(Backend& backend, ZooModel& model, const SwitchPlan& plan, const ParameterStore& store,
                               const DeviceRegion* region, TransferMode mode, Bytes alignment)
    : PipelineEngine(backend, model, plan, store, region, mode, alignment, GroupOpener{}) {}

PipelineEngine::PipelineEngine(Backend& backend, ZooModel& model, const SwitchPlan& plan, const ParameterStore& store,
                               GroupOpener open_group, Bytes alignment)
    : PipelineEngine(backend, model, plan, store, nullptr, TransferMode::Pipelined, alignment, std::move(open_group)) {
  PSW_CHECK(open_group_, "per-group memory without an opener");
}

PipelineEngine::PipelineEngine(Backend& backend, ZooModel& model, const SwitchPlan& plan, const ParameterStore& store,
                               const DeviceRegion* region, TransferMode mode, Bytes alignment, GroupOpener open_group)
    : backend_(backend),
      model_(model),
      groups_(plan.groups),
      mode_(mode),
      host_mapped_(plan.host_mapped),
      open_group_(std::move(open_group)) {
  auto& layers = model_.layers();
  check_plan_matches(plan, model_.name(), layer_fingerprint(model_), layers.size(), "pipeline plan");
  if (host_mapped_.empty()) host_mapped_.assign(layers.size(), false);
  const bool any_host_mapped = std::find(host_mapped_.begin(), host_mapped_.end(), true) != host_mapped_.end();
  if (any_host_mapped && (mode_ != TransferMode::Pipelined || open_group_)) {
    throw InputError("layers can be read from host memory only with pipelined transfers from pinned memory "
                     "into one device region");
  }
  if ((mode_ == TransferMode::Pageable) == store.pinned()) {
    throw InputError(mode_ == TransferMode::Pageable ? "the no-pinned-memory mode needs a pageable parameter store"
                                                     : "this transfer mode needs a pinned parameter store");
  }
  const PackedLayout packed = pack_layout(model_, groups_, alignment);
  layout_ = packed.layout;
  if (store.size() < layout_.total_bytes) {
    throw InputError(detail::concat("the parameter store of ", store.size(), " bytes is smaller than ", model_.name(),
                                    "'s packed parameters (", layout_.total_bytes, " bytes)"));
  }
  host_ = store.bytes().narrow(0, 0, layout_.total_bytes);
  group_of_layer_.resize(layers.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = groups_[g].first; i <= groups_[g].last; ++i) group_of_layer_[i] = g;
  }
  std::size_t k = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    for (const auto& t : layers[i].tensors) {
      slots_.push_back({i, t, packed.tensors.at(k++).offset, t.sizes().vec(), t.scalar_type(),
                        static_cast<Bytes>(t.nbytes())});
    }
  }
  // Slots are in layer order and groups are consecutive layers: group g's slots are
  // [group_slots_[g], group_slots_[g + 1]).
  group_slots_.assign(groups_.size() + 1, slots_.size());
  for (std::size_t s = slots_.size(); s-- > 0;) group_slots_[group_of_layer_[slots_[s].layer]] = s;
  for (std::size_t g = groups_.size(); g-- > 0;) group_slots_[g] = std::min(group_slots_[g], group_slots_[g + 1]);
  if (open_group_) {
    // Note [Per-group handles]: nothing is bound until a switch opens the groups; the model's
    // own copies of its tensors are released now.
    group_memory_.resize(groups_.size());
    close_groups();
  } else if (mode_ != TransferMode::AllocatePerTensor) {
    if (region == nullptr) throw InputError("a pipelined engine needs a device region");
    if (region->size() < layout_.total_bytes) {
      throw InputError(detail::concat("the device region of ", region->size(), " bytes is smaller than ",
                                      model_.name(), "'s packed parameters (", layout_.total_bytes, " bytes)"));
    }
    device_ = region->bytes().narrow(0, 0, layout_.total_bytes);
    bind_to(device_);
  }
  // Host-mapped layers are rebound to the pinned host copy, read in place by the device.
  if (any_host_mapped) {
    torch::NoGradGuard no_grad;
    const torch::Tensor mapped = backend_.map_host(host_);
    for (auto& slot : slots_) {
      if (host_mapped_[slot.layer]) slot.tensor.set_data(view_as(mapped, slot.offset, slot.bytes, slot.dtype, slot.sizes));
    }
  }
  // What each group copies: its span, minus host-mapped layers, as contiguous pieces.
  group_pieces_.resize(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    // A group of layers without parameters has no memory of its own to open (Note [Per-group
    // handles]), so nothing to copy or wait for.
    if (open_group_ && layout_.group_span[g] == 0) continue;
    const Bytes group_end = layout_.group_offset[g] + layout_.group_span[g];
    for (std::size_t i = groups_[g].first; i <= groups_[g].last; ++i) {
      if (host_mapped_[i]) continue;
      const Bytes begin = layout_.layer_offset[i];
      const Bytes end = i < groups_[g].last ? layout_.layer_offset[i + 1] : group_end;
      auto& pieces = group_pieces_[g];
      if (!pieces.empty() && pieces.back().first + pieces.back().second == begin) {
        pieces.back().second += end - begin;
      } else {
        pieces.emplace_back(begin, end - begin);
      }
    }
  }
}

void PipelineEngine::bind_to(const torch::Tensor& region) {
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) slot.tensor.set_data(view_as(region, slot.offset, slot.bytes, slot.dtype, slot.sizes));
}

void PipelineEngine::open_group(std::size_t group) {
  const Bytes span = layout_.group_span[group];
  if (span == 0) return;  // layers without parameters: no memory, nothing to open
  torch::Tensor memory = open_group_(group, span);
  PSW_CHECK(memory.dim() == 1 && memory.scalar_type() == torch::kUInt8 && memory.numel() >= span, "group ", group,
            "'s memory is not ", span, " bytes of uint8");
  ++group_opens_;
  const Bytes base = layout_.group_offset[group];
  torch::NoGradGuard no_grad;
  for (std::size_t s = group_slots_[group]; s < group_slots_[group + 1]; ++s) {
    TensorSlot& slot = slots_[s];
    slot.tensor.set_data(view_as(memory, slot.offset - base, slot.bytes, slot.dtype, slot.sizes));
  }
  group_memory_[group] = std::move(memory);
}

torch::Tensor PipelineEngine::device_range(std::size_t group, Bytes offset, Bytes length) const {
  if (!open_group_) return device_.narrow(0, offset, length);
  return group_memory_[group].narrow(0, offset - layout_.group_offset[group], length);
}

void PipelineEngine::close_groups() {
  if (!open_group_) return;
  // Kernels still reading the group memory must be done before its handles close.
  backend_.synchronize();
  torch::NoGradGuard no_grad;
  // An empty tensor of the same kind allocates nothing; a forward that ran unbound by mistake
  // would fail on the shapes instead of reading stale memory.
  for (auto& slot : slots_) slot.tensor.set_data(torch::empty({0}, torch::dtype(slot.dtype).device(backend_.device())));
  for (auto& memory : group_memory_) memory = torch::Tensor();
}

void PipelineEngine::evict_to_host() {
  if (mode_ != TransferMode::OnDemand) throw InputError("only managed memory (unified memory) is sent back to the host");
  backend_.synchronize();
  backend_.evict_to_host(device_);
}

void PipelineEngine::poison_device_parameters(std::uint8_t value) {
  if (mode_ == TransferMode::OnDemand) {
    throw InputError("the managed region holds the only device-side copy of the parameters: a switch copies nothing "
                     "that would restore them, so they are not poisoned (evict_to_host makes the next switch cold)");
  }
  if (device_.defined()) {
    backend_.fill(device_, value);
  } else {
    for (auto& slot : slots_) backend_.fill(slot.tensor.reshape({-1}).view(torch::kUInt8), value);
  }
}

torch::Tensor PipelineEngine::switch_in_and_run(const torch::Tensor& input) { return switch_in(input, nullptr); }

torch::Tensor PipelineEngine::switch_in_and_run(const torch::Tensor& input, const Forward& forward) {
  return switch_in(input, &forward);
}

torch::Tensor PipelineEngine::switch_in(const torch::Tensor& input, const Forward* forward) {
  torch::NoGradGuard no_grad;
  // Note [Host time of an eager switch]: from here to the forward's first call, and the
  // forward's calls.
  using HostClock = std::chrono::steady_clock;
  const HostClock::time_point entered = HostClock::now();
  auto host_ns = [](HostClock::duration d) {
    return nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  };
  auto timed_forward = [&](const LayerGate& gate) {
    const HostClock::time_point forward_called = HostClock::now();
    torch::Tensor out = forward_marked(input, gate, forward);
    eager_host_ = {host_ns(forward_called - entered), host_ns(HostClock::now() - forward_called)};
    return out;
  };
  if (mode_ == TransferMode::OnDemand) {
    // Unified memory: nothing to copy; the forward touches the pages and they migrate. The
    // copy stream stays out of it (begin_switch would fork it into a graph capture).
    backend_.mark(kMarkBegin);
    return timed_forward([](std::size_t) {});
  }
  backend_.begin_switch(groups_.size());
  backend_.mark(kMarkBegin);
  if (mode_ == TransferMode::AllocatePerTensor) {
    // No memory management: every tensor gets a fresh device allocation on the switch path
    // and its own copy, issued on the compute stream (so the forward is ordered after it).
    for (auto& slot : slots_) {
      auto fresh = torch::empty(slot.sizes, torch::dtype(slot.dtype).device(backend_.device()));
      fresh.copy_(view_as(host_, slot.offset, slot.bytes, slot.dtype, slot.sizes), /*non_blocking=*/true);
      slot.tensor.set_data(fresh);
    }
    return timed_forward([](std::size_t) {});
  }

  // Enqueue every group's copy at once; the copy stream runs them back to back.
  // A group is waited for before the first of its layers that runs (a group may start with
  // layers that do not run in this task, such as Inception-v3's auxiliary head); a group
  // with nothing to copy (only host-mapped layers) needs no wait.
  std::vector<bool> waited(groups_.size(), false);
  if (tracing_) {
    traced_group_ran_.assign(groups_.size(), false);
    backend_.mark_copy(kTraceCopyBegin);
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (open_group_) open_group(g);  // Note [Per-group handles]: on the switch path
    for (const auto& [offset, length] : group_pieces_[g]) {
      backend_.copy_group(g, device_range(g, offset, length), host_.narrow(0, offset, length));
    }
    if (group_pieces_[g].empty()) waited[g] = true;
    if (tracing_) backend_.mark_copy(trace_copy_end(g));
  }
  if (mode_ == TransferMode::Unpipelined) {
    // No optimisation: the forward is told once, after every group arrived. One copy stream
    // runs the copies in the order enqueued (on `host` one copy thread, FIFO), so the last
    // group with copies arriving means every group has.
    for (std::size_t g = groups_.size(); g-- > 0;) {
      if (!group_pieces_[g].empty()) {
        backend_.wait_group(g);
        break;
      }
    }
    waited.assign(groups_.size(), true);
  }
  // Groups are consecutive in execution order, so the running group only moves forward.
  std::size_t running = groups_.size();  // none yet
  torch::Tensor out = timed_forward([this, &waited, &running](std::size_t layer) {
    const std::size_t g = group_of_layer_[layer];
    const bool entering = g != running;
    if (tracing_ && entering && running < groups_.size()) backend_.mark(trace_compute_end(running));
    if (!waited[g]) {
      backend_.wait_group(g);
      waited[g] = true;
    }
    if (tracing_ && entering) {
      backend_.mark(trace_compute_start(g));
      traced_group_ran_[g] = true;
    }
    running = g;
  });
  if (tracing_ && running < groups_.size()) backend_.mark(trace_compute_end(running));
  backend_.join_copies();
  return out;
}

void PipelineEngine::capture_graphs(const torch::Tensor& example, bool traced) {
  if (!backend_.supports_graphs()) throw InputError("the " + backend_.name() + " backend cannot capture graphs");
  if (open_group_) throw InputError("per-group memory cannot be captured: its addresses change from one switch to the next");
  if (mode_ != TransferMode::Pipelined && mode_ != TransferMode::Unpipelined && mode_ != TransferMode::OnDemand) {
    throw InputError("only transfers from pinned memory into one region can be captured");
  }
  torch::NoGradGuard no_grad;
  graph_input_ = example.clone();
  // Warm up outside the capture: library handles, kernel selection, the activation cache.
  switch_in_and_run(graph_input_);
  run_resident(graph_input_);
  backend_.synchronize();
  if (!graph_switch_output_.defined()) {  // a second capture reuses the slots
    switch_graph_ = backend_.new_graph_slot();
    resident_graph_ = backend_.new_graph_slot();
    traced_switch_graph_ = backend_.new_graph_slot();
  }
  backend_.capture(switch_graph_, [this] { graph_switch_output_ = switch_in_and_run(graph_input_); });
  backend_.capture(resident_graph_, [this] { graph_resident_output_ = run_resident(graph_input_); });
  if (!traced || mode_ == TransferMode::OnDemand) return;
  const bool was_tracing = tracing_;
  tracing_ = true;
  backend_.capture(traced_switch_graph_, [this] { graph_traced_output_ = switch_in_and_run(graph_input_); });
  tracing_ = was_tracing;
}

torch::Tensor PipelineEngine::switch_in_and_run_graph(const torch::Tensor& input, bool traced) {
  PSW_CHECK(graph_switch_output_.defined(), "capture_graphs() first");
  graph_input_.copy_(input, /*non_blocking=*/true);
  eager_host_ = {};
  backend_.replay(traced ? traced_switch_graph_ : switch_graph_);
  return traced ? graph_traced_output_ : graph_switch_output_;
}

void PipelineEngine::set_tracing(bool on) {
  if (on && mode_ == TransferMode::AllocatePerTensor) {
    throw InputError("a switch without memory management copies per tensor: it has no groups to trace");
  }
  if (on && mode_ == TransferMode::OnDemand) {
    throw InputError("a switch of managed memory copies nothing: it has no groups to trace");
  }
  tracing_ = on;
}

Timeline PipelineEngine::measured_timeline() {
  PSW_CHECK(traced_group_ran_.size() == groups_.size(), "no traced switch to read (set_tracing(true) first)");
  backend_.synchronize();
  auto since_begin = [this](std::size_t slot) { return max(Duration::zero(), backend_.elapsed(kMarkBegin, slot)); };
  Timeline timeline;
  Duration copy_end = since_begin(kTraceCopyBegin);
  Duration compute_end = Duration::zero();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    GroupTiming t;
    t.group = groups_[g];
    for (const auto& piece : group_pieces_[g]) t.bytes += piece.second;
    t.transfer_start = copy_end;
    t.transfer_end = copy_end = max(copy_end, since_begin(trace_copy_end(g)));
    if (traced_group_ran_[g]) {
      t.compute_start = since_begin(trace_compute_start(g));
      t.compute_end = compute_end = max(t.compute_start, since_begin(trace_compute_end(g)));
    } else {
      t.compute_start = t.compute_end = compute_end;
    }
    timeline.groups.push_back(t);
  }
  timeline.total = since_begin(kMarkEnd);
  timeline.startup = since_begin(kMarkFirstLayer);
  return timeline;
}

torch::Tensor PipelineEngine::run_resident_graph(const torch::Tensor& input) {
  PSW_CHECK(graph_resident_output_.defined(), "capture_graphs() first");
  graph_input_.copy_(input, /*non_blocking=*/true);
  eager_host_ = {};
  backend_.replay(resident_graph_);
  return graph_resident_output_;
}

torch::Tensor PipelineEngine::forward_marked(const torch::Tensor& input, const LayerGate& gate, const Forward* forward) {
  bool started = false;
  const LayerGate marked = [this, &gate, &started](std::size_t layer) {
    gate(layer);
    if (!started) {
      backend_.mark(kMarkFirstLayer);
      started = true;
    }
  };
  torch::Tensor out = forward != nullptr ? (*forward)(input, marked) : model_.forward(input, marked);
  backend_.mark(kMarkEnd);
  return out;
}

torch::Tensor PipelineEngine::run_resident(const torch::Tensor& input) { return resident(input, nullptr); }

torch::Tensor PipelineEngine::run_resident(const torch::Tensor& input, const Forward& forward) {
  return resident(input, &forward);
}

torch::Tensor PipelineEngine::resident(const torch::Tensor& input, const Forward* forward) {
  torch::NoGradGuard no_grad;
  eager_host_ = {};
  backend_.mark(kMarkBegin);
  // Note [Per-group handles]: the parameters are in the daemon's memory; reaching them still
  // takes the handles.
  if (open_group_) {
    for (std::size_t g = 0; g < groups_.size(); ++g) open_group(g);
  }
  return forward_marked(input, [](std::size_t) {}, forward);
}

SwitchTiming PipelineEngine::last_timing() {
  backend_.synchronize();
  return {backend_.elapsed(kMarkBegin, kMarkFirstLayer), backend_.elapsed(kMarkBegin, kMarkEnd)};
}

std::unique_ptr<PrivatePipeline> make_private_pipeline(Backend& backend, ZooModel& model, const SwitchPlan& plan,
                                                       TransferMode mode, Bytes alignment) {
  const PackedLayout packed = pack_layout(model, plan.groups, alignment);
  auto owned = std::make_unique<PrivatePipeline>(PrivatePipeline{
      ParameterStore::allocate(backend, packed.layout.total_bytes, mode != TransferMode::Pageable), std::nullopt,
      std::nullopt});
  owned->store.pack(model, packed);
  if (mode == TransferMode::OnDemand) {
    owned->region.emplace(DeviceRegion::over(backend.allocate_managed(owned->store.bytes())));
  } else if (mode != TransferMode::AllocatePerTensor) {
    owned->region.emplace(DeviceRegion::allocate(backend, packed.layout.total_bytes));
  }
  owned->engine.emplace(backend, model, plan, owned->store, owned->region ? &*owned->region : nullptr, mode, alignment);
  return owned;
}

std::unique_ptr<PrivatePipeline> make_private_pipeline(Backend& backend, ZooModel& model, Grouping groups,
                                                       TransferMode mode, Bytes alignment,
                                                       std::vector<bool> host_mapped) {
  return make_private_pipeline(backend, model,
                               plan_for_model(model, Strategy::Fixed, std::move(groups), std::move(host_mapped)), mode,
                               alignment);
}

}  // namespace psw::exec
