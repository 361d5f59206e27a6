#pragma once
// The two memories a switch moves parameters between, owned apart from the engine that uses
// them (DESIGN.md §5), so that the runtime's memory daemon can own them for every worker:
//
//   ParameterStore  one model's parameters packed by a plan's layout in host memory: private
//                   to this process (allocated by the backend), or over a shared segment that
//                   several processes map (the daemon packs it once; workers only read it).
//   DeviceRegion    the device memory the parameters land in: allocated here, or imported from
//                   another process (CUDA IPC on `cuda`, a shared segment on `host`).
//
// Both are views of uint8 tensors whose storage someone keeps alive: the backend's allocator
// for the private kind, the owner of the shared memory for the imported kind.

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "psw/common/plan.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec {

// Where every tensor of a model lives in its packed form: the same offsets on the host and on
// the device (Note [Parameter binding] in pipeline.hpp).
struct PackedLayout {
  MemoryLayout layout;
  struct Tensor {
    std::size_t layer;
    Bytes offset;
    Bytes bytes;
  };
  std::vector<Tensor> tensors;  // the layers' tensors in order
};

// The layout of `model`'s tensors (each 16-byte aligned, layers back to back) by `groups`.
PackedLayout pack_layout(ZooModel& model, const Grouping& groups, Bytes alignment = 512);

// Note [Layer fingerprint] (plan.hpp) of the live model: the same hash as its profile's.
std::uint64_t layer_fingerprint(ZooModel& model);
// The fingerprint the model would have in `dtype`: its floating-point tensors at that dtype's
// element size (a plan made for the model in another dtype is told apart by it).
std::uint64_t layer_fingerprint(ZooModel& model, torch::ScalarType dtype);
// A SwitchPlan for `model` with the given groups (common's assemble_switch_plan, from the
// live model's layers); for tests and for callers that hold a grouping.
SwitchPlan plan_for_model(ZooModel& model, Strategy strategy, Grouping groups, std::vector<bool> host_mapped = {});

class ParameterStore {
 public:
  // Host memory of `bytes` from the backend, private to this process (pinned unless asked).
  static ParameterStore allocate(Backend& backend, Bytes bytes, bool pinned);
  // Over memory that outlives the store (a shared segment); `host` is uint8, 1-D.
  static ParameterStore over(torch::Tensor host, bool pinned);

  // Copies the model's current tensor values into their offsets (zero between them).
  void pack(ZooModel& model, const PackedLayout& layout);

  const torch::Tensor& bytes() const { return host_; }
  Bytes size() const { return static_cast<Bytes>(host_.numel()); }
  bool pinned() const { return pinned_; }

 private:
  ParameterStore(torch::Tensor host, bool pinned) : host_(std::move(host)), pinned_(pinned) {}
  torch::Tensor host_;
  bool pinned_ = true;
};

class DeviceRegion {
 public:
  static DeviceRegion allocate(Backend& backend, Bytes bytes);
  // Over device memory that outlives the region (imported from the memory daemon).
  static DeviceRegion over(torch::Tensor device);

  const torch::Tensor& bytes() const { return device_; }
  Bytes size() const { return static_cast<Bytes>(device_.numel()); }

 private:
  explicit DeviceRegion(torch::Tensor device) : device_(std::move(device)) {}
  torch::Tensor device_;
};

}  // namespace psw::exec
