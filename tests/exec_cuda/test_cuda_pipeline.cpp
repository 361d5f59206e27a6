// The pipeline engine on the CUDA backend (label gpu): switched outputs equal a plain
// resident run on the same GPU after the parameter region is poisoned, for every model and
// plan, and a warm switch allocates no device memory.
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "../exec/exec_test_support.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/profiler.hpp"

namespace psw::exec {
namespace {

using testing_support::plan_for;
using testing_support::expect_causal_trace;
using testing_support::relative_error;

class CudaPipeline : public ::testing::TestWithParam<std::tuple<std::string, Strategy>> {};

TEST_P(CudaPipeline, SwitchedOutputEqualsAResidentRun) {
  const auto& [name, strategy] = GetParam();
  auto backend = make_backend("cuda");
  auto model = make_model(name, 21);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 4).to(backend->device());
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for(name, strategy));
  PipelineEngine& engine = *engine_owned->engine;
  engine.switch_in_and_run(input);
  const torch::Tensor reference = engine.run_resident(input).clone();
  backend->synchronize();
  for (int repetition = 0; repetition < 3; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x5A + repetition));
    const torch::Tensor out = engine.switch_in_and_run(input);
    backend->synchronize();
    // Same GPU, same kernels, same inputs: the switched run must match the resident one.
    EXPECT_LT(relative_error(out, reference), 1e-5) << name << " repetition " << repetition;
  }
}

std::string label(Strategy s) { return s == Strategy::PerLayer ? "per_layer" : to_string(s); }

INSTANTIATE_TEST_SUITE_P(
    Zoo, CudaPipeline,
    ::testing::Combine(::testing::Values("resnet152", "inception_v3", "bert_base"),
                       ::testing::Values(Strategy::Optimal, Strategy::Single, Strategy::PerLayer)),
    [](const auto& p) { return std::get<0>(p.param) + "_" + label(std::get<1>(p.param)); });

class CudaGraphSwitch : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGraphSwitch, ReplayedSwitchEqualsAResidentRun) {
  const std::string name = GetParam();
  auto backend = make_backend("cuda");
  auto model = make_model(name, 5);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 2).to(backend->device());
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for(name, Strategy::Optimal));
  PipelineEngine& engine = *engine_owned->engine;
  engine.capture_graphs(input);
  const torch::Tensor reference = engine.run_resident(input).clone();
  for (int repetition = 0; repetition < 3; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x33 + repetition));
    const torch::Tensor out = engine.switch_in_and_run_graph(input).clone();
    backend->synchronize();
    EXPECT_LT(relative_error(out, reference), 1e-5) << name << " repetition " << repetition;
  }
  // The traced switch graph (Note [Measured trace]): same output, a causal timeline.
  engine.poison_device_parameters(0x44);
  const torch::Tensor traced = engine.switch_in_and_run_graph(input, /*traced=*/true).clone();
  expect_causal_trace(engine.measured_timeline(), engine.groups());
  EXPECT_LT(relative_error(traced, reference), 1e-5) << name << " traced";
  // The resident graph reads the bound parameters too: poisoning changes its output.
  engine.poison_device_parameters(0x00);
  const torch::Tensor poisoned = engine.run_resident_graph(input).clone();
  backend->synchronize();
  EXPECT_GT(relative_error(poisoned, reference), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaGraphSwitch, ::testing::Values("resnet152", "inception_v3", "bert_base"));

TEST(CudaHostMapped, BertEmbeddingsReadInPlaceGiveTheSameOutput) {
  auto backend = make_backend("cuda");
  auto model = make_model("bert_base", 8);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 3).to(backend->device());
  std::vector<bool> host_mapped;
  for (const auto& layer : model->layers()) host_mapped.push_back(layer.kind == "embedding");
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for("bert_base", Strategy::Optimal), TransferMode::Pipelined, 512,
                        host_mapped);
  PipelineEngine& engine = *engine_owned->engine;
  engine.switch_in_and_run(input);
  const torch::Tensor reference = engine.run_resident(input).clone();
  engine.capture_graphs(input);
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x11 + repetition));
    EXPECT_LT(relative_error(engine.switch_in_and_run(input).clone(), reference), 1e-5);
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x21 + repetition));
    EXPECT_LT(relative_error(engine.switch_in_and_run_graph(input).clone(), reference), 1e-5);
  }
}

