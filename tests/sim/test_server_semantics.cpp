// What the simulated server models beyond costs: MPS's slowdown only beside training, the
// project trace's batch and task columns, killed training losing its iteration, switch counts
// split by task, exact Chrome trace times, and the closed-form switch cost against the
// timeline it stands for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim_test_support.hpp"
#include "psw/common/chrome_trace.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/serving_profile.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"
#include "psw/sim/simulation.hpp"
#include "psw/sim/mechanism.hpp"

namespace psw::sim {
namespace {

using testing_support::data;
using testing_support::mean_ms;
using testing_support::Overrides;
using testing_support::simulate;
using testing_support::slurp;

std::string quoted(const std::string& path) { return "\"" + path + "\""; }
std::int64_t count(const nlohmann::json& s, const char* key) { return s.at(key).get<std::int64_t>(); }

std::vector<std::vector<std::string>> csv_rows(const std::filesystem::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(slurp(p));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::istringstream f(line);
    std::string field;
    while (std::getline(f, field, ',')) fields.push_back(field);
    rows.push_back(fields);
  }
  return rows;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("psw_sim_semantics_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Writes `text` as `dir`/`file` (the folder made if missing); returns the file's path.
std::string write_file(const std::filesystem::path& dir, const std::string& file, const std::string& text) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / file;
  std::ofstream(path) << text;
  return path.string();
}

// Note [MPS slowdown]: alone on the GPU an inference under MPS runs at the ready speed; beside
// the training job it is slowed by the profile's factor (550% on the V100).
TEST(SimMps, InferenceIsSlowedOnlyWhileTrainingSharesTheGpu) {
  const auto alone = simulate("solo.yaml");
  const auto alone_ready = simulate("solo.yaml", {{"mechanism", "ready"}});
  EXPECT_EQ(count(alone, "requests"), 6);
  EXPECT_NEAR(mean_ms(alone), mean_ms(alone_ready), 1e-6);
  const auto beside = simulate("small.yaml", {{"mechanism", "mps"}});
  const auto beside_ready = simulate("small.yaml", {{"mechanism", "ready"}});
  EXPECT_NEAR(mean_ms(beside), 5.5 * mean_ms(beside_ready), 1e-3);
}

// Note [GPU busy and GPU work]: under MPS on the H200 profile the requests, back to back beside
// the training job, and the job together do more work per second than either alone (inference
// at 1/1.37 of its speed, training at 1/1.5): the work fraction is that sum, above 1, while the
// busy fraction is the time the GPU had work, here all of it (the job never stops). The
// simulator once reported min(1, sum) as the busy fraction and had no work fraction.
TEST(SimMps, TheBusyFractionIsTimeWithWorkAndTheWorkFractionTheConcurrentSum) {
  const std::string h200 = quoted(std::string(PSW_SOURCE_DIR) + "/configs/hardware/h200-pcie5.yaml");
  const Overrides back_to_back = {{"hardware", h200},
                                  {"workload", "{kind: periodic, interval_ms: 1, count: 2000, models: [resnet152]}"}};
  Overrides mps = back_to_back;
  mps.push_back({"mechanism", "mps"});
  const auto shared = simulate("small.yaml", mps);
  EXPECT_GT(shared.at("gpu_work_fraction").get<double>(), 1.1);
  EXPECT_NEAR(shared.at("gpu_busy_fraction").get<double>(), 1.0, 1e-9);
  // One task at a time (PipeSwitch), or MPS without a training job: nothing overlaps, and the
  // two figures are the same, each below 1 where the GPU waited for switches or requests.
  Overrides pipeswitch = back_to_back;
  pipeswitch.push_back({"mechanism", "pipeswitch"});
  for (const auto& [config, overrides] : {std::pair{"small.yaml", pipeswitch}, std::pair{"solo.yaml", Overrides{}}}) {
    const auto s = simulate(config, overrides);
    const double busy = s.at("gpu_busy_fraction").get<double>();
    EXPECT_NEAR(busy, s.at("gpu_work_fraction").get<double>(), 1e-9) << config;
    EXPECT_GT(busy, 0.0) << config;
    EXPECT_LT(busy, 1.0) << config;
  }
}

// Note [Time slicing]: alone on the GPU a time-sliced inference runs at the ready speed; beside
// the training job it waits for a context switch, then runs with its share of the GPU.
TEST(SimTimeSliced, InferenceRunsWithItsShareOfTheGpuBesideTraining) {
  const auto alone = simulate("solo.yaml", {{"mechanism", "time-sliced"}});
  EXPECT_NEAR(mean_ms(alone), mean_ms(simulate("solo.yaml", {{"mechanism", "ready"}})), 1e-6);
  const HardwareProfile hw = load_experiment_config(data("small.yaml")).hardware;
  ASSERT_TRUE(hw.time_slicing);
  const double switch_ms = hw.time_slicing->context_switch.ms();
  const auto ready = simulate("small.yaml", {{"mechanism", "ready"}});
  double previous_iterations = -1;
  for (const int share : {25, 50, 100}) {
    ExperimentConfig config = load_experiment_config(data("small.yaml"), {{"mechanism", "time-sliced"}});
    config.hardware.time_slicing->inference_share_percent = share;
    const auto beside = to_json(run_simulation(config, SimulationOptions{}).summary);
    for (const char* model : {"resnet152", "bert_base"}) {
      // Ready's requests each run the model's forward alone (every model resident).
      const double work = ready.at("models").at(model).at("latency").at("mean_ms").get<double>();
      const double expected = switch_ms + work * 100.0 / share;
      EXPECT_NEAR(beside.at("models").at(model).at("latency").at("mean_ms").get<double>(), expected, 1e-3)
          << model << " at " << share << "%";
    }
    EXPECT_EQ(count(beside, "switches"), 0);  // every model resident, nothing switched
    EXPECT_EQ(count(beside, "training_switch_ins"), 0);
    // The training job never stops; while an inference runs it advances at the rest of the GPU,
    // so the larger the inference's share, the less far it gets.
    const double iterations = beside.at("training_iterations").get<double>();
    if (previous_iterations >= 0) {
      EXPECT_LE(iterations, previous_iterations) << share << "%";
    }
    previous_iterations = iterations;
  }
}

// Note [Request path]: a serving profile adds its server part to a request's service time and
// its protocol part to its latency, per model; with a training step, the training job takes it.
TEST(SimRequestPath, AServingProfileAddsItsPathsPerModelAndSetsTheTrainingStep) {
  // Without a training job (where the next request finds the training job depends on how long
  // the last one held the GPU): solo.yaml under PipeSwitch.
  const auto base = simulate("solo.yaml", {{"mechanism", "pipeswitch"}});
  const auto served = simulate("solo.yaml", {{"mechanism", "pipeswitch"}, {"serving", quoted(data("serving-small.yaml"))}});
  const ServingProfile profile = load_serving_profile(data("serving-small.yaml"));
  for (const char* model : {"resnet152", "bert_base"}) {
    const RequestPathCost* path = profile.path_of(model);
    ASSERT_NE(path, nullptr);
    // Requests 500 ms apart: none queues behind another, so each gains exactly its path.
    const double expected = base.at("models").at(model).at("latency").at("mean_ms").get<double>() +
                            path->protocol.ms() + path->server.ms();
    EXPECT_NEAR(served.at("models").at(model).at("latency").at("mean_ms").get<double>(), expected, 1e-6) << model;
  }
  // With a training step too, the training job takes the profile's 50 ms step, whatever its layers' times add up to:
  // whole iterations in what the makespan leaves it beside the six requests (each well under
  // 100 ms), more than with the V100 profile's own (longer) step.
  const auto untrained = simulate("small.yaml");
  const auto trained = simulate("small.yaml", {{"serving", quoted(data("serving-small-training.yaml"))}});
  const double makespan_s = trained.at("makespan_s").get<double>();
  const double iterations = trained.at("training_iterations").get<double>();
  EXPECT_LE(iterations, makespan_s / 0.050);
  EXPECT_GE(iterations, (makespan_s - 6 * 0.1) / 0.050 - 1);
  EXPECT_GT(iterations, untrained.at("training_iterations").get<double>());
  // training_step (Note [Training share]) says which step the simulator ran: the profile's,
  // else its layers' (longer here), and none without a training job.
  const ExperimentConfig with_step =
      load_experiment_config(data("small.yaml"), {{"serving", quoted(data("serving-small-training.yaml"))}});
  ASSERT_TRUE(training_step(with_step));
  EXPECT_EQ(*training_step(with_step), milliseconds(50));
  const auto layers_step = training_step(load_experiment_config(data("small.yaml")));
  ASSERT_TRUE(layers_step);
  EXPECT_GT(*layers_step, milliseconds(50));
  EXPECT_LE(untrained.at("training_iterations").get<double>(), makespan_s / layers_step->seconds() + 1);
  EXPECT_FALSE(training_step(load_experiment_config(data("load-periodic.yaml"))));
}

// Note [Latency parts]: with a serving profile each model's latency splits into the server's
// time and the protocol's, as psw load reports them; without one neither is written.
TEST(SimRequestPath, LatencySplitsIntoTheServersTimeAndTheProtocols) {
  const auto base = simulate("solo.yaml", {{"mechanism", "pipeswitch"}});
  const auto served = simulate("solo.yaml", {{"mechanism", "pipeswitch"}, {"serving", quoted(data("serving-small.yaml"))}});
  const ServingProfile profile = load_serving_profile(data("serving-small.yaml"));
  for (const char* model : {"resnet152", "bert_base"}) {
    const RequestPathCost* path = profile.path_of(model);
    ASSERT_NE(path, nullptr);
    const auto& entry = served.at("models").at(model);
    const double latency = entry.at("latency").at("mean_ms").get<double>();
    const double server = entry.at("server_latency").at("mean_ms").get<double>();
    const double protocol = entry.at("protocol_latency").at("mean_ms").get<double>();
    EXPECT_NEAR(server + protocol, latency, 1e-6) << model;
    EXPECT_NEAR(protocol, path->protocol.ms(), 1e-6) << model;  // no quantiles: the median each time
    // Requests apart: the server's time is the request without the profile plus its server part.
    EXPECT_NEAR(server, base.at("models").at(model).at("latency").at("mean_ms").get<double>() + path->server.ms(), 1e-6)
        << model;
    EXPECT_EQ(entry.at("server_latency").at("count"), entry.at("latency").at("count"));
    EXPECT_FALSE(base.at("models").at(model).contains("server_latency"));
    EXPECT_FALSE(base.at("models").at(model).contains("protocol_latency"));
  }
}

// Note [Closed-loop cycles]: with a serving profile the client has each answer a protocol after
// the server's completion, and only then issues the next request; meanwhile the server resumes
// training, as psw serve does, and the next request switches the model in again.
TEST(SimRequestPath, CyclesIssueTheNextRequestWhenTheClientHasTheAnswer) {
  const std::filesystem::path bare_dir = fresh_dir("cycles-bare");
  const std::filesystem::path served_dir = fresh_dir("cycles-served");
  const auto bare = simulate("cycles.yaml", {{"mechanism", "pipeswitch"}}, bare_dir);
  const auto served =
      simulate("cycles.yaml", {{"mechanism", "pipeswitch"}, {"serving", quoted(data("serving-small.yaml"))}}, served_dir);
  const std::int64_t protocol_ns = 3'000'000;  // resnet152's in serving-small.yaml
  // requests.csv: id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,latency_ns,...
  const auto rows = csv_rows(served_dir / "requests.csv");
  ASSERT_GT(rows.size(), 3u);
  const std::int64_t cycle_ns = 1'000'000'000;
  int chained = 0;
  for (std::size_t i = 2; i < rows.size(); ++i) {
    const std::int64_t arrival = std::stoll(rows[i][3]);
    const std::int64_t previous_finish = std::stoll(rows[i - 1][6]);
    if (arrival % (2 * cycle_ns) == cycle_ns) continue;  // the first of a phase: at its start
    EXPECT_EQ(arrival, previous_finish + protocol_ns) << "request " << rows[i][0];
    EXPECT_EQ(std::stoll(rows[i][7]), std::stoll(rows[i][6]) + protocol_ns - arrival) << "request " << rows[i][0];
    ++chained;
  }
  EXPECT_GT(chained, 0);
  // Training comes back between the requests: preempted again each time, and fewer answers.
  EXPECT_GT(count(served, "training_preemptions"), count(bare, "training_preemptions") + chained / 2);
  EXPECT_LT(served.at("throughput_rps").get<double>(), bare.at("throughput_rps").get<double>());
}

// Note [Cleanup in psw serve]: in the closed loop the next request comes a protocol after the
// answer, while training runs again, and needs the only standby worker, the one that has just
// answered. psw serve's worker is standby at once under PipeSwitch, where the paper's cleaned up
// first (50 ms in this hardware profile); under no-ipc-optimization it closes its per-group
// handles first (the profile's cleanup stands for that).
TEST(SimRequestPath, InTheClosedLoopTheWorkerOfPswServeIsStandbyAtOnce) {
  const std::string slow_cleanup = quoted(data("v100-slow-cleanup.yaml"));
  const std::string serving = quoted(data("serving-small.yaml"));
  // The longest wait from dispatch to the first layer computing over the requests of a phase
  // after its first (the first comes after a cycle of training, long after any cleanup).
  auto longest_startup_ms = [&](const Overrides& overrides, const std::string& name) {
    const std::filesystem::path dir = fresh_dir(name);
    simulate("cycles.yaml", overrides, dir);
    const auto rows = csv_rows(dir / "requests.csv");
    std::int64_t longest = 0;
    int chained = 0;
    for (std::size_t i = 1; i < rows.size(); ++i) {
      if (std::stoll(rows[i][3]) % 2'000'000'000 == 1'000'000'000) continue;  // a phase's first
      longest = std::max<std::int64_t>(longest, std::stoll(rows[i][5]) - std::stoll(rows[i][4]));
      ++chained;
    }
    EXPECT_GT(chained, 10) << name;
    return static_cast<double>(longest) / 1e6;
  };
  const double served = longest_startup_ms(
      {{"mechanism", "pipeswitch"}, {"hardware", slow_cleanup}, {"serving", serving}}, "cleanup-served");
  const double per_group = longest_startup_ms(
      {{"mechanism", "no-ipc-optimization"}, {"hardware", slow_cleanup}, {"serving", serving}}, "cleanup-per-group");
  EXPECT_LT(served, 10.0) << "a layer boundary and the first group, no cleanup";
  EXPECT_GT(per_group, 45.0) << "the 50 ms cleanup less the 3 ms protocol";
}

// Note [Fresh processes]: psw serve starts a process for every request under stop-and-start,
// even one queued behind a request of the same model; the simulator does so with a serving
// profile (modelling psw serve), and without one keeps the model's process for back-to-back
// requests of one model, as the paper's baseline.
TEST(SimRequestPath, UnderStopAndStartEveryRequestOfPswServeGetsAProcess) {
  // One model, requests 500 ms apart: far less than a start, so they queue behind each other.
  const Overrides one_model = {{"mechanism", "stop-and-start"},
                               {"workload", "{kind: periodic, interval_ms: 500, count: 4, models: [resnet152]}"}};
  Overrides served_overrides = one_model;
  served_overrides.push_back({"serving", quoted(data("serving-small.yaml"))});
  const auto served = simulate("solo.yaml", served_overrides);
  const auto bare = simulate("solo.yaml", one_model);
  EXPECT_EQ(count(served, "switches"), 4);
  EXPECT_EQ(count(bare, "switches"), 1);  // the first starts the process, the rest queue on it

  // A request that comes while the training job's fresh process is starting takes that process,
  // and waits only for the rest of its start (5.5 s on this profile, the kill included).
  auto latencies = [](std::int64_t interval_ms, std::optional<int> fresh_standby, const std::string& name) {
    SimulationOptions options;
    options.out_dir = fresh_dir(name);
    options.fresh_standby_processes = fresh_standby;
    (void)run_simulation(
        load_experiment_config(data("small.yaml"),
                               {{"mechanism", "stop-and-start"},
                                {"serving", quoted(data("serving-small-training.yaml"))},
                                {"workload", "{kind: periodic, interval_ms: " + std::to_string(interval_ms) +
                                                 ", count: 2, models: [resnet152]}"}}),
        options);
    // requests.csv: id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,latency_ns,...
    const auto rows = csv_rows(options.out_dir / "requests.csv");
    EXPECT_EQ(rows.size(), 3u);  // the header and two requests
    std::vector<std::int64_t> out;
    for (std::size_t r = 1; r < rows.size(); ++r) out.push_back(std::stoll(rows[r][7]));
    return out;
  };
  // A server whose standby process a warm-up used: every request waits for a start. 8 s apart,
  // the second request comes about 2.4 s after the first one's answer, when training began to
  // resume.
  const auto used = latencies(8000, 0, "stop-and-start-resuming");
  ASSERT_EQ(used.size(), 2u);
  EXPECT_GT(used[0], 5'500'000'000);
  EXPECT_LT(used[1], used[0] - 2'000'000'000);
  EXPECT_GT(used[1], used[0] - 3'000'000'000);
  // Note [Processes a server starts with]: a fresh server's first request takes the process it
  // started beside the training job, with neither a kill nor a start; training then resumes in
  // a process started for it, which the second request, 2 s later, waits for: about 5.5 - 1.9 s.
  const auto fresh = latencies(2000, std::nullopt, "stop-and-start-fresh-server");
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_LT(fresh[0], 1'000'000'000);
  EXPECT_GT(fresh[1], 3'000'000'000);
  EXPECT_LT(fresh[1], 4'000'000'000);
}

// Note [Protocol spread]: with the protocol's quantiles each request draws its own, so the
// latency spreads as they do; the same seed draws the same, and the median stays in place.
TEST(SimRequestPath, ProtocolQuantilesSpreadTheLatency) {
  const std::string spread =
      write_file(fresh_dir("spread"), "spread.yaml",
                 "name: spread\nsource: {kind: analytic}\ninputs: raw\nrequest_path:\n"
                 "  - {model: resnet152, protocol_ns: 3000000, server_ns: 500000, requests: 5, "
                 "protocol_quantiles_ns: [1000000, 3000000, 9000000]}\n"
                 "  - {model: bert_base, protocol_ns: 700000, server_ns: 250000, requests: 5}\n");
  const Overrides more = {{"workload.count", "200"}};
  auto with = [&](const std::string& profile) {
    Overrides o = more;
    o.push_back({"serving", quoted(profile)});
    return simulate("small.yaml", o);
  };
  const auto fixed = with(data("serving-small.yaml"));
  const auto spread_once = with(spread);
  const auto spread_twice = with(spread);
  auto resnet = [](const nlohmann::json& s, const char* key) {
    return s.at("models").at("resnet152").at("latency").at(key).get<double>();
  };
  EXPECT_EQ(spread_once, spread_twice);  // deterministic
  // Fixed 3 ms: no spread beyond the engine's. Drawn between 1 and 9 ms: wider both ways.
  EXPECT_GT(resnet(spread_once, "p99_ms") - resnet(spread_once, "p50_ms"),
            resnet(fixed, "p99_ms") - resnet(fixed, "p50_ms") + 3.0);
  EXPECT_LT(resnet(spread_once, "min_ms"), resnet(fixed, "min_ms") - 1.0);
  // The median draw is 3 ms, as the fixed path: the medians agree within the draws' noise.
  EXPECT_NEAR(resnet(spread_once, "p50_ms"), resnet(fixed, "p50_ms"), 1.0);
  // BERT-base's path has no quantiles: its latencies are exactly as before.
  EXPECT_EQ(spread_once.at("models").at("bert_base"), fixed.at("models").at("bert_base"));
}

// Note [Protocol under load]: each request's protocol grows by the profile's step per request in
// flight when it arrived (queued, served, or answered by the server but not yet by the
// protocol); the server's times do not change.
TEST(SimRequestPath, TheProtocolGrowsWithTheRequestsInFlightAtArrival) {
  const std::filesystem::path dir = fresh_dir("in-flight");
  const std::string growing =
      write_file(dir, "growing.yaml",
                 "name: growing\nsource: {kind: analytic}\ninputs: raw\nrequest_path:\n"
                 "  - {model: resnet152, protocol_ns: 3000000, server_ns: 500000, requests: 5, "
                 "protocol_per_in_flight_ns: 1000000}\n"
                 "  - {model: bert_base, protocol_ns: 700000, server_ns: 250000, requests: 5, "
                 "protocol_per_in_flight_ns: 1000000}\n");
  // Five requests 1 ms apart: each arrives while every earlier one is still being served.
  const Overrides burst = {{"workload.interval_ms", "1"}, {"workload.count", "5"}};
  auto with = [&](const std::string& profile, const std::string& name) {
    Overrides o = burst;
    o.push_back({"serving", quoted(profile)});
    simulate("small.yaml", o, dir / name);
    return csv_rows(dir / name / "requests.csv");  // id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,latency_ns
  };
  const auto alone = with(data("serving-small.yaml"), "alone");
  const auto loaded = with(growing, "loaded");
  ASSERT_EQ(alone.size(), 6u);  // the header and five requests
  ASSERT_EQ(loaded.size(), 6u);
  for (std::size_t i = 1; i < 6; ++i) {
    EXPECT_EQ(loaded[i][6], alone[i][6]) << "request " << i;  // the server's completion is the same
    EXPECT_EQ(std::stoll(loaded[i][7]) - std::stoll(alone[i][7]), static_cast<std::int64_t>(i - 1) * 1'000'000)
        << "request " << i - 1 << ": " << i - 1 << " in flight at its arrival";
  }
  // Spread apart (small.yaml's 500 ms), nothing is in flight at an arrival: no growth.
  const Overrides apart = {{"serving", quoted(growing)}};
  const Overrides apart_alone = {{"serving", quoted(data("serving-small.yaml"))}};
  EXPECT_EQ(simulate("small.yaml", apart).at("latency"), simulate("small.yaml", apart_alone).at("latency"));
}

// A serving profile must cover every model the workload requests, and the training job's batch.
TEST(SimRequestPath, AServingProfileWithoutAModelOrForAnotherBatchIsRefused) {
  const std::filesystem::path dir = fresh_dir("serving");
  const std::string partial =
      write_file(dir, "partial.yaml",
                 "name: partial\nsource: {kind: analytic}\ninputs: raw\n"
                 "request_path:\n  - {model: resnet152, protocol_ns: 1, server_ns: 1, requests: 1}\n");
  try {
    simulate("small.yaml", {{"serving", quoted(partial)}});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no request_path of model 'bert_base', which the workload requests"),
              std::string::npos) << e.what();
  }
  const std::string batch16 =
      write_file(dir, "batch16.yaml",
                 "name: b16\nsource: {kind: analytic}\ninputs: raw\n"
                 "request_path:\n  - {model: resnet152, protocol_ns: 1, server_ns: 1, requests: 1}\n"
                 "  - {model: bert_base, protocol_ns: 1, server_ns: 1, requests: 1}\n"
                 "training:\n  - {model: resnet152, batch: 16, step_ns: 1000}\n");
  try {
    simulate("small.yaml", {{"serving", quoted(batch16)}});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is for batch 16, the training job's for batch 8"), std::string::npos) << e.what();
  }
  // The job at batch 16 (Note [MPS contention]) takes that step, and needs it.
  EXPECT_NO_THROW(simulate("small.yaml", {{"serving", quoted(batch16)}, {"training.batch", "16"}}));
  try {
    simulate("small.yaml", {{"training.batch", "16"}});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a training job at batch 16 needs a serving profile with its step"),
              std::string::npos)
        << e.what();
  }
}

// Note [Batch of a request]: profiles are at batch 8; a row at batch 64 is refused with the
// trace file and its line.
TEST(SimProjectTrace, ABatchTheProfileDoesNotServeIsRefusedWithFileAndLine) {
  try {
    simulate("project-trace.yaml", {{"workload.path", quoted(data("trace-batch64.csv"))}});
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("trace-batch64.csv:3:"), std::string::npos) << what;
    EXPECT_NE(what.find("batch 64"), std::string::npos) << what;
    EXPECT_NE(what.find("profiled at batch 8"), std::string::npos) << what;
  }
}

// Note [Training requests]: a training row is one training iteration of its model, switched in
// for training, and reported apart from inference.
TEST(SimProjectTrace, ATrainingRowRunsATrainingIteration) {
  const auto dir = fresh_dir("training_row");
  const auto s = simulate("project-trace.yaml", {}, dir);
  EXPECT_EQ(count(s, "requests"), 3);  // inference only
  EXPECT_EQ(count(s, "training_requests"), 1);
  EXPECT_EQ(count(s, "switches"), 3);  // resnet152 at 0 and 2 s, bert_base at 3 s
  EXPECT_EQ(count(s, "training_switch_ins"), 1);
  const auto rows = csv_rows(dir / "requests.csv");
  ASSERT_EQ(rows.size(), 5u);
  ASSERT_EQ(rows[0][2], "task");
  ASSERT_EQ(rows[0][7], "latency_ns");
  EXPECT_EQ(rows[2][1], "bert_base");
  EXPECT_EQ(rows[2][2], "training");
  EXPECT_EQ(rows[4][2], "inference");
  // Its latency is the switch-in of BERT-base for training with ResNet-152 active: forward
  // and backward, not the inference's.
  const auto config = load_experiment_config(data("project-trace.yaml"));
  const MechanismModel mechanism(config.mechanism, config.hardware, config.models, config.planner, config.placement);
  const Duration training = mechanism.switch_in(1, Task::Training, Duration::zero(), 0u).finish;
  const Duration inference = mechanism.switch_in(1, Task::Inference, Duration::zero(), 0u).finish;
  EXPECT_EQ(std::stoll(rows[2][7]), training.ns());
  EXPECT_EQ(std::stoll(rows[4][7]), inference.ns());
  EXPECT_GT(training, inference + mechanism.ready_run(1, Task::Inference));
  std::filesystem::remove_all(dir);
}

// Note [Killed training]: stop-and-start kills the training process, so the iteration in
// progress when the request arrives is lost; PipeSwitch pauses at a layer boundary and loses
// nothing.
TEST(SimTraining, StopAndStartLosesTheIterationInProgress) {
  const Overrides one_request = {{"workload.count", "1"}, {"workload.models", "[resnet152]"}};
  Overrides stop_start = one_request;
  stop_start.emplace_back("mechanism", "stop-and-start");
  const auto killed = simulate("small.yaml", stop_start);
  const auto config = load_experiment_config(data("small.yaml"), stop_start);
  const MechanismModel mechanism(config.mechanism, config.hardware, config.models, config.planner, config.placement);
  const Duration iteration = mechanism.ready_run(*config.training_model, Task::Training);
  const Duration arrival = milliseconds(500);
  const double lost_ms = static_cast<double>(arrival.ns() % iteration.ns()) / 1e6;
  ASSERT_GT(lost_ms, 0.0);
  EXPECT_NEAR(killed.at("training_lost_ms").get<double>(), lost_ms, 1e-9);
  Overrides pipeswitch = one_request;
  pipeswitch.emplace_back("mechanism", "pipeswitch");
  EXPECT_EQ(simulate("small.yaml", pipeswitch).at("training_lost_ms").get<double>(), 0.0);
}

// Note [Training held]: one request under PipeSwitch holds the job from its layer boundary to
// running again; paused in place, it runs again when the request completes, with no switch back
// in (Note [Paused in place]); MPS never holds it.
TEST(SimTraining, TheTimeTrainingIsHeldForRequestsIsReported) {
  const Overrides one_request = {{"workload.count", "1"}, {"workload.models", "[resnet152]"},
                                 {"mechanism", "pipeswitch"}};
  const std::filesystem::path dir = fresh_dir("held-one");
  const auto summary = simulate("small.yaml", one_request, dir);
  const double held_ms = summary.at("training_held_ms").get<double>();
  // requests.csv: id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,...; the layer
  // boundary comes after the dispatch and no later than the first layer's start.
  const auto rows = csv_rows(dir / "requests.csv");
  ASSERT_EQ(rows.size(), 2u);  // the header and the request
  const double dispatch_ms = std::stod(rows[1][4]) / 1e6;
  const double startup_ms = std::stod(rows[1][5]) / 1e6;
  const double finish_ms = std::stod(rows[1][6]) / 1e6;
  EXPECT_LE(held_ms, finish_ms - dispatch_ms + 1e-6);
  EXPECT_GE(held_ms, finish_ms - startup_ms - 1e-6);
  const double latency_ms = summary.at("latency").at("mean_ms").get<double>();
  EXPECT_GT(held_ms, 0.0);
  // At least the request's time on the server, less the protocol and the layer boundary's wait.
  EXPECT_GT(held_ms, 0.5 * latency_ms);
  // The job ran the rest of the makespan: progress plus the hold make up the run.
  const double makespan_ms = summary.at("makespan_s").get<double>() * 1000.0;
  EXPECT_LT(held_ms, makespan_ms);
  Overrides mps = one_request;
  mps.back() = {"mechanism", "mps"};
  EXPECT_EQ(simulate("small.yaml", mps).at("training_held_ms").get<double>(), 0.0);
  Overrides two = one_request;
  two.front() = {"workload.count", "2"};
  EXPECT_GT(simulate("small.yaml", two).at("training_held_ms").get<double>(), held_ms);
}

// Note [Switch counts]: every request of small.yaml preempts training and switches its model
// in; under one process training is switched back in after each, under PipeSwitch it goes on
// paused in place (Note [Paused in place]); the counts are kept apart.
TEST(SimServer, SwitchCountsKeepInferenceAndTrainingApart) {
  const auto s = simulate("small.yaml", {{"mechanism", "pipeswitch"}});
  EXPECT_EQ(count(s, "switches"), 6);
  EXPECT_EQ(count(s, "training_preemptions"), 6);
  EXPECT_EQ(count(s, "training_switch_ins"), 0);
  std::int64_t per_model = 0;
  for (const auto& [name, m] : s.at("models").items()) per_model += m.at("switches").get<std::int64_t>();
  EXPECT_EQ(per_model, 6);
  const auto one_process = simulate("small.yaml", {{"mechanism", "one-process"}});
  EXPECT_EQ(count(one_process, "switches"), 6);
  EXPECT_EQ(count(one_process, "training_preemptions"), 6);
  EXPECT_EQ(count(one_process, "training_switch_ins"), 6);
  // MPS switches nothing.
  const auto mps = simulate("small.yaml", {{"mechanism", "mps"}});
  EXPECT_EQ(count(mps, "switches"), 0);
  EXPECT_EQ(count(mps, "training_switch_ins"), 0);
  EXPECT_EQ(count(mps, "training_preemptions"), 0);
}

// Note [Waits in the trace]: without a training job, requests of two models 1 us apart, and a
// 50 ms cleanup of a worker (v100-slow-cleanup.yaml), one standby worker. The first takes one
// worker, the second the other, sending the first's worker to its cleanup; the third (resnet152
// again) finds none standby and waits for that cleanup to end. The trace draws the wait as its
// own slice on the queue track and the switch from the wait's end, for as long as the switch
// alone takes; requests.csv keeps the wait between dispatch_ns and startup_ns.
TEST(SimChromeTrace, AWaitForABusyWorkerIsAWaitNotASwitch) {
  // Under no-ipc-optimization the worker closes its per-group handles after its answer (50 ms
  // in this profile): the next request, dispatched to it when the first one finished, waits
  // for that, then switches.
  const auto dir = fresh_dir("standby-wait");
  std::filesystem::create_directories(dir);
  const Overrides overrides = {{"mechanism", "no-ipc-optimization"},
                               {"hardware", quoted(data("v100-slow-cleanup.yaml"))},
                               {"workload", "{kind: periodic, interval_ms: 0.001, count: 2, models: [resnet152, bert_base]}"}};
  const auto summary = simulate("solo.yaml", overrides, dir / "out", dir / "trace.json");
  EXPECT_EQ(count(summary, "standby_waits"), 1);
  // requests.csv: id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,...
  const auto rows = csv_rows(dir / "out" / "requests.csv");
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_EQ(rows[2][1], "bert_base");
  const std::int64_t second_dispatch = std::stoll(rows[2][4]);
  EXPECT_EQ(second_dispatch, std::stoll(rows[1][6]));  // dispatched when the first one finished
  const std::int64_t worker_free = second_dispatch + 50'000'000;  // its handles closed

  const auto config = load_experiment_config(data("solo.yaml"), overrides);
  const MechanismModel mechanism(config.mechanism, config.hardware, config.models, config.planner, config.placement);
  const SwitchInCost cost = mechanism.switch_in(1, Task::Inference, Duration::zero(), 0u);
  ASSERT_TRUE(cost.switched);
  EXPECT_EQ(std::stoll(rows[2][5]), worker_free + cost.startup.ns());  // startup_ns: the first layer

  const auto trace = nlohmann::json::parse(slurp(dir / "trace.json"));
  std::vector<nlohmann::json> waits;
  std::vector<nlohmann::json> switches;
  for (const auto& e : trace.at("traceEvents")) {
    const std::string name = e.at("name").get<std::string>();
    if (name.rfind("wait for a standby worker", 0) == 0) waits.push_back(e);
    if (name == "switch in bert_base") switches.push_back(e);
  }
  ASSERT_EQ(waits.size(), 1u) << trace.dump();
  EXPECT_EQ(waits[0].at("name"), "wait for a standby worker bert_base");
  EXPECT_EQ(waits[0].at("tid"), 3);  // the queue track
  const auto us = [](std::int64_t ns) { return std::stod(chrome_trace_us(nanoseconds(ns))); };
  EXPECT_DOUBLE_EQ(waits[0].at("ts").get<double>(), us(second_dispatch));
  EXPECT_DOUBLE_EQ(waits[0].at("dur").get<double>(), us(worker_free - second_dispatch));
  ASSERT_EQ(switches.size(), 1u);
  EXPECT_DOUBLE_EQ(switches[0].at("ts").get<double>(), us(worker_free));
  EXPECT_DOUBLE_EQ(switches[0].at("dur").get<double>(), us(cost.startup.ns()));
  std::filesystem::remove_all(dir);
}

// Chrome trace times are exact: an hour in, the nanoseconds are still there.
TEST(SimChromeTrace, TimestampsAfterAnHourKeepNanoseconds) {
  const auto dir = fresh_dir("hour");
  std::filesystem::create_directories(dir);
  simulate("project-trace.yaml", {{"workload.path", quoted(data("trace-hour.csv"))}}, {}, dir / "trace.json");
  const std::string trace = slurp(dir / "trace.json");
  const auto config = load_experiment_config(data("project-trace.yaml"));
  const MechanismModel mechanism(config.mechanism, config.hardware, config.models, config.planner, config.placement);
  const SwitchInCost cost = mechanism.switch_in(1, Task::Inference, Duration::zero(), std::nullopt);
  const Duration arrival = nanoseconds(3'600'001'234'567);
  EXPECT_NE(trace.find("\"name\":\"switch in bert_base\",\"cat\":\"switch\",\"ph\":\"X\",\"pid\":1,\"tid\":2,"
                       "\"ts\":3600001234.567,\"dur\":" + chrome_trace_us(cost.startup) + "}"),
            std::string::npos)
      << trace;
  EXPECT_NE(trace.find("\"ts\":" + chrome_trace_us(arrival + cost.startup) + ",\"dur\":" +
                       chrome_trace_us(cost.finish - cost.startup) + "}"),
            std::string::npos)
      << trace;
  EXPECT_EQ(trace.find("e+"), std::string::npos) << trace;  // no exponent notation anywhere
  const auto parsed = nlohmann::json::parse(trace);  // still valid JSON
  EXPECT_TRUE(parsed.contains("traceEvents"));
  std::filesystem::remove_all(dir);
}

// A measured profile without backward times (psw profile without --train, as a user profiles a
// machine for serving) can be served by the simulator; only training it is refused, naming it.
TEST(SimMechanism, AMeasuredProfileWithoutBackwardTimesServesButDoesNotTrain) {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  ModelProfile inference_only = load_model_profile(root / "configs/models/h200/bert_base.yaml");
  ASSERT_EQ(inference_only.source.kind, ProfileSource::Measured);
  ASSERT_TRUE(has_training_times(inference_only));
  for (auto& layer : inference_only.layers) layer.backward_time.reset();
  EXPECT_FALSE(has_training_times(inference_only));
  const HardwareProfile hw = load_hardware_profile(root / "configs/hardware/h200-pcie5.yaml");
  const MechanismModel mechanism(Mechanism::PipeSwitch, hw, {inference_only}, Strategy::Optimal);
  const SwitchInCost served = mechanism.switch_in(0, Task::Inference, Duration::zero(), std::nullopt);
  EXPECT_GT(served.finish, mechanism.ready_run(0, Task::Inference));
  try {
    (void)mechanism.switch_in(0, Task::Training, Duration::zero(), std::nullopt);
    FAIL() << "training a model without backward times was simulated";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model 'bert_base' cannot be simulated as a training task"), std::string::npos)
        << e.what();
  }
}

// Note [Prefill curve]: llama-8b's measured profile (512-token prompt) with a curve that makes
// 2048 tokens cost 4x and 128 tokens 0.4x: a prompt scales every layer's compute and leaves the
// transfers; the switch is the timeline of the scaled costs over the same groups.
ModelProfile llama_with_curve() {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  ModelProfile model = load_model_profile(root / "configs/models/h200/bf16/llama-8b.yaml");
  Duration forward = Duration::zero();
  for (const auto& layer : model.layers) forward += *layer.forward_time;
  model.prompt_tokens = 512;
  model.prefill_curve = {{128, nanoseconds(forward.ns() * 2 / 5)}, {512, forward}, {2048, forward * 4}};
  return model;
}

TEST(SimMechanism, ADecodersPromptScalesItsComputeNotItsTransfers) {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  const HardwareProfile hw = load_hardware_profile(root / "configs/hardware/h200-pcie5.yaml");
  const ModelProfile model = llama_with_curve();
  const MechanismModel mechanism(Mechanism::PipeSwitch, hw, {model}, Strategy::Optimal);
  const Duration ready = mechanism.ready_run(0, Task::Inference);
  EXPECT_EQ(mechanism.ready_run(0, Task::Inference, 512), ready);
  EXPECT_NEAR(static_cast<double>(mechanism.ready_run(0, Task::Inference, 2048).ns()), 4.0 * static_cast<double>(ready.ns()),
              static_cast<double>(model.num_layers()));  // each layer rounded to the nanosecond
  const SwitchCosts base = make_switch_costs(model, hw, Task::Inference, HostMemory::Pinned);
  const Grouping groups = mechanism.grouping(0, Task::Inference);
  for (const std::int64_t tokens : {std::int64_t{128}, std::int64_t{2048}, std::int64_t{8192}}) {
    const SwitchCosts scaled = base.with_compute_scaled(prefill_scale(model, tokens));
    const SwitchInCost cost = mechanism.switch_in(0, Task::Inference, Duration::zero(), std::nullopt, tokens);
    EXPECT_EQ(cost.finish, evaluate_timeline(scaled, groups).total) << tokens;
    // Never faster than its transfers, whatever the prompt.
    EXPECT_GE(cost.finish, hw.pinned.copy_time(base.total_bytes())) << tokens;
  }
  EXPECT_LT(mechanism.switch_in(0, Task::Inference, Duration::zero(), std::nullopt, 128).finish,
            mechanism.switch_in(0, Task::Inference, Duration::zero(), std::nullopt).finish);
  EXPECT_EQ(mechanism.switch_in(0, Task::Inference, Duration::zero(), std::nullopt, 0).finish,
            mechanism.switch_in(0, Task::Inference, Duration::zero(), std::nullopt, 512).finish);
}

// The same through a replay: each request of the Azure LLM 2023 trace is priced at its row's
// ContextTokens (the resident model: its latency is the scaled forward).
TEST(SimMechanism, ATraceReplayPricesEachPromptByItsContextTokens) {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-prefill-replay-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const ModelProfile model = llama_with_curve();
  std::ofstream(dir / "llama-8b.yaml") << to_yaml(model);
  auto replay = [&](bool with_curve) {
    ModelProfile written = model;
    if (!with_curve) written.prefill_curve.clear();
    std::ofstream(dir / "llama-8b.yaml") << to_yaml(written);
    std::ofstream(dir / "replay.yaml") << "name: prefill-replay\nhardware: " << quoted((root / "configs/hardware/h200-pcie5.yaml").string())
                                       << "\nmodels:\n  - {name: llama-8b, profile: " << quoted((dir / "llama-8b.yaml").string())
                                       << "}\nmechanism: ready\nseed: 1\nworkload:\n  kind: trace\n  format: azure-llm-2023\n  path: "
                                       << quoted(std::string(PSW_TEST_DATA_DIR) + "/traces/llm2023_small.csv")
                                       << "\n  buckets:\n    - {max_context_tokens: 1000000, model: llama-8b}\n";
    return to_json(run_simulation(load_experiment_config(dir / "replay.yaml", {}), SimulationOptions{}).summary);
  };
  const double flat = mean_ms(replay(false));
  const double priced = mean_ms(replay(true));
  // The fixture's prompts: 100, 2000, 4000, 8000 and 50 tokens; the 8000-token one arrives 1 ns
  // after the 4000-token one and waits for it. Flat, the mean is (5 + 1) forwards / 5.
  const double forward = flat / 1.2;
  double expected = prefill_scale(model, 4000);
  for (const std::int64_t tokens : {100, 2000, 4000, 8000, 50}) expected += prefill_scale(model, tokens);
  EXPECT_NEAR(priced, forward * expected / 5.0, flat * 1e-3);
  EXPECT_GT(priced, 5.0 * flat);
  std::filesystem::remove_all(dir);
}

// Note [Decode in the simulator]: a request that decodes holds the GPU for its steps after the
// first token, so the one behind it waits for them; its latency is the last token's and its
// first token is recorded beside it. Without decode_step_ns, decode: true is refused.
TEST(SimMechanism, ADecodingRequestHoldsTheGpuForItsSteps) {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-decode-replay-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ModelProfile model = load_model_profile(root / "configs/models/h200/bf16/llama-8b.yaml");
  const Duration step = milliseconds(10);
  // Two prompts of the profile's own length: A decodes 10 tokens after its first, B arrives 1 ns
  // later and decodes none.
  std::ofstream(dir / "trace.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,512,11\n"
                                      "2023-11-16 18:00:00.000000001,512,1\n";
  auto replay = [&](bool decode, bool with_step) {
    ModelProfile written = model;
    if (with_step) written.decode_step = step;
    std::ofstream(dir / "llama-8b.yaml") << to_yaml(written);
    std::ofstream(dir / "replay.yaml") << "name: decode-replay\nhardware: " << quoted((root / "configs/hardware/h200-pcie5.yaml").string())
                                       << "\nmodels:\n  - {name: llama-8b, profile: " << quoted((dir / "llama-8b.yaml").string())
                                       << "}\nmechanism: ready\nseed: 1\nworkload:\n  kind: trace\n  format: azure-llm-2023\n  path: "
                                       << quoted((dir / "trace.csv").string()) << "\n  decode: " << (decode ? "true" : "false")
                                       << "\n  buckets:\n    - {max_context_tokens: 1000000, model: llama-8b}\n";
    return run_simulation(load_experiment_config(dir / "replay.yaml", {}), SimulationOptions{}).summary;
  };
  const auto plain = replay(false, true);
  const auto decoding = replay(true, true);
  const auto& p = plain.models.at("llama-8b");
  const auto& d = decoding.models.at("llama-8b");
  EXPECT_FALSE(p.first_token_latency.has_value());
  ASSERT_TRUE(d.first_token_latency.has_value());
  // Plain: A takes F, B waits for it: mean (3F - 1 ns) / 2. Decoding: A's 10 steps come before
  // B too, and count in A's latency: the mean grows by 20 steps / 2; A's first token is still F.
  EXPECT_NEAR(d.latency.mean_ms - p.latency.mean_ms, 10.0 * step.ms(), 1e-6);
  EXPECT_EQ(d.first_token_latency->count, 1);
  const double forward = (2.0 * p.latency.mean_ms + 1e-6) / 3.0;
  EXPECT_NEAR(d.first_token_latency->mean_ms, forward, 1e-5);
  EXPECT_NEAR(decoding.makespan_s - plain.makespan_s, 10 * step.seconds(), 1e-9);  // the GPU is held for them
  // Round trip of the summary's new key.
  EXPECT_EQ(simulation_summary_from_json(to_json(decoding), "decoding").models.at("llama-8b").first_token_latency,
            d.first_token_latency);
  try {
    replay(true, false);
    ADD_FAILURE() << "decoding was priced without a decode step";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no decode_step_ns (psw profile --decode-tokens N measures it)"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// The closed form of MechanismModel::switch_in (Note [Shifted timeline]) against the timeline
// evaluation (common/timeline.hpp) of the same costs and plan, for every shipped model and
// hardware profile, both tasks, the GPU freed at several times, and every mechanism that has a
// timeline: the PipeSwitch family (its plan; transfers from `prep`) and the one-copy mechanisms
// (stop-and-start, two processes, one process: one group of the whole model from `prep`).
TEST(SimClosedForm, SwitchCostEqualsTheTimelineForEveryShippedProfile) {
  const std::filesystem::path root = PSW_SOURCE_DIR;
  std::vector<ModelProfile> models;
  for (const char* dir : {"configs/models", "configs/models/h200"}) {
    for (const auto& entry : std::filesystem::directory_iterator(root / dir)) {
      if (entry.path().extension() == ".yaml") models.push_back(load_model_profile(entry.path()));
    }
  }
  std::vector<HardwareProfile> hardware;
  for (const auto& entry : std::filesystem::directory_iterator(root / "configs/hardware")) {
    if (entry.path().extension() == ".yaml") hardware.push_back(load_hardware_profile(entry.path()));
  }
  ASSERT_GE(models.size(), 6u);
  ASSERT_GE(hardware.size(), 4u);
  int compared = 0;
  int eager_compared = 0;
  for (const HardwareProfile& hw : hardware) {
    for (Mechanism m : all_mechanisms()) {
      const MechanismTraits& t = traits(m);
      const bool one_copy = m == Mechanism::StopAndStart || m == Mechanism::TwoProcesses || m == Mechanism::OneProcess;
      if (!t.pipeswitch_family && !one_copy) continue;
      const MechanismModel mechanism(m, hw, models, Strategy::Optimal);
      const Duration sync = hw.group_sync + (t.ipc_handle_per_group ? hw.ipc_handle_open : Duration::zero());
      for (std::uint32_t i = 0; i < models.size(); ++i) {
        for (Task task : {Task::Inference, Task::Training}) {
          const SwitchCosts base = make_switch_costs(models[i], hw, task, t.host_memory);
          std::vector<Bytes> bytes;
          std::vector<Duration> compute;
          for (std::size_t k = 0; k < base.num_layers(); ++k) {
            bytes.push_back(base.layer_bytes(k));
            compute.push_back(base.layer_compute(k));
          }
          // What the mechanism does before its first copy (zero for most).
          Duration before_copy = Duration::zero();
          if (m == Mechanism::NoMemoryManagement || m == Mechanism::OneProcess) {
            before_copy = hw.cuda_malloc * static_cast<std::int64_t>(models[i].num_layers());
          } else if (m == Mechanism::StopAndStart || m == Mechanism::TwoProcesses) {
            // Note [Worker kill]: the process replaced is killed and reaped before the start.
            before_copy = hw.process_kill + hw.process_start + hw.framework_start + hw.cuda_context_create + hw.cuda_malloc;
          }
          const Grouping plan = one_copy ? Grouping{{0, base.num_layers() - 1}} : mechanism.grouping(i, task);
          // Note [Eager switch in the simulator]: where the profile has the server's host times of
          // this model under this mechanism, its own timeline (tests/sim/test_eager_switch.cpp).
          const auto eager = task == Task::Inference ? hw.eager_switch.find({models[i].name, to_string(m)})
                                                     : hw.eager_switch.end();
          for (Duration stop : {Duration::zero(), microseconds(300), milliseconds(40), seconds(20)}) {
            // Note [Training abort]: one process's worker switches only after the stop.
            const Duration after_stop = m == Mechanism::OneProcess ? stop : Duration::zero();
            if (eager != hw.eager_switch.end()) {
              const SwitchCosts plain(bytes, compute, base.link(), hw.group_sync);
              const EagerSwitchTimes expected =
                  eager_switch_times(plain, plan, eager->second, eager_copies_of(m), stop - after_stop);
              const SwitchInCost closed = mechanism.switch_in(i, task, stop, std::nullopt);
              EXPECT_EQ(closed.startup, after_stop + expected.startup) << hw.name << " " << to_string(m) << " " << models[i].name;
              EXPECT_EQ(closed.finish, after_stop + expected.total) << hw.name << " " << to_string(m) << " " << models[i].name;
              ++eager_compared;
              continue;
            }
            const Duration prep = before_copy + after_stop;
            // The timeline starts its transfers at 0: shift the GPU's release by `prep`.
            const Duration gpu_free = max(stop, prep) - prep;
            const SwitchCosts costs(bytes, compute, base.link(), one_copy ? hw.group_sync : sync, base.tail(), gpu_free);
            const Timeline timeline = evaluate_timeline(costs, plan);
            const SwitchInCost closed = mechanism.switch_in(i, task, stop, std::nullopt);
            const std::string what = hw.name + " " + to_string(m) + " " + models[i].name + " " + to_string(task) +
                                     " stop " + std::to_string(stop.ns());
            EXPECT_EQ(closed.startup, prep + timeline.startup) << what;
            // Note [First forward in a fresh process]: a request's first forward in its process.
            Duration first_forward = Duration::zero();
            if ((m == Mechanism::StopAndStart || m == Mechanism::TwoProcesses) && task == Task::Inference &&
                hw.first_forward.contains(models[i].name)) {
              first_forward = hw.first_forward.at(models[i].name);
            }
            EXPECT_EQ(closed.finish, prep + timeline.total + first_forward) << what;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
  // The H200 profiles (and its NVLink variant) carry the three eager ablations' host times.
  EXPECT_GT(eager_compared, 0);
}

}  // namespace
}  // namespace psw::sim
