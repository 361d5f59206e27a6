// Note [Calibrating a cost]: fit_cost recovers a cost from a run simulated with it, refuses a
// measurement no value of the cost explains, and refuses a run of another mechanism.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/hardware_profile.hpp"
#include "psw/xval/calibration.hpp"
#include "psw/sim/simulation.hpp"

namespace psw::xval {
namespace {

using sim::run_simulation;
using sim::SimulationOptions;

// The figures' case from the base's estimates (as scripts/calibrate-h200.sh starts from a link
// profile on the base), so that each fit has somewhere to go: the project's h200 profile
// already holds the fitted values.
ExperimentConfig figures_case(Mechanism mechanism) {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  ExperimentConfig config = load_experiment_config(
      root / "configs/experiments/h200-figures.yaml",
      {{"mechanism", to_string(mechanism)},
       {"hardware", "\"" + (root / "configs/hardware/h200-pcie5-base.yaml").string() + "\""}});
  return config;
}

// A "measurement" made by the simulator itself with the cost at `truth`.
nlohmann::json simulated_run(ExperimentConfig config, const CalibratableCost& cost, double truth) {
  cost.set(config.hardware, truth);
  return to_json(run_simulation(config, SimulationOptions{}).summary);
}

TEST(Calibration, RecoversEachCostFromARunSimulatedWithIt) {
  struct Case {
    const char* cost;
    double truth;
  };
  for (const Case& c : {Case{"memory.cuda_malloc_ns", 150000}, Case{"memory.ipc_handle_open_ns", 2'500'000},
                        Case{"link.pageable.bandwidth_bytes_per_s", 3.0e9}, Case{"unified_memory.page_fault_ns", 70000},
                        Case{"mps.inference_slowdown_percent", 140}, Case{"startup.framework_start_ns", 3.0e9},
                        Case{"training_abort_ns", 6.5e6}}) {
    SCOPED_TRACE(c.cost);
    const CalibratableCost& cost = calibratable_cost(c.cost);
    const ExperimentConfig config = figures_case(cost.paid_by);
    const double initial = cost.get(config.hardware);
    ASSERT_GT(std::abs(initial - c.truth), 0.1 * c.truth);  // the fit has somewhere to go
    const CostFit fit = fit_cost(config, cost, simulated_run(config, cost, c.truth), "test");
    EXPECT_EQ(fit.initial, initial);
    EXPECT_NEAR(fit.simulated_fitted_ms, fit.measured_ms, 0.01 * fit.measured_ms);
    EXPECT_NE(fit.simulated_initial_ms, fit.measured_ms);
    // Rounded simulated times may make nearby values indistinguishable: within 5% of the truth.
    EXPECT_NEAR(fit.fitted, c.truth, 0.05 * c.truth);
    EXPECT_EQ(cost.get(fit.hardware), fit.fitted);
  }
}

// Note [Training abort]: under one process every request waits for it, outside the engine;
// under PipeSwitch (a worker of its own) none does.
TEST(Calibration, TheTrainingAbortIsPaidBeforeTheEngineUnderOneProcessOnly) {
  for (const Mechanism mechanism : {Mechanism::OneProcess, Mechanism::PipeSwitch}) {
    SCOPED_TRACE(to_string(mechanism));
    ExperimentConfig config = figures_case(mechanism);
    const nlohmann::json before = to_json(run_simulation(config, SimulationOptions{}).summary);
    config.hardware.training_abort = milliseconds(5);
    const nlohmann::json after = to_json(run_simulation(config, SimulationOptions{}).summary);
    const double added = mechanism == Mechanism::OneProcess ? 5.0 : 0.0;
    EXPECT_NEAR(summary_mean_ms(after, FitMeasure::Latency, "after"),
                summary_mean_ms(before, FitMeasure::Latency, "before") + added, 0.05)
        << "the stop's layer boundary moves with the training's progress: within 1% of the abort";
    EXPECT_NEAR(summary_mean_ms(after, FitMeasure::Engine, "after"), summary_mean_ms(before, FitMeasure::Engine, "before"),
                0.001);
  }
}

// Note [Pooled runs]: two runs of one case fit the cost of their requests together; an eager
// model's host times are the means over all its switches; runs that stood otherwise are refused.
TEST(Calibration, PoolsRunsOfOneCase) {
  const CalibratableCost& abort = calibratable_cost("training_abort_ns");
  const ExperimentConfig config = figures_case(Mechanism::OneProcess);
  const nlohmann::json low = simulated_run(config, abort, 4e6);
  const nlohmann::json high = simulated_run(config, abort, 8e6);
  const CostFit alone = fit_cost(config, abort, low, "low.json");
  const CostFit pooled = fit_cost(config, abort, std::vector<RecordedRun>{{low, "low.json"}, {high, "high.json"}});
  EXPECT_NEAR(pooled.measured_ms,
              (summary_mean_ms(low, FitMeasure::Latency, "low") + summary_mean_ms(high, FitMeasure::Latency, "high")) / 2,
              1e-9)
      << "the same number of requests in each";
  EXPECT_NEAR(pooled.fitted, 6e6, 0.05 * 6e6);
  EXPECT_NEAR(alone.fitted, 4e6, 0.05 * 4e6);
  // A run whose server still had its fresh processes (Note [Processes a server starts with])
  // stood otherwise than one after a warm-up.
  nlohmann::json fresh = high;
  fresh["fresh_standby_workers"] = 1;
  nlohmann::json warm = low;
  warm["fresh_standby_workers"] = 0;
  EXPECT_THROW((void)fit_cost(config, abort, std::vector<RecordedRun>{{warm, "warm.json"}, {fresh, "fresh.json"}}),
               InputError);
  EXPECT_THROW((void)fit_cost(config, abort, std::vector<RecordedRun>{}), InputError);

  nlohmann::json first = low;
  first["eager_switches"] = {{"resnet152", {{"count", 5}, {"prepare_mean_ms", 10.0}, {"forward_mean_ms", 8.0}}}};
  nlohmann::json second = high;
  second["eager_switches"] = {{"resnet152", {{"count", 15}, {"prepare_mean_ms", 6.0}, {"forward_mean_ms", 12.0}}},
                              {"bert_base", {{"count", 5}, {"prepare_mean_ms", 2.0}, {"forward_mean_ms", 4.0}}}};
  const EagerSwitchAdoption a =
      adopt_eager_switch(config, std::vector<RecordedRun>{{first, "first.json"}, {second, "second.json"}});
  const EagerHostTimes& resnet = a.hardware.eager_switch.at({"resnet152", "one-process"});
  EXPECT_EQ(resnet.prepare, microseconds(7000)) << "(5 x 10 + 15 x 6) / 20";
  EXPECT_EQ(resnet.forward, microseconds(11000)) << "(5 x 8 + 15 x 12) / 20";
  EXPECT_EQ(a.hardware.eager_switch.at({"bert_base", "one-process"}).prepare, milliseconds(2)) << "one run had it";
  for (const auto& m : a.models) {
    if (m.model == "resnet152") {
      EXPECT_EQ(m.switches, 20);
    }
  }
}

TEST(Calibration, RefusesAMeasurementNoValueExplainsAndARunOfAnotherMechanism) {
  const CalibratableCost& malloc_cost = calibratable_cost("memory.cuda_malloc_ns");
  const ExperimentConfig config = figures_case(Mechanism::NoMemoryManagement);
  nlohmann::json run = simulated_run(config, malloc_cost, 20000);
  // An engine far faster than the model's compute alone: no allocation cost explains it.
  for (auto& [name, model] : run["models"].items()) {
    if (model.contains("engine_latency")) model["engine_latency"]["mean_ms"] = 0.001;
  }
  try {
    (void)fit_cost(config, malloc_cost, run, "run.json");
    FAIL() << "fitted an impossible measurement";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run.json: no memory.cuda_malloc_ns in [100, 1e+08] gives the measured engine mean"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)fit_cost(figures_case(Mechanism::PipeSwitch), malloc_cost, run, "run.json");
    FAIL() << "fitted a cost on a run that does not pay it";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is fitted on a run of no-memory-management"), std::string::npos) << e.what();
  }
  EXPECT_THROW(calibratable_cost("memory.nothing_ns"), InputError);
}

// Note [MPS contention]: a run simulated with one point per model (each model its own slowdown
// beside ResNet-152 training at batch 8) gives the points back, from a profile with none; the
// simulator then uses each model's own point, and a run of another mechanism is refused.
TEST(Calibration, FitsOneMpsContentionPointPerModel) {
  const ExperimentConfig config = figures_case(Mechanism::Mps);
  ASSERT_TRUE(config.hardware.mps.contention.empty());
  ASSERT_EQ(config.training_batch, 8);
  const std::map<std::string, int> truth = {{"resnet152", 138}, {"inception_v3", 150}, {"bert_base", 125}};
  ExperimentConfig measured = config;
  for (const auto& [model, percent] : truth) measured.hardware.mps.contention.push_back({model, "resnet152", 8, percent});
  const ContentionFit fit = fit_mps_contention(config, to_json(run_simulation(measured, SimulationOptions{}).summary), "run.json");
  EXPECT_EQ(fit.training_model, "resnet152");
  EXPECT_EQ(fit.training_batch, 8);
  ASSERT_EQ(fit.points.size(), truth.size());
  for (const auto& p : fit.points) {
    SCOPED_TRACE(p.model);
    EXPECT_NEAR(p.percent, truth.at(p.model), 1);
    EXPECT_NEAR(p.simulated_fitted_ms, p.measured_ms, 0.01 * p.measured_ms);
    EXPECT_LT(p.simulated_ready_ms, p.measured_ms);
    // The one number the profile had is not the model's.
    EXPECT_GT(std::abs(p.simulated_initial_ms - p.measured_ms), 0.01 * p.measured_ms);
  }
  ASSERT_EQ(fit.hardware.mps.contention.size(), truth.size());
  // A second fit of the same job and batch replaces the points, not adds to them.
  ExperimentConfig again = config;
  again.hardware = fit.hardware;
  EXPECT_EQ(fit_mps_contention(again, to_json(run_simulation(measured, SimulationOptions{}).summary), "run.json")
                .hardware.mps.contention.size(),
            truth.size());
  try {
    (void)fit_mps_contention(figures_case(Mechanism::Ready), to_json(run_simulation(measured, SimulationOptions{}).summary),
                             "run.json");
    FAIL() << "fitted MPS's contention on a run of ready";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mps.contention is fitted on a run of mps"), std::string::npos) << e.what();
  }
}

// Note [MPS contention]: between two points of a pair the slowdown is linear in the training
// batch, outside them the nearest point's; a pair without points takes the one number.
TEST(Calibration, MpsContentionInterpolatesInTheTrainingBatch) {
  MpsModel mps;
  mps.inference_slowdown_percent = 137;
  mps.contention = {{"resnet152", "resnet152", 32, 209}, {"resnet152", "resnet152", 2, 125},
                    {"resnet152", "resnet152", 8, 138}, {"bert_base", "resnet152", 8, 125}};
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "resnet152", "resnet152", 8), 138);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "resnet152", "resnet152", 4), 125 + 13.0 * 2 / 6);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "resnet152", "resnet152", 16), 138 + 71.0 * 8 / 24);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "resnet152", "resnet152", 1), 125);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "resnet152", "resnet152", 64), 209);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "bert_base", "resnet152", 32), 125);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "inception_v3", "resnet152", 8), 137);
  EXPECT_DOUBLE_EQ(mps_inference_slowdown_percent(mps, "resnet152", "bert_base", 8), 137);
}


