#pragma once
// Helpers shared by the executor's host tests (tests/exec) and GPU tests (tests/exec_cuda).

#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "psw/common/config.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"

namespace psw::exec::testing_support {

// The grouping `strategy` gives `model` on the H200 profile (Fixed: the artifact's groups).
inline Grouping plan_for(const std::string& model, Strategy strategy) {
  const std::string root = PSW_SOURCE_DIR;
  const ModelProfile profile = load_model_profile(root + "/configs/models/" + model + ".yaml");
  if (strategy == Strategy::Fixed) {
    return load_fixed_groups(root + "/configs/plans/" + model + "-artifact.yaml", profile);
  }
  const HardwareProfile hw = load_hardware_profile(root + "/configs/hardware/h200-pcie5.yaml");
  return make_plan(strategy, make_switch_costs(profile, hw, Task::Inference)).groups;
}

// max |a - b| / max |b|, in float64 on the CPU.
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const auto a64 = a.to(torch::kCPU, torch::kFloat64);
  const auto b64 = b.to(torch::kCPU, torch::kFloat64);
  const double diff = (a64 - b64).abs().max().item<double>();
  const double scale = b64.abs().max().item<double>();
  return diff / std::max(scale, 1e-30);
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

}  // namespace psw::exec::testing_support
