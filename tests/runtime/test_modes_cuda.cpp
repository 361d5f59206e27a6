// The server's mechanisms on the GPU (label gpu): `psw serve`'s controller with its memory
// daemon and workers on the cuda backend, one request per model per mechanism, each output
// compared with a plain run of the same model on the same GPU. For no-ipc-optimization the
// workers must also have opened one CUDA IPC handle per group with parameters per request
// (Note [Per-group handles]); for unified-memory the models live in managed memory (Note
// [Managed memory]). A training job runs and is preempted, as in the host tests.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "psw/common/config.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/runtime/server/controller.hpp"
#include "controller_test_support.hpp"

namespace psw::runtime {
namespace {

using namespace std::chrono_literals;
using namespace test_support;

// The plain run: the zoo model on the GPU, its own parameters, an eager forward.
torch::Tensor plain_run(const std::string& name, const torch::Tensor& input) {
  auto model = exec::make_model(name, 0);
  model->to(torch::Device(torch::kCUDA, 0));
  torch::NoGradGuard no_grad;
  return model->forward(input.to(torch::Device(torch::kCUDA, 0))).to(torch::kCPU);
}

class CudaServeModes : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaServeModes, ServesEveryModelAsAPlainRunBesideTraining) {
  const std::string mechanism = GetParam();
  const ServeConfig config = write_config(mechanism, "mechanism: " + mechanism + R"(
workers: 2
request_timeout_ms: 60000
max_tensor_bytes: 16777216
models:
  - name: resnet152
    batch: 8
  - name: inception_v3
    batch: 8
  - name: bert_base
    batch: 8
training:
  model: resnet152
  batch: 8
  input_size: 64
  seed: 1
  autostart: false
)");
  ControllerOptions options;
  options.config = config;
  options.backend = "cuda";
  options.exec_path = PSW_EXEC_PATH;
  Controller controller(options);
  controller.start_training("resnet152", 100);
  ASSERT_TRUE(eventually([&] { return controller.training_status("resnet152").running; }, 120s));
  const bool per_group = traits(config.mechanism).ipc_handle_per_group;
  std::uint64_t expected_opens = 0;
  int seed = 40;
  for (const std::string name : {"resnet152", "inception_v3", "bert_base"}) {
    auto probe = exec::make_model(name, 0);
    const torch::Tensor input = probe->example_input(8, seed++);
    const torch::Tensor served = output_of(controller.infer(request_for(name, input)));
    // Another process, the same GPU and kernels (cuDNN's TF32 convolutions in both): equal to
    // within the rounding of a different kernel schedule, not bit for bit.
    EXPECT_LT(relative_error(served, plain_run(name, input)), 1e-3) << mechanism << " " << name;
    if (per_group) expected_opens += groups_with_parameters(config, name);
    const std::vector<std::uint64_t> opens = controller.worker_group_opens();
    EXPECT_EQ(std::accumulate(opens.begin(), opens.end(), std::uint64_t{0}), expected_opens) << mechanism << " " << name;
  }
  const ControllerStats stats = controller.stats();
  EXPECT_EQ(stats.failed_requests, 0);
  EXPECT_EQ(stats.transfers, 3);
  EXPECT_EQ(stats.worker_restarts, 0);
  EXPECT_GE(stats.preemptions, 1);
  ASSERT_TRUE(eventually([&] { return controller.training_status("resnet152").stopped; }, 300s));
  EXPECT_EQ(controller.training_status("resnet152").completed_steps, 100);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, CudaServeModes,
                         ::testing::Values("pipeswitch", "no-optimization", "no-ipc-optimization", "unified-memory"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace psw::runtime
