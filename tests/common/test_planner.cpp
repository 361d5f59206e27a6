// Planners against the brute-force optimum, on thousands of random instances, and
// against each other on the shipped and on deep synthetic models.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <set>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/synthetic.hpp"
#include "psw/common/timeline.hpp"

namespace psw {
namespace {

// A random instance; `regime` shifts the balance between transfer and compute so that
// transfer-bound, compute-bound and balanced cases all appear.
SwitchCosts random_costs(std::mt19937_64& rng, std::size_t n) {
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const int regime = static_cast<int>(uniform(0, 3));
  std::vector<Bytes> bytes(n);
  std::vector<Duration> compute(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Some layers carry no parameters or take no time, as in real profiles.
    bytes[i] = uniform(0, 5) == 0 ? 0 : uniform(1, regime == 0 ? 20'000 : 5'000);
    compute[i] = nanoseconds(uniform(0, 6) == 0 ? 0 : uniform(1, regime == 1 ? 20'000 : 5'000));
  }
  // Odd bandwidths make per-group ceil() rounding matter.
  const LinkCost link{nanoseconds(uniform(0, 3) == 0 ? 0 : uniform(1, 3'000)),
                      Bandwidth::bytes_per_second(uniform(300'000'000, 3'000'000'000))};
  const Duration sync = nanoseconds(uniform(0, 2) == 0 ? 0 : uniform(1, 1'000));
  const Duration tail = nanoseconds(uniform(0, 1) == 0 ? 0 : uniform(1, 10'000));
  const Duration busy = nanoseconds(uniform(0, 2) == 0 ? uniform(1, 30'000) : 0);
  return SwitchCosts(bytes, compute, link, sync, tail, busy);
}

class PlannerProperty : public ::testing::TestWithParam<std::uint64_t> {};

// 4 seeds x 1,000 instances of 1..14 layers = 4,000 brute-force comparisons.
TEST_P(PlannerProperty, ExactPlannersMatchBruteForce) {
  std::mt19937_64 rng(GetParam());
  for (int instance = 0; instance < 1000; ++instance) {
    const std::size_t n = 1 + static_cast<std::size_t>(instance % 14);
    const SwitchCosts costs = random_costs(rng, n);
    const PlanResult brute = plan_brute_force(costs);
    const PlanResult optimal = plan_optimal(costs);
    const PlanResult pipeswitch = plan_pipeswitch(costs);
    ASSERT_EQ(optimal.total, brute.total) << "optimal, seed " << GetParam() << " instance " << instance;
    ASSERT_EQ(pipeswitch.total, brute.total) << "pipeswitch, seed " << GetParam() << " instance " << instance;
    // The reported total is the evaluated total of the returned grouping.
    ASSERT_EQ(evaluate_total(costs, optimal.groups), optimal.total);
    ASSERT_EQ(evaluate_total(costs, pipeswitch.groups), pipeswitch.total);
    ASSERT_EQ(evaluate_timeline(costs, brute.groups).total, brute.total);
    // Nothing beats the pipeline bound; the trivial plans never beat the optimum.
    ASSERT_LE(pipeline_bound(costs), brute.total);
    ASSERT_LE(brute.total, plan_single(costs).total);
    ASSERT_LE(brute.total, plan_per_layer(costs).total);
    // Note [Early start]: within one group's fixed costs of the optimum, a first group no
    // larger, and when it is smaller, the first of 1, 2, 4, ... layers with which that is
    // reachable (brute force).
    const Duration slack = costs.link().copy_fixed + costs.group_sync();
    const PlanResult early = prefer_early_start(costs, optimal);
    ASSERT_GE(early.total, brute.total);
    ASSERT_LE(early.total, brute.total + slack);
    ASSERT_EQ(evaluate_total(costs, early.groups), early.total);
    const std::size_t first = early.groups.front().size();
    ASSERT_LE(first, optimal.groups.front().size());
    for (std::size_t k = 1; k < first; k *= 2) {
      bool reachable = false;
      for (std::uint32_t mask = 0; mask < (1u << (n - 1)) && !reachable; ++mask) {
        if (mask & ((1u << (k - 1)) - 1) || !(mask & (1u << (k - 1)))) continue;  // first group [0, k-1]
        std::vector<std::size_t> ends;
        for (std::size_t b = 0; b + 1 < n; ++b) {
          if (mask & (1u << b)) ends.push_back(b + 1);
        }
        ends.push_back(n);
        reachable = evaluate_total(costs, grouping_from_ends(ends)) <= brute.total + slack;
      }
      ASSERT_FALSE(reachable) << "a first group of " << k << " layers is within the slack, seed " << GetParam()
                              << " instance " << instance;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PlannerProperty, ::testing::Values(1u, 2u, 3u, 42u));

// A deeper random instance for the comparison with the label-setting DP: `regime` 0 is
// transfer-bound, 1 compute-bound, 2 balanced (each layer computes about as long as its
// bytes take to copy, where plans have dozens of groups); a random share of the layers (up
// to about two thirds, sometimes the leading ones) read no parameters, like the kernels of
// a model captured from CUDA graphs.
SwitchCosts random_deep_costs(std::mt19937_64& rng, std::size_t n, int regime) {
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const auto pick = [&uniform](std::array<std::int64_t, 4> options) {
    return options[static_cast<std::size_t>(uniform(0, 3))];
  };
  const Bandwidth bandwidth = Bandwidth::bytes_per_second(uniform(1'000'000'000, 60'000'000'000));
  const std::int64_t zero_percent = pick({0, 10, 50, 70});
  const std::size_t leading_zeros = uniform(0, 3) == 0 ? static_cast<std::size_t>(uniform(1, 5)) : 0;
  const std::int64_t max_bytes = regime == 1 ? 20'000 : 2'000'000;
  std::vector<Bytes> bytes(n);
  std::vector<Duration> compute(n);
  for (std::size_t i = 0; i < n; ++i) {
    const bool parameterless = i < leading_zeros || uniform(0, 99) < zero_percent;
    bytes[i] = parameterless ? 0 : uniform(1, max_bytes);
    const std::int64_t copy_ns = bandwidth.transfer_time(bytes[i]).ns();
    std::int64_t ns = 0;
    if (regime == 0) ns = uniform(0, 2'000);
    if (regime == 1) ns = uniform(0, 50'000);
    if (regime == 2) ns = copy_ns * uniform(30, 150) / 100 + uniform(0, 5'000);
    compute[i] = nanoseconds(uniform(0, 9) == 0 ? 0 : ns);
  }
  // Fixed costs from negligible to dominant, so that plans of one to dozens of groups appear.
  const std::int64_t max_fixed = pick({30, 300, 3'000, 20'000});
  const LinkCost link{nanoseconds(uniform(0, 4) == 0 ? 0 : uniform(1, max_fixed)), bandwidth};
  const Duration sync = nanoseconds(uniform(0, 4) == 0 ? 0 : uniform(1, max_fixed));
  const Duration tail = nanoseconds(uniform(0, 1) == 0 ? 0 : uniform(1, 1'000'000));
  const Duration busy = nanoseconds(uniform(0, 1) == 0 ? 0 : uniform(1, 2'000'000));
  return SwitchCosts(bytes, compute, link, sync, tail, busy);
}

class OptimalAgainstLabelSetting : public ::testing::TestWithParam<std::uint64_t> {};

// The group-count DP of `optimal` against the label-setting DP it replaced (both exact),
// on models of 50 to 300 layers: 4 seeds x 250 instances.
TEST_P(OptimalAgainstLabelSetting, SameTotals) {
  std::mt19937_64 rng(GetParam());
  for (int instance = 0; instance < 250; ++instance) {
    const int regime = instance % 3;
    const auto n = static_cast<std::size_t>(std::uniform_int_distribution<int>(50, 300)(rng));
    const SwitchCosts costs = random_deep_costs(rng, n, regime);
    const PlanResult optimal = plan_optimal(costs);
    const PlanResult reference = planner_detail::plan_label_setting(costs);
    ASSERT_EQ(optimal.total, reference.total)
        << "seed " << GetParam() << " instance " << instance << " (" << n << " layers, regime " << regime << ")";
    ASSERT_EQ(evaluate_total(costs, optimal.groups), optimal.total);
    const PlanResult early = prefer_early_start(costs, optimal);
    ASSERT_LE(early.total, optimal.total + costs.link().copy_fixed + costs.group_sync());
    ASSERT_EQ(evaluate_total(costs, early.groups), early.total);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, OptimalAgainstLabelSetting, ::testing::Values(5u, 6u, 7u, 8u));

// Note [Parameterless layers]: models where most layers, the leading ones included, read no
// parameters, against brute force; and models with no parameters at all.
TEST(Planner, ParameterlessLayersMatchBruteForce) {
  std::mt19937_64 rng(11);
  for (int instance = 0; instance < 600; ++instance) {
    const auto n = static_cast<std::size_t>(1 + instance % 16);
    const SwitchCosts costs = random_deep_costs(rng, n, instance % 3);
    const PlanResult brute = plan_brute_force(costs);
    const PlanResult optimal = plan_optimal(costs);
    ASSERT_EQ(optimal.total, brute.total) << "instance " << instance;
    ASSERT_EQ(evaluate_total(costs, optimal.groups), optimal.total);
  }
  for (const std::size_t n : {1u, 2u, 7u}) {
    const SwitchCosts costs(std::vector<Bytes>(n, 0), std::vector<Duration>(n, nanoseconds(100)),
                            LinkCost{nanoseconds(50), Bandwidth::bytes_per_second(1'000'000'000)}, nanoseconds(10),
                            nanoseconds(5), nanoseconds(30));
    const PlanResult optimal = plan_optimal(costs);
    EXPECT_EQ(optimal.total, plan_brute_force(costs).total);
    EXPECT_EQ(optimal.groups.size(), 1u);  // one copy_fixed, one sync
  }
}

TEST(Planner, SingleAndPerLayerHaveTheirShapes) {
  std::mt19937_64 rng(7);
  const SwitchCosts costs = random_costs(rng, 9);
  EXPECT_EQ(plan_single(costs).groups.size(), 1u);
  EXPECT_EQ(plan_per_layer(costs).groups.size(), 9u);
}

TEST(Planner, FixedValidatesItsGroups) {
  std::mt19937_64 rng(7);
  const SwitchCosts costs = random_costs(rng, 4);
  const Grouping good{{0, 1}, {2, 3}};
  EXPECT_EQ(make_plan(Strategy::Fixed, costs, &good).total, evaluate_total(costs, good));
  const Grouping bad{{0, 1}, {3, 3}};
  EXPECT_THROW(make_plan(Strategy::Fixed, costs, &bad), InputError);
  EXPECT_THROW(make_plan(Strategy::Fixed, costs, nullptr), InputError);
}

TEST(Planner, ParsesStrategies) {
  EXPECT_EQ(parse_strategy("pipeswitch"), Strategy::PipeSwitch);
  EXPECT_EQ(parse_strategy("per-layer"), Strategy::PerLayer);
  EXPECT_THROW(parse_strategy("fast"), InputError);
}

TEST(Planner, BruteForceRefusesLargeModels) {
  const SwitchCosts costs(std::vector<Bytes>(30, 1), std::vector<Duration>(30, nanoseconds(1)),
                          LinkCost{nanoseconds(1), Bandwidth::bytes_per_second(1'000'000'000)},
                          nanoseconds(1));
  EXPECT_THROW(plan_brute_force(costs), InputError);
}

struct ShippedCase {
  const char* model;
  const char* hardware;
  Task task;
};

class ShippedModels : public ::testing::TestWithParam<ShippedCase> {};

// On every shipped model and hardware profile the two exact planners agree, beat the
// trivial plans, and stay above the pipeline bound.
TEST_P(ShippedModels, ExactPlannersAgree) {
  const auto& c = GetParam();
  const std::string root = PSW_SOURCE_DIR;
  const ModelProfile model = load_model_profile(root + "/configs/models/" + c.model + ".yaml");
  const HardwareProfile hw = load_hardware_profile(root + "/configs/hardware/" + c.hardware + ".yaml");
  const SwitchCosts costs = make_switch_costs(model, hw, c.task);
  const PlanResult optimal = plan_optimal(costs);
  const PlanResult pipeswitch = plan_pipeswitch(costs);
  EXPECT_EQ(optimal.total, pipeswitch.total);
  EXPECT_LE(optimal.total, plan_single(costs).total);
  EXPECT_LE(optimal.total, plan_per_layer(costs).total);
  EXPECT_GE(optimal.total, pipeline_bound(costs));
  EXPECT_EQ(evaluate_total(costs, optimal.groups), optimal.total);
  EXPECT_EQ(evaluate_total(costs, pipeswitch.groups), pipeswitch.total);
  const PlanResult early = make_plan(Strategy::Optimal, costs);
  EXPECT_LE(early.total, optimal.total + costs.link().copy_fixed + costs.group_sync());
  EXPECT_LE(evaluate_timeline(costs, early.groups).startup, evaluate_timeline(costs, optimal.groups).startup);
}

INSTANTIATE_TEST_SUITE_P(
    All, ShippedModels,
    ::testing::Values(ShippedCase{"resnet152", "h200-pcie5", Task::Inference},
                      ShippedCase{"inception_v3", "h200-pcie5", Task::Inference},
                      ShippedCase{"bert_base", "h200-pcie5", Task::Inference},
                      ShippedCase{"resnet152", "v100-pcie3-x16", Task::Inference},
                      ShippedCase{"inception_v3", "v100-pcie3-x16", Task::Inference},
                      ShippedCase{"bert_base", "v100-pcie3-x16", Task::Inference},
                      ShippedCase{"resnet152", "t4-pcie3-x8", Task::Inference},
                      ShippedCase{"inception_v3", "t4-pcie3-x8", Task::Inference},
                      ShippedCase{"bert_base", "t4-pcie3-x8", Task::Inference},
                      ShippedCase{"resnet152", "t4-pcie3-x8", Task::Training},
                      ShippedCase{"inception_v3", "v100-pcie3-x16", Task::Training},
                      ShippedCase{"bert_base", "h200-pcie5", Task::Training}),
    [](const auto& p) {
      return std::string(p.param.model) + "_" + std::string(p.param.hardware).substr(0, 2) + "_" +
             to_string(p.param.task);
    });

class DeepSynthetic : public ::testing::TestWithParam<std::tuple<SyntheticKind, const char*>> {};

// 1,000-layer synthetic models: both exact planners agree on every shipped hardware.
TEST_P(DeepSynthetic, ExactPlannersAgreeOnAThousandLayers) {
  const auto [kind, hardware] = GetParam();
  const ModelProfile model = make_synthetic_layers(kind, 1000);
  ASSERT_EQ(model.num_layers(), 1000u);
  const HardwareProfile hw =
      load_hardware_profile(std::string(PSW_SOURCE_DIR) + "/configs/hardware/" + hardware + ".yaml");
  const SwitchCosts costs = make_switch_costs(model, hw, Task::Inference);
  const PlanResult optimal = plan_optimal(costs);
  const PlanResult pipeswitch = plan_pipeswitch(costs);
  EXPECT_EQ(optimal.total, pipeswitch.total);
  EXPECT_GE(optimal.total, pipeline_bound(costs));
  EXPECT_LE(optimal.total, plan_single(costs).total);
}

INSTANTIATE_TEST_SUITE_P(
    All, DeepSynthetic,
    ::testing::Combine(::testing::Values(SyntheticKind::Transformer, SyntheticKind::Cnn),
                       ::testing::Values("h200-pcie5", "v100-pcie3-x16", "t4-pcie3-x8")),
    [](const auto& p) {
      return std::string(std::get<0>(p.param) == SyntheticKind::Transformer ? "transformer" : "cnn") +
             "_" + std::string(std::get<1>(p.param)).substr(0, 2);
    });

TEST(Synthetic, DepthsAreExactAndNamesUnique) {
  for (std::size_t n : {1u, 7u, 50u, 333u}) {
    for (SyntheticKind kind : {SyntheticKind::Transformer, SyntheticKind::Cnn}) {
      const ModelProfile model = make_synthetic_layers(kind, n);
      EXPECT_EQ(model.num_layers(), n);
      std::set<std::string> names;
      for (const auto& layer : model.layers) {
        EXPECT_TRUE(names.insert(layer.name).second) << layer.name;
        EXPECT_GE(layer.param_bytes, 0);
      }
    }
  }
  EXPECT_EQ(make_synthetic_transformer(12).num_layers(), 4u + 12u * 8u + 1u);
  EXPECT_THROW(make_synthetic_cnn(0), InputError);
  // A synthetic profile survives its own YAML.
  const ModelProfile model = make_synthetic_cnn(2);
  const ModelProfile again = parse_model_profile(to_yaml(model), "synthetic");
  ASSERT_EQ(again.num_layers(), model.num_layers());
  EXPECT_EQ(again.layers.back().forward_flops, model.layers.back().forward_flops);
  EXPECT_EQ(again.total_param_bytes(), model.total_param_bytes());
}

}  // namespace
}  // namespace psw
