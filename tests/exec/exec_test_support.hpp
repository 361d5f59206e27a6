#pragma once
// Helpers shared by the executor's host tests (tests/exec) and GPU tests (tests/exec_cuda).

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "psw/common/config.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/safetensors.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec::testing_support {

// The analytic profile of `model` in `dtype` (fp32, bf16, fp16): configs/models/MODEL.yaml
// for fp32, configs/models/DTYPE/MODEL.yaml for the others (scripts/gen_model_profiles.py).
inline ModelProfile analytic_profile(const std::string& model, const std::string& dtype = "fp32") {
  const std::string root = PSW_SOURCE_DIR;
  return load_model_profile(root + "/configs/models/" + (dtype == "fp32" ? "" : dtype + "/") + model + ".yaml");
}

// The grouping `strategy` gives `model` in `dtype` on the H200 profile (Fixed: the artifact's
// groups).
inline Grouping plan_for(const std::string& model, Strategy strategy, const std::string& dtype = "fp32") {
  const std::string root = PSW_SOURCE_DIR;
  const ModelProfile profile = analytic_profile(model, dtype);
  if (strategy == Strategy::Fixed) {
    return load_fixed_groups(root + "/configs/plans/" + model + "-artifact.yaml", profile);
  }
  const HardwareProfile hw = load_hardware_profile(root + "/configs/hardware/h200-pcie5.yaml");
  return make_plan(strategy, make_switch_costs(profile, hw, Task::Inference)).groups;
}

// Tensor `name` of a reference file (an F32 output or an I64 input), on the CPU.
inline torch::Tensor read_tensor(const std::filesystem::path& file, const std::string& name) {
  const SafetensorsHeader header = read_safetensors_header(file);
  const SafetensorsEntry* entry = header.find(name);
  if (entry == nullptr || (entry->dtype != TensorDtype::F32 && entry->dtype != TensorDtype::I64)) {
    throw std::runtime_error(file.string() + " has no F32 or I64 tensor " + name);
  }
  torch::Tensor t = torch::empty(entry->shape, entry->dtype == TensorDtype::F32 ? torch::kFloat32 : torch::kInt64);
  read_safetensors_tensor(file, header, *entry, t.data_ptr());
  return t;
}

// max |a - b| / max |b|, in float64 on the CPU.
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const auto a64 = a.to(torch::kCPU, torch::kFloat64);
  const auto b64 = b.to(torch::kCPU, torch::kFloat64);
  const double diff = (a64 - b64).abs().max().item<double>();
  const double scale = b64.abs().max().item<double>();
  return diff / std::max(scale, 1e-30);
}

// The relative L2 error ||y - reference|| / ||reference|| (in float64 on the CPU): how far a
// model's output in bf16 or fp16 is from the fp32 model's (the zoo's dtype tests).
inline double relative_l2(const torch::Tensor& y, const torch::Tensor& reference) {
  const auto y64 = y.to(torch::kCPU, torch::kFloat64);
  const auto r64 = reference.to(torch::kCPU, torch::kFloat64);
  return (y64 - r64).norm().item<double>() / std::max(r64.norm().item<double>(), 1e-30);
}

// The bound on relative_l2 between a zoo model's output in `dtype` ("bf16", "fp16") and the
// fp32 model's of the same seed on the same input (README, "Data types"). bf16 keeps 8
// significant bits, so every layer's output is off by up to 2^-9 relative and the errors
// accumulate over the depth; measured on the CPU (LibTorch 1.13, tests/exec/test_zoo_dtype.cpp,
// small inputs): ResNet-152 0.0071, Inception-v3 0.0098, BERT-base 0.016: the bound is 3x the
// largest. fp16 keeps 11 bits, 8x finer; its bound, 0.02, is for the GPU (LibTorch 1.13's CPU
// kernels lack Half), where the fp32 reference itself runs cuDNN's convolutions in TF32 (11
// bits). A broken conversion (bits reinterpreted, a tensor left unconverted or zeroed) gives
// errors of order 1, or fails the dtype checks before.
inline double dtype_tolerance(const std::string& dtype) {
  if (dtype == "bf16") return 0.05;
  if (dtype == "fp16") return 0.02;
  ADD_FAILURE() << "no tolerance for dtype '" << dtype << "'";
  return 0.0;
}

// On the CPU (tests/exec/test_zoo_dtype.cpp) the bound depends on the CPU: LibTorch 1.13's bf16
// convolutions on a CPU with AVX2 only (no AVX-512) gave ResNet-152 0.038 and Inception-v3 0.071
// (5-7x the figures above, measured where AVX-512 was available; BERT-base, without
// convolutions, 0.017 on both), so the CPU's bf16 bound is 2x the largest of those; still far
// below a broken conversion's errors of order 1.
inline double dtype_tolerance_on_cpu(const std::string& dtype) {
  return dtype == "bf16" ? 0.15 : dtype_tolerance(dtype);
}

