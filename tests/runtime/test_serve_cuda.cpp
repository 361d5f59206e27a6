// The server on the GPU (label gpu): every model a worker holds answers with its own outputs.
// A worker keeps one engine per model on one backend, each with captured switch and resident
// graphs (Note [Switch graphs]); the host tests cannot see graphs, so this is where a request
// proves that it ran its own model's graph on the device.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <regex>

#include "../support/aoti_package_files.hpp"
#include "controller_test_support.hpp"
#include "psw/common/output.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::runtime {
namespace {

using namespace test_support;

// The served model answers seeded inputs of `batch` as `reference` (on the device) computes them.
void expect_answers_of(Controller& controller, const ServedModelConfig& model, exec::ZooModel& reference, int batch) {
  torch::NoGradGuard no_grad;
  reference.to(torch::kCUDA);
  for (std::uint64_t seed = 11; seed < 13; ++seed) {
    const torch::Tensor input = reference.example_input(batch, seed);
    const torch::Tensor expected = reference.forward(input.to(torch::kCUDA)).cpu();
    EXPECT_LT(relative_error(output_of(controller.infer(request_for(model, input))), expected), 1e-3) << "seed " << seed;
  }
}

TEST(ServeCuda, EveryModelAnswersWithItsOwnOutputsThroughItsGraphs) {
  // Batch 2 is the configured batch, so requests replay the captured graphs.
  const ServeConfig config = write_config("cuda-models", R"(
workers: 2
cache: off
request_timeout_ms: 120000
models:
  - name: resnet152
    batch: 2
  - name: inception_v3
    batch: 2
  - name: bert_base
    batch: 2
)");
  auto controller = start(config, "cuda");
  ASSERT_TRUE(controller->ready());
  torch::NoGradGuard no_grad;
  for (const char* name : {"resnet152", "inception_v3", "bert_base"}) {
    // The server's models are the zoo's with seed 0 (served_models.hpp), computed on the CPU.
    auto reference = exec::make_model(name, 0);
    // With random weights the vision models' outputs differ by under 2% between inputs, about
    // what TF32 convolutions may change: compare the part that depends on the input, the
    // output minus that of the graphs' capture example (seed 0), which is also what a worker
    // replaying another model's graph would answer with (its stale capture-time output).
    const torch::Tensor base = reference->forward(reference->example_input(2, 0));
    for (std::uint64_t seed = 11; seed < 13; ++seed) {
      const torch::Tensor input = reference->example_input(2, seed);
      const torch::Tensor expected = reference->forward(input);
      const torch::Tensor served = output_of(controller->infer(request_for(name, input)));
      EXPECT_LT(relative_error(served - base, expected - base), 0.2) << name << " seed " << seed;
      EXPECT_LT(relative_error(served, expected), 2e-2) << name << " seed " << seed;
    }
  }
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.transfers, 6);  // cache off: every request switched its model in
}

