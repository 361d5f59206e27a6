// Note [TorchScript models]: a user's TorchScript file (made here by Debian's python3-torch, as a
// user would export it) as a model the engine switches: its layers and tensors, the switched
// output equal to the module's own forward after the device copy was poisoned, tuple outputs, and
// the errors for files and inputs that do not fit.
#include <gtest/gtest.h>

#include <torch/script.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "exec_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/torchscript.hpp"
#include "../common/input_error.hpp"

namespace psw::exec {
namespace {

namespace fs = std::filesystem;
using test_support::input_error_of;

// The files of tests/exec/make_torchscript.py, made once per test binary.
const fs::path& torchscript_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("psw-torchscript-" + std::to_string(::getpid()));
    const std::string command = "/usr/bin/python3 " + std::string(PSW_SOURCE_DIR) + "/tests/exec/make_torchscript.py " +
                                d.string();
    if (std::system(command.c_str()) != 0) {
      throw std::runtime_error("could not make the TorchScript files (" + command +
                               "): scripts/setup.sh installs python3-torch");
    }
    return d;
  }();
  return dir;
}

const InputSpec kImage{{1, 3, 16, 16}, torch::kFloat32};

TEST(TorchScript, LayersAreTheSubmodulesThatOwnTensors) {
  auto model = load_torchscript(torchscript_dir() / "cnn.pt", kImage);
  EXPECT_EQ(model->name(), "cnn");
  EXPECT_EQ(model->dtype(), torch::kFloat32);
  const auto& layers = model->layers();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].name, "0");
  EXPECT_EQ(layers[0].kind, "Conv2d");
  EXPECT_EQ(layers[0].tensor_names, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(layers[1].kind, "BatchNorm2d");
  EXPECT_EQ(layers[1].tensor_names,
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(layers[2].name, "5");
  EXPECT_EQ(layers[2].tensors.at(0).sizes(), (std::vector<std::int64_t>{5, 8}));
}

TEST(TorchScript, SwitchedOutputEqualsTheModulesOwnAfterPoisoning) {
  auto model = load_torchscript(torchscript_dir() / "cnn.pt", kImage);
  torch::jit::Module reference = torch::jit::load((torchscript_dir() / "cnn.pt").string());
  reference.eval();
  const torch::Tensor input = model->example_input(4, 7);
  EXPECT_EQ(input.sizes(), (std::vector<std::int64_t>{4, 3, 16, 16}));
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = reference.forward({input}).toTensor();
  auto backend = make_host_backend();
  auto owned = make_private_pipeline(*backend, *model, Grouping{{0, 0}, {1, 2}});
  for (int repetition = 0; repetition < 2; ++repetition) {
    owned->engine->poison_device_parameters(static_cast<std::uint8_t>(0x3C + repetition));
    EXPECT_TRUE(torch::equal(owned->engine->switch_in_and_run(input), expected)) << "repetition " << repetition;
  }
  EXPECT_TRUE(torch::equal(owned->engine->run_resident(input), expected));
  std::vector<std::size_t> gated;
  model->forward(input, [&](std::size_t layer) { gated.push_back(layer); });
  EXPECT_EQ(gated, (std::vector<std::size_t>{0, 1, 2}));  // every layer, before the module runs
}

TEST(TorchScript, ATupleOutputGivesItsFirstTensor) {
  auto model = load_torchscript(torchscript_dir() / "tuple_out.pt", InputSpec{{2, 8}, torch::kFloat32});
  EXPECT_EQ(model->layers().at(0).name, "proj");
  EXPECT_EQ(model->forward(model->example_input(2, 1)).sizes(), (std::vector<std::int64_t>{2, 4}));
}

TEST(TorchScript, FilesAndInputsThatDoNotFitAreInputErrors) {
  const fs::path dir = torchscript_dir();
  EXPECT_NE(input_error_of([&] { load_torchscript(dir / "absent.pt", kImage); }).find("no such file"), std::string::npos);
  std::ofstream(dir / "not.pt") << "not a zip archive";
  EXPECT_NE(input_error_of([&] { load_torchscript(dir / "not.pt", kImage); }).find("not a TorchScript file"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { load_torchscript(dir / "no_params.pt", kImage); }).find("no parameters or buffers"),
            std::string::npos);
  auto model = load_torchscript(dir / "cnn.pt", kImage);
  EXPECT_NE(input_error_of([&] { model->forward(torch::zeros({1, 3, 17, 16})); })
                .find("the input is Float [1, 3, 17, 16]; it takes Float [1, 3, 16, 16] (any batch)"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { model->training_outputs(torch::zeros({1, 3, 16, 16}), [](std::size_t) {}); })
                .find("inference only"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_input_shape("8,3,,224"); }).find("positive integers"), std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_input_shape("8,-3"); }).find("positive integers"), std::string::npos);
  EXPECT_EQ(parse_input_shape("8,3,224,224"), (std::vector<std::int64_t>{8, 3, 224, 224}));
  EXPECT_NE(input_error_of([&] { parse_input_dtype("f32"); }).find("fp32, bf16, fp16 or int64"), std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model((dir / "cnn.pt").string(), 0, torch::kFloat32, std::nullopt); })
                .find("needs its input's shape"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model("resnet152", 0, torch::kFloat32, kImage); }).find("are for TorchScript"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model((dir / "cnn.pt").string(), 0, torch::kBFloat16, kImage); })
                .find("runs in the dtype it was saved in"),
            std::string::npos);
}

}  // namespace
}  // namespace psw::exec
