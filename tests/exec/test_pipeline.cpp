// The pipeline engine on the host backend: layout, binding, gating, and output equality
// with a plain resident run for every plan and model, after poisoning the device region.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"
#include "exec_test_support.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/pipeline.hpp"

namespace psw::exec {
namespace {

using testing_support::analytic_profile;
using testing_support::plan_for;
using testing_support::expect_causal_trace;
using testing_support::relative_error;

using testing_support::small_input;

torch::Tensor plain_run(const std::string& name, std::uint64_t seed, const torch::Tensor& input) {
  auto model = make_model(name, seed);
  torch::NoGradGuard no_grad;
  return model->forward(input);
}

class PipelineOutputs : public ::testing::TestWithParam<std::tuple<std::string, Strategy>> {};

TEST_P(PipelineOutputs, SwitchedOutputEqualsAPlainRun) {
  const auto& [name, strategy] = GetParam();
  auto model = make_model(name, 11);
  const torch::Tensor input = small_input(*model, 5);
  const torch::Tensor reference = plain_run(name, 11, input);
  auto backend = make_host_backend();
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for(name, strategy));
  PipelineEngine& engine = *engine_owned->engine;
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0xA5 + repetition));
    const torch::Tensor out = engine.switch_in_and_run(input);
    EXPECT_LT(relative_error(out, reference), 1e-5) << name << " repetition " << repetition;
  }
  // The pool was allocated once, at construction, by the layout.
  EXPECT_EQ(engine_owned->region->size(), engine.layout().total_bytes);
}

std::string strategy_label(Strategy s) { return s == Strategy::PerLayer ? "per_layer" : to_string(s); }

INSTANTIATE_TEST_SUITE_P(
    Zoo, PipelineOutputs,
    ::testing::Combine(::testing::Values("resnet152", "inception_v3", "bert_base"),
                       ::testing::Values(Strategy::Optimal, Strategy::Single, Strategy::PerLayer, Strategy::Fixed)),
    [](const auto& p) { return std::get<0>(p.param) + "_" + strategy_label(std::get<1>(p.param)); });

// The pipeline moves a bf16 model's bytes as they are: after poisoning, the switched output
// equals a plain bf16 run of the same seed bit for bit (the same kernels on the same values;
// relative_error would hide a dtype slip, torch::equal does not). ResNet-152 mixes bf16
// tensors with BatchNorm's int64 counts in one layout; BERT is all bf16.
TEST(Pipeline, Bf16SwitchedOutputEqualsAPlainBf16Run) {
  for (const std::string name : {"resnet152", "bert_base"}) {
    auto model = make_model(name, 11, torch::kBFloat16);
    const torch::Tensor input = small_input(*model, 5);
    torch::Tensor reference;
    {
      auto plain = make_model(name, 11, torch::kBFloat16);
      reference = plain->forward(input);
    }
    ASSERT_EQ(reference.scalar_type(), torch::kBFloat16);
    auto backend = make_host_backend();
    auto engine_owned = make_private_pipeline(*backend, *model, plan_for(name, Strategy::Optimal, "bf16"));
    PipelineEngine& engine = *engine_owned->engine;
    for (int repetition = 0; repetition < 2; ++repetition) {
      engine.poison_device_parameters(static_cast<std::uint8_t>(0xA5 + repetition));
      const torch::Tensor out = engine.switch_in_and_run(input);
      EXPECT_EQ(out.scalar_type(), torch::kBFloat16) << name;
      EXPECT_TRUE(torch::equal(out, reference)) << name << " repetition " << repetition;
    }
    // The region holds the bf16 bytes: those of the bf16 profile, half the fp32 ones but for
    // the int64 counts and the alignment.
    EXPECT_GE(engine.layout().total_bytes, analytic_profile(name, "bf16").total_param_bytes());
    EXPECT_LT(engine.layout().total_bytes, analytic_profile(name).total_param_bytes());
  }
}

TEST(Pipeline, PoisonedParametersChangeAResidentRun) {
  // Proves the model reads the bound region: poisoning without a switch breaks the output.
  auto model = make_model("bert_base", 3);
  auto backend = make_host_backend();
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for("bert_base", Strategy::Optimal));
  PipelineEngine& engine = *engine_owned->engine;
  const torch::Tensor input = small_input(*model, 1);
  const torch::Tensor good = engine.switch_in_and_run(input);
  engine.poison_device_parameters(0x00);
  const torch::Tensor zeroed = engine.run_resident(input);
  EXPECT_GT(relative_error(zeroed, good), 1e-3);
}

