#pragma once
// Helpers shared by the executor's host tests (tests/exec) and GPU tests (tests/exec_cuda).

#include <algorithm>
#include <string>

#include <torch/torch.h>

#include "psw/common/config.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"

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

}  // namespace psw::exec::testing_support
