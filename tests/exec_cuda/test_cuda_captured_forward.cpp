// A user's TorchScript model pipelined through its captured graph on the GPU (label gpu): Note
// [Graph-pipelined switch]. The module is made here (a TorchScript module defined in C++: three
// matmuls, a bias, a buffer, and a parameter the forward never reads), saved, and loaded as a
// user's file is.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>
#include <string>
#include <utility>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/kernel_graph.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/captured_forward.hpp"
#include "psw/exec/graph_switch.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::exec {
namespace {

std::filesystem::path save_mlp() {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "psw_captured_mlp.pt";
  torch::manual_seed(3);
  torch::jit::Module module("Mlp");
  module.register_parameter("w1", torch::randn({64, 256}) * 0.1, /*is_buffer=*/false);
  module.register_parameter("b1", torch::randn({256}), /*is_buffer=*/false);
  module.register_parameter("w2", torch::randn({256, 256}) * 0.1, /*is_buffer=*/false);
  module.register_buffer("scale", torch::rand({256}) + 0.5);
  module.register_parameter("w3", torch::randn({256, 10}) * 0.1, /*is_buffer=*/false);
  module.register_parameter("unused", torch::randn({1000}), /*is_buffer=*/false);
  module.define(R"JIT(
def forward(self, x):
    h = torch.relu(torch.matmul(x, self.w1) + self.b1)
    h = torch.relu(torch.matmul(h, self.w2)) * self.scale
    return torch.matmul(h, self.w3)
)JIT");
  module.save(file.string());
  return file;
}

// A module whose forward branches on a device value: a host synchronisation, which a capture
// cannot hold (Note [Uncaptured switch]).
std::filesystem::path save_branching(const std::filesystem::path& file) {
  torch::manual_seed(4);
  torch::jit::Module module("Branching");
  module.register_parameter("w", torch::randn({64, 64}) * 0.1, /*is_buffer=*/false);
  module.define(R"JIT(
def forward(self, x):
    h = torch.matmul(x, self.w)
    if bool(h.sum() > 0):
        h = h * 2.0
    return torch.relu(h)
)JIT");
  module.save(file.string());
  return file;
}

// The spec of a captured switch of `file` on `input`, planned for the H200's link.
GraphSwitchSpec spec_for(const std::filesystem::path& file, InputSpec input) {
  GraphSwitchSpec spec;
  spec.model = file.string();
  spec.inputs = {std::move(input)};
  spec.hardware = load_hardware_profile(std::string(PSW_SOURCE_DIR) + "/configs/hardware/h200-pcie5.yaml");
  return spec;
}

torch::Tensor raw(const torch::Tensor& t) { return t.contiguous().view({-1}).view(torch::kUInt8).clone(); }

TEST(CudaCapturedForward, TheReaderFindsEveryParameterTheForwardReads) {
  auto backend = make_backend("cuda");
  auto model = load_torchscript(save_mlp(), InputSpec{{32, 64}, torch::kFloat32});
  model->to(backend->device());
  const torch::Tensor input = model->example_input(32, 1).to(backend->device());
  auto pipeline = make_private_pipeline(*backend, *model, single_group(model->layers().size()));
  for (int i = 0; i < 3; ++i) pipeline->engine->switch_in_and_run(input);
  std::vector<GraphParameter> parameters;
  for (const ZooLayer& layer : model->layers()) {
    for (std::size_t t = 0; t < layer.tensors.size(); ++t) {
      parameters.push_back({layer.tensor_names[t], reinterpret_cast<std::uint64_t>(layer.tensors[t].data_ptr()),
                            static_cast<Bytes>(layer.tensors[t].nbytes())});
    }
  }
  auto captured = backend->capture_forward([&] { return model->forward(input, [](std::size_t) {}); }, parameters);
  const KernelGraph& graph = captured->description();
  EXPECT_EQ(captured->read_stats().kernels_unread, 0u);
  EXPECT_GE(captured->read_stats().kernels, 3u);
  const KernelGraphAnalysis analysis = analyze_kernel_graph(graph);
  EXPECT_EQ(analysis.nodes_using_everything, 0u);
  // Every parameter but `unused` is read by a kernel; `unused` forms the last, unused layer.
  ASSERT_EQ(analysis.unused_parameters, 1u);
  ASSERT_TRUE(analysis.layers.back().unused);
  EXPECT_EQ(graph.parameters[analysis.layers.back().parameters.front()].name, "unused");
  // w1 is read before w2, and w2 before w3: layers follow the forward.
  auto layer_of = [&](const std::string& name) {
    for (std::size_t p = 0; p < graph.parameters.size(); ++p) {
      if (graph.parameters[p].name == name) return analysis.parameter_layer[p];
    }
    ADD_FAILURE() << name << " not among the parameters";
    return std::size_t{0};
  };
  EXPECT_LT(layer_of("w1"), layer_of("w2"));
  EXPECT_LT(layer_of("w2"), layer_of("w3"));

  // The resident replay is the eager forward; after poisoning it is not, and the switch is again.
  captured->replay_resident();
  backend->synchronize();
  const torch::Tensor reference = raw(captured->output());
  EXPECT_TRUE(torch::allclose(captured->output(), model->forward(input, [](std::size_t) {}), 1e-5, 1e-6));
  const Grouping per_layer = per_layer_groups(analysis.layers.size());
  const RewrittenGraph rewrite = rewrite_with_copies(graph, analysis, per_layer);
  captured->build_switch(rewrite, pipeline->store.bytes(), pipeline->region->bytes().narrow(0, 0, pipeline->store.size()));
  backend->fill(pipeline->region->bytes(), 0xFF);
  captured->replay_resident();
  backend->synchronize();
  EXPECT_FALSE(torch::equal(reference, raw(captured->output()))) << "the poison did not reach the forward";
  for (int i = 0; i < 5; ++i) {
    backend->fill(pipeline->region->bytes(), static_cast<std::uint8_t>(0x40 + i));
    captured->replay_switch();
    backend->synchronize();
    EXPECT_TRUE(torch::equal(reference, raw(captured->output()))) << "switch " << i;
  }
}

TEST(CudaCapturedForward, RunGraphSwitchReportsAPlannedSwitchEqualToTheResidentReplay) {
  GraphSwitchSpec spec = spec_for(save_mlp(), InputSpec{{32, 64}, torch::kFloat32});
  spec.repeat = 10;
  spec.warmup = 2;
  spec.profile_repeat = 5;
  const GraphSwitchReport r = run_graph_switch_benchmark(spec);
  EXPECT_EQ(r.outputs_checked, 10u);
  EXPECT_EQ(r.outputs_equal, r.outputs_checked);
  EXPECT_EQ(r.graph.parameters.size(), 6u);
  EXPECT_EQ(r.parameters_used, 5u);
  EXPECT_EQ(r.profile.layers.size(), r.layers);
  EXPECT_GE(r.copy_ranges, 1u);
  EXPECT_GT(r.bound.ms(), 0.0);
  EXPECT_LE(r.bound.ms(), r.predicted.ms() + 1e-9);
  EXPECT_GT(r.latency.median_ms, 0.0);
}

// Note [Captured switch]: `psw profile --graph`'s profile is the capture's layers, and the switch
// planned from it (psw run --graph --profile) is the one planned from its own timing; a profile
// of other layers is refused, naming the first difference.
TEST(CudaCapturedForward, TheCapturesProfileIsPlannedFromAndAnotherIsRefused) {
  GraphSwitchSpec spec = spec_for(save_mlp(), InputSpec{{32, 64}, torch::kFloat32});
  spec.repeat = 5;
  spec.warmup = 1;
  spec.profile_repeat = 5;
  const CapturedProfile measured = profile_captured_graph(spec);
  EXPECT_GT(measured.nodes, 0u);
  EXPECT_EQ(measured.profile.batch, 32);
  EXPECT_EQ(measured.profile.source.kind, ProfileSource::Measured);
  ASSERT_GE(measured.profile.layers.size(), 2u);
  spec.profile = measured.profile;
  spec.profile_origin = "given.yaml";
  const GraphSwitchReport r = run_graph_switch_benchmark(spec);
  EXPECT_EQ(r.outputs_equal, r.outputs_checked);
  ASSERT_EQ(r.profile.layers.size(), measured.profile.layers.size());
  for (std::size_t l = 0; l < r.profile.layers.size(); ++l) {
    EXPECT_EQ(r.profile.layers[l].forward_time, measured.profile.layers[l].forward_time) << "layer " << l;
  }
  ModelProfile other = measured.profile;
  other.layers.pop_back();
  spec.profile = other;
  try {
    run_graph_switch_benchmark(spec);
    ADD_FAILURE() << "a profile of other layers was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("given.yaml: not a profile of this captured graph"), std::string::npos)
        << e.what();
  }
}

// Note [Uncaptured switch]: a forward that cannot be captured is one clear error, and with
// allow_uncaptured it is measured copy-then-forward, said so, its outputs still checked; the
// stream works again after the failed capture.
TEST(CudaCapturedForward, AForwardThatCannotBeCapturedIsSaidAndRunsCopyThenForwardWhenAllowed) {
  GraphSwitchSpec spec = spec_for(save_branching(std::filesystem::temp_directory_path() / "psw_branching.pt"),
                                  InputSpec{{16, 64}, torch::kFloat32});
  spec.repeat = 5;
  spec.warmup = 1;
  spec.profile_repeat = 3;
  try {
    run_graph_switch_benchmark(spec);
    ADD_FAILURE() << "a forward that synchronises with the host was captured";
  } catch (const UncapturableError& e) {
    EXPECT_NE(std::string(e.what()).find("the forward cannot be captured as a CUDA graph"), std::string::npos)
        << e.what();
  }
  spec.allow_uncaptured = true;
  const GraphSwitchReport r = run_graph_switch_benchmark(spec);
  EXPECT_FALSE(r.captured);
  EXPECT_NE(r.uncaptured_reason.find("cannot be captured"), std::string::npos) << r.uncaptured_reason;
  EXPECT_EQ(r.outputs_checked, 5u);
  EXPECT_EQ(r.outputs_equal, r.outputs_checked);
  EXPECT_GT(r.latency.median_ms, 0.0);
  EXPECT_TRUE(r.groups.empty());
}

}  // namespace
}  // namespace psw::exec