TEST(Pipeline, VariantsGiveTheSameOutput) {
  auto probe = make_model("resnet152", 2);
  const torch::Tensor input = small_input(*probe, 9);
  const torch::Tensor reference = plain_run("resnet152", 2, input);
  for (TransferMode mode : {TransferMode::Pageable, TransferMode::AllocatePerTensor}) {
    auto model = make_model("resnet152", 2);
    auto backend = make_host_backend();
    auto engine_owned = make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::Optimal), mode);
  PipelineEngine& engine = *engine_owned->engine;
    engine.poison_device_parameters();
    EXPECT_LT(relative_error(engine.switch_in_and_run(input), reference), 1e-5);
  }
}

TEST(Pipeline, HostMappedEmbeddingsGiveTheSameOutput) {
  // BERT's embedding tables read in place from the host copy; the rest switched as usual.
  // BERT-Tiny: the same layers as BERT-base's (three embeddings first), in a hundredth of the time.
  auto model = make_model("bert_tiny", 4);
  const torch::Tensor input = small_input(*model, 3);
  const torch::Tensor reference = plain_run("bert_tiny", 4, input);
  std::vector<bool> host_mapped;
  for (const auto& layer : model->layers()) host_mapped.push_back(layer.kind == "embedding");
  auto backend = make_host_backend();
  auto engine_owned = make_private_pipeline(*backend, *model, plan_for("bert_tiny", Strategy::Optimal), TransferMode::Pipelined, 512,
                        host_mapped);
  PipelineEngine& engine = *engine_owned->engine;
  engine.poison_device_parameters();
  EXPECT_LT(relative_error(engine.switch_in_and_run(input), reference), 1e-5);
  // A grouping whose first group holds only host-mapped layers needs no wait for it.
  auto model2 = make_model("bert_tiny", 4);
  const std::size_t last = model2->layers().size() - 1;
  auto split_owned = make_private_pipeline(*backend, *model2, Grouping{{0, 2}, {3, last}}, TransferMode::Pipelined, 512, host_mapped);
  PipelineEngine& split = *split_owned->engine;
  split.poison_device_parameters();
  EXPECT_LT(relative_error(split.switch_in_and_run(input), reference), 1e-5);
  EXPECT_THROW(make_private_pipeline(*backend, *model2, Grouping{{0, last}}, TransferMode::Pageable, 512, host_mapped),
               InputError);
}

TEST(Pipeline, TracedSwitchIsCausalAndComplete) {
  for (const std::string name : {"inception_v3", "bert_base"}) {
    auto model = make_model(name, 3);
    const torch::Tensor input = small_input(*model, 2);
    auto backend = make_host_backend();
    const Grouping groups = plan_for(name, Strategy::Fixed);
    auto engine_owned = make_private_pipeline(*backend, *model, groups);
  PipelineEngine& engine = *engine_owned->engine;
    EXPECT_THROW(engine.measured_timeline(), Error);  // nothing traced yet
    engine.set_tracing(true);
    engine.poison_device_parameters();
    const torch::Tensor out = engine.switch_in_and_run(input);
    const Timeline t = engine.measured_timeline();
    expect_causal_trace(t, groups);
    Bytes copied = 0;
    for (const auto& gt : t.groups) copied += gt.bytes;
    EXPECT_EQ(copied, engine.layout().total_bytes) << name;
    // Tracing does not change the output.
    EXPECT_LT(relative_error(out, plain_run(name, 3, input)), 1e-5) << name;
  }
  auto model = make_model("resnet152", 3);
  auto backend = make_host_backend();
  auto no_umm_owned = make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::Single), TransferMode::AllocatePerTensor);
  PipelineEngine& no_umm = *no_umm_owned->engine;
  EXPECT_THROW(no_umm.set_tracing(true), InputError);
}

// No optimisation (TransferMode::Unpipelined): every group copied, and the forward starts only
// after the last one arrived; the output is a plain run's. (BERT-Tiny: the subject is the
// engine's order, which a small model shows as well as BERT-base in a tenth of the time.)
TEST(Pipeline, UnpipelinedSwitchComputesOnlyAfterTheLastGroupArrived) {
  auto model = make_model("bert_tiny", 6);
  const torch::Tensor input = small_input(*model, 2);
  const torch::Tensor reference = plain_run("bert_tiny", 6, input);
  auto backend = make_host_backend();
  const Grouping groups = plan_for("bert_tiny", Strategy::PerLayer);
  auto owned = make_private_pipeline(*backend, *model, groups, TransferMode::Unpipelined);
  PipelineEngine& engine = *owned->engine;
  engine.set_tracing(true);
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x3C + repetition));
    EXPECT_LT(relative_error(engine.switch_in_and_run(input), reference), 1e-5) << repetition;
    const Timeline t = engine.measured_timeline();
    expect_causal_trace(t, groups);
    Duration last_arrival = Duration::zero();
    for (const auto& gt : t.groups) last_arrival = max(last_arrival, gt.transfer_end);
    EXPECT_GE(t.startup, last_arrival) << "the first layer started before every group had arrived";
    for (std::size_t g = 0; g < t.groups.size(); ++g) {
      if (t.groups[g].compute_end > t.groups[g].compute_start) EXPECT_GE(t.groups[g].compute_start, last_arrival) << g;
    }
  }
}