TEST(CudaPipelineMemory, AWarmSwitchAllocatesNoDeviceMemory) {
  auto backend = make_backend("cuda");
  auto model = make_model("resnet152", 1);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 1).to(backend->device());
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::Optimal));
  PipelineEngine& engine = *engine_owned->engine;
  for (int i = 0; i < 3; ++i) engine.switch_in_and_run(input);  // warm the activation cache
  backend->synchronize();
  const auto device = backend->device().index();
  const auto before = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  for (int i = 0; i < 5; ++i) {
    engine.poison_device_parameters();
    engine.switch_in_and_run(input);
  }
  backend->synchronize();
  const auto after = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  // No new cudaMalloc on the switch path: reserved memory (segments obtained from the
  // driver) stays the same; activations reuse cached blocks and parameters live in the pool
  // allocated once. Index 0 of a stat array is the aggregate over pool kinds.
  EXPECT_EQ(after.reserved_bytes[0].current, before.reserved_bytes[0].current);
  EXPECT_EQ(after.num_alloc_retries, before.num_alloc_retries);
  EXPECT_EQ(engine_owned->region->size(), engine.layout().total_bytes);
}

// The ablation modes of the server on the GPU, in one process (the server itself:
// tests/runtime/test_modes_cuda.cpp). Each output equals a resident run of the plain
// pipelined engine over the same model.
torch::Tensor pipelined_reference(Backend& backend, const std::string& name, std::uint64_t seed,
                                  const torch::Tensor& input) {
  auto model = make_model(name, seed);
  model->to(backend.device());
  auto owned = make_private_pipeline(backend, *model, plan_for(name, Strategy::Optimal));
  owned->engine->switch_in_and_run(input);
  torch::Tensor out = owned->engine->run_resident(input).clone();
  backend.synchronize();
  return out;
}

// No optimisation: per-layer copies, the forward after the last, eager and replayed.
TEST(CudaModes, UnpipelinedSwitchEqualsAResidentRunAndComputesAfterTheLastCopy) {
  auto backend = make_backend("cuda");
  auto model = make_model("resnet152", 12);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 5).to(backend->device());
  const torch::Tensor reference = pipelined_reference(*backend, "resnet152", 12, input);
  auto owned = make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::PerLayer), TransferMode::Unpipelined);
  PipelineEngine& engine = *owned->engine;
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x61 + repetition));
    EXPECT_LT(relative_error(engine.switch_in_and_run(input).clone(), reference), 1e-5) << repetition;
  }
  engine.set_tracing(true);
  engine.poison_device_parameters();
  engine.switch_in_and_run(input);
  const Timeline t = engine.measured_timeline();
  engine.set_tracing(false);
  Duration last_arrival = Duration::zero();
  for (const auto& g : t.groups) last_arrival = max(last_arrival, g.transfer_end);
  EXPECT_GE(t.startup, last_arrival) << "the first layer started before every group had arrived";
  engine.capture_graphs(input, /*traced=*/false);
  engine.poison_device_parameters(0x70);
  EXPECT_LT(relative_error(engine.switch_in_and_run_graph(input).clone(), reference), 1e-5) << "replayed";
}