// Note [Decoder in the pipeline] on the GPU: llama-tiny in bf16 served at its configured batch
// and prompt length replays its captured switch graph; the logits are those of the same model
// run on the device alone, and depend on the prompt (not a stale capture-time output).
TEST(ServeCuda, ADecoderInBf16AnswersThroughItsGraphs) {
  const std::string zoo = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto reference = exec::make_model(zoo, 0, torch::kBFloat16);
  exec::Decoder& decoder = *exec::as_decoder(*reference);
  torch::NoGradGuard no_grad;
  const std::filesystem::path profiles = decoder_profiles("cuda-decoder", *reference, decoder.example_tokens(2, 32, 0));
  const ServeConfig config = write_config("cuda-decoder", R"(
workers: 2
cache: off
request_timeout_ms: 120000
models:
  - name: llama-tiny
    decoder: )" + zoo + R"(
    dtype: bf16
    prompt_tokens: 32
    batch: 2
  - name: bert_base
    batch: 2
)", profiles);
  const ServedModelConfig& served = config.models.at(0);
  auto controller = start(config, "cuda");
  ASSERT_TRUE(controller->ready());
  reference->to(torch::kCUDA);
  const torch::Tensor base = reference->forward(decoder.example_tokens(2, 32, 0).to(torch::kCUDA)).to(torch::kFloat32);
  auto bert = exec::make_model("bert_base", 0);
  for (std::uint64_t seed = 11; seed < 13; ++seed) {
    const torch::Tensor prompt = decoder.example_tokens(2, 32, seed);
    const torch::Tensor expected = reference->forward(prompt.to(torch::kCUDA)).to(torch::kFloat32).cpu();
    const torch::Tensor answer = output_of(controller->infer(request_for(served, prompt)), "BF16");
    EXPECT_LT(relative_error(answer, expected), 0.02) << "seed " << seed;
    EXPECT_LT(relative_error(answer - base.cpu(), expected - base.cpu()), 0.1) << "seed " << seed;
    // Another model in between: the decoder is switched in cold again.
    controller->infer(request_for("bert_base", bert->example_input(2, seed)));
  }
  EXPECT_EQ(controller->stats().transfers, 4);
  EXPECT_EQ(controller->stats().failed_requests, 0);
}

// Note [Decode graph], Note [Prefill graphs] on the GPU: llama-tiny in fp32 generates through
// the server, cold (switched in) and then warm (resident: its bucket's prefill graph, a second
// bucket's captured at its first prompt), each call's tokens those of recomputing the whole
// sequence on the device, and told one by one.
TEST(ServeCuda, ADecoderGeneratesColdAndWarmThroughItsGraphs) {
  const std::string zoo = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto reference = exec::make_model(zoo, 0, torch::kFloat32);  // the served weights (seed 0)
  exec::Decoder& decoder = *exec::as_decoder(*reference);
  torch::NoGradGuard no_grad;
  const ServeConfig config = write_config("cuda-generate", R"(workers: 1
request_timeout_ms: 120000
cache: active
models:
  - name: llama-tiny
    decoder: )" + zoo + R"(
    prompt_tokens: 16
    prompt_buckets: [16, 64, 255]
    batch: 1
)", decoder_profiles("cuda-generate", *reference, decoder.example_tokens(1, 16, 3)));
  auto controller = start(config, "cuda");
  ASSERT_TRUE(controller->ready());
  reference->to(torch::kCUDA);
  constexpr std::int64_t kTokens = 12;
  const std::vector<std::pair<std::int64_t, bool>> calls = {{5, true}, {9, false}, {40, false}, {33, false}, {5, false}};
  for (const auto& [length, switched] : calls) {
    const torch::Tensor prompt = decoder.example_tokens(1, length, 50 + static_cast<std::uint64_t>(length));
    torch::Tensor sequence = prompt.to(torch::kCUDA);
    for (int i = 0; i < kTokens; ++i) sequence = torch::cat({sequence, reference->forward(sequence).argmax(-1, true)}, 1);
    const torch::Tensor generated = sequence.narrow(1, length, kTokens).cpu();
    const std::vector<std::int64_t> expected(generated.data_ptr<std::int64_t>(), generated.data_ptr<std::int64_t>() + kTokens);
    GenerateRequest request;
    request.model = "llama-tiny";
    request.input_ids.assign(prompt.data_ptr<std::int64_t>(), prompt.data_ptr<std::int64_t>() + length);
    request.max_tokens = kTokens;
    std::vector<std::int64_t> told;
    const GenerateResponse r = controller->generate(request, [&](const GeneratedToken& t) { told.push_back(t.id); });
    EXPECT_EQ(r.output_ids, expected) << "prompt of " << length;
    EXPECT_EQ(told, expected) << "prompt of " << length;
    EXPECT_EQ(r.switched, switched) << "prompt of " << length;
    EXPECT_EQ(r.prompt_bucket, length <= 16 ? 16 : 64);
  }
  EXPECT_EQ(controller->stats().failed_requests, 0);
}