// Note [Per-group handles]: the engine opens each group's memory on every switch and resident
// run, binds the group's tensors to it, and lets go of all of it in close_groups(). (BERT-Tiny,
// a group per layer: many groups, in milliseconds.)
TEST(Pipeline, PerGroupMemoryIsOpenedEverySwitchAndClosedAfterTheTask) {
  auto model = make_model("bert_tiny", 7);
  const torch::Tensor input = small_input(*model, 4);
  const torch::Tensor reference = plain_run("bert_tiny", 7, input);
  auto backend = make_host_backend();
  const SwitchPlan plan = plan_for_model(*model, Strategy::Fixed, plan_for("bert_tiny", Strategy::PerLayer));
  const PackedLayout packed = pack_layout(*model, plan.groups);
  ParameterStore store = ParameterStore::allocate(*backend, packed.layout.total_bytes, /*pinned=*/true);
  store.pack(*model, packed);
  // The daemon's memory, one allocation per group; an opening is a tensor over it whose
  // deleter counts the closing.
  std::vector<torch::Tensor> daemon;
  std::size_t with_parameters = 0;
  for (const Bytes span : packed.layout.group_span) {
    daemon.push_back(torch::full({std::max<Bytes>(span, 1)}, 0xEE, torch::kUInt8));
    with_parameters += span > 0 ? 1 : 0;
  }
  ASSERT_GT(with_parameters, 1u);
  std::size_t opened = 0;
  std::size_t closed = 0;
  GroupOpener open = [&](std::size_t g, Bytes bytes) {
    EXPECT_EQ(bytes, packed.layout.group_span.at(g));
    ++opened;
    return torch::from_blob(daemon.at(g).data_ptr(), {bytes}, [&closed](void*) { ++closed; }, torch::kUInt8);
  };
  PipelineEngine engine(*backend, *model, plan, store, open);
  EXPECT_TRUE(engine.per_group_memory());
  auto all_unbound = [&] {
    for (const auto& layer : model->layers()) {
      for (const auto& t : layer.tensors) {
        if (t.numel() != 0) return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(all_unbound()) << "the model's tensors are bound before any switch";
  EXPECT_EQ(opened, 0u);
  EXPECT_EQ(engine.last_eager_host_times().forward, Duration::zero());
  EXPECT_LT(relative_error(engine.switch_in_and_run(input), reference), 1e-5);
  EXPECT_EQ(opened, with_parameters);
  // Note [Host time of an eager switch]: the opens, bindings and copies before the forward.
  EXPECT_GT(engine.last_eager_host_times().prepare, Duration::zero());
  EXPECT_GT(engine.last_eager_host_times().forward, Duration::zero());
  EXPECT_EQ(engine.group_opens(), with_parameters);
  EXPECT_EQ(closed, 0u) << "group memory closed during the task";
  engine.close_groups();
  EXPECT_EQ(closed, with_parameters) << "the engine still holds group memory after close_groups()";
  EXPECT_TRUE(all_unbound());
  // A resident run opens the handles again and reads what the switch left in the daemon's memory.
  EXPECT_LT(relative_error(engine.run_resident(input), reference), 1e-5);
  EXPECT_EQ(opened, 2 * with_parameters);
  EXPECT_EQ(engine.last_eager_host_times().prepare, Duration::zero()) << "a resident run is no switch";
  EXPECT_EQ(engine.last_eager_host_times().forward, Duration::zero());
  engine.close_groups();
  // It reads the daemon's memory, nothing of its own: zeroed there, the output changes...
  for (auto& d : daemon) d.zero_();
  const torch::Tensor zeroed = engine.run_resident(input);
  EXPECT_GT(relative_error(zeroed, reference), 1e-3);
  engine.close_groups();
  // ...and a switch copies the parameters back into it.
  EXPECT_LT(relative_error(engine.switch_in_and_run(input), reference), 1e-5);
  engine.close_groups();
  EXPECT_EQ(opened, 4 * with_parameters);
  EXPECT_EQ(closed, opened);
}

// Unified memory (TransferMode::OnDemand): the region is the parameters; a switch copies
// nothing over it.
TEST(Pipeline, ManagedRegionIsTheParametersAndASwitchCopiesNothing) {
  auto model = make_model("resnet152", 8);
  const torch::Tensor input = small_input(*model, 3);
  const torch::Tensor reference = plain_run("resnet152", 8, input);
  auto backend = make_host_backend();
  auto owned = make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::Optimal), TransferMode::OnDemand);
  PipelineEngine& engine = *owned->engine;
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.evict_to_host();
    EXPECT_LT(relative_error(engine.switch_in_and_run(input), reference), 1e-5) << repetition;
  }
  EXPECT_THROW(engine.poison_device_parameters(), InputError);
  EXPECT_THROW(engine.set_tracing(true), InputError);
  owned->region->bytes().zero_();
  EXPECT_GT(relative_error(engine.switch_in_and_run(input), reference), 1e-3) << "the switch copied over the region";
  // Eviction is of managed memory only.
  auto other = make_model("resnet152", 8);
  auto pipelined = make_private_pipeline(*backend, *other, plan_for("resnet152", Strategy::Optimal));
  EXPECT_THROW(pipelined->engine->evict_to_host(), InputError);
}