// Note [Adopting a worker start]: the three costs taken from a run's split of its starts, the
// simulated latency moving by the change of the whole start; refused for another mechanism, a
// summary without the split, or a rest below one cudaMalloc.
TEST(Calibration, AdoptsAWorkerStartFromTheServersSplit) {
  // As gpu-serve.sh runs it, one request a model, far enough apart that none waits for another's
  // start (the base's estimate of a start is 9 s).
  ExperimentConfig config = figures_case(Mechanism::StopAndStart);
  config.workload.interval = seconds(30);
  config.workload.count = 3;
  nlohmann::json run = to_json(run_simulation(config, SimulationOptions{}).summary);
  // ResNet-152's first forward in its fresh process 200 ms longer than its layers.
  const double resnet_engine_ms = run["models"]["resnet152"]["engine_latency"]["mean_ms"].get<double>();
  run["models"]["resnet152"]["engine_latency"]["mean_ms"] = resnet_engine_ms + 200.0;
  run["worker_starts"] = {
      {"count", 4},
      {"mean_ms",
       {{"process", 280.0}, {"context", 140.0}, {"memory", 0.5}, {"models", 1500.0}, {"training", 450.0}, {"other", 19.5}}},
      {"total_mean_ms", 2390.0}};
  const WorkerStartAdoption a = adopt_worker_start(config, run, "run.json");
  EXPECT_EQ(a.starts, 4);
  EXPECT_EQ(a.hardware.process_start, milliseconds(280));
  EXPECT_EQ(a.hardware.cuda_context_create, milliseconds(140));
  EXPECT_EQ(a.hardware.framework_start + a.hardware.cuda_malloc, milliseconds(1970));
  EXPECT_DOUBLE_EQ(a.measured_latency_ms, run["latency"]["mean_ms"].get<double>());
  // Note [First forward in a fresh process]: the engine's excess, the others' none.
  ASSERT_EQ(a.first_forwards.size(), 3u);
  ASSERT_EQ(a.hardware.first_forward.size(), 1u);
  EXPECT_NEAR(a.hardware.first_forward.at("resnet152").seconds() * 1e3, 200.0, 1e-3);
  for (const auto& f : a.first_forwards) {
    EXPECT_NEAR(f.first_forward_ms, f.model == "resnet152" ? 200.0 : 0.0, 1e-3) << f.model;
  }
  // Note [Processes a server starts with]: the run's server was fresh (no warm-up), so its
  // first request took the process started beside the training job; the other two paid one
  // start each, and one in three the first forward: the mean moves by two thirds of the change
  // of the start less a third of 200 ms, to a millisecond.
  const double before = (config.hardware.process_start + config.hardware.cuda_context_create +
                         config.hardware.framework_start).seconds() * 1e3;
  const double after = 280.0 + 140.0 + 1970.0 - config.hardware.cuda_malloc.seconds() * 1e3;
  EXPECT_NEAR(a.simulated_initial_ms - a.simulated_adopted_ms, (before - after) * 2 / 3 - 200.0 / 3, 1.0);
  // A run after a warm-up (its server had no unused process left): every request paid one.
  nlohmann::json warmed = run;
  warmed["warmup_per_model"] = 2;
  const WorkerStartAdoption w = adopt_worker_start(config, warmed, "run.json");
  EXPECT_NEAR(w.simulated_initial_ms - w.simulated_adopted_ms, before - after - 200.0 / 3, 1.0);
  EXPECT_FALSE(a.kill_ms.has_value()) << "a run that counted no kills";
  EXPECT_EQ(a.hardware.process_kill, config.hardware.process_kill);
  // Note [Worker kill]: where the run counted kills, their mean is adopted, and every request
  // that waits for a fresh process pays it before its start: two in three here, every one where
  // the server said none was left unused (psw load's fresh_standby_workers).
  nlohmann::json killing = run;
  killing["worker_starts"]["kills"] = 4;
  killing["worker_starts"]["kill_mean_ms"] = 150.0;
  const WorkerStartAdoption k = adopt_worker_start(config, killing, "run.json");
  ASSERT_TRUE(k.kill_ms.has_value());
  EXPECT_EQ(k.hardware.process_kill, milliseconds(150));
  EXPECT_NEAR(k.simulated_adopted_ms - a.simulated_adopted_ms, 100.0, 1.0);
  killing["fresh_standby_workers"] = 0;
  nlohmann::json warmed_without_kills = run;
  warmed_without_kills["fresh_standby_workers"] = 0;
  EXPECT_NEAR(adopt_worker_start(config, killing, "run.json").simulated_adopted_ms -
                  adopt_worker_start(config, warmed_without_kills, "run.json").simulated_adopted_ms,
              150.0, 1.0);
  nlohmann::json miscounted = run;
  miscounted["fresh_standby_workers"] = -1;
  EXPECT_THROW((void)adopt_worker_start(config, miscounted, "run.json"), InputError);
  EXPECT_THROW((void)adopt_worker_start(figures_case(Mechanism::PipeSwitch), run, "run.json"), InputError);
  nlohmann::json without = run;
  without.erase("worker_starts");
  EXPECT_THROW((void)adopt_worker_start(config, without, "run.json"), InputError);
  nlohmann::json tiny = run;
  tiny["worker_starts"]["mean_ms"] = {{"process", 1.0}, {"context", 1.0}, {"memory", 0.0},
                                      {"models", 0.0},  {"training", 0.0}, {"other", 0.0}};
  EXPECT_THROW((void)adopt_worker_start(config, tiny, "run.json"), InputError);
}