// Note [TorchScript served through its graph]: a user's TorchScript model on the GPU is switched
// through its captured forward (the worker says so on its stderr at start), its answers are the module's on
// the device at the captured batch and, eagerly, at another, and depend on the input.
TEST(ServeCuda, AUsersTorchScriptModelSwitchesThroughItsCapturedGraph) {
  const std::filesystem::path dir = make_torchscript_files("cuda-torchscript");
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto reference = exec::load_torchscript(dir / "cnn.pt", exec::InputSpec{{2, 3, 16, 16}, torch::kFloat32});
  write_made_up_profile(dir / "profiles", *reference, reference->example_input(2, 0));
  const ServeConfig config = write_config("cuda-torchscript", "workers: 2\ncache: off\nrequest_timeout_ms: 120000\n"
                                          "models:\n  - name: cnn\n    torchscript: " + (dir / "cnn.pt").string() +
                                          "\n    input_shape: [3, 16, 16]\n    batch: 2\n", dir / "profiles");
  auto controller = start(config, "cuda");
  ASSERT_TRUE(controller->ready());
  torch::NoGradGuard no_grad;
  reference->to(torch::kCUDA);
  const torch::Tensor base = reference->forward(reference->example_input(2, 0).to(torch::kCUDA)).cpu();
  for (std::uint64_t seed = 11; seed < 14; ++seed) {
    const torch::Tensor input = reference->example_input(2, seed);
    const torch::Tensor expected = reference->forward(input.to(torch::kCUDA)).cpu();
    const torch::Tensor served = output_of(controller->infer(request_for(config.models.at(0), input)));
    EXPECT_LT(relative_error(served, expected), 1e-3) << "seed " << seed;
    EXPECT_LT(relative_error(served - base, expected - base), 1e-2) << "seed " << seed;
  }
  // Another batch than the captured one: the engine's eager copy-then-run.
  const torch::Tensor three = reference->example_input(3, 21);
  EXPECT_LT(relative_error(output_of(controller->infer(request_for(config.models.at(0), three))),
                           reference->forward(three.to(torch::kCUDA)).cpu()),
            1e-3);
  EXPECT_EQ(controller->stats().transfers, 4);
  EXPECT_EQ(controller->stats().failed_requests, 0);
  controller.reset();
  std::error_code ignored;
  remove_tree(dir, ignored);  // not std::filesystem::remove_all: output.hpp says why
}

// Note [Uncaptured switch] served: a TorchScript model whose forward branches on a device value
// stops the start with the reason, unless its entry allows it uncaptured; then it is served
// copy-then-forward with the module's answers.
TEST(ServeCuda, AnUncapturableModelStopsTheStartUnlessAllowedThenIsServedCopyThenForward) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-cuda-branching-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  torch::manual_seed(4);
  torch::jit::Module module("Branching");
  module.register_parameter("w", torch::randn({3 * 16 * 16, 10}) * 0.05, /*is_buffer=*/false);
  module.define(R"JIT(
def forward(self, x):
    h = torch.matmul(torch.flatten(x, 1), self.w)
    if bool(h.sum() > 0):
        h = h * 2.0
    return h
)JIT");
  module.save((dir / "branching.pt").string());
  auto reference = exec::load_torchscript(dir / "branching.pt", exec::InputSpec{{2, 3, 16, 16}, torch::kFloat32});
  write_made_up_profile(dir / "profiles", *reference, reference->example_input(2, 0));
  const std::string entry = "workers: 1\ncache: off\nrequest_timeout_ms: 120000\nmodels:\n  - name: branching\n"
                            "    torchscript: " + (dir / "branching.pt").string() +
                            "\n    input_shape: [3, 16, 16]\n    batch: 2\n";
  try {
    start(write_config("cuda-branching", entry, dir / "profiles"), "cuda");
    ADD_FAILURE() << "a model that cannot be captured was served without allow_uncaptured";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be captured"), std::string::npos) << e.what();
  }
  const ServeConfig allowed = write_config("cuda-branching-allowed", entry + "    allow_uncaptured: true\n", dir / "profiles");
  auto controller = start(allowed, "cuda");
  ASSERT_TRUE(controller->ready());
  expect_answers_of(*controller, allowed.models.at(0), *reference, 2);
  controller.reset();
  std::error_code ignored;
  remove_tree(dir, ignored);  // not std::filesystem::remove_all: output.hpp says why
}