TEST(Pipeline, LayoutKeepsGroupsContiguousAndTensorsAligned) {
  auto model = make_model("inception_v3", 0);
  auto backend = make_host_backend();
  const Grouping groups = plan_for("inception_v3", Strategy::Fixed);
  auto engine_owned = make_private_pipeline(*backend, *model, groups);
  PipelineEngine& engine = *engine_owned->engine;
  const auto& layout = engine.layout();
  ASSERT_EQ(layout.group_offset.size(), groups.size());
  for (std::size_t g = 0; g + 1 < groups.size(); ++g) {
    EXPECT_EQ(layout.group_offset[g] + layout.group_span[g], layout.group_offset[g + 1]);
    EXPECT_EQ(layout.group_offset[g] % 512, 0);
  }
  for (const auto& layer : model->layers()) {
    for (const auto& t : layer.tensors) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16, 0u) << layer.name;
    }
  }
}

TEST(Pipeline, RejectsAGroupingOfAnotherModel) {
  auto model = make_model("bert_base", 0);
  auto backend = make_host_backend();
  EXPECT_THROW(make_private_pipeline(*backend, *model, plan_for("resnet152", Strategy::Single)), InputError);
}

// Note [Layer fingerprint]: a plan made from a profile is accepted by the live model it
// describes, and refused by another model or by the same layers in another order.
TEST(Pipeline, PlanFromTheProfileMatchesTheLiveModelAndNoOther) {
  const std::string root = PSW_SOURCE_DIR;
  const ModelProfile profile = load_model_profile(root + "/configs/models/resnet152.yaml");
  const HardwareProfile hw = load_hardware_profile(root + "/configs/hardware/h200-pcie5.yaml");
  const SwitchPlan plan = make_switch_plan(profile, hw, Task::Inference, Strategy::Optimal, Placement::Copy);
  auto resnet = make_model("resnet152", 0);
  EXPECT_EQ(plan.fingerprint, layer_fingerprint(*resnet));
  auto backend = make_host_backend();
  EXPECT_NO_THROW(make_private_pipeline(*backend, *resnet, plan));
  // A plan round-tripped through its YAML file is the same plan.
  const SwitchPlan again = parse_switch_plan(to_yaml(plan), "plan.yaml");
  EXPECT_EQ(again.groups, plan.groups);
  EXPECT_EQ(again.fingerprint, plan.fingerprint);
  EXPECT_EQ(again.strategy, plan.strategy);
  EXPECT_EQ(again.host_mapped, plan.host_mapped);
  auto bert = make_model("bert_base", 0);
  EXPECT_THROW(make_private_pipeline(*backend, *bert, plan), InputError);
  // Same model name and layer count, two layers swapped: refused by the fingerprint.
  ModelProfile swapped = profile;
  std::swap(swapped.layers[3], swapped.layers[4]);
  SwitchPlan wrong = plan;
  wrong.fingerprint = layer_fingerprint(swapped);
  try {
    make_private_pipeline(*backend, *resnet, wrong);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fingerprint"), std::string::npos) << e.what();
  }
}

TEST(Backend, UnknownBackendsAreRefused) {
  EXPECT_THROW(make_backend("tpu"), InputError);
  EXPECT_EQ(make_backend("host")->name(), "host");
}

TEST(Backend, CopyToDeviceCopiesTheHostBytesIntoTheTensor) {
  auto backend = make_backend("host");
  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), -3.5f);
  torch::Tensor dst = torch::zeros({10, 100}, torch::dtype(torch::kFloat32).device(backend->device()));
  backend->copy_to_device(dst, host.data());
  backend->synchronize();
  EXPECT_TRUE(torch::equal(dst.flatten(), torch::from_blob(host.data(), {1000}, torch::kFloat32)));
  // A strided view would be written past its elements: refused.
  EXPECT_ANY_THROW(backend->copy_to_device(dst.t(), host.data()));
}

#if !PSW_WITH_CUDA
TEST(Backend, CudaIsRefusedClearlyWithoutACudaBuild) {
  try {
    make_backend("cuda");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("without CUDA"), std::string::npos);
  }
}
#endif

}  // namespace
}  // namespace psw::exec
