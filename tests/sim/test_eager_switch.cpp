// Note [Eager switch in the simulator]: the timeline of a switch the server runs call by call,
// against the pipeline it reduces to and the host-bound switch it becomes.

#include <gtest/gtest.h>

#include <filesystem>

#include "psw/common/config.hpp"
#include "psw/common/timeline.hpp"
#include "psw/sim/mechanism.hpp"

namespace psw::sim {
namespace {

const std::filesystem::path kRoot(PSW_SOURCE_DIR);

struct Fixture {
  HardwareProfile hw = load_hardware_profile(kRoot / "configs/hardware/h200-pcie5.yaml");
  std::vector<ModelProfile> models;
  Fixture() {
    hw.eager_switch.clear();  // the shipped profile's entries: each test sets its own
    for (const char* name : {"resnet152", "inception_v3", "bert_base"}) {
      models.push_back(load_model_profile(kRoot / "configs/models/h200" / (std::string(name) + ".yaml")));
    }
  }
  // A model's inference costs on `link`, with the plain group sync and the GPU free at `gpu_free`.
  SwitchCosts costs(const ModelProfile& model, const LinkCost& link, Duration gpu_free = Duration::zero()) const {
    const SwitchCosts base = make_switch_costs(model, hw, Task::Inference);
    std::vector<Bytes> bytes;
    std::vector<Duration> compute;
    for (std::size_t k = 0; k < base.num_layers(); ++k) {
      bytes.push_back(base.layer_bytes(k));
      compute.push_back(base.layer_compute(k));
    }
    return SwitchCosts(bytes, compute, link, hw.group_sync, Duration::zero(), gpu_free);
  }
};

TEST(EagerSwitch, WithoutHostTimeItIsThePipeline) {
  const Fixture f;
  int compared = 0;
  for (const ModelProfile& model : f.models) {
    const Grouping groups = make_plan(Strategy::Optimal, f.costs(model, f.hw.pinned)).groups;
    for (Duration stop : {Duration::zero(), microseconds(300), milliseconds(40)}) {
      const Timeline pipeline = evaluate_timeline(f.costs(model, f.hw.pinned, stop), groups);
      for (EagerCopies copies : {EagerCopies::Enqueued, EagerCopies::Pageable}) {
        const EagerSwitchTimes eager = eager_switch_times(f.costs(model, f.hw.pinned), groups, {}, copies, stop);
        EXPECT_EQ(eager.startup, pipeline.startup) << model.name;
        EXPECT_EQ(eager.total, pipeline.total) << model.name;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18);
}

TEST(EagerSwitch, AHostSlowerThanTheDeviceSetsThePace) {
  const Fixture f;
  const ModelProfile& resnet = f.models[0];
  const SwitchCosts costs = f.costs(resnet, f.hw.pinned);
  const Grouping groups = make_plan(Strategy::Optimal, costs).groups;
  const Timeline pipeline = evaluate_timeline(costs, groups);
  // The forward's calls ten times the device's whole switch: the last layer ends with the last
  // call, plus at most one layer's compute and a group sync.
  const EagerHostTimes host{milliseconds(3), pipeline.total * 10};
  const EagerSwitchTimes eager = eager_switch_times(costs, groups, host, EagerCopies::Enqueued, Duration::zero());
  Duration longest_layer = Duration::zero();
  for (std::size_t l = 0; l < costs.num_layers(); ++l) longest_layer = max(longest_layer, costs.layer_compute(l));
  EXPECT_GE(eager.total, host.prepare + host.forward);
  EXPECT_LE(eager.total, host.prepare + host.forward + longest_layer + f.hw.group_sync);
  // No layer starts before the prepare is done and the forward called.
  EXPECT_GE(eager.startup, host.prepare);
  // A slower prepare delays the switch by at least what it adds beyond the device's pace.
  const EagerHostTimes slower{milliseconds(30), pipeline.total * 10};
  EXPECT_GE(eager_switch_times(costs, groups, slower, EagerCopies::Enqueued, Duration::zero()).total,
            eager.total + milliseconds(27));
}

TEST(EagerSwitch, PerTensorCopiesComeBeforeTheForwardPageableOnesWithTheHost) {
  const Fixture f;
  const ModelProfile& bert = f.models[2];
  const SwitchCosts costs = f.costs(bert, f.hw.pinned);
  const Grouping groups = make_plan(Strategy::Optimal, costs).groups;
  ASSERT_GT(groups.size(), 2u);
  Duration copies = Duration::zero();
  for (const LayerGroup& g : groups) copies += costs.transfer_time(g.first, g.last);
  // Per tensor: on the compute stream, so the first layer waits for every copy.
  const EagerSwitchTimes per_tensor = eager_switch_times(costs, groups, {}, EagerCopies::PerTensor, Duration::zero());
  EXPECT_EQ(per_tensor.startup, copies + f.hw.group_sync);
  EXPECT_GT(per_tensor.total, evaluate_timeline(costs, groups).total);
  // Pageable: a host that returns from its copies later than the link would finish them sets
  // the arrivals; the first group arrives with its share of the prepare (by bytes).
  const EagerHostTimes staged{copies * 2, Duration::zero()};
  const EagerSwitchTimes pageable = eager_switch_times(costs, groups, staged, EagerCopies::Pageable, Duration::zero());
  EXPECT_GE(pageable.total, staged.prepare + costs.compute(groups.back().first, groups.back().last));
  // Enqueued copies after a prepare that long start late and then take the link's time: never
  // sooner than copies the host has finished itself.
  const EagerSwitchTimes enqueued = eager_switch_times(costs, groups, staged, EagerCopies::Enqueued, Duration::zero());
  EXPECT_GE(enqueued.total, pageable.total);
  EXPECT_GE(enqueued.startup, pageable.startup);
}

TEST(EagerSwitch, TheMechanismTakesTheServersHostTimesWhereTheProfileHasThem) {
  Fixture f;
  const EagerHostTimes host{milliseconds(6), milliseconds(5)};
  f.hw.eager_switch[{"resnet152", "no-ipc-optimization"}] = host;
  const MechanismModel with(Mechanism::NoIpcOptimization, f.hw, f.models, Strategy::Optimal, Placement::Copy, {});
  HardwareProfile without_hw = f.hw;
  without_hw.eager_switch.clear();
  const MechanismModel without(Mechanism::NoIpcOptimization, without_hw, f.models, Strategy::Optimal, Placement::Copy, {});
  const Duration stop = microseconds(500);
  // ResNet-152: the eager timeline of its plan (the same groups as without the entry).
  const Grouping& groups = with.grouping(0, Task::Inference);
  EXPECT_EQ(groups, without.grouping(0, Task::Inference));
  const EagerSwitchTimes expected =
      eager_switch_times(f.costs(f.models[0], f.hw.pinned), groups, host, EagerCopies::Enqueued, stop);
  const SwitchInCost resnet = with.switch_in(0, Task::Inference, stop, std::nullopt);
  EXPECT_EQ(resnet.startup, expected.startup);
  EXPECT_EQ(resnet.finish, expected.total);
  EXPECT_NE(resnet.finish, without.switch_in(0, Task::Inference, stop, std::nullopt).finish);
  // BERT-base has no entry: the analytic costs, as without any.
  EXPECT_EQ(with.switch_in(2, Task::Inference, stop, std::nullopt).finish,
            without.switch_in(2, Task::Inference, stop, std::nullopt).finish);
  // Training switches keep the analytic costs.
  EXPECT_EQ(with.switch_in(0, Task::Training, stop, std::nullopt).finish,
            without.switch_in(0, Task::Training, stop, std::nullopt).finish);
}

// Note [Training abort]: one process's worker takes the request after the training's stop and
// abort, so its switch follows them (the engine's clock starts there), with the server's host
// times where the profile has them (per tensor, on the compute stream).
TEST(EagerSwitch, OneProcessSwitchesAfterTheTrainingsAbort) {
  Fixture f;
  f.hw.training_abort = milliseconds(7);
  const EagerHostTimes host{milliseconds(12), milliseconds(11)};
  f.hw.eager_switch[{"resnet152", "one-process"}] = host;
  const MechanismModel one(Mechanism::OneProcess, f.hw, f.models, Strategy::Optimal, Placement::Copy, {});
  EXPECT_EQ(one.training_abort(), milliseconds(7));
  EXPECT_EQ(MechanismModel(Mechanism::PipeSwitch, f.hw, f.models, Strategy::Optimal, Placement::Copy, {}).training_abort(),
            Duration::zero())
      << "a worker of its own serves: nothing to abort first";
  const Duration stop = microseconds(300) + one.training_abort();
  const EagerSwitchTimes expected = eager_switch_times(f.costs(f.models[0], f.hw.pinned), one.grouping(0, Task::Inference),
                                                       host, EagerCopies::PerTensor, Duration::zero());
  const SwitchInCost resnet = one.switch_in(0, Task::Inference, stop, std::nullopt);
  EXPECT_EQ(resnet.worker_ready, stop);
  EXPECT_EQ(resnet.startup, stop + expected.startup);
  EXPECT_EQ(resnet.finish, stop + expected.total);
  EXPECT_GE(resnet.finish - resnet.worker_ready, host.prepare + host.forward) << "the host's own time";
  // BERT-base has no entry: the paper's analytic switch, also after the stop, not beside it.
  const SwitchInCost bert = one.switch_in(2, Task::Inference, stop, std::nullopt);
  const SwitchInCost bert_at_once = one.switch_in(2, Task::Inference, Duration::zero(), std::nullopt);
  EXPECT_EQ(bert.worker_ready, stop);
  EXPECT_EQ(bert.finish, bert_at_once.finish + stop);
}

}  // namespace
}  // namespace psw::sim