// Note [Device memory limit], Note [AOTInductor packages]: a served package keeps its own copy of
// its constants in every worker, beside the region. A device_memory_bytes that holds the region
// but not the copies stops the start naming them; one that holds both serves the package's
// answers (those of the same net traced to TorchScript).
TEST(ServeCuda, APackagesOwnCopiesCountAgainstTheDeviceMemory) {
  ASSERT_TRUE(exec::aoti_packages_supported()) << "the GPU host's LibTorch has no AOTInductor";
  const std::filesystem::path packages = psw::test_support::aoti_package_dir();
  const exec::InputSpec image{{4, 3, 16, 16}, torch::kFloat32};
  auto package = exec::load_aoti_package(packages / "cnn.pt2", {image}, torch::Device(torch::kCUDA, 0));
  Bytes exposed = 0;
  Bytes tensors = 0;
  for (const exec::ZooLayer& layer : package->layers()) {
    exposed += layer.bytes();
    tensors += static_cast<Bytes>(layer.tensors.size());
  }
  const std::filesystem::path profiles =
      std::filesystem::temp_directory_path() / ("psw-cuda-package-profiles-" + std::to_string(::getpid()));
  write_made_up_profile(profiles, *package, package->example_input(4, 0));
  package.reset();
  const auto config_with_limit = [&](Bytes limit) {
    return write_config("cuda-package-" + std::to_string(limit),
                        "workers: 2\ncache: off\nrequest_timeout_ms: 120000\ndevice_memory_bytes: " +
                            std::to_string(limit) + "\nmodels:\n  - name: cnn\n    torchscript: " +
                            (packages / "cnn.pt2").string() + "\n    input_shape: [3, 16, 16]\n    batch: 4\n",
                        profiles);
  };
  const auto start_error = [&](Bytes limit) -> std::string {
    try {
      start(config_with_limit(limit), "cuda");
    } catch (const std::exception& e) {
      return e.what();
    }
    return "the server started";
  };
  // A limit of one byte: the start's message gives the copies and the whole.
  const std::string tight = start_error(1);
  std::smatch numbers;
  ASSERT_TRUE(std::regex_search(tight, numbers,
                                std::regex(R"(the packages' own copies of their constants \((\d+) bytes: each of the 2 )"
                                           R"(workers loads them\) and the training state need (\d+) bytes)")))
      << tight;
  const Bytes copies = std::stoll(numbers[1].str());
  const Bytes needed = std::stoll(numbers[2].str());
  EXPECT_GE(copies, 2 * exposed);                   // each worker's copy of what the package exposes,
  EXPECT_LE(copies, 2 * (exposed + 512 * tensors));  // at the region's alignment
  EXPECT_GT(needed, copies);                        // and the region
  // The region fits, the copies do not: refused, naming them.
  const std::string short_by_one = start_error(needed - 1);
  EXPECT_NE(short_by_one.find("the packages' own copies of their constants"), std::string::npos) << short_by_one;
  // Both fit: served, with the net's answers.
  const ServeConfig served = config_with_limit(needed);
  auto controller = start(served, "cuda");
  ASSERT_TRUE(controller->ready());
  auto twin = exec::load_torchscript(packages / "cnn.pt", image);
  expect_answers_of(*controller, served.models.at(0), *twin, 4);
  EXPECT_EQ(controller->stats().failed_requests, 0);
  controller.reset();
  std::error_code ignored;
  remove_tree(profiles, ignored);  // not std::filesystem::remove_all: output.hpp says why
}

}  // namespace
}  // namespace psw::runtime
