#pragma once
// What the controller's tests share (host and cuda): a serve config in a fresh folder, a
// controller over psw-exec, requests of zoo tensors, outputs back as tensors.
#include <gtest/gtest.h>
#include <unistd.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/profile_paths.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/common/server_policy.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/profiler.hpp"
#include "psw/runtime/server/controller.hpp"

namespace psw::runtime::test_support {

// A serve config in a fresh folder; `body` is appended (models:, training:). Profiles from
// `profiles` (default: the shipped H200 ones).
inline ServeConfig write_config(const std::string& name, const std::string& body, std::filesystem::path profiles = {}) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("psw-controller-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string root = PSW_SOURCE_DIR;
  if (profiles.empty()) profiles = root + "/configs/models/h200";
  std::ofstream(dir / "serve.yaml") << "hardware: " << root << "/configs/hardware/h200-pcie5.yaml\n"
                                    << "profiles: " << profiles.string() << "\n"
                                    << body;
  return load_serve_config(dir / "serve.yaml");
}

// tests/exec/make_torchscript.py's TorchScript files (made with python3-torch, as a user exports
// a model) in a fresh folder named for `name`; a test failure if they cannot be made.
inline std::filesystem::path make_torchscript_files(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-" + name + "-" + std::to_string(::getpid()));
  // CI's python with Debian's python3-torch; on a GPU host the one that holds PyTorch
  // (scripts/gpu-build.sh sets PSW_PYTHON).
  const char* python = std::getenv("PSW_PYTHON");
  const std::string command = std::string(python != nullptr ? python : "/usr/bin/python3") + " " +
                              std::string(PSW_SOURCE_DIR) + "/tests/exec/make_torchscript.py " + dir.string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command << " (scripts/setup.sh installs python3-torch)";
  return dir;
}

// Note [Decision log]: every controller a test starts logs its decisions, and when the test is
// done with it (the controller shut down) the log must replay through the scheduling policy
// without a difference: whatever the test did (faults, kills, preemptions), the server decided
// what the policy decides.
// A test that failed prints what the server did: its log and the last of its decisions, so
// that a failure seen once on CI's loaded cores can be read afterwards (a flaky count of
// preemptions, 2026-12-05, left nothing to read).
struct ReplayedShutdown {
  std::filesystem::path decisions;
  std::shared_ptr<std::vector<std::string>> log;
  void operator()(Controller* controller) const {
    delete controller;
    if (decisions.empty()) return;
    const DecisionReplay replay = replay_decision_file(decisions);
    EXPECT_TRUE(replay.identical) << describe_difference(replay);
    EXPECT_GT(replay.events, 0) << decisions;
    if (::testing::Test::HasFailure()) print_server_record();
    std::filesystem::remove(decisions);
  }
  void print_server_record() const {
    std::fprintf(stderr, "--- the server's log:\n");
    if (log) {
      for (const std::string& line : *log) std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::ifstream in(decisions);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
    constexpr std::size_t kLast = 60;
    std::fprintf(stderr, "--- its last %zu of %zu decisions (%s):\n", std::min(kLast, lines.size()), lines.size(),
                 decisions.c_str());
    for (std::size_t i = lines.size() > kLast ? lines.size() - kLast : 0; i < lines.size(); ++i) {
      std::fprintf(stderr, "%s\n", lines[i].c_str());
    }
  }
};
using ControllerUnderTest = std::unique_ptr<Controller, ReplayedShutdown>;

inline std::filesystem::path fresh_decisions_path() {
  static int count = 0;
  return std::filesystem::temp_directory_path() /
         ("psw-decisions-" + std::to_string(::getpid()) + "-" + std::to_string(++count) + ".jsonl");
}

// `regions`: mapped by every worker at its start (ControllerOptions::regions).
inline ControllerUnderTest start(const ServeConfig& config, const std::string& backend = "host",
                                 std::vector<BorrowedBytes> regions = {}) {
  ControllerOptions options;
  options.config = config;
  options.backend = backend;
  options.regions = std::move(regions);
  options.exec_path = PSW_EXEC_PATH;
  options.decisions = fresh_decisions_path();
  // PSW_TEST_LOG=1 prints the controller's log (workers started, replaced, ...) as it comes;
  // otherwise it is kept, and printed if the test fails (ReplayedShutdown).
  auto log = std::make_shared<std::vector<std::string>>();
  auto log_mutex = std::make_shared<std::mutex>();
  if (std::getenv("PSW_TEST_LOG")) {
    options.log = [](const std::string& l) { std::fprintf(stderr, "%s\n", l.c_str()); };
  } else {
    options.log = [log, log_mutex](const std::string& l) {
      std::lock_guard<std::mutex> lock(*log_mutex);
      log->push_back(l);
    };
  }
  ReplayedShutdown deleter{options.decisions, log};
  try {
    return ControllerUnderTest(new Controller(options), deleter);
  } catch (...) {
    std::filesystem::remove(options.decisions);
    throw;
  }
}

// A served model's profile for the host's tests: its layers from the live model on `input`,
// times made up (only the grouping depends on them), in DIR/NAME.yaml (fp32) or
// DIR/DTYPE/NAME.yaml as psw profile writes it.
inline void write_made_up_profile(const std::filesystem::path& dir, exec::ZooModel& model, const torch::Tensor& input) {
  const std::filesystem::path path = profile_path_in(dir, model.name(), exec::zoo_dtype_name(model.dtype()));
  std::filesystem::create_directories(path.parent_path());
  ModelProfile profile = exec::profile_skeleton(model, input);
  for (auto& layer : profile.layers) layer.forward_time = microseconds(20);
  std::ofstream(path) << to_yaml(profile);
}

// A decoder's served profile (write_made_up_profile) in a fresh folder, beside BERT-base's
// H200 one and BERT-Tiny's analytic one.
inline std::filesystem::path decoder_profiles(const std::string& name, exec::ZooModel& decoder, const torch::Tensor& prompt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-controller-" + name + "-profiles-" + std::to_string(::getpid()));
  write_made_up_profile(dir, decoder, prompt);
  std::filesystem::copy_file(std::string(PSW_SOURCE_DIR) + "/configs/models/h200/bert_base.yaml", dir / "bert_base.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(std::string(PSW_SOURCE_DIR) + "/configs/models/bert_tiny.yaml", dir / "bert_tiny.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

inline const char* datatype_of(torch::ScalarType type) {
  switch (type) {
    case torch::kInt64: return "INT64";
    case torch::kBFloat16: return "BF16";
    case torch::kFloat16: return "FP16";
    default: return "FP32";
  }
}

inline TensorData tensor_of(const std::string& name, const torch::Tensor& t) {
  TensorData d;
  d.name = name;
  d.datatype = datatype_of(t.scalar_type());
  d.shape.assign(t.sizes().begin(), t.sizes().end());
  d.bytes.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return d;
}

inline InferRequest request_for(const ServedModelConfig& model, const torch::Tensor& input) {
  InferRequest r;
  r.model = model.name;
  r.id = "test";
  r.inputs.push_back(tensor_of(served_model_info(model).inputs.front().name, input));
  return r;
}

inline InferRequest request_for(const std::string& model, const torch::Tensor& input) {
  ServedModelConfig built_in;
  built_in.name = model;
  return request_for(built_in, input);
}

// The response's first output as a tensor of `datatype` (FP32 unless said), in fp32.
inline torch::Tensor output_of(const InferResponse& r, const std::string& datatype = "FP32") {
  const TensorData& out = r.outputs.at(0);
  EXPECT_EQ(out.datatype, datatype);
  const torch::ScalarType type = datatype == "BF16" ? torch::kBFloat16 : datatype == "FP16" ? torch::kFloat16 : torch::kFloat32;
  torch::Tensor t = torch::empty(out.shape, type);
  EXPECT_EQ(out.bytes.size(), t.nbytes());
  if (out.bytes.size() == t.nbytes()) std::memcpy(t.data_ptr(), out.bytes.data(), t.nbytes());
  return t.to(torch::kFloat32);
}

inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor a64 = a.to(torch::kCPU, torch::kFloat64);
  const torch::Tensor b64 = b.to(torch::kCPU, torch::kFloat64);
  return (a64 - b64).abs().max().item<double>() / std::max(1e-30, b64.abs().max().item<double>());
}

// The groups with parameters of `name`'s plan under `config` (the daemon and the workers plan
// the same way: served_models.hpp): under no-ipc-optimization, the handles a switch opens.
inline std::uint64_t groups_with_parameters(const ServeConfig& config, const std::string& name) {
  const ServedModelConfig& m = config.models.at(static_cast<std::size_t>(config.model_index(name)));
  const SwitchPlan plan = make_switch_plan(load_model_profile(config.profiles / (name + ".yaml")),
                                           load_hardware_profile(config.hardware), Task::Inference,
                                           grouping_strategy(config.mechanism, m.strategy), Placement::Copy,
                                           traits(config.mechanism).host_memory);
  auto model = exec::make_model(name, 0);
  std::uint64_t count = 0;
  for (const Bytes span : exec::pack_layout(*model, plan.groups).layout.group_span) count += span > 0 ? 1 : 0;
  return count;
}

template <typename Predicate>
bool eventually(Predicate&& p, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return p();
}

}  // namespace psw::runtime::test_support