// Note [Adopting eager host times]: each model's measured host times become its entry under the
// run's mechanism, and a host that slow moves the simulated engine to at least its own time.
TEST(Calibration, AdoptsTheHostTimesOfEagerSwitches) {
  const ExperimentConfig config = figures_case(Mechanism::NoIpcOptimization);
  nlohmann::json run = to_json(run_simulation(config, SimulationOptions{}).summary);
  run["eager_switches"] = {{"resnet152", {{"count", 20}, {"prepare_mean_ms", 6.5}, {"forward_mean_ms", 9.0}}},
                           {"bert_base", {{"count", 20}, {"prepare_mean_ms", 0.5}, {"forward_mean_ms", 2.0}}}};
  const EagerSwitchAdoption a = adopt_eager_switch(config, run, "run.json");
  ASSERT_EQ(a.models.size(), 2u);
  ASSERT_EQ(a.hardware.eager_switch.size(), 2u);
  const EagerHostTimes& resnet = a.hardware.eager_switch.at({"resnet152", "no-ipc-optimization"});
  EXPECT_EQ(resnet.prepare, microseconds(6500));
  EXPECT_EQ(resnet.forward, milliseconds(9));
  for (const auto& m : a.models) {
    EXPECT_EQ(m.switches, 20) << m.model;
    EXPECT_DOUBLE_EQ(m.measured_engine_ms, run["models"][m.model]["engine_latency"]["mean_ms"].get<double>());
    if (m.model == "resnet152") {
      EXPECT_GE(m.simulated_adopted_ms, 6.5 + 9.0) << "the host's own time";
    }
  }
  // Inception-v3 switched nothing eagerly in this run: no entry, its analytic costs.
  EXPECT_FALSE(a.hardware.eager_switch.contains({"inception_v3", "no-ipc-optimization"}));
  // One process switches tensor by tensor too (Note [Training abort]): its own entries.
  const EagerSwitchAdoption one = adopt_eager_switch(figures_case(Mechanism::OneProcess), run, "run.json");
  EXPECT_EQ(one.hardware.eager_switch.at({"resnet152", "one-process"}).prepare, microseconds(6500));
  EXPECT_FALSE(one.hardware.eager_switch.contains({"resnet152", "no-ipc-optimization"}));
  // A mechanism the server replays from graphs, a run without the measurement, a model the
  // workload does not request, a negative time: each refused.
  EXPECT_THROW((void)adopt_eager_switch(figures_case(Mechanism::PipeSwitch), run, "run.json"), InputError);
  nlohmann::json without = run;
  without.erase("eager_switches");
  EXPECT_THROW((void)adopt_eager_switch(config, without, "run.json"), InputError);
  nlohmann::json stranger = run;
  stranger["eager_switches"]["gpt2"] = {{"count", 1}, {"prepare_mean_ms", 1.0}, {"forward_mean_ms", 1.0}};
  EXPECT_THROW((void)adopt_eager_switch(config, stranger, "run.json"), InputError);
  nlohmann::json negative = run;
  negative["eager_switches"]["bert_base"]["prepare_mean_ms"] = -1.0;
  EXPECT_THROW((void)adopt_eager_switch(config, negative, "run.json"), InputError);
}


