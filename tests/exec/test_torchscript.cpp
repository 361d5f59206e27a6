// Note [TorchScript models]: a user's TorchScript file (made here by Debian's python3-torch, as a
// user would export it) as a model the engine switches: its layers and tensors, the switched
// output equal to the module's own forward after the device copy was poisoned, tuple outputs, and
// the errors for files and inputs that do not fit.
#include <gtest/gtest.h>

#include <torch/script.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "exec_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/graph_switch.hpp"
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

// Note [Several inputs]: a module of two inputs (features fp32, ids int64) takes them packed into
// one byte tensor, switched in and unpacked bit for bit; the counts and batches that do not fit.
TEST(TorchScript, SeveralInputsArePackedIntoOneAndGivenToTheModuleInOrder) {
  const fs::path file = torchscript_dir() / "two_inputs.pt";
  EXPECT_EQ(torchscript_input_names(file), (std::vector<std::string>{"features", "ids"}));
  const std::vector<InputSpec> specs{{{2, 6}, torch::kFloat32}, {{2, 4}, torch::kInt64}};
  auto model = load_torchscript(file, specs);
  const torch::Tensor example = model->example_input(3, 5);
  EXPECT_EQ(example.scalar_type(), torch::kUInt8);
  EXPECT_EQ(example.sizes(), (std::vector<std::int64_t>{3, 6 * 4 + 4 * 8}));

  torch::jit::Module reference = torch::jit::load(file.string());
  reference.eval();
  const torch::Tensor features = torch::randn({3, 6});
  const torch::Tensor ids = torch::randint(0, 512, {3, 4}, torch::kInt64);
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = reference.forward({features, ids}).toTensor();
  const torch::Tensor packed = pack_inputs({features, ids});
  auto backend = make_host_backend();
  auto owned = make_private_pipeline(*backend, *model, Grouping{{0, 0}, {1, 1}});
  owned->engine->poison_device_parameters(0x5A);
  EXPECT_TRUE(torch::equal(owned->engine->switch_in_and_run(packed), expected));
  EXPECT_TRUE(torch::equal(owned->engine->run_resident(packed), expected));
  // The order matters: the ids' bytes first are another input.
  EXPECT_FALSE(torch::equal(model->forward(packed), reference.forward({features, ids * 0}).toTensor()));

  EXPECT_NE(input_error_of([&] { load_torchscript(file, specs.front()); })
                .find("the module's forward takes 2 inputs (features, ids), 1 given"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { load_torchscript(file, {specs[0], InputSpec{{3, 4}, torch::kInt64}}); })
                .find("input 1 has batch 3, input 0 2: every input has the same batch"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { model->forward(torch::zeros({3, 50}, torch::kUInt8)); })
                .find("a model of 2 inputs takes them packed, Byte [batch, 56]"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { pack_inputs({features, ids.narrow(0, 0, 2)}); }).find("every input has the batch (3) first"),
            std::string::npos);
  // An error inside the module (ids beyond the embedding's rows) is the user's input error, said
  // without the interpreter's traceback.
  const std::string refused = input_error_of([&] { model->forward(pack_inputs({features, ids + 600})); });
  EXPECT_NE(refused.find("two_inputs: the module refused the input [3, 56]: index out of range in self"), std::string::npos)
      << refused;
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
  // Note [TorchScript training]: the training forward checks its input as the inference one does.
  EXPECT_NE(input_error_of([&] { model->training_outputs(torch::zeros({1, 3, 17, 16}), [](std::size_t) {}); })
                .find("the input is Float [1, 3, 17, 16]; it takes Float [1, 3, 16, 16] (any batch)"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_input_shape("8,3,,224"); }).find("positive integers"), std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_input_shape("8,-3"); }).find("positive integers"), std::string::npos);
  EXPECT_EQ(parse_input_shape("8,3,224,224"), (std::vector<std::int64_t>{8, 3, 224, 224}));
  EXPECT_NE(input_error_of([&] { parse_input_dtype("f32"); }).find("fp32, bf16, fp16 or int64"), std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model((dir / "cnn.pt").string(), 0, torch::kFloat32, {}); })
                .find("needs its input's shape"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model("resnet152", 0, torch::kFloat32, {kImage}); }).find("are for TorchScript"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { open_model((dir / "cnn.pt").string(), 0, torch::kBFloat16, {kImage}); })
                .find("runs in the dtype it was saved in"),
            std::string::npos);
}

