// A user's model compiled ahead of time by AOTInductor (Note [AOTInductor packages]) on the GPU
// (label gpu): loaded as a ZooModel, reading the constants where the engine binds them, and
// switched through its captured graph. The packages are made here with the GPU host's PyTorch
// (tests/exec_cuda/make_aoti_package.py), as a user compiles one.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "../common/input_error.hpp"
#include "../support/aoti_package_files.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/graph_switch.hpp"
#include "psw/exec/torchscript.hpp"

#if __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#define PSW_TEST_HAS_AOTI 1
#endif

namespace psw::exec {
namespace {

namespace fs = std::filesystem;
using test_support::input_error_of;

const fs::path& package_dir() { return psw::test_support::aoti_package_dir(); }

const InputSpec kImage{{4, 3, 16, 16}, torch::kFloat32};
const torch::Device kCuda(torch::kCUDA, 0);

// name -> tensor of every layer tensor, "layer.tensor".
std::map<std::string, torch::Tensor> tensors_of(ZooModel& model) {
  std::map<std::string, torch::Tensor> out;
  for (ZooLayer& layer : model.layers()) {
    for (std::size_t t = 0; t < layer.tensors.size(); ++t) out[layer.name + "." + layer.tensor_names[t]] = layer.tensors[t];
  }
  return out;
}

// The package's constants as AOTInductor lists them, for a failure's message.
std::string constants_listed(const fs::path& file) {
#ifdef PSW_TEST_HAS_AOTI
  torch::inductor::AOTIModelPackageLoader loader(file.string(), "model", true, 1, 0);
  auto* runner = loader.get_runner();
  const auto extracted = runner->extract_constants_map(false);
  std::string out = "the package's constants: ";
  for (const auto& [name, fqn] : runner->getConstantNamesToOriginalFQNs()) {
    out += name + " (" + fqn + (extracted.count(fqn) != 0 ? ", extracted" : "") + "); ";
  }
  return out;
#else
  return file.string() + ": no AOTInductor in this LibTorch";
#endif
}

TEST(CudaAotiPackage, APackageHasItsModulesAsLayersAndComputesAsItsTorchScriptTwin) {
  ASSERT_TRUE(aoti_packages_supported());
  SCOPED_TRACE(constants_listed(package_dir() / "cnn.pt2"));
  auto package = load_aoti_package(package_dir() / "cnn.pt2", {kImage}, kCuda);
  auto twin = load_torchscript(package_dir() / "cnn.pt", kImage);
  EXPECT_EQ(package->name(), "cnn");
  EXPECT_EQ(package->dtype(), torch::kFloat32);
  for (const auto& [name, t] : tensors_of(*package)) EXPECT_TRUE(t.is_cpu()) << name << ": built on the CPU, as every model";
  package->to(kCuda);
  twin->to(kCuda);
  const auto ours = tensors_of(*package);
  const auto theirs = tensors_of(*twin);
  // The package exposes at least the conv's and the linear's weights (Note [AOTInductor packages]);
  // whatever it exposes is the module's tensor of that name.
  for (const char* name : {"0.weight", "5.weight"}) ASSERT_EQ(ours.count(name), 1u) << name;
  for (const auto& [name, t] : ours) {
    ASSERT_EQ(theirs.count(name), 1u) << name << " is not the module's";
    EXPECT_TRUE(t.is_cuda()) << name;
    EXPECT_TRUE(torch::equal(t, theirs.at(name))) << name;
  }
  const torch::Tensor input = package->example_input(4, 1).to(kCuda);
  const torch::Tensor out = package->forward(input).clone();
  EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{4, 5}));
  EXPECT_TRUE(torch::allclose(out, twin->forward(input), 1e-4, 1e-5));

