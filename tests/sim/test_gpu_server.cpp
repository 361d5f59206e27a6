// The simulated GPU server: determinism, every mechanism's ordering, costs taken from the
// profiles, queueing, training progress, memory capacity, cycles and standby workers.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "sim_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/server_policy.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/sim/mechanism.hpp"
#include "psw/common/metrics.hpp"

namespace psw::sim {
namespace {

using testing_support::data;
using testing_support::mean_ms;
using testing_support::Overrides;
using testing_support::simulate;
using testing_support::slurp;

TEST(SimServer, SameConfigAndSeedGiveByteIdenticalOutputs) {
  const auto dir = std::filesystem::temp_directory_path() / "psw_sim_determinism";
  std::filesystem::remove_all(dir);
  simulate("poisson.yaml", {}, dir / "a");
  simulate("poisson.yaml", {}, dir / "b");
  const std::string a = slurp(dir / "a" / "requests.csv");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, slurp(dir / "b" / "requests.csv"));
  EXPECT_EQ(slurp(dir / "a" / "summary.json"), slurp(dir / "b" / "summary.json"));
  // A different seed gives a different run.
  simulate("poisson.yaml", {{"seed", "4"}}, dir / "c");
  EXPECT_NE(a, slurp(dir / "c" / "requests.csv"));
  std::filesystem::remove_all(dir);
}

TEST(SimServer, MechanismsOrderAsThePaperArgues) {
  std::map<std::string, double> latency;
  for (Mechanism m : all_mechanisms()) {
    const auto s = simulate("small.yaml", {{"mechanism", to_string(m)}});
    EXPECT_EQ(s.at("requests").get<std::int64_t>(), 6) << to_string(m);
    latency[to_string(m)] = mean_ms(s);
  }
  EXPECT_LT(latency["ready"], latency["pipeswitch"]);
  for (const char* slower : {"per-layer-pipeline", "grouped-transmission", "no-optimization",
                             "no-memory-management", "no-ipc-optimization", "no-pinned-memory",
                             "one-process", "stop-and-start", "mps"}) {
    EXPECT_LE(latency["pipeswitch"], latency[slower]) << slower;
  }
  EXPECT_LT(latency["grouped-transmission"], latency["no-optimization"]);
  EXPECT_LT(latency["one-process"], latency["stop-and-start"]);
  EXPECT_DOUBLE_EQ(latency["two-processes"], latency["stop-and-start"]);
  // Stop-and-start pays seconds of process, framework and context start.
  EXPECT_GT(latency["stop-and-start"], 5000.0);
}

TEST(SimServer, CostsComeFromTheHardwareProfile) {
  // Raising the framework start by 1 s raises every stop-and-start latency by 1 s.
  const auto base = simulate("small.yaml", {{"mechanism", "stop-and-start"}, {"workload.interval_ms", "20000"}});
  const auto slower = simulate("small.yaml", {{"mechanism", "stop-and-start"},
                                              {"workload.interval_ms", "20000"},
                                              {"hardware", "\"" + data("v100-slow-framework.yaml") + "\""}});
  EXPECT_NEAR(mean_ms(slower) - mean_ms(base), 1000.0, 1e-6);
  // MPS: the latency is the resident run slowed by the profile's factor (550%).
  const auto ready = simulate("small.yaml", {{"mechanism", "ready"}});
  const auto mps = simulate("small.yaml", {{"mechanism", "mps"}});
  EXPECT_NEAR(mean_ms(mps), 5.5 * mean_ms(ready), 1e-3);
}

TEST(SimServer, RequestsArrivingTogetherQueue) {
  // Two requests 1 ns apart for the same model: the second waits for the first and then
  // runs resident (no second switch).
  const auto s = simulate("small.yaml", {{"mechanism", "pipeswitch"},
                                         {"workload.interval_ms", "0.000001"},
                                         {"workload.count", "2"},
                                         {"workload.models", "[resnet152]"}});
  EXPECT_EQ(s.at("requests").get<std::int64_t>(), 2);
  const auto& l = s.at("latency");
  const auto ready = simulate("small.yaml", {{"mechanism", "ready"}, {"workload.count", "1"},
                                             {"workload.models", "[resnet152]"}});
  EXPECT_NEAR(l.at("max_ms").get<double>() - l.at("min_ms").get<double>(), mean_ms(ready), 0.01);
  EXPECT_EQ(s.at("models").at("resnet152").at("switches").get<std::int64_t>(), 1);
}

TEST(SimServer, TrainingLosesNoProgressWhenPreempted) {
  // Without requests, the training job runs makespan / iteration iterations; each
  // PipeSwitch preemption only costs the GPU time of the inference and the switches.
  const auto with_requests = simulate("small.yaml", {{"mechanism", "ready"}});
  const double makespan = with_requests.at("makespan_s").get<double>();
  const double busy = with_requests.at("gpu_busy_fraction").get<double>();
  EXPECT_GT(with_requests.at("training_iterations").get<std::int64_t>(), 0);
  EXPECT_NEAR(busy, 1.0, 1e-3);  // ready: no switch time, training fills every gap
  EXPECT_GT(makespan, 2.9);
  const auto stop_start = simulate("small.yaml", {{"mechanism", "stop-and-start"}});
  EXPECT_LT(stop_start.at("training_iterations").get<std::int64_t>(),
            with_requests.at("training_iterations").get<std::int64_t>());
}

TEST(SimServer, GpuMemoryCapacityIsEnforced) {
  // The quoted path through detail::concat: GCC 12 warns (-Wrestrict, falsely) on "\"" + std::string.
  const std::string tiny_gpu = detail::concat('"', data("tiny-gpu.yaml"), '"');
  EXPECT_THROW(simulate("small.yaml", {{"hardware", tiny_gpu}}), InputError);
  try {
    simulate("small.yaml", {{"mechanism", "ready"}, {"hardware", tiny_gpu}});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU memory"), std::string::npos) << e.what();
  }
  // Unified memory over-subscribes instead.
  EXPECT_NO_THROW(simulate("small.yaml", {{"mechanism", "unified-memory"}, {"hardware", tiny_gpu}}));
}

TEST(SimServer, CyclesReachTheReadyThroughputUnderPipeSwitch) {
  const auto ready = simulate("cycles.yaml", {{"mechanism", "ready"}});
  const auto pipeswitch = simulate("cycles.yaml", {{"mechanism", "pipeswitch"}});
  const auto stop_start = simulate("cycles.yaml", {{"mechanism", "stop-and-start"}});
  const double r = ready.at("throughput_rps").get<double>();
  EXPECT_GT(r, 10.0);
  EXPECT_GT(pipeswitch.at("throughput_rps").get<double>(), 0.95 * r);
  // A 1 s cycle is shorter than a process start: stop-and-start completes almost nothing.
  EXPECT_LT(stop_start.at("throughput_rps").get<double>(), 0.2 * r);
}

TEST(SimServer, ARequestWaitsForItsWorkerToFinishWhatItDoesAfterATask) {
  // Requests alternate between two models 1 us apart, so each waits in the queue for the one
  // before. The server policy gives it the worker of the last task, standby as soon as its
  // answer is out (Note [Cleanup in psw serve]); under no-ipc-optimization that worker still
  // closes its per-group handles (the profile's slow cleanup, 50 ms), and the request waits for
  // it: every request after the first. More standby workers change nothing (the policy takes
  // the last task's worker, as psw serve does); under PipeSwitch nothing is left to do.
  const Overrides burst = {{"workload.interval_ms", "0.001"},
                           {"workload.count", "6"},
                           {"hardware", "\"" + data("v100-slow-cleanup.yaml") + "\""}};
  Overrides per_group = burst;
  per_group.emplace_back("mechanism", "no-ipc-optimization");
  const auto s = simulate("small.yaml", per_group);
  EXPECT_EQ(s.at("standby_waits").get<std::int64_t>(), 5);
  Overrides more_workers = per_group;
  more_workers.emplace_back("standby_workers", "4");
  EXPECT_EQ(simulate("small.yaml", more_workers).at("standby_waits").get<std::int64_t>(), 5);
  Overrides pipeswitch = burst;
  pipeswitch.emplace_back("mechanism", "pipeswitch");
  const auto fast = simulate("small.yaml", pipeswitch);
  EXPECT_EQ(fast.at("standby_waits").get<std::int64_t>(), 0);
  EXPECT_LT(mean_ms(fast), mean_ms(s));
}

// Note [The simulator drives the server policy]: every decision of a simulation is the
// policy's, so its decision log replays through a fresh policy without a difference, as psw
// serve's does, for every mechanism, with and without a serving profile, on open and closed
// loops, and with a bursty workload whose requests queue.
TEST(SimDecisions, EveryMechanismsDecisionLogReplaysWithoutADifference) {
  const auto dir = std::filesystem::temp_directory_path() / "psw_sim_decisions";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  struct Case {
    std::string config;
    Overrides overrides;
  };
  std::vector<Case> cases;
  for (Mechanism m : all_mechanisms()) {
    if (traits(m).peer_paths) {
      cases.push_back({"parallel.yaml", {}});
      continue;
    }
    for (const char* config : {"small.yaml", "training-batch16.yaml", "cycles.yaml", "solo.yaml"}) {
      cases.push_back({config, {{"mechanism", to_string(m)}}});
    }
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.config + (c.overrides.empty() ? "" : " " + c.overrides[0].second));
    SimulationOptions options;
    options.decisions = dir / "decisions.jsonl";
    const SimulationSummary summary = run_simulation(load_experiment_config(data(c.config), c.overrides), options).summary;
    const DecisionReplay replay = replay_decision_file(options.decisions);
    EXPECT_TRUE(replay.identical) << describe_difference(replay);
    // Every request arrived and was answered through the policy.
    const std::int64_t requests = summary.requests + summary.training_requests;
    EXPECT_GE(replay.events, 2 * requests);
    EXPECT_GE(replay.actions, 2 * requests);
  }
  std::filesystem::remove_all(dir);
}

