#pragma once
// SwitchCosts: everything the timeline evaluation needs to know about one switch,
// resolved from a model profile and a hardware profile: per-layer bytes and gated
// compute times, the link, and the per-group synchronisation cost.
//
// The planners, the simulator and the executor's prediction all consume this type, so
// that they cannot disagree about what a group costs.

#include <cstddef>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/units.hpp"

namespace psw {

enum class HostMemory { Pinned, Pageable };

class SwitchCosts {
 public:
  // Validates at construction: equal lengths, at least one layer, non-negative sizes and
  // times, positive bandwidth. Throws InputError otherwise.
  SwitchCosts(std::vector<Bytes> layer_bytes, std::vector<Duration> layer_compute,
              LinkCost link, Duration group_sync, Duration tail = Duration::zero(),
              Duration gpu_free_at = Duration::zero());

  std::size_t num_layers() const { return layer_bytes_.size(); }
  Bytes layer_bytes(std::size_t i) const { return layer_bytes_[i]; }
  Duration layer_compute(std::size_t i) const { return layer_compute_[i]; }

  // Bytes and compute of layers first..last (inclusive), O(1) from prefix sums.
  Bytes bytes(std::size_t first, std::size_t last) const {
    return bytes_prefix_[last + 1] - bytes_prefix_[first];
  }
  Duration compute(std::size_t first, std::size_t last) const {
    return compute_prefix_[last + 1] - compute_prefix_[first];
  }
  // One group's transfer: copy_fixed + ceil(bytes / bandwidth).
  Duration transfer_time(std::size_t first, std::size_t last) const {
    return link_.copy_time(bytes(first, last));
  }

  const LinkCost& link() const { return link_; }
  Duration group_sync() const { return group_sync_; }
  // Work after the last group's compute that needs every parameter resident already
  // (the backward pass of a training iteration); zero for inference.
  Duration tail() const { return tail_; }
  // When the GPU finishes the old task; the first group's compute cannot start earlier.
  Duration gpu_free_at() const { return gpu_free_at_; }

  Bytes total_bytes() const { return bytes_prefix_.back(); }
  Duration total_compute() const { return compute_prefix_.back(); }
  // The ready model: the same work with every parameter already resident.
  Duration ready_time() const { return total_compute() + tail_; }
  // The same switch with every layer's compute times `factor` (rounded to the nanosecond) and
  // the bytes, link and sync as they are: a decoder's prefill of another prompt length (Note
  // [Prefill curve] in model_profile.hpp). The tail and gpu_free_at are kept.
  SwitchCosts with_compute_scaled(double factor) const;

 private:
  std::vector<Bytes> layer_bytes_;
  std::vector<Duration> layer_compute_;
  std::vector<Bytes> bytes_prefix_;
  std::vector<Duration> compute_prefix_;
  LinkCost link_;
  Duration group_sync_;
  Duration tail_;
  Duration gpu_free_at_;
};

// Per-layer forward (gated) time of `layer` on `hardware`: the measured time for a
// measured profile, the roofline of the compute model for an analytic one. Layers that
// do not run in the task (training_only in inference) take zero time.
Duration forward_time(const LayerProfile& layer, const ModelProfile& model,
                      const HardwareProfile& hardware, Task task);
Duration backward_time(const LayerProfile& layer, const ModelProfile& model,
                       const HardwareProfile& hardware);

// Whether `model` can be costed for training: an estimated profile always (the roofline gives
// backward times), a measured one where every layer has a backward time (psw profile --train).
bool has_training_times(const ModelProfile& model);

// `host_mapped` (empty, or one flag per layer): layers read in place from pinned host memory
// (Note [Placement], placement.hpp) cross PCIe as no group's bytes; their compute grows by
// hardware.mapped's cost of their host_read_bytes. InputError when a mapped layer has no
// host_read_bytes, the hardware no mapped link, or the memory is pageable.
SwitchCosts make_switch_costs(const ModelProfile& model, const HardwareProfile& hardware,
                              Task task, HostMemory memory = HostMemory::Pinned,
                              const std::vector<bool>& host_mapped = {});

}  // namespace psw
