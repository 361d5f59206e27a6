#pragma once
// What the controller's tests share (host and cuda): a serve config in a fresh folder, a
// controller over psw-exec, requests of zoo tensors, outputs back as tensors.
#include <gtest/gtest.h>
#include <unistd.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "psw/common/serve_config.hpp"
#include "psw/runtime/controller.hpp"

namespace psw::runtime::test_support {

// A serve config in a fresh folder; `extra` is appended (models:, training:).
inline ServeConfig write_config(const std::string& name, const std::string& body) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("psw-controller-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string root = PSW_SOURCE_DIR;
  std::ofstream(dir / "serve.yaml") << "hardware: " << root << "/configs/hardware/h200-pcie5.yaml\n"
                                    << "profiles: " << root << "/configs/models/h200\n"
                                    << body;
  return load_serve_config(dir / "serve.yaml");
}

inline std::unique_ptr<Controller> start(const ServeConfig& config, const std::string& backend = "host") {
  ControllerOptions options;
  options.config = config;
  options.backend = backend;
  options.exec_path = PSW_EXEC_PATH;
  return std::make_unique<Controller>(options);
}

inline TensorData tensor_of(const std::string& name, const torch::Tensor& t) {
  TensorData d;
  d.name = name;
  d.datatype = t.scalar_type() == torch::kInt64 ? "INT64" : "FP32";
  d.shape.assign(t.sizes().begin(), t.sizes().end());
  d.bytes.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return d;
}

inline InferRequest request_for(const std::string& model, const torch::Tensor& input) {
  InferRequest r;
  r.model = model;
  r.id = "test";
  r.inputs.push_back(tensor_of(zoo_model_info(model).inputs.front().name, input));
  return r;
}

inline torch::Tensor output_of(const InferResponse& r) {
  const TensorData& out = r.outputs.at(0);
  EXPECT_EQ(out.datatype, "FP32");
  torch::Tensor t = torch::empty(out.shape, torch::kFloat32);
  EXPECT_EQ(out.bytes.size(), t.nbytes());
  std::memcpy(t.data_ptr(), out.bytes.data(), t.nbytes());
  return t;
}

inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor a64 = a.to(torch::kCPU, torch::kFloat64);
  const torch::Tensor b64 = b.to(torch::kCPU, torch::kFloat64);
  return (a64 - b64).abs().max().item<double>() / std::max(1e-30, b64.abs().max().item<double>());
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