  // The package reads our tensors: changed in place (the twin's alike), then moved elsewhere.
  torch::NoGradGuard no_grad;  // the twin's are parameters
  torch::Tensor fc_weight = ours.at("5.weight");
  const torch::Tensor weight_values = fc_weight.clone();
  fc_weight.mul_(-0.5);
  theirs.at("5.weight").mul_(-0.5);
  const torch::Tensor changed = package->forward(input).clone();
  EXPECT_FALSE(torch::allclose(changed, out, 1e-4, 1e-5));
  EXPECT_TRUE(torch::allclose(changed, twin->forward(input), 1e-4, 1e-5));
  fc_weight.set_data(weight_values.clone());
  EXPECT_TRUE(torch::equal(package->forward(input), out));
}

TEST(CudaAotiPackage, APackageOfTwoInputsTakesThemPacked) {
  const std::vector<InputSpec> inputs{{{4, 6}, torch::kFloat32}, {{4, 4}, torch::kInt64}};
  SCOPED_TRACE(constants_listed(package_dir() / "two_inputs.pt2"));
  auto package = load_aoti_package(package_dir() / "two_inputs.pt2", inputs, kCuda);
  package->to(kCuda);
  auto twin = load_torchscript(package_dir() / "two_inputs.pt", inputs);
  twin->to(kCuda);
  const torch::Tensor features = torch::randn({4, 6}).to(kCuda);
  const torch::Tensor ids = torch::randint(0, 512, {4, 4}).to(kCuda);
  const torch::Tensor packed = pack_inputs({features, ids});
  EXPECT_TRUE(torch::allclose(package->forward(packed), twin->forward(packed), 1e-5, 1e-6));
  EXPECT_NE(input_error_of([&] { package->forward(features); }).find("takes them packed"), std::string::npos);
}

TEST(CudaAotiPackage, APackageSwitchesThroughItsCapturedGraphBitForBit) {
  GraphSwitchSpec spec;
  spec.model = (package_dir() / "cnn.pt2").string();
  spec.inputs = {kImage};
  spec.hardware = load_hardware_profile(std::string(PSW_SOURCE_DIR) + "/configs/hardware/h200-pcie5.yaml");
  spec.repeat = 10;
  spec.warmup = 2;
  spec.profile_repeat = 5;
  const GraphSwitchReport r = run_graph_switch_benchmark(spec);
  EXPECT_TRUE(r.captured);
  EXPECT_EQ(r.outputs_checked, 10u);
  EXPECT_EQ(r.outputs_equal, r.outputs_checked);
  EXPECT_GE(r.parameters_used, 2u);  // the weights the package exposes (Note [AOTInductor packages])
  EXPECT_GT(r.bound.ms(), 0.0);
}

TEST(CudaAotiPackage, WhatIsNotAPackageForThisDeviceIsOneClearError) {
  const fs::path junk = fs::temp_directory_path() / "psw-junk.pt2";
  std::ofstream(junk) << "not a zip";
  EXPECT_NE(input_error_of([&] { load_aoti_package(junk, {kImage}, kCuda); }).find("not an AOTInductor package"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { load_aoti_package(package_dir() / "missing.pt2", {kImage}, kCuda); }).find("no such file"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { load_aoti_package(package_dir() / "cnn-cpu.pt2", {kImage}, kCuda); })
                .find("compiled for cpu"),
            std::string::npos);
  auto package = load_aoti_package(package_dir() / "cnn.pt2", {kImage}, kCuda);
  EXPECT_NE(input_error_of([&] { package->forward(package->example_input(4, 1).to(kCuda)); }).find("move the model there"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { package->to(torch::Device(torch::kMeta)); }).find("runs where it was loaded"),
            std::string::npos);
  package->to(kCuda);
  const std::string wrong_batch = input_error_of([&] { package->forward(package->example_input(8, 1).to(kCuda)); });
  EXPECT_NE(wrong_batch.find("refused the input"), std::string::npos) << wrong_batch;
  EXPECT_NE(input_error_of([&] { package->training_outputs(package->example_input(4, 1).to(kCuda), [](std::size_t) {}); })
                .find("no backward"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model((package_dir() / "cnn.pt2").string(), 0, torch::kBFloat16, {kImage}, kCuda); })
                .find("are Float, not BFloat16"),
            std::string::npos);
}

}  // namespace
}  // namespace psw::exec
