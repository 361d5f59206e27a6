// Parallel transmission through helper GPUs (Note [Parallel paths], [Balanced split],
// [Parallel planner]): the timeline reduces exactly to the single-GPU one, hand-computed
// helper paths, the balanced split against every split of one group, the planner against
// brute force, and the two-link pipeline bound below every plan.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/parallel.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/timeline.hpp"

namespace psw {
namespace {

std::filesystem::path source_path(const std::string& relative) {
  return std::filesystem::path(PSW_SOURCE_DIR) / relative;
}

// Every shipped model profile, the measured H200 ones included.
std::vector<std::filesystem::path> shipped_models() {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(source_path("configs/models"))) {
    if (entry.path().extension() == ".yaml") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A random grouping of n layers (each boundary cut with probability 1/4).
Grouping random_grouping(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::size_t> ends;
  for (std::size_t k = 1; k < n; ++k) {
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) ends.push_back(k);
  }
  ends.push_back(n);
  return grouping_from_ends(ends);
}

void expect_same_group(const GroupTiming& a, const GroupTiming& b) {
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.transfer_start, b.transfer_start);
  EXPECT_EQ(a.transfer_end, b.transfer_end);
  EXPECT_EQ(a.compute_start, b.compute_start);
  EXPECT_EQ(a.compute_end, b.compute_end);
}

// Every field of the parallel timeline of an all-direct plan equals the single-GPU one.
void expect_reduces(const ParallelCosts& costs, const Grouping& groups) {
  const Timeline one = evaluate_timeline(costs.costs(), groups);
  const ParallelPlan direct = all_direct(costs, groups);
  const ParallelTimeline many = evaluate_parallel_timeline(costs, direct);
  ASSERT_EQ(one.groups.size(), many.groups.size());
  for (std::size_t g = 0; g < one.groups.size(); ++g) {
    expect_same_group(one.groups[g], many.groups[g].timing);
    EXPECT_TRUE(many.groups[g].paths[0].used);
    for (std::size_t p = 1; p < costs.num_paths(); ++p) EXPECT_FALSE(many.groups[g].paths[p].used);
  }
  EXPECT_EQ(one.total, many.total);
  EXPECT_EQ(one.startup, many.startup);
  EXPECT_EQ(one.overhead, many.overhead);
  EXPECT_EQ(one.ready, many.ready);
  EXPECT_EQ(evaluate_parallel_total(costs, direct), one.total);
  EXPECT_EQ(evaluate_total(costs.costs(), groups), one.total);
}

TEST(ParallelTimeline, ReducesToOneGpuOnEveryShippedModel) {
  const HardwareProfile hw = load_hardware_profile(source_path("configs/hardware/h200-pcie5-nvlink.yaml"));
  std::mt19937_64 rng(10);
  for (const auto& path : shipped_models()) {
    const ModelProfile model = load_model_profile(path);
    for (const Task task : {Task::Inference, Task::Training}) {
      if (task == Task::Training && model.source.kind == ProfileSource::Measured) {
        bool has_backward = true;
        for (const auto& layer : model.layers) has_backward = has_backward && layer.backward_time.has_value();
        if (!has_backward) continue;
      }
      SCOPED_TRACE(path.string() + (task == Task::Training ? " training" : " inference"));
      const SwitchCosts costs = make_switch_costs(model, hw, task);
      const std::size_t n = costs.num_layers();
      std::vector<Grouping> groupings{single_group(n), per_layer_groups(n), make_plan(Strategy::Optimal, costs).groups};
      for (int r = 0; r < 20; ++r) groupings.push_back(random_grouping(rng, n));
      for (const int gpus : {1, 2, 8}) {
        const ParallelCosts parallel = make_parallel_costs(costs, hw, gpus, gpus == 8);
        for (const Grouping& g : groupings) expect_reduces(parallel, g);
      }
      // One GPU: the balanced split is all direct, and the bound is the single-link bound.
      const ParallelCosts alone = make_parallel_costs(costs, hw, 1, false);
      EXPECT_EQ(parallel_pipeline_bound(alone), pipeline_bound(costs));
      for (const Grouping& g : groupings) {
        const ParallelPlan balanced = balanced_splits(alone, g);
        for (std::size_t k = 0; k < g.size(); ++k) {
          ASSERT_EQ(balanced.splits[k].size(), 1u);
          EXPECT_EQ(balanced.splits[k][0], costs.bytes(g[k].first, g[k].last));
        }
        EXPECT_EQ(balanced_total(alone, g), evaluate_total(costs, g));
      }
    }
  }
}

TEST(ParallelTimeline, ReducesWithABusyGpuAndATail) {
  const SwitchCosts costs({100, 0, 50, 200}, {nanoseconds(30), nanoseconds(5), nanoseconds(80), nanoseconds(40)},
                          LinkCost{nanoseconds(10), Bandwidth::bytes_per_second(1'000'000'000)}, nanoseconds(1),
                          nanoseconds(7), nanoseconds(500));
  const ParallelCosts parallel(costs, {HelperPath{LinkCost{nanoseconds(10), Bandwidth::bytes_per_second(1'000'000'000)},
                                                  LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(10'000'000'000)},
                                                  100}});
  for (std::uint32_t mask = 0; mask < 8; ++mask) {
    std::vector<std::size_t> ends;
    for (std::size_t k = 0; k < 3; ++k) {
      if (mask >> k & 1u) ends.push_back(k + 1);
    }
    ends.push_back(4);
    expect_reduces(parallel, grouping_from_ends(ends));
  }
}

// 1 byte per ns on both host links (10 ns per copy), 10 bytes per ns over NVLink with no fixed
// cost, chunks of 100 bytes.
ParallelCosts hand_costs() {
  const SwitchCosts costs({400, 100}, {nanoseconds(50), nanoseconds(20)},
                          LinkCost{nanoseconds(10), Bandwidth::bytes_per_second(1'000'000'000)}, nanoseconds(1));
  return ParallelCosts(costs, {HelperPath{LinkCost{nanoseconds(10), Bandwidth::bytes_per_second(1'000'000'000)},
                                          LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(10'000'000'000)},
                                          100}});
}

TEST(ParallelTimeline, HandComputedHelperPath) {
  const ParallelCosts costs = hand_costs();
  ParallelPlan plan;
  plan.groups = {{0, 0}, {1, 1}};
  plan.splits = {{200, 200}, {0, 100}};
  const ParallelTimeline t = evaluate_parallel_timeline(costs, plan);
  // Group 0: direct 0 -> 10 + 200 = 210. Helper: stage A 0 -> 10 + 200 = 210, in two chunks;
  // the first is on the helper at 110 and hops by 110 + 20 = 130 for both, the last hops
  // 210 -> 220. Arrival 220; compute 221..271.
  EXPECT_EQ(t.groups[0].paths[0].end, nanoseconds(210));
  EXPECT_EQ(t.groups[0].paths[1].host_end, nanoseconds(210));
  EXPECT_EQ(t.groups[0].paths[1].end, nanoseconds(220));
  EXPECT_EQ(t.groups[0].timing.transfer_start, nanoseconds(0));
  EXPECT_EQ(t.groups[0].timing.transfer_end, nanoseconds(220));
  EXPECT_EQ(t.groups[0].timing.compute_start, nanoseconds(221));
  EXPECT_EQ(t.groups[0].timing.compute_end, nanoseconds(271));
  // Group 1 all through the helper: its host link is free at 210, stage A 210 -> 320; one
  // chunk, it hops 320 -> 330. The direct path carries no copy.
  EXPECT_FALSE(t.groups[1].paths[0].used);
  EXPECT_EQ(t.groups[1].paths[1].start, nanoseconds(210));
  EXPECT_EQ(t.groups[1].paths[1].end, nanoseconds(330));
  EXPECT_EQ(t.groups[1].timing.transfer_start, nanoseconds(210));
  EXPECT_EQ(t.groups[1].timing.compute_start, nanoseconds(331));
  EXPECT_EQ(t.total, nanoseconds(351));
  EXPECT_EQ(t.startup, nanoseconds(221));
  EXPECT_EQ(evaluate_parallel_total(costs, plan), t.total);
}

// Note [Parallel paths]: the chunk flow shop when the host link is the faster stage: the
// hops are the bottleneck, from the first chunk's arrival on.
TEST(ParallelTimeline, HopBoundHelperPath) {
  const SwitchCosts costs({300}, {nanoseconds(1)}, LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(1'000'000'000)},
                          nanoseconds(0));
  // Host link 10 B/ns, no fixed cost; peer 1 B/ns with 5 ns per chunk copy; chunks of 100.
  const ParallelCosts parallel(costs, {HelperPath{LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(10'000'000'000)},
                                                  LinkCost{nanoseconds(5), Bandwidth::bytes_per_second(1'000'000'000)},
                                                  100}});
  ParallelPlan plan{{{0, 0}}, {{0, 300}}};
  // First chunk on the helper at 10; three hops of 5 + 100 each: 10 + 315 = 325.
  EXPECT_EQ(evaluate_parallel_timeline(parallel, plan).groups[0].timing.transfer_end, nanoseconds(325));
}

// For one group, the balanced split arrives no later than any split of its bytes.
TEST(ParallelSplit, BalancedIsTheBestSplitOfOneGroup) {
  const ParallelCosts costs = hand_costs();
  const Grouping one{{0, 1}};
  const ParallelPlan balanced = balanced_splits(costs, one);
  const Duration arrival = evaluate_parallel_timeline(costs, balanced).groups[0].timing.transfer_end;
  Duration best = Duration::max();
  for (Bytes h = 0; h <= 500; ++h) {
    const ParallelPlan plan{one, {{500 - h, h}}};
    best = min(best, evaluate_parallel_timeline(costs, plan).groups[0].timing.transfer_end);
  }
  EXPECT_EQ(arrival, best);
  EXPECT_GT(balanced.splits[0][1], 0);  // the helper is worth using here
  EXPECT_LT(arrival, nanoseconds(10 + 500));  // faster than all direct
}

// Note [Balanced split]: without fixed costs the balanced split is optimal for a grouping in
// the fluid limit; with chunks it may lose at most the chunk fill (one chunk's host copy and
// hop) per group. Checked against every split in eighths of each group's bytes.
TEST(ParallelSplit, BalancedIsNearOptimalForAGroupingWithoutFixedCosts) {
  std::mt19937_64 rng(11);
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int instance = 0; instance < 25; ++instance) {
    SCOPED_TRACE(instance);
    const std::size_t n = 5;
    std::vector<Bytes> bytes(n);
    std::vector<Duration> compute(n);
    for (std::size_t i = 0; i < n; ++i) {
      bytes[i] = uniform(100'000, 2'000'000);
      compute[i] = nanoseconds(uniform(1'000, 60'000));
    }
    const SwitchCosts costs(bytes, compute, LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(uniform(10, 60) * 1'000'000'000)},
                            nanoseconds(0));
    const HelperPath helper{LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(uniform(10, 60) * 1'000'000'000)},
                            LinkCost{nanoseconds(0), Bandwidth::bytes_per_second(360'000'000'000)}, 4'096};
    const ParallelCosts parallel(costs, {helper});
    const Grouping groups = random_grouping(rng, n);
    ParallelPlan plan{groups, std::vector<PathSplit>(groups.size(), PathSplit(2, 0))};
    Duration best = Duration::max();
    const std::function<void(std::size_t)> search = [&](std::size_t g) {
      if (g == groups.size()) {
        best = min(best, evaluate_parallel_total(parallel, plan));
        return;
      }
      const Bytes b = costs.bytes(groups[g].first, groups[g].last);
      for (int k = 0; k <= 8; ++k) {
        plan.splits[g] = {b - b * k / 8, b * k / 8};
        search(g + 1);
      }
    };
    search(0);
    const Duration fill = helper.host.bandwidth.transfer_time(helper.chunk_bytes) +
                          helper.peer.bandwidth.transfer_time(helper.chunk_bytes) + nanoseconds(2);
    EXPECT_LE(balanced_total(parallel, groups), best + fill * static_cast<std::int64_t>(groups.size()));
  }
}

TEST(ParallelTimeline, RefusesBadSplits) {
  const ParallelCosts costs = hand_costs();
  const Grouping g{{0, 0}, {1, 1}};
  EXPECT_THROW(evaluate_parallel_timeline(costs, ParallelPlan{g, {{400, 0}}}), InputError);            // one split
  EXPECT_THROW(evaluate_parallel_timeline(costs, ParallelPlan{g, {{400}, {100}}}), InputError);        // one path
  EXPECT_THROW(evaluate_parallel_timeline(costs, ParallelPlan{g, {{300, 0}, {100, 0}}}), InputError);  // bytes lost
  EXPECT_THROW(evaluate_parallel_timeline(costs, ParallelPlan{g, {{500, -100}, {100, 0}}}), InputError);
  EXPECT_THROW(evaluate_parallel_timeline(costs, ParallelPlan{{{0, 1}, {1, 1}}, {{500, 0}, {100, 0}}}), InputError);
}

TEST(ParallelCosts, FromTheHardwareProfile) {
  const HardwareProfile hw = load_hardware_profile(source_path("configs/hardware/h200-pcie5-nvlink.yaml"));
  const HardwareProfile one = load_hardware_profile(source_path("configs/hardware/h200-pcie5.yaml"));
  const ModelProfile model = load_model_profile(source_path("configs/models/bert_base.yaml"));
  const SwitchCosts costs = make_switch_costs(model, hw, Task::Inference);
  const ParallelCosts idle = make_parallel_costs(costs, hw, 4, false);
  ASSERT_EQ(idle.helpers().size(), 3u);
  EXPECT_EQ(idle.helpers()[0].host.bandwidth, hw.pinned.bandwidth);
  // Three helpers share the target's NVLink ingress evenly.
  ASSERT_TRUE(hw.multi_gpu->peer_ingress.has_value());
  EXPECT_EQ(idle.helpers()[0].peer.bandwidth.bytes_per_second(),
            std::min(hw.multi_gpu->peer_link.bandwidth.bytes_per_second(),
                     hw.multi_gpu->peer_ingress->bytes_per_second() / 3));
  EXPECT_EQ(make_parallel_costs(costs, hw, 2, false).helpers()[0].peer.bandwidth, hw.multi_gpu->peer_link.bandwidth);
  // A training helper forwards at helper_busy_share_percent of its link.
  const ParallelCosts busy = make_parallel_costs(costs, hw, 4, true);
  EXPECT_EQ(busy.helpers()[2].host.bandwidth.bytes_per_second(),
            hw.pinned.bandwidth.bytes_per_second() * hw.multi_gpu->helper_busy_share_percent / 100);
  EXPECT_EQ(busy.helpers()[2].host.copy_fixed, hw.pinned.copy_fixed);
  EXPECT_THROW(make_parallel_costs(costs, hw, 9, false), InputError);   // the host has 8
  EXPECT_THROW(make_parallel_costs(costs, hw, 0, false), InputError);
  EXPECT_THROW(make_parallel_costs(costs, one, 2, false), InputError);  // no multi_gpu section
  EXPECT_EQ(make_parallel_costs(costs, one, 1, false).helpers().size(), 0u);
  EXPECT_THROW(ParallelCosts(costs, {HelperPath{hw.pinned, hw.pinned, 0}}), InputError);  // no chunk
}

// A random small instance whose helpers differ from the direct link and from each other.
ParallelCosts random_parallel(std::mt19937_64& rng, std::size_t n, std::size_t helpers) {
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const bool transfer_bound = uniform(0, 1) == 0;
  std::vector<Bytes> bytes(n);
  std::vector<Duration> compute(n);
  for (std::size_t i = 0; i < n; ++i) {
    bytes[i] = uniform(0, 5) == 0 ? 0 : uniform(1'000, 400'000);
    compute[i] = nanoseconds(uniform(0, 6) == 0 ? 0 : uniform(100, transfer_bound ? 20'000 : 200'000));
  }
  const LinkCost direct{nanoseconds(uniform(0, 3'000)), Bandwidth::bytes_per_second(uniform(5'000'000'000, 60'000'000'000))};
  std::vector<HelperPath> paths;
  for (std::size_t h = 0; h < helpers; ++h) {
    paths.push_back(HelperPath{
        LinkCost{nanoseconds(uniform(0, 3'000)), Bandwidth::bytes_per_second(uniform(5'000'000'000, 60'000'000'000))},
        LinkCost{nanoseconds(uniform(0, 8'000)), Bandwidth::bytes_per_second(uniform(20'000'000'000, 400'000'000'000))},
        uniform(4'096, 200'000)});
  }
  const SwitchCosts costs(bytes, compute, direct, nanoseconds(uniform(0, 2'000)),
                          nanoseconds(uniform(0, 1) == 0 ? 0 : uniform(1, 50'000)),
                          nanoseconds(uniform(0, 2) == 0 ? uniform(1, 100'000) : 0));
  return ParallelCosts(costs, std::move(paths));
}

struct BruteCase {
  std::size_t layers;
  std::size_t helpers;
  int steps;
  int instances;
};

// Note [Parallel planner]: within kParallelPlannerBound of brute force over groupings and
// discretized splits; never slower than one GPU; above the multi-link pipeline bound.
TEST(ParallelPlanner, WithinTheDocumentedBoundOfBruteForce) {
  std::mt19937_64 rng(2020);
  double worst = 0;
  for (const BruteCase& c : {BruteCase{5, 1, 4, 60}, BruteCase{6, 1, 4, 20}, BruteCase{5, 2, 3, 12},
                             BruteCase{4, 3, 2, 12}}) {
    for (int i = 0; i < c.instances; ++i) {
      SCOPED_TRACE(testing::Message() << c.layers << " layers, " << c.helpers << " helpers, instance " << i);
      const ParallelCosts costs = random_parallel(rng, c.layers, c.helpers);
      const ParallelPlanResult planned = plan_parallel(costs);
      const ParallelPlanResult brute = plan_parallel_brute_force(costs, c.steps);
      EXPECT_EQ(evaluate_parallel_total(costs, planned.plan), planned.total);
      EXPECT_EQ(evaluate_parallel_total(costs, brute.plan), brute.total);
      const double ratio = static_cast<double>(planned.total.ns()) / static_cast<double>(brute.total.ns());
      worst = std::max(worst, ratio);
      EXPECT_LE(ratio, kParallelPlannerBound);
      EXPECT_LE(planned.total, planned.single_gpu_total);
      EXPECT_LE(brute.total, brute.single_gpu_total);  // all direct is among the brute force's splits
      const Duration bound = parallel_pipeline_bound(costs);
      EXPECT_LE(bound, planned.total);
      EXPECT_LE(bound, brute.total);
    }
  }
  RecordProperty("worst_ratio_over_brute_force", testing::PrintToString(worst));
  std::printf("worst planner / brute force: %.4f (bound %.2f)\n", worst, kParallelPlannerBound);
}

// No helpers: the single-GPU planner's plan and total exactly.
TEST(ParallelPlanner, EqualsTheSingleGpuPlannerWithoutHelpers) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 30; ++i) {
    const ParallelCosts costs = random_parallel(rng, 12, 0);
    const PlanResult single = make_plan(Strategy::Optimal, costs.costs());
    const ParallelPlanResult planned = plan_parallel(costs);
    EXPECT_EQ(planned.plan.groups, single.groups);
    EXPECT_EQ(planned.total, single.total);
    EXPECT_EQ(planned.single_gpu_total, single.total);
  }
  const HardwareProfile hw = load_hardware_profile(source_path("configs/hardware/h200-pcie5-nvlink.yaml"));
  for (const auto& path : shipped_models()) {
    const SwitchCosts costs = make_switch_costs(load_model_profile(path), hw, Task::Inference);
    const ParallelPlanResult planned = plan_parallel(make_parallel_costs(costs, hw, 1, false));
    const PlanResult single = make_plan(Strategy::Optimal, costs);
    EXPECT_EQ(planned.plan.groups, single.groups) << path;
    EXPECT_EQ(planned.total, single.total) << path;
  }
}

// The shipped H200 profile: more GPUs never slow a switch, training helpers never beat idle
// ones, and every plan is within 1.10 of its multi-link pipeline bound (the parallel
// planner's target).
TEST(ParallelPlanner, ShippedModelsOnSeveralH200s) {
  const HardwareProfile hw = load_hardware_profile(source_path("configs/hardware/h200-pcie5-nvlink.yaml"));
  for (const std::string name : {"resnet152", "inception_v3", "bert_base"}) {
    SCOPED_TRACE(name);
    const SwitchCosts costs = make_switch_costs(load_model_profile(source_path("configs/models/" + name + ".yaml")),
                                                hw, Task::Inference);
    Duration previous = Duration::max();
    for (const int gpus : {1, 2, 4, 8}) {
      SCOPED_TRACE(testing::Message() << gpus << " GPUs");
      const ParallelCosts parallel = make_parallel_costs(costs, hw, gpus, false);
      const ParallelPlanResult planned = plan_parallel(parallel);
      EXPECT_LE(planned.total, previous);
      const Duration bound = parallel_pipeline_bound(parallel);
      EXPECT_LE(bound, planned.total);
      EXPECT_LE(static_cast<double>(planned.total.ns()), 1.10 * static_cast<double>(bound.ns()));
      EXPECT_EQ(evaluate_parallel_timeline(parallel, planned.plan).total, planned.total);
      previous = planned.total;
      EXPECT_GE(plan_parallel(make_parallel_costs(costs, hw, gpus, true)).total, planned.total);
    }
  }
}

// DESIGN.md §6: a transfer-bound switch on two H200s at most 0.55 x its single-link time.
// BERT-base's bytes with its compute divided by 50 (about batch 1 and less: every layer
// copied, the links the bottleneck).
TEST(ParallelPlanner, TransferBoundSwitchOnTwoH200s) {
  const HardwareProfile hw = load_hardware_profile(source_path("configs/hardware/h200-pcie5-nvlink.yaml"));
  const SwitchCosts bert = make_switch_costs(load_model_profile(source_path("configs/models/bert_base.yaml")), hw,
                                             Task::Inference);
  std::vector<Bytes> bytes;
  std::vector<Duration> compute;
  for (std::size_t i = 0; i < bert.num_layers(); ++i) {
    bytes.push_back(bert.layer_bytes(i));
    compute.push_back(nanoseconds(bert.layer_compute(i).ns() / 50));
  }
  const SwitchCosts costs(bytes, compute, bert.link(), bert.group_sync());
  const ParallelPlanResult one = plan_parallel(make_parallel_costs(costs, hw, 1, false));
  const ParallelCosts two_gpus = make_parallel_costs(costs, hw, 2, false);
  const ParallelPlanResult two = plan_parallel(two_gpus);
  EXPECT_LE(static_cast<double>(two.total.ns()), 0.55 * static_cast<double>(one.total.ns()));
  EXPECT_LE(static_cast<double>(two.total.ns()), 1.10 * static_cast<double>(parallel_pipeline_bound(two_gpus).ns()));
  // Training helpers forward at half their link: slower than idle ones, faster than one GPU.
  const ParallelPlanResult busy = plan_parallel(make_parallel_costs(costs, hw, 2, true));
  EXPECT_GT(busy.total, two.total);
  EXPECT_LT(busy.total, one.total);
}

}  // namespace
}  // namespace psw