// Note [Measured trace]: every group's compute starts after its copies end, copies run back
// to back in group order, and compute only moves forward.
inline void expect_causal_trace(const Timeline& t, const Grouping& groups) {
  ASSERT_EQ(t.groups.size(), groups.size());
  Duration copy_end = Duration::zero();
  Duration compute_end = Duration::zero();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const GroupTiming& gt = t.groups[g];
    EXPECT_EQ(gt.group, groups[g]);
    EXPECT_GE(gt.transfer_start, copy_end) << g;
    EXPECT_GE(gt.transfer_end, gt.transfer_start) << g;
    EXPECT_GE(gt.compute_start, compute_end) << g;
    EXPECT_GE(gt.compute_end, gt.compute_start) << g;
    if (gt.bytes > 0 && gt.compute_end > gt.compute_start) EXPECT_GE(gt.compute_start, gt.transfer_end) << g;
    copy_end = gt.transfer_end;
    compute_end = gt.compute_end;
  }
  EXPECT_GT(t.total, Duration::zero());
  EXPECT_LE(t.startup, t.total);
}

// Full-size inputs make CPU forwards slow; the properties the host tests check hold at any
// size the architectures accept, so they use the smallest (the layers and bytes are the same).
inline torch::Tensor small_input(const ZooModel& model, std::uint64_t seed) {
  const torch::Tensor x = model.example_input(1, seed);
  if (x.dim() == 2) return x.narrow(1, 0, 8).contiguous();  // token ids (BERT-base, BERT-Tiny)
  const std::int64_t size = model.name() == "inception_v3" ? 75 : 64;
  return x.narrow(2, 0, size).narrow(3, 0, size).contiguous();
}

struct Event {
  enum class Kind { BeginSwitch, Copy, Wait, Mark, JoinCopies };
  Kind kind;
  std::size_t value;  // the group (Copy, Wait), the mark slot (Mark), the group count (BeginSwitch)
};

// Forwards allocation and fills to the host backend; records the switch's calls and runs each
// group's copies only when that group is waited for (a copy stream that is as late as allowed).
class RecordingBackend : public Backend {
 public:
  RecordingBackend() : inner_(make_host_backend()) {}

  std::string name() const override { return "recording"; }
  torch::Device device() const override { return inner_->device(); }
  torch::Tensor allocate_device(Bytes bytes) override { return inner_->allocate_device(bytes); }
  torch::Tensor allocate_host(Bytes bytes, bool pinned) override { return inner_->allocate_host(bytes, pinned); }
  torch::Tensor map_host(const torch::Tensor& host) override { return inner_->map_host(host); }
  void begin_switch(std::size_t num_groups) override {
    pending_.clear();
    events.push_back({Event::Kind::BeginSwitch, num_groups});
  }
  void copy_group(std::size_t group, const torch::Tensor& dst, const torch::Tensor& src) override {
    pending_[group].emplace_back(dst, src);
    events.push_back({Event::Kind::Copy, group});
  }
  void wait_group(std::size_t group) override {
    for (auto& [dst, src] : pending_[group]) dst.copy_(src);
    pending_.erase(group);
    events.push_back({Event::Kind::Wait, group});
  }
  void join_copies() override {
    for (auto& [group, copies] : pending_) {
      for (auto& [dst, src] : copies) dst.copy_(src);
    }
    pending_.clear();
    events.push_back({Event::Kind::JoinCopies, 0});
  }
  void synchronize() override {}
  void fill(const torch::Tensor& dst, std::uint8_t value) override { inner_->fill(dst, value); }
  void copy_to_device(const torch::Tensor& dst, const void* src) override { inner_->copy_to_device(dst, src); }
  std::string device_description() const override { return "recording over " + inner_->device_description(); }
  Duration time_copy(Bytes, bool, int, int) override { return Duration::zero(); }
  Duration time_mapped_read(Bytes, int) override { return Duration::zero(); }
  void mark(std::size_t slot) override { events.push_back({Event::Kind::Mark, slot}); }
  void mark_copy(std::size_t) override {}
  Duration elapsed(std::size_t, std::size_t) override { return Duration::zero(); }

  std::vector<Event> events;

 private:
  std::unique_ptr<Backend> inner_;
  std::map<std::size_t, std::vector<std::pair<torch::Tensor, torch::Tensor>>> pending_;
};

}  // namespace psw::exec::testing_support
