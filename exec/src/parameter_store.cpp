#include "psw/exec/parameter_store.hpp"

#include <optional>

#include "psw/common/error.hpp"

namespace psw::exec {

namespace {

constexpr Bytes kTensorAlignment = 16;  // vectorised loads need 16-byte aligned tensors

Bytes align_up(Bytes v, Bytes a) { return (v + a - 1) / a * a; }

torch::Tensor view_bytes(const torch::Tensor& region, Bytes offset, const torch::Tensor& like) {
  return region.narrow(0, offset, static_cast<std::int64_t>(like.nbytes())).view(like.scalar_type()).view(like.sizes());
}

void check_bytes_tensor(const torch::Tensor& t, const char* what) {
  PSW_CHECK(t.defined() && t.dim() == 1 && t.scalar_type() == torch::kUInt8 && t.is_contiguous(), what,
            " must be a contiguous 1-D uint8 tensor");
}

}  // namespace

PackedLayout pack_layout(ZooModel& model, const Grouping& groups, Bytes alignment) {
  auto& layers = model.layers();
  validate_grouping(groups, layers.size(), "pipeline plan for " + model.name());
  std::vector<Bytes> spans;
  spans.reserve(layers.size());
  for (const auto& layer : layers) {
    Bytes span = 0;
    for (const auto& t : layer.tensors) span = align_up(span + static_cast<Bytes>(t.nbytes()), kTensorAlignment);
    spans.push_back(span);
  }
  PackedLayout packed;
  packed.layout = make_memory_layout(spans, groups, alignment);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Bytes offset = packed.layout.layer_offset[i];
    for (const auto& t : layers[i].tensors) {
      PSW_CHECK(t.is_contiguous(), "tensor of layer ", layers[i].name, " is not contiguous");
      packed.tensors.push_back({i, offset, static_cast<Bytes>(t.nbytes())});
      offset = align_up(offset + static_cast<Bytes>(t.nbytes()), kTensorAlignment);
    }
  }
  return packed;
}

namespace {

// Each layer's name and bytes; with `floating`, the bytes its floating-point tensors would take
// in that dtype (integer tensors as they are).
LayerSignature layer_signature(ZooModel& model, std::optional<torch::ScalarType> floating = std::nullopt) {
  LayerSignature signature;
  for (const auto& layer : model.layers()) {
    Bytes bytes = 0;
    for (const torch::Tensor& t : layer.tensors) {
      const auto element = floating && t.is_floating_point() ? c10::elementSize(*floating) : t.element_size();
      bytes += static_cast<Bytes>(t.numel()) * static_cast<Bytes>(element);
    }
    signature.emplace_back(layer.name, bytes);
  }
  return signature;
}

}  // namespace

std::uint64_t layer_fingerprint(ZooModel& model) { return psw::layer_fingerprint(layer_signature(model)); }

std::uint64_t layer_fingerprint(ZooModel& model, torch::ScalarType dtype) {
  return psw::layer_fingerprint(layer_signature(model, dtype));
}

SwitchPlan plan_for_model(ZooModel& model, Strategy strategy, Grouping groups, std::vector<bool> host_mapped) {
  return assemble_switch_plan(model.name(), layer_signature(model), strategy, std::move(groups), std::move(host_mapped));
}

ParameterStore ParameterStore::allocate(Backend& backend, Bytes bytes, bool pinned) {
  return ParameterStore(backend.allocate_host(bytes, pinned).zero_(), pinned);
}

ParameterStore ParameterStore::over(torch::Tensor host, bool pinned) {
  check_bytes_tensor(host, "a parameter store");
  return ParameterStore(std::move(host), pinned);
}

void ParameterStore::pack(ZooModel& model, const PackedLayout& layout) {
  PSW_CHECK(size() >= layout.layout.total_bytes, "a store of ", size(), " bytes for a layout of ",
            layout.layout.total_bytes);
  torch::NoGradGuard no_grad;
  host_.zero_();
  std::size_t k = 0;
  for (const auto& layer : model.layers()) {
    for (const auto& t : layer.tensors) {
      const auto& slot = layout.tensors.at(k++);
      view_bytes(host_, slot.offset, t).copy_(t.to(torch::kCPU));
    }
  }
  PSW_CHECK(k == layout.tensors.size(), "the layout has ", layout.tensors.size(), " tensors, the model ", k);
}

DeviceRegion DeviceRegion::allocate(Backend& backend, Bytes bytes) { return DeviceRegion(backend.allocate_device(bytes)); }

DeviceRegion DeviceRegion::over(torch::Tensor device) {
  check_bytes_tensor(device, "a device region");
  return DeviceRegion(std::move(device));
}

}  // namespace psw::exec
