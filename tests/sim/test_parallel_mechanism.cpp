// pipeswitch-parallel in the simulator (Note [Parallel paths]): with one GPU it is PipeSwitch
// exactly; its switch is the parallel timeline of its plan; more idle helpers switch faster,
// training helpers slower than idle ones; the config's parallel key is strict.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim_test_support.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/parallel.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/sim/mechanism.hpp"

namespace psw::sim {
namespace {

using testing_support::data;
using testing_support::Overrides;

// tests/data/sim/parallel.yaml with `overrides`.
nlohmann::json simulate_parallel(const Overrides& overrides) {
  return testing_support::simulate("parallel.yaml", overrides);
}

double model_mean_ms(const nlohmann::json& s, const std::string& model) {
  return s.at("models").at(model).at("latency").at("mean_ms").get<double>();
}

TEST(SimParallel, OneGpuIsPipeSwitchExactly) {
  nlohmann::json parallel = simulate_parallel({{"parallel.gpus", "1"}});
  nlohmann::json pipeswitch = simulate_parallel({{"mechanism", "pipeswitch"}});
  ASSERT_EQ(parallel.at("mechanism"), "pipeswitch-parallel");
  for (const char* model : {"resnet152", "bert_base"}) {
    const auto& p = parallel.at("models").at(model).at("parallel");
    EXPECT_EQ(p.at("gpus"), 1);
    EXPECT_EQ(p.at("via_helpers_bytes"), 0);
    EXPECT_DOUBLE_EQ(p.at("switch_ms").get<double>(), p.at("single_gpu_ms").get<double>());
    parallel["models"][model].erase("parallel");
  }
  parallel.erase("mechanism");
  pipeswitch.erase("mechanism");
  EXPECT_EQ(parallel, pipeswitch);
}

TEST(SimParallel, MoreIdleHelpersSwitchFasterTrainingHelpersSlower) {
  double previous = 1e300;
  for (const char* gpus : {"1", "2", "4", "8"}) {
    SCOPED_TRACE(std::string(gpus) + " GPUs");
    const nlohmann::json idle = simulate_parallel({{"parallel.gpus", gpus}});
    const nlohmann::json busy = simulate_parallel({{"parallel.gpus", gpus}, {"parallel.helpers", "training"}});
    EXPECT_EQ(idle.at("requests"), 6);
    const double bert = model_mean_ms(idle, "bert_base");
    EXPECT_LE(bert, previous);
    previous = bert;
    EXPECT_GE(model_mean_ms(busy, "bert_base"), bert);
    const auto& p = idle.at("models").at("bert_base").at("parallel");
    EXPECT_LE(p.at("bound_ms").get<double>(), p.at("switch_ms").get<double>());
    EXPECT_LE(p.at("switch_ms").get<double>(), p.at("single_gpu_ms").get<double>());
    if (std::string(gpus) != "1") {
      EXPECT_GT(p.at("via_helpers_bytes").get<std::int64_t>(), 0);
    }
  }
  // BERT-base's transfer (8.1 ms) exceeds its compute (7.1 ms) on one H200: a second GPU's
  // link takes the switch to its compute, about a millisecond off every request.
  const double one = model_mean_ms(simulate_parallel({{"parallel.gpus", "1"}}), "bert_base");
  const double two = model_mean_ms(simulate_parallel({{"parallel.gpus", "2"}}), "bert_base");
  EXPECT_LT(two, one - 0.8);
}

// The closed form of MechanismModel::switch_in (Note [Shifted timeline]) against the
// parallel timeline of the mechanism's own plan, with the GPU released at several times.
TEST(SimParallel, SwitchInIsTheParallelTimeline) {
  const auto root = std::filesystem::path(PSW_SOURCE_DIR);
  const HardwareProfile hw = load_hardware_profile(root / "configs/hardware/h200-pcie5-nvlink.yaml");
  std::vector<ModelProfile> models;
  for (const char* name : {"resnet152", "inception_v3", "bert_base"}) {
    models.push_back(load_model_profile(root / "configs/models" / (std::string(name) + ".yaml")));
  }
  int compared = 0;
  for (const ParallelSpec spec : {ParallelSpec{1, false}, ParallelSpec{2, false}, ParallelSpec{4, true}}) {
    const MechanismModel mechanism(Mechanism::PipeSwitchParallel, hw, models, Strategy::Optimal, Placement::Copy, spec);
    for (std::uint32_t i = 0; i < models.size(); ++i) {
      for (Task task : {Task::Inference, Task::Training}) {
        const SwitchCosts base = make_switch_costs(models[i], hw, task);
        std::vector<Bytes> bytes;
        std::vector<Duration> compute;
        for (std::size_t k = 0; k < base.num_layers(); ++k) {
          bytes.push_back(base.layer_bytes(k));
          compute.push_back(base.layer_compute(k));
        }
        const ParallelPlan plan{mechanism.grouping(i, task), mechanism.splits(i, task)};
        for (Duration stop : {Duration::zero(), microseconds(300), milliseconds(40)}) {
          const SwitchCosts costs(bytes, compute, base.link(), hw.group_sync, base.tail(), stop);
          const ParallelTimeline timeline =
              evaluate_parallel_timeline(make_parallel_costs(costs, hw, spec.gpus, spec.helpers_training), plan);
          const SwitchInCost closed = mechanism.switch_in(i, task, stop, std::nullopt);
          EXPECT_EQ(closed.startup, timeline.startup) << models[i].name << " " << spec.gpus << " GPUs";
          EXPECT_EQ(closed.finish, timeline.total) << models[i].name << " " << spec.gpus << " GPUs";
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 54);
}

TEST(SimParallel, ConfigKeyIsStrictAndResolved) {
  const ExperimentConfig config = load_experiment_config(data("parallel.yaml"), {{"parallel.helpers", "training"}});
  EXPECT_EQ(config.parallel.gpus, 2);
  EXPECT_TRUE(config.parallel.helpers_training);
  EXPECT_NE(resolved_yaml(config).find("parallel: {gpus: 2, helpers: training}"), std::string::npos);
  // Absent: every GPU of the hardware, helpers idle.
  const ExperimentConfig all = load_experiment_config(data("parallel.yaml"), {{"parallel", "{}"}});
  EXPECT_EQ(all.parallel.gpus, 8);
  EXPECT_FALSE(all.parallel.helpers_training);
  // Other mechanisms do not write it (their resolved configs are unchanged).
  const ExperimentConfig plain = load_experiment_config(data("small.yaml"));
  EXPECT_EQ(resolved_yaml(plain).find("parallel"), std::string::npos);
  const auto message = [](const Overrides& o) {
    try {
      load_experiment_config(data("parallel.yaml"), o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Named by the override and the hardware's file (Note [Overridden keys in messages]).
  EXPECT_NE(message({{"parallel.gpus", "9"}})
                .find("--set parallel.gpus=9: key 'parallel.gpus': the hardware profile " +
                      (std::filesystem::path(PSW_SOURCE_DIR) / "configs/hardware/h200-pcie5-nvlink.yaml").string() +
                      " has 8 GPUs, not 9"),
            std::string::npos)
      << message({{"parallel.gpus", "9"}});
  EXPECT_NE(message({{"parallel.gpus", "0"}}).find("key 'parallel.gpus': must be between 1 and 64"), std::string::npos);
  EXPECT_NE(message({{"parallel.helpers", "some"}}).find("expected idle or training, got 'some'"), std::string::npos);
  EXPECT_NE(message({{"parallel.links", "2"}}).find("unknown key 'parallel.links'"), std::string::npos);
}

}  // namespace
}  // namespace psw::sim