// Note [Per-group handles], the engine's side: memory per group, opened on every switch and
// let go after it (here allocations of this process; CUDA IPC refuses a handle opened by the
// process that made it).
TEST(CudaModes, PerGroupMemoryEqualsAResidentRun) {
  auto backend = make_backend("cuda");
  auto model = make_model("bert_base", 13);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 6).to(backend->device());
  const torch::Tensor reference = pipelined_reference(*backend, "bert_base", 13, input);
  const SwitchPlan plan = plan_for_model(*model, Strategy::Fixed, plan_for("bert_base", Strategy::Optimal));
  const PackedLayout packed = pack_layout(*model, plan.groups);
  ParameterStore store = ParameterStore::allocate(*backend, packed.layout.total_bytes, /*pinned=*/true);
  store.pack(*model, packed);
  std::vector<torch::Tensor> daemon;
  std::size_t with_parameters = 0;
  for (const Bytes span : packed.layout.group_span) {
    daemon.push_back(backend->allocate_shared_device(std::max<Bytes>(span, 1)));
    with_parameters += span > 0 ? 1 : 0;
  }
  PipelineEngine engine(*backend, *model, plan, store,
                        [&daemon](std::size_t g, Bytes bytes) { return daemon.at(g).narrow(0, 0, bytes); });
  for (int repetition = 0; repetition < 2; ++repetition) {
    for (auto& d : daemon) backend->fill(d, static_cast<std::uint8_t>(0x52 + repetition));
    EXPECT_LT(relative_error(engine.switch_in_and_run(input).clone(), reference), 1e-5) << repetition;
    engine.close_groups();
    EXPECT_LT(relative_error(engine.run_resident(input).clone(), reference), 1e-5) << repetition;
    engine.close_groups();
  }
  EXPECT_EQ(engine.group_opens(), 4 * with_parameters);
  EXPECT_THROW(engine.capture_graphs(input), InputError);
}

// Note [Managed memory]: cudaMallocManaged filled by the host; every switch after
// evict_to_host() migrates the pages again, eager and replayed.
TEST(CudaModes, ManagedMemoryMigratesOnDemandAndGoesBackToTheHost) {
  auto backend = make_backend("cuda");
  auto model = make_model("resnet152", 14);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 7).to(backend->device());
  const torch::Tensor reference = pipelined_reference(*backend, "resnet152", 14, input);
  auto owned = make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::Optimal), TransferMode::OnDemand);
  PipelineEngine& engine = *owned->engine;
  EXPECT_TRUE(owned->region->bytes().is_cuda());
  for (int repetition = 0; repetition < 3; ++repetition) {
    engine.evict_to_host();
    EXPECT_LT(relative_error(engine.switch_in_and_run(input).clone(), reference), 1e-5) << repetition;
  }
  engine.capture_graphs(input, /*traced=*/false);
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.evict_to_host();
    EXPECT_LT(relative_error(engine.switch_in_and_run_graph(input).clone(), reference), 1e-5) << "replayed " << repetition;
  }
  EXPECT_THROW(engine.poison_device_parameters(), InputError);
}

// The profiler on the GPU: the training iteration (forward and backward) is captured as a
// graph with a gradient hook per parameter; every layer gets a backward time and the
// calibrated per-layer times sum to the uninstrumented phases (Note [Mark overhead]).
class CudaProfiler : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaProfiler, TrainingIterationIsProfiledPerLayer) {
  const std::string name = GetParam();
  auto backend = make_backend("cuda");
  auto model = make_model(name, 2);
  model->to(backend->device());
  const torch::Tensor input = model->example_input(8, 1).to(backend->device());
  const PhaseTimes inference = profile_forward(*backend, *model, input, 5);
  const TrainingTimes training = profile_training(*backend, *model, input, 5);
  auto sum = [](const std::vector<Duration>& v) {
    Duration s = Duration::zero();
    for (Duration d : v) s += d;
    return s;
  };
  EXPECT_EQ(sum(inference.per_layer), inference.total);
  EXPECT_EQ(sum(training.forward.per_layer), training.forward.total);
  EXPECT_EQ(sum(training.backward.per_layer), training.backward.total);
  // The per-layer records cost time that the calibration removes.
  EXPECT_GT(inference.instrumented, inference.total);
  // Backward does about twice the forward's arithmetic.
  EXPECT_GT(training.backward.total, inference.total);
  std::size_t with_time = 0;
  for (Duration d : training.backward.per_layer) with_time += d > Duration::zero() ? 1 : 0;
  EXPECT_GT(with_time, model->layers().size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaProfiler, ::testing::Values("resnet152", "inception_v3", "bert_base"));

}  // namespace
}  // namespace psw::exec