// Note [Captured switch]: the host backend captures no graphs, so a server on it (CI's) runs a
// user's model copy-then-forward; asked for the captured switch itself, it says why not.
TEST(TorchScript, TheCapturedSwitchNeedsABackendWithGraphs) {
  auto backend = make_backend("host");
  auto model = load_torchscript(torchscript_dir() / "cnn.pt", kImage);
  const torch::Tensor bytes = torch::zeros({64}, torch::kUInt8);
  EXPECT_NE(input_error_of([&] {
              CapturedSwitch(*backend, *model, model->example_input(1, 0), bytes, bytes, CapturedSwitchSpec{});
            }).find("the host backend cannot capture graphs: cnn is pipelined through its captured graph on cuda only"),
            std::string::npos);
}

// Note [AOTInductor packages]: a package lists its constants in no set order; each module's
// layer holds its own constants, wherever they are listed, and names each as the module does.
TEST(AotiPackage, ConstantsAreGroupedByTheirModuleWhereverTheyAreListed) {
  const std::vector<ModuleConstants> modules = constants_by_module(
      {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight", "bn1.running_mean", "scale", "bn1.running_var"});
  ASSERT_EQ(modules.size(), 4u);
  EXPECT_EQ(modules[0].module, "bn1");
  EXPECT_EQ(modules[0].constants, (std::vector<std::size_t>{1, 2, 4, 6}));
  EXPECT_EQ(modules[0].tensor_names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var"}));
  EXPECT_EQ(modules[1].module, "conv1");
  EXPECT_EQ(modules[1].constants, (std::vector<std::size_t>{0}));
  EXPECT_EQ(modules[2].module, "layer1.0.conv1");
  EXPECT_EQ(modules[2].tensor_names, (std::vector<std::string>{"weight"}));
  EXPECT_EQ(modules[3].module, "(root)");
  EXPECT_EQ(modules[3].constants, (std::vector<std::size_t>{5}));
  EXPECT_EQ(modules[3].tensor_names, (std::vector<std::string>{"scale"}));
  EXPECT_TRUE(constants_by_module({}).empty());
}

// A package lists its constants in no order (a hash map's); the modules come out by path with
// numbers compared as numbers, as a model registers its numbered children, whatever the listing.
TEST(AotiPackage, ModulesAreOrderedByPathWithNumbersAsNumbers) {
  std::vector<std::string> names = {"features.10.block.0.weight", "classifier.3.bias", "features.2.block.1.weight",
                                    "features.1.weight", "features.2.block.0.weight", "features.10.block.0.bias",
                                    "features.1.block.0.weight", "classifier.0.weight", "features.2.weight"};
  const std::vector<std::string> expected = {"classifier.0", "classifier.3", "features.1", "features.1.block.0",
                                             "features.2", "features.2.block.0", "features.2.block.1",
                                             "features.10.block.0"};
  for (int shuffle = 0; shuffle < 3; ++shuffle) {
    std::rotate(names.begin(), names.begin() + 4, names.end());
    std::vector<std::string> got;
    for (const ModuleConstants& m : constants_by_module(names)) got.push_back(m.module);
    EXPECT_EQ(got, expected) << "listing rotated " << shuffle + 1 << " times";
  }
  std::vector<std::string> numbered;
  for (const ModuleConstants& m : constants_by_module({"layers.12.w", "layers.3.w", "layers.x.w", "layers.100.w"})) {
    numbered.push_back(m.module);
  }
  EXPECT_EQ(numbered, (std::vector<std::string>{"layers.3", "layers.12", "layers.100", "layers.x"}));
}

// Note [AOTInductor packages]: a .pt2 is a user's model file, not a TorchScript one; where the
// LibTorch has no AOTInductor (Debian's 1.13, CI's) it is one error naming the file and why, and
// where it has, a missing file is.
TEST(AotiPackage, APackageIsAModelFileLoadedOnlyWhereLibTorchHasAotInductor) {
  EXPECT_TRUE(names_aoti_package("model.pt2"));
  EXPECT_FALSE(names_aoti_package("model.pt"));
  EXPECT_FALSE(names_aoti_package(".pt2"));
  EXPECT_FALSE(names_torchscript("model.pt2"));
  EXPECT_TRUE(names_model_file("model.pt2"));
  EXPECT_TRUE(names_model_file("model.pt"));
  EXPECT_FALSE(names_model_file("resnet152"));
  const std::string message =
      input_error_of([] { open_model("/nonexistent/model.pt2", 0, torch::kFloat32, {kImage}, torch::kCPU); });
  EXPECT_EQ(message.rfind("/nonexistent/model.pt2: ", 0), 0u) << message;
  if (aoti_packages_supported()) {
    EXPECT_NE(message.find("no such file"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("an AOTInductor package needs LibTorch 2.6 or later"), std::string::npos) << message;
  }
  EXPECT_NE(input_error_of([] { open_model("model.pt2", 0, torch::kFloat32, {}, torch::kCPU); }).find("needs its input"),
            std::string::npos);
}

}  // namespace
}  // namespace psw::exec