// Note [Unified memory's two costs]: a run simulated with a page fault and a migration bandwidth
// gives both back together, pooled over two runs too; one number could not (the fault alone
// leaves the models apart); a run of one model, engines below the forward and a run of another
// mechanism are refused.
TEST(Calibration, FitsUnifiedMemorysFaultAndBandwidthTogether) {
  const ExperimentConfig config = figures_case(Mechanism::UnifiedMemory);
  ExperimentConfig truth = config;
  truth.hardware.unified_memory.page_fault = microseconds(40);
  truth.hardware.unified_memory.migration_bandwidth = Bandwidth::bytes_per_second(8'000'000'000);
  ASSERT_GT(std::abs(static_cast<double>(config.hardware.unified_memory.migration_bandwidth.bytes_per_second()) - 8e9), 1e9);
  const nlohmann::json run = to_json(run_simulation(truth, SimulationOptions{}).summary);
  for (const std::size_t runs : {1u, 2u}) {
    SCOPED_TRACE(runs);
    const UnifiedMemoryFit fit = fit_unified_memory(config, std::vector<RecordedRun>(runs, RecordedRun{run, "run.json"}));
    EXPECT_NEAR(fit.fitted_page_fault_ns, 40'000, 400);
    EXPECT_NEAR(fit.fitted_bandwidth, 8e9, 8e7);
    EXPECT_EQ(fit.initial_bandwidth, static_cast<double>(config.hardware.unified_memory.migration_bandwidth.bytes_per_second()));
    EXPECT_EQ(fit.hardware.unified_memory.page_fault.ns(), static_cast<std::int64_t>(fit.fitted_page_fault_ns));
    ASSERT_EQ(fit.models.size(), 3u);
    for (const auto& m : fit.models) {
      EXPECT_EQ(m.requests, static_cast<std::int64_t>(runs) * run["models"][m.model]["engine_latency"]["count"].get<std::int64_t>());
      EXPECT_NEAR(m.simulated_fitted_ms, m.measured_ms, 0.01 * m.measured_ms) << m.model;
      EXPECT_GT(std::abs(m.simulated_initial_ms - m.measured_ms), 0.05 * m.measured_ms) << m.model;
    }
  }
  // One model cannot part the two costs.
  nlohmann::json one_model = run;
  one_model["models"].erase("inception_v3");
  one_model["models"].erase("bert_base");
  EXPECT_THROW((void)fit_unified_memory(config, {{one_model, "run.json"}}), InputError);
  // Engines at a hundredth of the truth: below the forward, no positive bandwidth reaches them.
  nlohmann::json fast = run;
  for (nlohmann::json& model : fast["models"]) {
    if (model.contains("engine_latency")) model["engine_latency"]["mean_ms"] = model["engine_latency"]["mean_ms"].get<double>() / 100;
  }
  EXPECT_THROW((void)fit_unified_memory(config, {{fast, "run.json"}}), InputError);
  EXPECT_THROW((void)fit_unified_memory(figures_case(Mechanism::PipeSwitch), {{run, "run.json"}}), InputError);
}

}  // namespace
}  // namespace psw::xval
