#include "psw/exec/pipeline.hpp"

#include "psw/common/error.hpp"

namespace psw::exec {

namespace {

constexpr Bytes kTensorAlignment = 16;  // vectorised loads need 16-byte aligned tensors

Bytes align_up(Bytes v, Bytes a) { return (v + a - 1) / a * a; }

torch::Tensor view_as(const torch::Tensor& region, Bytes offset, const torch::Tensor& like) {
  return region.narrow(0, offset, static_cast<std::int64_t>(like.nbytes()))
      .view(like.scalar_type())
      .view(like.sizes());
}

}  // namespace

PipelineEngine::PipelineEngine(Backend& backend, ZooModel& model, Grouping groups, TransferMode mode,
                               Bytes alignment)
    : backend_(backend), model_(model), groups_(std::move(groups)), mode_(mode) {
  auto& layers = model_.layers();
  validate_grouping(groups_, layers.size(), "pipeline plan for " + model_.name());
  // Each layer's span: its tensors back to back, each aligned.
  std::vector<Bytes> spans;
  for (const auto& layer : layers) {
    Bytes span = 0;
    for (const auto& t : layer.tensors) span = align_up(span + static_cast<Bytes>(t.nbytes()), kTensorAlignment);
    spans.push_back(span);
  }
  layout_ = make_memory_layout(spans, groups_, alignment);
  group_of_layer_.resize(layers.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = groups_[g].first; i <= groups_[g].last; ++i) group_of_layer_[i] = g;
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Bytes offset = layout_.layer_offset[i];
    for (const auto& t : layers[i].tensors) {
      PSW_CHECK(t.is_contiguous(), "tensor of layer ", layers[i].name, " is not contiguous");
      slots_.push_back({i, t, offset});
      offset = align_up(offset + static_cast<Bytes>(t.nbytes()), kTensorAlignment);
    }
  }
  // Pack once into host memory, by the layout.
  host_ = backend_.allocate_host(layout_.total_bytes, mode_ != TransferMode::Pageable);
  host_.zero_();
  for (const auto& slot : slots_) {
    view_as(host_, slot.offset, slot.tensor).copy_(slot.tensor.to(torch::kCPU));
  }
  if (mode_ != TransferMode::AllocatePerTensor) {
    device_ = backend_.allocate_device(layout_.total_bytes);
    device_allocations_ += layout_.total_bytes;
    bind_to(device_);
  }
}

void PipelineEngine::bind_to(const torch::Tensor& region) {
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) slot.tensor.set_data(view_as(region, slot.offset, slot.tensor));
}

void PipelineEngine::poison_device_parameters(std::uint8_t value) {
  if (device_.defined()) {
    backend_.fill(device_, value);
  } else {
    for (auto& slot : slots_) backend_.fill(slot.tensor.reshape({-1}).view(torch::kUInt8), value);
  }
}

torch::Tensor PipelineEngine::switch_in_and_run(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  backend_.begin_switch(groups_.size());
  backend_.mark(kMarkBegin);
  if (mode_ == TransferMode::AllocatePerTensor) {
    // No memory management: every tensor gets a fresh device allocation on the switch path
    // and its own copy, issued on the compute stream (so the forward is ordered after it).
    for (auto& slot : slots_) {
      auto fresh = torch::empty(slot.tensor.sizes(), slot.tensor.options().device(backend_.device()));
      fresh.copy_(view_as(host_, slot.offset, slot.tensor), /*non_blocking=*/true);
      slot.tensor.set_data(fresh);
    }
    return forward_marked(input, [](std::size_t) {});
  }
  // Enqueue every group's copy at once; the copy stream runs them back to back.
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto offset = static_cast<std::int64_t>(layout_.group_offset[g]);
    const auto span = static_cast<std::int64_t>(layout_.group_span[g]);
    backend_.copy_group(g, device_.narrow(0, offset, span), host_.narrow(0, offset, span));
  }
  // A group is waited for before the first of its layers that runs (a group may start with
  // layers that do not run in this task, such as Inception-v3's auxiliary head).
  std::vector<bool> waited(groups_.size(), false);
  torch::Tensor out = forward_marked(input, [this, &waited](std::size_t layer) {
    const std::size_t g = group_of_layer_[layer];
    if (!waited[g]) {
      backend_.wait_group(g);
      waited[g] = true;
    }
  });
  backend_.join_copies();
  return out;
}

void PipelineEngine::capture_graphs(const torch::Tensor& example) {
  if (!backend_.supports_graphs()) throw InputError("the " + backend_.name() + " backend cannot capture graphs");
  if (mode_ != TransferMode::Pipelined) throw InputError("only pipelined transfers from pinned memory can be captured");
  torch::NoGradGuard no_grad;
  graph_input_ = example.clone();
  // Warm up outside the capture: library handles, kernel selection, the activation cache.
  switch_in_and_run(graph_input_);
  run_resident(graph_input_);
  backend_.synchronize();
  backend_.capture(kSwitchGraph, [this] { graph_switch_output_ = switch_in_and_run(graph_input_); });
  backend_.capture(kResidentGraph, [this] { graph_resident_output_ = run_resident(graph_input_); });
}

torch::Tensor PipelineEngine::switch_in_and_run_graph(const torch::Tensor& input) {
  PSW_CHECK(graph_switch_output_.defined(), "capture_graphs() first");
  graph_input_.copy_(input, /*non_blocking=*/true);
  backend_.replay(kSwitchGraph);
  return graph_switch_output_;
}

torch::Tensor PipelineEngine::run_resident_graph(const torch::Tensor& input) {
  PSW_CHECK(graph_resident_output_.defined(), "capture_graphs() first");
  graph_input_.copy_(input, /*non_blocking=*/true);
  backend_.replay(kResidentGraph);
  return graph_resident_output_;
}

torch::Tensor PipelineEngine::forward_marked(const torch::Tensor& input, const LayerGate& gate) {
  bool started = false;
  torch::Tensor out = model_.forward(input, [this, &gate, &started](std::size_t layer) {
    gate(layer);
    if (!started) {
      backend_.mark(kMarkFirstLayer);
      started = true;
    }
  });
  backend_.mark(kMarkEnd);
  return out;
}

torch::Tensor PipelineEngine::run_resident(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  backend_.mark(kMarkBegin);
  return forward_marked(input, [](std::size_t) {});
}

SwitchTiming PipelineEngine::last_timing() {
  backend_.synchronize();
  return {backend_.elapsed(kMarkBegin, kMarkFirstLayer), backend_.elapsed(kMarkBegin, kMarkEnd)};
}

}  // namespace psw::exec