// Note [Simulation summary]: summary.json is the typed summary's JSON form, read back whole;
// a summary with a key missing or of the wrong type is refused naming the key.
TEST(SimSummary, RoundTripsThroughJsonAndRefusesAMalformedOne) {
  for (const char* config : {"training-batch16.yaml", "parallel.yaml", "cycles.yaml"}) {
    SCOPED_TRACE(config);
    const SimulationSummary s = run_simulation(load_experiment_config(data(config), {}), SimulationOptions{}).summary;
    EXPECT_FALSE(s.models.empty());
    const SimulationSummary back = simulation_summary_from_json(nlohmann::json::parse(to_json(s).dump()), "x");
    EXPECT_EQ(back, s);
    EXPECT_EQ(to_json(back).dump(), to_json(s).dump());
  }
  const SimulationSummary s = run_simulation(load_experiment_config(data("training-batch16.yaml"), {}), SimulationOptions{}).summary;
  ASSERT_TRUE(s.models.begin()->second.server_latency.has_value());
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& part) {
    nlohmann::json j = to_json(s);
    edit(j);
    try {
      (void)simulation_summary_from_json(j, "run/summary.json");
      ADD_FAILURE() << "accepted: " << part;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused([](nlohmann::json& j) { j.erase("throughput_rps"); }, "run/summary.json: no 'throughput_rps'");
  refused([](nlohmann::json& j) { j["switches"] = "many"; }, "'switches' must be an integer");
  refused([](nlohmann::json& j) { j["latency"].erase("p99_ms"); }, "run/summary.json.latency: the latency summary has no number 'p99_ms'");
  refused([](nlohmann::json& j) { j["models"]["resnet152"]["engine_latency"]["count"] = -1; },
          "run/summary.json.models.resnet152.engine_latency: the latency summary has no count");
}

TEST(SimServer, EveryMechanismParsesAndUnknownOnesAreRejected) {
  for (Mechanism m : all_mechanisms()) EXPECT_EQ(parse_mechanism(to_string(m)), m);
  EXPECT_THROW(parse_mechanism("magic"), InputError);
  EXPECT_THROW(simulate("small.yaml", {{"mechanism", "magic"}}), InputError);
}

TEST(SimMetrics, HistogramQuantilesAreWithinATenthOfAPercent) {
  LatencyHistogram h;
  for (std::int64_t v = 1; v <= 100'000; ++v) h.add(microseconds(v));
  EXPECT_EQ(h.count(), 100'000);
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = q * 100'000 * 1'000;
    EXPECT_NEAR(static_cast<double>(h.quantile(q).ns()), exact, exact * 1e-3) << q;
  }
  EXPECT_EQ(h.min(), microseconds(1));
  EXPECT_EQ(h.max(), microseconds(100'000));
  EXPECT_EQ(h.mean().ns(), 50'000'500);
  LatencyHistogram small;
  small.add(nanoseconds(5));
  EXPECT_EQ(small.quantile(0.99), nanoseconds(5));
}

// Note [Placement]: with BERT's word embeddings read in place, its switches start and end
// earlier than with every layer copied; the resolved config says which placement ran.
TEST(SimServer, PlacementAutoStartsBertEarlier) {
  const auto placed = simulate("placement.yaml");
  const auto copied = simulate("placement.yaml", {{"placement", "copy"}});
  EXPECT_LT(placed.at("startup_overhead_ms").at("mean").get<double>(),
            copied.at("startup_overhead_ms").at("mean").get<double>());
  EXPECT_LT(mean_ms(placed), mean_ms(copied));
  const auto config = load_experiment_config(data("placement.yaml"));
  EXPECT_NE(resolved_yaml(config).find("placement: auto"), std::string::npos);
}

}  // namespace
}  // namespace psw::sim
