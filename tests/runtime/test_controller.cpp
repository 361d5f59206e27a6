// The controller with its memory daemon and worker processes on the host backend (Note
// [Scheduling], Note [Faults], Note [Training state]): outputs equal a plain run, inference
// preempts training without loss, bad requests leave the server serving, a crashed or hung
// worker is replaced and its request answered.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <numeric>
#include <optional>
#include <thread>

#include "psw/common/config.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/safetensors.hpp"
#include "psw/common/serve_config.hpp"
#include "../common/input_error.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/profiler.hpp"
#include "psw/exec/torchscript.hpp"
#include "psw/exec/weights.hpp"
#include "psw/runtime/server/controller.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"
#include "psw/runtime/worker/training.hpp"
#include "controller_test_support.hpp"

namespace psw::runtime {
namespace {

using namespace std::chrono_literals;
using namespace test_support;

// The host backend's servers plan with the analytic profiles (configs/models/): they cover every
// zoo model, bert_tiny's included (the H200's measured ones do not), and the host's times are
// not the H200's anyway. BERT-Tiny is the model of the tests whose subject is the server, not
// the model: a request or a training step on it takes milliseconds on CI's two cores.
ServeConfig write_host_config(const std::string& name, const std::string& body) {
  return write_config(name, body, std::filesystem::path(PSW_SOURCE_DIR) / "configs/models");
}

// The training state after `steps` uninterrupted steps of `config`'s job. Zero steps
// is the initial state: TrainingJob::run(0, ...) would train until stopped, and nothing stops it
// here. (A job stopped before its first step completed returns 0: under CI's load the
// unified-memory case below did, and the test then trained for ever, until ctest killed it at
// 900 s; so did a stop-and-start case in an earlier CI run.)
torch::Tensor uninterrupted_state(const TrainingJobConfig& config, std::int64_t steps) {
  auto model = make_training_model(config, config.seed);
  torch::Tensor state = torch::empty({TrainingJob::state_bytes(*model, config)}, torch::kUInt8);
  TrainingHeader header{};
  TrainingJob::initialize(*model, config, state, &header);
  auto fresh = make_training_model(config, 0);
  TrainingJob job(*fresh, config, state, &header);
  std::atomic<std::uint32_t> never{0};
  torch::AutoGradMode grad(true);
  if (steps > 0) job.run(steps, never);
  return TrainingJob::committed_state(state, header);
}

// The served job's state after `steps` completed steps (Note [Committed slot]): that slot of the
// daemon's training segment (host backend).
std::pair<const std::uint8_t*, std::size_t> served_committed_state(Controller& controller, std::int64_t steps) {
  const auto [data, size] = controller.training_segment();
  const std::size_t slot = size / 2;
  return {data + static_cast<std::size_t>(steps % 2) * slot, slot};
}

// A mechanism's name as a parameterized test's name (gtest allows no '-').
std::string mechanism_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// The training jobs below run until stopped, not for a few steps: a job of three steps could
// finish (it did, on CI's two cores) before the first request comes to preempt it. Stops the job
// and waits for its worker to let go of it; returns the steps it completed.
std::int64_t stop_and_count_steps(Controller& controller, const std::string& model) {
  controller.stop_training(model);
  EXPECT_TRUE(eventually([&] { return controller.training_status(model).stopped; }, 300s));
  EXPECT_FALSE(controller.training_status(model).active);
  return controller.training_status(model).completed_steps;
}

TEST(Controller, ServesModelsBesideTrainingAndPreemptsItWithoutLoss) {
  const ServeConfig config = write_host_config("serve", R"(
workers: 2
request_timeout_ms: 120000
models:
  - name: inception_v3
    batch: 1
  - name: bert_tiny
    batch: 1
training:
  model: resnet152
  batch: 2
  input_size: 32
  seed: 1
  autostart: false
)");
  auto controller = start(config);
  EXPECT_TRUE(controller->ready());
  ASSERT_EQ(controller->models().size(), 2u);
  controller->start_training("resnet152", 0);
  // Past its first step: a job is "running" from the moment it is sent to its worker, but the
  // worker's first step first copies and faults in the 0.5 GB of its state slot, with no layer
  // boundary to stop at. On a loaded machine that took 8 s, and then the four requests were
  // answered (on the other worker, the job's pause pending) and the job stopped before the pause
  // was ever seen: no preemption at all (2026-12-05, once in nine runs, three at a time).
  ASSERT_TRUE(eventually([&] { return controller->training_status("resnet152").completed_steps >= 1; }, 300s));
  // Requests while the job trains: each stops it, runs, and lets it resume.
  auto inception = exec::make_model("inception_v3", 0);
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 2; ++i) {
    const torch::Tensor image = inception->example_input(1, 10 + i);
    const torch::Tensor tokens = bert->example_input(1, 20 + i);
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("inception_v3", image))), inception->forward(image)), 1e-5);
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
    std::this_thread::sleep_for(300ms);
  }
  const std::int64_t steps = stop_and_count_steps(*controller, "resnet152");
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.requests, 4);
  EXPECT_EQ(stats.transfers, 4);  // cache off: every request switches its model in
  EXPECT_GE(stats.preemptions, 1);
  EXPECT_EQ(stats.preemption_ns.size(), static_cast<std::size_t>(stats.preemptions));
  // Note [Preemption phases]: every preemption split, its phases adding up to it exactly, and
  // counted at one place of the step.
  for (const auto& phase : stats.preemption_phase_ns) ASSERT_EQ(phase.size(), stats.preemption_ns.size());
  for (std::size_t p = 0; p < stats.preemption_ns.size(); ++p) {
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < kPreemptionPhases; ++k) {
      EXPECT_GE(stats.preemption_phase_ns[k][p], 0) << kPreemptionPhaseNames[k];
      sum += stats.preemption_phase_ns[k][p];
    }
    EXPECT_EQ(sum, stats.preemption_ns[p]) << "preemption " << p;
  }
  std::size_t by_boundary = 0;
  for (const auto& place : stats.preemption_by_boundary_ns) by_boundary += place.size();
  EXPECT_EQ(by_boundary, stats.preemption_ns.size());
  // Note [Request phases]: per request, the phases add up to the server's latency exactly (the
  // input's copy to the device is a part of the device's startup, not a phase beside it).
  for (const auto& phase : stats.phase_ns) ASSERT_EQ(phase.size(), stats.latency_ns.size());
  for (std::size_t r = 0; r < stats.latency_ns.size(); ++r) {
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < kRequestPhases; ++k) {
      if (k != static_cast<std::size_t>(RequestPhase::InputToDevice) && k != static_cast<std::size_t>(RequestPhase::InputLaunch)) {
        sum += stats.phase_ns[k][r];
      }
      EXPECT_GE(stats.phase_ns[k][r], 0) << kRequestPhaseNames[k];
    }
    EXPECT_EQ(sum, stats.latency_ns[r]) << "request " << r;
    EXPECT_LE(stats.phase_ns[static_cast<std::size_t>(RequestPhase::InputToDevice)][r],
              stats.phase_ns[static_cast<std::size_t>(RequestPhase::DeviceStartup)][r]);
    // The launch is host time inside the input's copy: more than nothing, at most all of it.
    EXPECT_GT(stats.phase_ns[static_cast<std::size_t>(RequestPhase::InputLaunch)][r], 0);
    EXPECT_LE(stats.phase_ns[static_cast<std::size_t>(RequestPhase::InputLaunch)][r],
              stats.phase_ns[static_cast<std::size_t>(RequestPhase::InputToDevice)][r]);
  }
  // The job's state equals as many uninterrupted steps of the same job, bit for bit.
  const torch::Tensor reference = uninterrupted_state(*config.training, steps);
  const auto [data, size] = served_committed_state(*controller, steps);
  ASSERT_EQ(size, static_cast<std::size_t>(reference.numel()));
  EXPECT_EQ(std::memcmp(data, reference.data_ptr(), size), 0) << "the served job's weights differ from an uninterrupted run";
  const std::string metrics = controller->metrics_text();
  EXPECT_NE(metrics.find("psw_preemptions_total " + std::to_string(stats.preemptions)), std::string::npos) << metrics;
  EXPECT_LE(stats.preemptions_abandoning_step, stats.preemptions);
  EXPECT_NE(metrics.find("psw_preemptions_abandoned_total " + std::to_string(stats.preemptions_abandoning_step)),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("psw_server_info{mechanism=\"pipeswitch\",backend=\"host\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_requests_total{model=\"bert_tiny\",outcome=\"ok\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_training_iterations_total " + std::to_string(steps)), std::string::npos) << metrics;
  // Note [Training held]: every preemption held the job for a while; none is in progress now.
  EXPECT_GT(stats.training_held_ns, 0);
  EXPECT_NE(metrics.find("psw_training_held_seconds_total "), std::string::npos) << metrics;
  // Per model: each model's two requests, in its own startup and latency summaries.
  ASSERT_EQ(stats.by_model.size(), 2u);
  for (const char* model : {"inception_v3", "bert_tiny"}) {
    ASSERT_EQ(stats.by_model.count(model), 1u) << model;
    EXPECT_EQ(stats.by_model.at(model).startup_ns.size(), 2u) << model;
    EXPECT_EQ(stats.by_model.at(model).latency_ns.size(), 2u) << model;
    for (std::size_t k = 0; k < kRequestPhases; ++k) {
      EXPECT_EQ(stats.by_model.at(model).phase_ns[k].size(), 2u) << model << " " << kRequestPhaseNames[k];
      EXPECT_NE(metrics.find(std::string("psw_request_phase_by_model_seconds_count{model=\"") + model + "\",phase=\"" +
                             kRequestPhaseNames[k] + "\"} 2\n"),
                std::string::npos)
          << metrics;
    }
    for (const char* metric : {"psw_startup_by_model_seconds", "psw_server_latency_by_model_seconds"}) {
      const std::string labels = std::string("{model=\"") + model + "\"";
      EXPECT_NE(metrics.find(metric + labels + ",quantile=\"0.99\"} "), std::string::npos) << metrics;
      EXPECT_NE(metrics.find(std::string(metric) + "_count" + labels + "} 2\n"), std::string::npos) << metrics;
    }
  }
  std::vector<std::int64_t> startups;
  for (const auto& [model, samples] : stats.by_model) {
    startups.insert(startups.end(), samples.startup_ns.begin(), samples.startup_ns.end());
  }
  std::vector<std::int64_t> all = stats.startup_ns;
  std::sort(startups.begin(), startups.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(startups, all);
  // One HELP per metric, though its lines come per model.
  const auto helps = [&metrics](const std::string& name) {
    std::size_t n = 0;
    for (std::size_t at = 0; (at = metrics.find("# HELP " + name + " ", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_EQ(helps("psw_request_phase_by_model_seconds"), 1u) << metrics;
  EXPECT_EQ(helps("psw_startup_by_model_seconds"), 1u) << metrics;
  EXPECT_NE(metrics.find("psw_request_phase_seconds{phase=\"device_startup\",quantile=\"0.99\"}"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("psw_preemption_phase_seconds_count{phase=\"drain\"} " + std::to_string(stats.preemptions)),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("psw_preemption_by_boundary_seconds{boundary=\"backward\",quantile=\"0.99\"}"),
            std::string::npos)
      << metrics;
  // The split summaries' largest sample (quantile 1): the preemptions' is the largest preemption.
  const std::string largest = "psw_preemption_phase_seconds{phase=\"signal\",quantile=\"1\"} ";
  const std::size_t at = metrics.find(largest);
  ASSERT_NE(at, std::string::npos) << metrics;
  const std::int64_t most_signal = *std::max_element(stats.preemption_phase_ns[0].begin(), stats.preemption_phase_ns[0].end());
  EXPECT_NEAR(std::stod(metrics.substr(at + largest.size())), static_cast<double>(most_signal) * 1e-9, 1e-9 + 1e-5 * most_signal * 1e-9)
      << metrics;
}

// Note [Fresh processes]: stop-and-start gives every task a new process; the training job is
// stopped (not paused), resumes from its last completed step, and still loses nothing.
// Its job is bounded (5 steps), not run until stopped as the tests above: stopping an unbounded
// job under stop-and-start once left CI recomputing an uninterrupted run for over 7 minutes
// (not understood yet). The first request must find the job still running,
// so everything slow (building BERT, its expected output) happens before the job starts: in
// one CI run (2026-12-02) the job's three steps finished while the test was still building BERT, and
// no request preempted anything.
TEST(Controller, StopAndStartGivesEveryTaskAFreshProcess) {
  const ServeConfig config = write_host_config("stop-and-start", R"(
mechanism: stop-and-start
workers: 2
request_timeout_ms: 120000
models:
  - name: bert_tiny
    batch: 1
training:
  model: bert_tiny
  batch: 4
  input_size: 32
  seed: 1
  autostart: false
  rehearse: false  # every task a fresh process: the other tests' workers rehearse
)");
  constexpr int kSteps = 200;
  auto controller = start(config);
  torch::NoGradGuard no_grad;
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  const torch::Tensor expected = bert->forward(tokens);
  EXPECT_FALSE(controller->training_status("bert_tiny").active);  // not started (autostart: false)
  controller->start_training("bert_tiny", kSteps);
  EXPECT_TRUE(controller->training_status("bert_tiny").active);  // from the start, before it runs
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
  // Note [Processes a server starts with]: one worker trains, the other waits unused; the first
  // request takes it, and after it no worker is unused (the training job resumed in a fresh one).
  EXPECT_NE(controller->metrics_text().find("psw_fresh_standby_workers 1\n"), std::string::npos);
  std::vector<pid_t> seen = controller->worker_pids();
  for (int i = 0; i < 2; ++i) {
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), expected), 1e-5);
    // The second request finds both workers used (the first ran the first request, the other
    // the resumed training): it waits for one fresh process, not two.
    if (i == 0) ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").stopped; }, 300s));
  EXPECT_EQ(controller->training_status("bert_tiny").completed_steps, kSteps);
  EXPECT_FALSE(controller->training_status("bert_tiny").active);  // finished
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.failed_requests, 0);
  EXPECT_EQ(stats.worker_restarts, 0);  // restarts of the mechanism are not faults
  EXPECT_GE(stats.preemptions, 1);
  // The training ran first on worker 0; its process was replaced when the first request came
  // (a worker that ran one task and was not needed again may still be there).
  const std::vector<pid_t> now = controller->worker_pids();
  EXPECT_EQ(std::count(now.begin(), now.end(), seen[0]), 0) << "worker 0's first process is still there";
  // Note [Worker start]: the two first workers and at least the one that replaced the training
  // worker said Ready with their start split by phase; building the models takes time on any
  // machine, and the phases add up to no more than the test has run.
  EXPECT_GE(stats.worker_starts, 3);
  // Note [Fresh processes]: a stopped training worker is not replaced beside the request's start.
  EXPECT_EQ(stats.most_replacements_starting, 1);
  std::int64_t started_ns = 0;
  for (std::int64_t ns : stats.worker_start_ns) {
    EXPECT_GE(ns, 0);
    started_ns += ns;
  }
  EXPECT_GT(stats.worker_start_ns[static_cast<std::size_t>(WorkerStartPhase::Models)], 0);
  EXPECT_GT(stats.worker_start_ns[static_cast<std::size_t>(WorkerStartPhase::Process)], 0);
  EXPECT_LT(started_ns, stats.worker_starts * std::int64_t{300'000'000'000});
  const std::string metrics = controller->metrics_text();
  EXPECT_NE(metrics.find("psw_worker_starts_total " + std::to_string(stats.worker_starts)), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_worker_start_seconds_total{phase=\"models\"} "), std::string::npos) << metrics;
  // Note [Worker kill]: every replacement killed and reaped its predecessor, timed (a process's
  // exit takes more than nothing), and the metrics say so.
  EXPECT_EQ(stats.worker_kills, stats.worker_starts - 2) << "the two first workers replaced no one";
  EXPECT_GT(stats.worker_kill_ns, 0);
  EXPECT_NE(metrics.find("psw_worker_kills_total " + std::to_string(stats.worker_kills)), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_worker_kill_seconds_total "), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_fresh_standby_workers 0\n"), std::string::npos) << metrics;
  // The job's state equals as many uninterrupted steps.
  const torch::Tensor reference = uninterrupted_state(*config.training, kSteps);
  const auto [data, size] = served_committed_state(*controller, kSteps);
  ASSERT_EQ(size, static_cast<std::size_t>(reference.numel()));
  EXPECT_EQ(std::memcmp(data, reference.data_ptr(), size), 0);
}

TEST(WorkerStart, SplitsAStartIntoItsPhasesAndRefusesTimesOutOfOrder) {
  constexpr std::int64_t ms = 1'000'000;
  const std::int64_t spawned = 1000 * ms;
  const std::int64_t times[6] = {spawned + 30 * ms,   spawned + 430 * ms,  spawned + 433 * ms,
                                 spawned + 4333 * ms, spawned + 4533 * ms, spawned + 4535 * ms};
  const std::optional<WorkerStartSplit> split = split_worker_start(spawned, times);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(*split, (WorkerStartSplit{30 * ms, 400 * ms, 3 * ms, 3900 * ms, 200 * ms, 2 * ms}));
  EXPECT_EQ(describe_worker_start(*split),
            "after 4.54 s: process 30.0 ms, context 400.0 ms, memory 3.0 ms, models 3900.0 ms, training 200.0 ms, "
            "other 2.0 ms");
  const std::int64_t unset[6] = {};
  EXPECT_FALSE(split_worker_start(spawned, unset).has_value());
  std::int64_t swapped[6];
  std::copy(std::begin(times), std::end(times), swapped);
  std::swap(swapped[2], swapped[3]);
  EXPECT_FALSE(split_worker_start(spawned, swapped).has_value());
  EXPECT_FALSE(split_worker_start(times[0] + 1, times).has_value());  // the worker's entry before its spawn
  EXPECT_FALSE(split_worker_start(0, times).has_value());             // never spawned
}

// Two workers serving BERT-Tiny (batch 1) beside a BERT-Tiny training job on 16 tokens, under
// `mechanism`, in a config folder named PREFIX + mechanism.
ServeConfig bert_beside_training(const std::string& prefix, const std::string& mechanism) {
  return write_host_config(prefix + mechanism, "mechanism: " + mechanism + R"(
workers: 2
request_timeout_ms: 120000
models:
  - name: bert_tiny
    batch: 1
training:
  model: bert_tiny
  batch: 2
  input_size: 16
  seed: 1
  autostart: true
)");
}

// MPS and time slicing: inference runs beside the training job, which is never stopped (on the
// host backend the two processes share the CPU; on a GPU mps needs NVIDIA's MPS daemon, and
// time-sliced needs none running).
class ControllerBesideTraining : public ::testing::TestWithParam<std::string> {};

TEST_P(ControllerBesideTraining, RunsInferenceBesideTrainingWithoutStoppingIt) {
  const std::string mechanism = GetParam();
  const ServeConfig config = bert_beside_training("beside-", mechanism);
  auto controller = start(config);
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
    EXPECT_TRUE(controller->training_status("bert_tiny").running);
  }
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.preemptions, 0);
  EXPECT_EQ(stats.transfers, 1);  // the model stays resident beside the training job
  // With one worker there is nowhere to run inference beside training: refused at start.
  ServeConfig one = config;
  one.workers = 1;
  EXPECT_THROW(start(one), InputError);
  EXPECT_NE(controller->metrics_text().find("psw_server_info{mechanism=\"" + mechanism + "\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, ControllerBesideTraining, ::testing::Values("mps", "time-sliced"),
                         mechanism_test_name);

// Note [Server policy]: the mechanisms no other test here serves, each beside a training job
// that requests preempt. Every controller's decision log replays without a difference
// (ReplayedShutdown); here the log also shows the mechanism's own decisions: a fresh process per
// task under two processes, a pause in place under PipeSwitch's variants, and nothing resident
// dropped under ready.
class ControllerDecisions : public ::testing::TestWithParam<std::string> {};

TEST_P(ControllerDecisions, ServesBesideTrainingAsThePolicyDecides) {
  const std::string mechanism = GetParam();
  const ServeConfig config = bert_beside_training("decisions-", mechanism);
  auto controller = start(config);
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
    // Wait for the job to run again, so that the next request preempts it.
    ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
  }
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.preemptions, 3);
  EXPECT_EQ(stats.failed_requests, 0);
  if (traits(config.mechanism).process == ProcessModel::FreshProcess) {
    EXPECT_EQ(stats.preemptions_abandoning_step, 3);  // a new process per task
    EXPECT_GE(stats.worker_kills, 3);
  } else {
    EXPECT_EQ(stats.preemptions_abandoning_step, 0);  // paused in place beside the standby worker
  }
  // Ready keeps the model once loaded; the others transfer every time (cache off).
  EXPECT_EQ(stats.transfers, config.mechanism == Mechanism::Ready ? 1 : 3);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, ControllerDecisions,
                         ::testing::Values("ready", "two-processes", "per-layer-pipeline", "grouped-transmission",
                                           "no-memory-management", "no-pinned-memory"),
                         mechanism_test_name);

// Note [Residency]: with `cache: active` a request for the model of the task before runs on it
// as it is (no transfer), one for another model switches it in, and the answers are the
// model's either way.
TEST(Controller, CacheActiveKeepsTheLastTasksModel) {
  const ServeConfig config = write_host_config("cache-active", R"(
workers: 2
cache: active
request_timeout_ms: 120000
models:
  - name: inception_v3
    batch: 1
  - name: bert_tiny
    batch: 1
)");
  auto controller = start(config);
  auto bert = exec::make_model("bert_tiny", 0);
  auto inception = exec::make_model("inception_v3", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  const torch::Tensor image = inception->example_input(1, 75);
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  }
  EXPECT_EQ(controller->stats().transfers, 1);
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("inception_v3", image))), inception->forward(image)),
            1e-5);
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  EXPECT_EQ(controller->stats().transfers, 3);
  EXPECT_EQ(controller->stats().failed_requests, 0);
}

// `psw serve --set`: the server's processes read the config with the server's overrides. The
// file serves one model and the override two: a worker that read the file alone would expect
// another count of segments and fail to start.
TEST(Controller, ItsProcessesReadTheConfigWithTheServersOverrides) {
  const ServeConfig file = write_host_config("overrides", R"(
workers: 2
request_timeout_ms: 120000
models:
  - name: inception_v3
    batch: 1
)");
  const ServeConfig config =
      load_serve_config(file.path, {{"models", "[{name: bert_tiny, batch: 1}, {name: inception_v3, batch: 1}]"}});
  ASSERT_EQ(config.models.size(), 2u);
  auto controller = start(config);
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  torch::NoGradGuard no_grad;
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  EXPECT_EQ(controller->stats().failed_requests, 0);
}

// One process: training and inference take turns in one worker; a request abandons the
// training's step (there is no other worker to pause for), which resumes from its last one.
TEST(Controller, OneProcessTakesTurnsInOneWorker) {
  const ServeConfig config = write_host_config("one-process", R"(
mechanism: one-process
workers: 1
request_timeout_ms: 120000
models:
  - name: bert_tiny
    batch: 1
training:
  model: bert_tiny
  batch: 2
  input_size: 16
  seed: 1
  autostart: false
)");
  auto controller = start(config);
  controller->start_training("bert_tiny", 0);
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  torch::NoGradGuard no_grad;
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  EXPECT_GE(controller->stats().preemptions, 1);
  // One worker: nowhere to serve beside a paused job, so every preemption abandons the step.
  EXPECT_EQ(controller->stats().preemptions_abandoning_step, controller->stats().preemptions);
  // The job resumes after the request and goes on counting its steps.
  const std::int64_t after_request = controller->training_status("bert_tiny").completed_steps;
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").completed_steps > after_request; }, 300s));
  stop_and_count_steps(*controller, "bert_tiny");
  EXPECT_EQ(controller->worker_pids().size(), 1u);
  ServeConfig two = config;
  two.workers = 2;
  EXPECT_THROW(start(two), InputError);
}

std::uint64_t total(const std::vector<std::uint64_t>& v) { return std::accumulate(v.begin(), v.end(), std::uint64_t{0}); }

// How many of `pid`'s mappings are of a shared segment named psw-<prefix>... (Note
// [Anonymous segments]: memfds show in /proc/PID/maps as /memfd:psw-NAME).
int mappings_of(pid_t pid, const std::string& prefix) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) count += line.find("/memfd:psw-" + prefix) != std::string::npos;
  return count;
}

// The three mechanisms of the table served last (Note [Mechanism table]): no-optimization
// (per-layer copies, the forward after the last), no-ipc-optimization (Note [Per-group
// handles]) and unified-memory (Note [Managed memory]; on the host backend ordinary memory,
// so only the serving is checked, not the migration). Each serves every model with a plain
// run's outputs beside a training job, which requests preempt without loss as under pipeswitch.
class ControllerModes : public ::testing::TestWithParam<std::string> {};

TEST_P(ControllerModes, ServeEveryModelBesideTrainingAndPreemptItWithoutLoss) {
  const std::string mechanism = GetParam();
  const ServeConfig config = write_host_config("mode-" + mechanism, "mechanism: " + mechanism + R"(
workers: 2
request_timeout_ms: 120000
models:
  - name: bert_tiny
    batch: 1
  - name: resnet152
    batch: 1
training:
  model: bert_tiny
  batch: 2
  input_size: 16
  seed: 1
  autostart: false
)");
  const bool per_group = traits(config.mechanism).ipc_handle_per_group;
  const std::uint64_t bert_groups = per_group ? groups_with_parameters(config, "bert_tiny") : 0;
  const std::uint64_t resnet_groups = per_group ? groups_with_parameters(config, "resnet152") : 0;
  auto controller = start(config);
  // Note [Per-group handles]: nothing opened, nothing mapped, before the first switch.
  EXPECT_EQ(total(controller->worker_group_opens()), 0u);
  for (pid_t pid : controller->worker_pids()) EXPECT_EQ(mappings_of(pid, "groups-"), 0) << "worker " << pid;
  auto bert = exec::make_model("bert_tiny", 0);
  auto resnet = exec::make_model("resnet152", 0);
  controller->start_training("bert_tiny", 0);
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 120s));
  torch::NoGradGuard no_grad;
  std::uint64_t opens = 0;
  auto handles_closed = [&] {
    for (pid_t pid : controller->worker_pids()) {
      if (mappings_of(pid, "groups-") != 0) return false;
    }
    return true;
  };
  for (int i = 0; i < 2; ++i) {
    const torch::Tensor tokens = bert->example_input(1, 20 + i);
    const torch::Tensor image = resnet->example_input(1, 30 + i);
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
    opens += bert_groups;
    // Every switch opens every group's handle again: they were closed after the last task.
    EXPECT_EQ(total(controller->worker_group_opens()), opens) << "after bert_tiny request " << i;
    EXPECT_TRUE(eventually(handles_closed, 30s)) << "a worker still maps group memory after its task";
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("resnet152", image))), resnet->forward(image)), 1e-5);
    opens += resnet_groups;
    EXPECT_EQ(total(controller->worker_group_opens()), opens) << "after resnet152 request " << i;
    EXPECT_TRUE(eventually(handles_closed, 30s)) << "a worker still maps group memory after its task";
    std::this_thread::sleep_for(300ms);
  }
  if (per_group) EXPECT_GT(opens, 4u);
  const std::int64_t steps = stop_and_count_steps(*controller, "bert_tiny");
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.requests, 4);
  EXPECT_EQ(stats.failed_requests, 0);
  EXPECT_EQ(stats.transfers, 4);  // cache off: every request switches its model in
  EXPECT_EQ(stats.worker_restarts, 0);
  EXPECT_GE(stats.preemptions, 1);
  // Note [Host time of an eager switch]: `host` captures no graphs, so every switch ran
  // eagerly and its host time was counted per model, for psw load in the metrics.
  const std::string metrics = controller->metrics_text();
  for (const std::string model : {"bert_tiny", "resnet152"}) {
    ASSERT_TRUE(stats.eager_switch_host.contains(model)) << model;
    const ControllerStats::EagerSwitchHost& host = stats.eager_switch_host.at(model);
    EXPECT_EQ(host.switches, 2) << model;
    EXPECT_GT(host.forward_ns, 0) << model;
    if (per_group) EXPECT_GT(host.prepare_ns, 0) << model << ": opening its groups took no time";
    EXPECT_NE(metrics.find("psw_eager_switches_total{model=\"" + model + "\"} 2\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("psw_eager_switch_host_seconds_total{model=\"" + model + "\",part=\"forward\"} "),
              std::string::npos)
        << metrics;
  }
  // The job's state equals as many uninterrupted steps of the same job, bit for bit.
  const torch::Tensor reference = uninterrupted_state(*config.training, steps);
  const auto [data, size] = served_committed_state(*controller, steps);
  ASSERT_EQ(size, static_cast<std::size_t>(reference.numel()));
  EXPECT_EQ(std::memcmp(data, reference.data_ptr(), size), 0) << "the served job's weights differ from an uninterrupted run";
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, ControllerModes,
                         ::testing::Values("no-optimization", "no-ipc-optimization", "unified-memory"),
                         mechanism_test_name);

ServeConfig single_model_config(const std::string& name, int timeout_ms) {
  return write_host_config(name, "workers: 2\nmax_tensor_bytes: 4194304\nrequest_timeout_ms: " + std::to_string(timeout_ms) +
                                "\nmodels:\n  - name: bert_tiny\n    batch: 1\n");
}

void expect_code(const std::function<void()>& call, ServiceError::Code code, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "expected a ServiceError";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// Note [Deadlines], [Backpressure]: while one request runs (the GPU serves one at a time), a
// request whose caller cancels or whose deadline passes is withdrawn from the queue and never
// runs; one past its deadline on arrival is not queued; one beyond max_queue is refused at once.
// The decision log replays (the withdrawals are the policy's RequestWithdrawn).
TEST(Controller, CallersThatGiveUpAreWithdrawnAndAFullQueueRefuses) {
  auto controller = start(write_host_config("deadlines", "workers: 2\nmax_queue: 4\nrequest_timeout_ms: 300000\n"
                                                    "models:\n  - name: bert_tiny\n    batch: 8\n"));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(8, 3);
  // A slow request (a large batch of BERT-Tiny: about 80 GFLOP, seconds on the host's
  // cores, against the tenth of a second the requests below take to be withdrawn, refused or
  // queued) runs while the others come.
  const torch::Tensor slow = bert->example_input(512, 4);
  auto running = std::async(std::launch::async, [&] { return controller->infer(request_for("bert_tiny", slow)); });
  ASSERT_TRUE(eventually([&] { return controller->stats().transfers == 1; }, 120s));
  InferRequest cancelled = request_for("bert_tiny", tokens);
  cancelled.cancelled = [] { return true; };
  expect_code([&] { controller->infer(cancelled); }, ServiceError::Code::Cancelled,
              "the client cancelled the request while it waited in the queue (it will not run)");
  InferRequest late = request_for("bert_tiny", tokens);
  late.deadline = std::chrono::steady_clock::now() + 100ms;
  expect_code([&] { controller->infer(late); }, ServiceError::Code::DeadlineExceeded,
              "the request's deadline passed while it waited in the queue (it will not run)");
  InferRequest past = request_for("bert_tiny", tokens);
  past.deadline = std::chrono::steady_clock::now() - 1ms;
  expect_code([&] { controller->infer(past); }, ServiceError::Code::DeadlineExceeded, "before it reached the queue");
  EXPECT_EQ(controller->stats().withdrawn_requests, 2);
  // Backpressure: one running, three waiting (max_queue 4); the fifth is refused at once.
  std::vector<std::future<InferResponse>> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.push_back(std::async(std::launch::async, [&] { return controller->infer(request_for("bert_tiny", tokens)); }));
  }
  ASSERT_TRUE(eventually([&] { return controller->stats().requests == 6; }, 60s));
  ASSERT_EQ(controller->stats().transfers, 1) << "the slow request finished too soon for this test";
  expect_code([&] { controller->infer(request_for("bert_tiny", tokens)); }, ServiceError::Code::ResourceExhausted,
              "the server's queue is full: 4 requests wait or run (max_queue 4)");
  EXPECT_EQ(controller->stats().refused_queue_full, 1);
  torch::NoGradGuard no_grad;
  EXPECT_LT(relative_error(output_of(running.get()), bert->forward(slow)), 1e-5);
  const torch::Tensor expected = bert->forward(tokens);
  for (auto& answer : waiting) EXPECT_LT(relative_error(output_of(answer.get()), expected), 1e-5);
  // Only the four admitted requests ran: the withdrawn ones never reached a worker.
  EXPECT_EQ(controller->stats().transfers, 4);
  const std::string metrics = controller->metrics_text();
  EXPECT_NE(metrics.find("psw_requests_withdrawn_total 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("psw_requests_refused_total 1"), std::string::npos) << metrics;
}

TEST(Controller, BadRequestsAreRefusedAndTheServerGoesOn) {
  auto controller = start(single_model_config("bad", 60000));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 3);
  InferRequest unknown = request_for("bert_tiny", tokens);
  unknown.model = "gpt2";
  expect_code([&] { controller->infer(unknown); }, ServiceError::Code::NotFound, "gpt2");
  // Inputs by name: a misnamed input is refused naming the model's, a missing one named.
  InferRequest misnamed = request_for("bert_tiny", tokens);
  misnamed.inputs.front().name = "tokens";
  expect_code([&] { controller->infer(misnamed); }, ServiceError::Code::InvalidArgument,
              "bert_tiny has no input 'tokens'; it takes 'input_ids' (INT64 [-1, 128])");
  InferRequest none = request_for("bert_tiny", tokens);
  none.inputs.clear();
  expect_code([&] { controller->infer(none); }, ServiceError::Code::InvalidArgument,
              "bert_tiny's input 'input_ids' (INT64 [-1, 128]) is missing from the request");
  InferRequest wrong_type = request_for("bert_tiny", tokens.to(torch::kFloat32));
  expect_code([&] { controller->infer(wrong_type); }, ServiceError::Code::InvalidArgument, "INT64");
  expect_code([&] { controller->infer(request_for("bert_tiny", tokens.reshape({-1}))); }, ServiceError::Code::InvalidArgument,
              "rank");
  expect_code([&] { controller->infer(request_for("bert_tiny", tokens.narrow(1, 0, 64).contiguous())); },
              ServiceError::Code::InvalidArgument, "dimension 1");
  expect_code([&] { controller->infer(request_for("bert_tiny", torch::zeros({8192, 128}, torch::kInt64))); },
              ServiceError::Code::ResourceExhausted, "max_tensor_bytes");
  // Token ids outside the vocabulary are refused before a worker sees them (on a GPU the
  // embedding's index would be a device-side assert).
  expect_code([&] { controller->infer(request_for("bert_tiny", torch::full({1, 128}, 1 << 30, torch::kInt64))); },
              ServiceError::Code::InvalidArgument, "holds token id 1073741824 at element 0: ids must lie in [0, 30522)");
  torch::Tensor negative = tokens.clone();
  negative[0][7] = -1;
  expect_code([&] { controller->infer(request_for("bert_tiny", negative)); }, ServiceError::Code::InvalidArgument,
              "holds token id -1 at element 7");
  torch::NoGradGuard no_grad;
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  EXPECT_EQ(controller->stats().worker_restarts, 0);
}

// Note [Placement] in the server: with placement auto the plan leaves BERT's embedding tables
// in the daemon's shared host memory, read in place; the outputs stay those of a plain run.
TEST(Controller, PlacementAutoReadsLayersInPlaceWithTheSameOutputs) {
  const ServeConfig config = write_host_config("placement", "workers: 2\nplacement: auto\nrequest_timeout_ms: 60000\n"
                                                       "models:\n  - name: bert_tiny\n    batch: 1\n");
  ASSERT_EQ(config.placement, Placement::Auto);
  const SwitchPlan plan = make_switch_plan(load_model_profile(config.profiles / "bert_tiny.yaml"),
                                           load_hardware_profile(config.hardware), Task::Inference, Strategy::Optimal,
                                           Placement::Auto, HostMemory::Pinned);
  ASSERT_NE(std::find(plan.host_mapped.begin(), plan.host_mapped.end(), true), plan.host_mapped.end())
      << "the plan reads nothing in place: the test would not test placement";
  auto controller = start(config);
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  for (std::uint64_t seed = 3; seed < 5; ++seed) {
    const torch::Tensor tokens = bert->example_input(1, seed);
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  }
}

// Whether `controller` becomes ready with none of `pids` among its workers within 300 s: after
// its workers were killed, the controller may see the second death late.
bool ready_with_none_of(Controller& controller, const std::vector<pid_t>& pids) {
  return eventually(
      [&] {
        for (pid_t now : controller.worker_pids()) {
          if (std::find(pids.begin(), pids.end(), now) != pids.end()) return false;
        }
        return controller.ready();
      },
      300s);
}

TEST(Controller, ACrashedWorkerIsReplacedAndItsRequestAnswered) {
  auto controller = start(single_model_config("crash", 60000));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 3);
  // Freeze every worker so the request is certainly in one when they die.
  const std::vector<pid_t> pids = controller->worker_pids();
  for (pid_t pid : pids) ::kill(pid, SIGSTOP);
  auto reply = std::async(std::launch::async, [&] { return controller->infer(request_for("bert_tiny", tokens)); });
  // Dispatched to a worker: the first request of the model is a transfer, counted as it is sent.
  EXPECT_TRUE(eventually([&] { return controller->stats().transfers == 1; }, 60s));
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  try {
    reply.get();
    ADD_FAILURE() << "expected the request to fail";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ServiceError::Code::Unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("exited"), std::string::npos) << e.what();
  }
  // Ready again with no process of before left: the controller may see the second death late,
  // and a request sent to that worker meanwhile would fail with it (seen once in CI).
  ASSERT_TRUE(ready_with_none_of(*controller, pids));
  torch::NoGradGuard no_grad;
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  EXPECT_GE(controller->stats().worker_restarts, 1);
}

TEST(Controller, AHungWorkerIsReplacedByTheWatchdog) {
  // The timeout also bounds the first request of a fresh worker on a loaded 2-core CI machine.
  auto controller = start(single_model_config("hang", 5000));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 3);
  const std::vector<pid_t> pids = controller->worker_pids();
  for (pid_t pid : pids) ::kill(pid, SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  expect_code([&] { controller->infer(request_for("bert_tiny", tokens)); }, ServiceError::Code::DeadlineExceeded,
              "did not answer within 5000 ms");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
  for (pid_t pid : pids) ::kill(pid, SIGKILL);  // the one the watchdog did not need
  // Ready again with no process of before left (the controller may see the second death late).
  ASSERT_TRUE(ready_with_none_of(*controller, pids));
  // It serves again. A fresh worker's first request can itself run past the 5 s limit on a
  // loaded 2-core CI machine (its first forward initializes LibTorch; it happened once with the
  // load end-to-end test training beside it): the watchdog then replaces that worker too, which
  // is the behaviour under test, so a few attempts are allowed, each answered or refused by it.
  torch::NoGradGuard no_grad;
  std::optional<InferResponse> answer;
  for (int attempt = 0; attempt < 3 && !answer; ++attempt) {
    try {
      answer = controller->infer(request_for("bert_tiny", tokens));
    } catch (const ServiceError& e) {
      ASSERT_EQ(e.code(), ServiceError::Code::DeadlineExceeded) << e.what();
      ASSERT_TRUE(eventually([&] { return controller->ready(); }, 300s));
    }
  }
  ASSERT_TRUE(answer.has_value()) << "three fresh workers in a row ran past the limit";
  EXPECT_LT(relative_error(output_of(*answer), bert->forward(tokens)), 1e-5);
}

// Shared-memory tensors (shared_memory.hpp): an input borrowed from a client's shared memory
// is copied straight into the worker; an output wanted there is written straight there when it
// fits (and comes back as bytes otherwise, for the front end to refuse); an object shrunk under
// a waiting request fails that request, not the server.
TEST(Controller, ReadsBorrowedInputsAndWritesOutputDestinations) {
  auto controller = start(single_model_config("shared-memory", 60000));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 3);
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = bert->forward(tokens);
  auto object = std::make_shared<SharedMemoryObject>(unique_shared_memory_key("psw-test-controller"), 3 * 4096);
  const std::shared_ptr<void> owner = object;
  std::memcpy(object->data(), tokens.data_ptr(), tokens.nbytes());
  InferRequest request = request_for("bert_tiny", tokens);
  request.inputs[0].bytes.clear();
  request.inputs[0].borrowed = BorrowedBytes{owner, object->data(), tokens.nbytes()};
  const std::size_t output_bytes = static_cast<std::size_t>(expected.nbytes());
  request.output_destinations.push_back({"pooled_output", BorrowedBytes{owner, object->data() + 4096, output_bytes}});

  const InferResponse placed = controller->infer(request);
  ASSERT_EQ(placed.outputs.size(), 1u);
  const TensorData& out = placed.outputs[0];
  ASSERT_TRUE(out.is_borrowed());
  EXPECT_EQ(out.borrowed.data, object->data() + 4096);
  EXPECT_TRUE(out.bytes.empty());
  torch::Tensor y = torch::empty(out.shape, torch::kFloat32);
  ASSERT_EQ(out.contents().size(), y.nbytes());
  std::memcpy(y.data_ptr(), object->data() + 4096, y.nbytes());
  EXPECT_LT(relative_error(y, expected), 1e-5);

  InferRequest small = request;
  small.output_destinations[0].destination.size = output_bytes - 1;
  const InferResponse unplaced = controller->infer(small);
  EXPECT_FALSE(unplaced.outputs.at(0).is_borrowed());
  EXPECT_LT(relative_error(output_of(unplaced), expected), 1e-5);

  // The input's pages gone: the copy into the worker meets SIGBUS and the request fails.
  const int fd = ::shm_open(object->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  ::close(fd);
  expect_code([&] { controller->infer(request); }, ServiceError::Code::InvalidArgument, "shrank");
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), expected), 1e-5);
  EXPECT_EQ(controller->stats().worker_restarts, 0);
}

// Note [Inputs read in place]: an input in a registered region is read by the worker from its
// own mapping of the region, not copied by the controller; each worker maps a region once, a new
// worker after a crash too; a region registered again under its name is read anew; an input
// outside its region, or in an object that shrank, fails that request only.
TEST(Controller, WorkersReadRegisteredInputsInPlace) {
  auto controller = start(single_model_config("in-place", 60000));
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  const torch::Tensor first = bert->example_input(1, 5);
  const torch::Tensor second = bert->example_input(1, 6);
  const torch::Tensor expected_first = bert->forward(first);
  const torch::Tensor expected_second = bert->forward(second);
  const std::size_t bytes = first.nbytes();
  SharedMemoryRegistry registry;
  auto in_region = [&](const torch::Tensor& tokens, std::int64_t offset) {
    InferRequest r = request_for("bert_tiny", tokens);
    r.inputs[0].bytes.clear();
    r.inputs[0].borrowed = registry.range("input", offset, static_cast<std::int64_t>(bytes), "input 'input_ids'");
    return r;
  };
  auto phase = [](const ControllerStats& stats, RequestPhase k) { return stats.phase_ns[static_cast<std::size_t>(k)]; };

  // A region at an offset of its object that is no page's start, the input across a page end.
  auto object = std::make_unique<SharedMemoryObject>(unique_shared_memory_key("psw-test-in-place"), 3 * 4096);
  std::memcpy(object->data() + 100 + 4000, second.data_ptr(), bytes);
  controller->shared_memory_registered(registry.register_region("input", object->key(), 100, 2 * 4096));
  // Both workers on standby map it before a request needs it.
  ASSERT_TRUE(eventually([&] { return controller->stats().region_maps == 2; }, 60s));
  // `first` goes through the io segment of the worker that then gets the requests in the region
  // (the last task's worker is preferred): had it read its io segment, it would answer for `first`.
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", first))), expected_first), 1e-5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(relative_error(output_of(controller->infer(in_region(second, 4000))), expected_second), 1e-5);
  }
  ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.inputs_read_in_place, 3);
  EXPECT_EQ(stats.region_maps, 2);  // once per worker, however many requests
  const std::vector<std::int64_t> copies = phase(stats, RequestPhase::InputCopy);
  ASSERT_EQ(copies.size(), 4u);
  for (std::size_t r = 1; r < 4; ++r) EXPECT_EQ(copies[r], 0) << "the controller copied request " << r << "'s input";

  // Note [Outputs written in place]: an answer wanted in the region is the worker's to write
  // there; one that does not fit its range comes back through the io segment, for the front end
  // to refuse. The region's bytes there are set first, so that stale ones would show.
  {
    ServedModelConfig built_in;
    built_in.name = "bert_tiny";
    const std::string output_name = served_model_info(built_in).outputs.front().name;
    const std::size_t out_bytes = expected_second.nbytes();
    const std::size_t at = 4000 + bytes;  // after the input
    ASSERT_LE(at + out_bytes, 2u * 4096);
    std::memset(object->data() + 100 + at, 0xff, out_bytes);
    InferRequest wanted = in_region(second, 4000);
    wanted.output_destinations.push_back(
        {output_name, registry.range("input", static_cast<std::int64_t>(at), static_cast<std::int64_t>(out_bytes), "output")});
    const InferResponse answer = controller->infer(wanted);
    ASSERT_EQ(answer.outputs.size(), 1u);
    EXPECT_TRUE(answer.outputs[0].is_borrowed());
    // The registry's own mapping of the object: the same pages at another address.
    ASSERT_EQ(answer.outputs[0].contents().size(), out_bytes);
    EXPECT_EQ(std::memcmp(answer.outputs[0].contents().data(), object->data() + 100 + at, out_bytes), 0);
    torch::Tensor written = torch::empty_like(expected_second);
    std::memcpy(written.data_ptr(), object->data() + 100 + at, out_bytes);
    EXPECT_LT(relative_error(written, expected_second), 1e-5);
    EXPECT_EQ(controller->stats().outputs_written_in_place, 1);
    InferRequest small = in_region(second, 4000);
    small.output_destinations.push_back({output_name, registry.range("input", static_cast<std::int64_t>(at), 8, "output")});
    const InferResponse through_io = controller->infer(small);
    ASSERT_EQ(through_io.outputs.size(), 1u);
    EXPECT_FALSE(through_io.outputs[0].is_borrowed());
    EXPECT_EQ(through_io.outputs[0].bytes.size(), out_bytes);
    EXPECT_EQ(controller->stats().outputs_written_in_place, 1);
    EXPECT_NE(controller->metrics_text().find("psw_outputs_written_in_place_total 1\n"), std::string::npos);
  }

  // An input that runs past its region's end (a range the registry would refuse, made by hand):
  // the worker refuses it, and goes on.
  {
    InferRequest outside = in_region(second, 0);  // holds the region until the block's end
    outside.inputs[0].borrowed.data += 2 * 4096 - 8;
    expect_code([&] { controller->infer(outside); }, ServiceError::Code::InvalidArgument, "outside its shared memory region");
  }

  // Both workers killed: their replacements map the region again and read from it.
  const std::vector<pid_t> pids = controller->worker_pids();
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  ASSERT_TRUE(eventually(
      [&] {
        for (pid_t now : controller->worker_pids()) {
          if (std::find(pids.begin(), pids.end(), now) != pids.end()) return false;
        }
        return controller->ready() && controller->stats().region_maps == 4;
      },
      300s));
  EXPECT_LT(relative_error(output_of(controller->infer(in_region(second, 4000))), expected_second), 1e-5);

  // Unregistered: every worker unmaps it. Registered again under the same name, another object
  // with other contents: those are read.
  registry.unregister("input");
  ASSERT_TRUE(eventually([&] { return controller->stats().region_unmaps == 2; }, 60s));
  auto other = std::make_unique<SharedMemoryObject>(unique_shared_memory_key("psw-test-in-place"), 4096);
  std::memcpy(other->data(), first.data_ptr(), bytes);
  controller->shared_memory_registered(registry.register_region("input", other->key(), 0, 4096));
  EXPECT_LT(relative_error(output_of(controller->infer(in_region(first, 0))), expected_first), 1e-5);

  // The object shrunk after the request took its range: the controller refuses the request
  // before any worker reads past the object's end.
  {
    const InferRequest shrunk = in_region(first, 0);
    const int fd = ::shm_open(other->key().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 16), 0);
    ::close(fd);
    expect_code([&] { controller->infer(shrunk); }, ServiceError::Code::InvalidArgument, "shrank");
  }
  // Shrunk after the controller's check, before the worker read it: the worker's copy (the
  // CPU's, on host) meets SIGBUS and fails the request, not the worker.
  {
    const int fd = ::shm_open(other->key().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 4096), 0);  // whole again
    const InferRequest late = in_region(first, 0);
    const std::vector<pid_t> stopped = controller->worker_pids();
    for (pid_t pid : stopped) ::kill(pid, SIGSTOP);
    const std::int64_t dispatched_in_place = controller->stats().inputs_read_in_place;
    auto reply = std::async(std::launch::async, [&] { return controller->infer(late); });
    // Dispatched, past the controller's check (the count goes up as the worker is sent it).
    EXPECT_TRUE(eventually([&] { return controller->stats().inputs_read_in_place == dispatched_in_place + 1; }, 60s));
    ASSERT_EQ(::ftruncate(fd, 0), 0);  // no page left (a partial last page would still read)
    ::close(fd);
    for (pid_t pid : stopped) ::kill(pid, SIGCONT);
    expect_code([&] { reply.get(); }, ServiceError::Code::InvalidArgument, "shrank");
  }
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", first))), expected_first), 1e-5);
  stats = controller->stats();
  // 3, the two with outputs in the region, the one outside its region, after the restart, after
  // registering again, the late shrink
  EXPECT_EQ(stats.inputs_read_in_place, 9);
  EXPECT_EQ(stats.worker_restarts, 2);
  EXPECT_NE(controller->metrics_text().find("psw_inputs_read_in_place_total 9"), std::string::npos);
}

// `request` with its input moved into a slot of `staging`, as the front end places a raw input
// (its own bytes kept where no slot is free).
InferRequest in_staging(InputStaging& staging, InferRequest request) {
  TensorData& input = request.inputs.at(0);
  if (std::optional<BorrowedBytes> slot = staging.acquire(input.bytes.size())) {
    std::memcpy(slot->data, input.bytes.data(), slot->size);
    input.bytes.clear();
    input.borrowed = std::move(*slot);
  }
  return request;
}

// Note [Raw inputs received in place]: the front end's input staging, told to the controller
// before any request, is mapped once per worker on standby; requests whose inputs lie in its
// slots are read there in place, a slot reused by the next request included, and nothing is
// unmapped while the staging lives.
TEST(Controller, InputsInTheFrontEndsStagingAreReadInPlace) {
  auto controller = start(single_model_config("staging", 60000));
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  InputStaging staging(2, 64 * 1024);
  controller->shared_memory_registered(staging.whole());
  ASSERT_TRUE(eventually([&] { return controller->stats().region_maps == 2; }, 60s));
  for (int length = 5; length < 9; ++length) {
    const torch::Tensor tokens = bert->example_input(1, length);
    const torch::Tensor expected = bert->forward(tokens);
    const InferRequest request = in_staging(staging, request_for("bert_tiny", tokens));
    ASSERT_TRUE(request.inputs[0].is_borrowed());
    EXPECT_LT(relative_error(output_of(controller->infer(request)), expected), 1e-5) << length;
  }
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.inputs_read_in_place, 4);
  EXPECT_EQ(stats.region_maps, 2);
  EXPECT_EQ(stats.region_unmaps, 0);
}

// A caller who gives up while its worker reads the input from a staging slot does not free the
// slot: the controller holds it until the worker has answered.
TEST(Controller, AStagingSlotStaysHeldUntilTheWorkerAnswersAGivenUpRequest) {
  auto controller = start(write_host_config("staging-held", "workers: 2\nrequest_timeout_ms: 300000\n"
                                                        "models:\n  - name: bert_tiny\n    batch: 8\n"));
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor slow = bert->example_input(512, 4);  // seconds on the host's cores
  InputStaging staging(1, 1 << 20);
  controller->shared_memory_registered(staging.whole());
  ASSERT_TRUE(eventually([&] { return controller->stats().region_maps == 2; }, 60s));
  {
    InferRequest request = in_staging(staging, request_for("bert_tiny", slow));
    ASSERT_TRUE(request.inputs[0].is_borrowed());
    request.deadline = std::chrono::steady_clock::now() + 300ms;
    expect_code([&] { controller->infer(request); }, ServiceError::Code::DeadlineExceeded, "while its worker ran it");
  }
  EXPECT_EQ(staging.slots_free(), 0u) << "the slot was freed while the worker still read it";
  EXPECT_TRUE(eventually([&] { return staging.slots_free() == 1; }, 120s));
}

// Regions the controller is given at its start (psw serve's input staging) are mapped by every
// worker before the training job starts, the one that trains among them, so that no worker's
// first request in the staging waits for a map; told after the start, a region would reach only
// the worker on standby until the training one served a request.
TEST(Controller, RegionsGivenAtTheStartAreMappedByEveryWorkerBeforeTrainingStarts) {
  const ServeConfig config = bert_beside_training("regions-at-start-", "pipeswitch");
  InputStaging staging(2, 64 * 1024);
  auto controller = start(config, "host", {staging.whole()});
  EXPECT_EQ(controller->stats().region_maps, 2) << "both workers map the staging before the controller is up";
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 60s));
  // Told again, as the front ends tell their staging once the controller is up: nothing new.
  controller->shared_memory_registered(staging.whole());
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  for (int length = 5; length < 7; ++length) {
    const torch::Tensor tokens = bert->example_input(1, length);
    const InferRequest request = in_staging(staging, request_for("bert_tiny", tokens));
    ASSERT_TRUE(request.inputs[0].is_borrowed());
    EXPECT_LT(relative_error(output_of(controller->infer(request)), bert->forward(tokens)), 1e-5) << length;
  }
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.inputs_read_in_place, 2);
  EXPECT_EQ(stats.region_maps, 2);
}

// Note [Inputs read in place]: a training worker takes any message for the controller gone and
// would stop, so a region registered while it trains is mapped only by the worker on standby,
// and the job trains on, before and after a request in that region.
TEST(Controller, RegionsRegisteredWhileTrainingLeaveTheTrainingWorkerAlone) {
  const ServeConfig config = write_host_config("in-place-training", R"(
workers: 2
request_timeout_ms: 120000
models:
  - name: bert_tiny
    batch: 1
training:
  model: bert_tiny
  batch: 2
  input_size: 16
  seed: 1
  autostart: false
)");
  auto controller = start(config);
  controller->start_training("bert_tiny", 0);
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").running; }, 60s));
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = bert->example_input(1, 7);
  SharedMemoryRegistry registry;
  auto object = std::make_unique<SharedMemoryObject>(unique_shared_memory_key("psw-test-in-place-training"), 4096);
  std::memcpy(object->data(), tokens.data_ptr(), tokens.nbytes());
  controller->shared_memory_registered(registry.register_region("input", object->key(), 0, 4096));
  ASSERT_TRUE(eventually([&] { return controller->stats().region_maps == 1; }, 60s));
  const std::int64_t before = controller->training_status("bert_tiny").completed_steps;
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").completed_steps > before; }, 300s));
  EXPECT_TRUE(controller->training_status("bert_tiny").running);
  EXPECT_EQ(controller->stats().preemptions, 0);

  InferRequest request = request_for("bert_tiny", tokens);
  request.inputs[0].bytes.clear();
  request.inputs[0].borrowed = registry.range("input", 0, static_cast<std::int64_t>(tokens.nbytes()), "input");
  EXPECT_LT(relative_error(output_of(controller->infer(request)), bert->forward(tokens)), 1e-5);
  const std::int64_t after_request = controller->training_status("bert_tiny").completed_steps;
  ASSERT_TRUE(eventually([&] { return controller->training_status("bert_tiny").completed_steps > after_request; }, 300s));
  const ControllerStats stats = controller->stats();
  EXPECT_EQ(stats.inputs_read_in_place, 1);
  EXPECT_EQ(stats.region_maps, 1);  // the training worker was never sent one
  EXPECT_EQ(stats.worker_restarts, 0);
  controller->stop_training("bert_tiny");
}

// The controller's table of the models' tensors matches the zoo, in every dtype.
TEST(Controller, ModelInfoMatchesTheZoo) {
  torch::NoGradGuard no_grad;
  for (const auto& name : exec::zoo_model_names()) {
    ServedModelConfig served;
    served.name = name;
    const ModelInfo info = served_model_info(served);
    auto model = exec::make_model(name, 0);
    torch::Tensor x = model->example_input(1, 0);
    EXPECT_EQ(info.inputs.at(0).datatype, x.scalar_type() == torch::kInt64 ? "INT64" : "FP32") << name;
    ASSERT_EQ(info.inputs.at(0).shape.size(), static_cast<std::size_t>(x.dim())) << name;
    for (std::int64_t d = 1; d < x.dim(); ++d) EXPECT_EQ(info.inputs.at(0).shape[d], x.size(d)) << name;
    served.dtype = "bf16";
    const ModelInfo bf16 = served_model_info(served);
    EXPECT_EQ(bf16.outputs.at(0).datatype, "BF16") << name;
    EXPECT_EQ(bf16.inputs.at(0).datatype, x.scalar_type() == torch::kInt64 ? "INT64" : "BF16") << name;
    EXPECT_EQ(token_id_bound(served), name == "bert_base" || name == "bert_tiny" ? 30522 : 0) << name;
    if (name == "inception_v3") continue;  // 299 x 299 on the CPU is slow; its output is N x 1000 as ResNet's
    const torch::Tensor y = model->forward(x);
    EXPECT_EQ(info.outputs.at(0).shape.at(1), y.size(1)) << name;
  }
  ServedModelConfig unknown;
  unknown.name = "gpt2";
  EXPECT_THROW(served_model_info(unknown), InputError);
}

// Note [Decoder in the pipeline] served: llama-tiny in bf16 beside BERT-Tiny in fp32. A prompt
// is answered with its last position's logits, those of the model run alone, on every
// switch; a prompt of another length and ids outside the vocabulary are refused before a
// worker sees them, and the server goes on.
TEST(Controller, ServesADecoderInBf16BesideAnotherModel) {
  const std::string zoo = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto decoder = exec::make_model(zoo, 0, torch::kBFloat16);
  auto bert = exec::make_model("bert_tiny", 0);
  torch::NoGradGuard no_grad;
  const torch::Tensor prompt = exec::as_decoder(*decoder)->example_tokens(1, 16, 3);
  const ServeConfig config = write_config("decoder", R"(workers: 2
request_timeout_ms: 120000
models:
  - name: llama-tiny
    decoder: )" + zoo + R"(
    prompt_tokens: 16
    dtype: bf16
    batch: 1
  - name: bert_tiny
    batch: 1
)", decoder_profiles("decoder", *decoder, prompt));
  const ServedModelConfig& served = config.models.at(0);
  const ModelInfo info = served_model_info(served);
  EXPECT_EQ(info.inputs.at(0).shape, (std::vector<std::int64_t>{-1, 16}));
  EXPECT_EQ(info.outputs.at(0).datatype, "BF16");
  EXPECT_EQ(info.outputs.at(0).shape, (std::vector<std::int64_t>{-1, 512}));
  auto controller = start(config);
  // bf16 sums in another process may round in another order (its threads): a relative 1e-2
  // allows that, where another model or stale weights would be off by about 1.
  const torch::Tensor expected = decoder->forward(prompt).to(torch::kFloat32);
  const torch::Tensor tokens = bert->example_input(1, 4);
  for (int i = 0; i < 2; ++i) {
    EXPECT_LT(relative_error(output_of(controller->infer(request_for(served, prompt)), "BF16"), expected), 1e-2) << i;
    EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  }
  EXPECT_EQ(controller->stats().transfers, 4);
  expect_code([&] { controller->infer(request_for(served, exec::as_decoder(*decoder)->example_tokens(1, 17, 3))); },
              ServiceError::Code::InvalidArgument, "llama-tiny's input dimension 1 must be 16, got 17");
  torch::Tensor outside = prompt.clone();
  outside[0][5] = 512;
  expect_code([&] { controller->infer(request_for(served, outside)); }, ServiceError::Code::InvalidArgument,
              "llama-tiny's input 'input_ids' holds token id 512 at element 5: ids must lie in [0, 512)");
  EXPECT_LT(relative_error(output_of(controller->infer(request_for(served, prompt)), "BF16"), expected), 1e-2);
  EXPECT_EQ(controller->stats().worker_restarts, 0);
}

// Note [Generate call] served: llama-tiny (fp32) generates greedily what recomputing the whole
// sequence token by token gives, for prompts in two buckets, cold (switched) and warm; every
// token is told in order before the answer; bad prompts and max_tokens are refused naming what is
// wrong, and the server goes on.
TEST(Controller, GeneratesWhatRecomputingTheWholeSequenceGives) {
  const std::string zoo = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto reference = exec::make_model(zoo, 0, torch::kFloat32);  // the served weights (seed 0)
  torch::NoGradGuard no_grad;
  const ServeConfig config = write_config("generate", R"(workers: 2
request_timeout_ms: 120000
cache: off
models:
  - name: llama-tiny
    decoder: )" + zoo + R"(
    prompt_tokens: 16
    prompt_buckets: [16, 64, 255]
    batch: 1
)", decoder_profiles("generate", *reference, exec::as_decoder(*reference)->example_tokens(1, 16, 3)));
  auto controller = start(config);
  constexpr std::int64_t kTokens = 10;
  for (const std::int64_t length : {5, 40, 5}) {
    const torch::Tensor prompt = exec::as_decoder(*reference)->example_tokens(1, length, 30 + length);
    torch::Tensor sequence = prompt;
    for (int i = 0; i < kTokens; ++i) {
      sequence = torch::cat({sequence, reference->forward(sequence).argmax(-1, true)}, 1);
    }
    GenerateRequest request;
    request.model = "llama-tiny";
    request.id = "g" + std::to_string(length);
    request.input_ids.assign(prompt.data_ptr<std::int64_t>(), prompt.data_ptr<std::int64_t>() + length);
    request.max_tokens = kTokens;
    std::vector<GeneratedToken> told;
    const GenerateResponse r = controller->generate(request, [&](const GeneratedToken& t) { told.push_back(t); });
    const std::vector<std::int64_t> expected(sequence.data_ptr<std::int64_t>() + length,
                                             sequence.data_ptr<std::int64_t>() + length + kTokens);
    EXPECT_EQ(r.output_ids, expected) << "prompt of " << length;
    EXPECT_EQ(r.id, request.id);
    EXPECT_EQ(r.prompt_bucket, length <= 16 ? 16 : 64);
    EXPECT_TRUE(r.switched);  // cache off: every request switches
    EXPECT_GT(r.ttft_ns, 0);
    EXPECT_GT(r.tpot_ns, 0);
    EXPECT_GE(r.server_ns, r.ttft_ns);
    EXPECT_TRUE(r.worker == 0 || r.worker == 1) << r.worker;  // workers: 2
    ASSERT_EQ(told.size(), static_cast<std::size_t>(kTokens));
    for (std::size_t i = 0; i < told.size(); ++i) {
      EXPECT_EQ(told[i].index, static_cast<std::int64_t>(i));
      EXPECT_EQ(told[i].id, expected[i]);
    }
  }
  GenerateRequest bad;
  bad.model = "llama-tiny";
  bad.max_tokens = 4;
  bad.input_ids.assign(256, 1);
  expect_code([&] { controller->generate(bad, nullptr); }, ServiceError::Code::InvalidArgument,
              "a prompt of 256 tokens is longer than llama-tiny's longest, 255 (its context of 256 positions less one)");
  bad.input_ids.assign(250, 1);
  bad.max_tokens = 7;
  expect_code([&] { controller->generate(bad, nullptr); }, ServiceError::Code::InvalidArgument,
              "the prompt's 250 tokens and max_tokens 7 exceed llama-tiny's context of 256 positions (max_tokens at most 6");
  bad.max_tokens = 0;
  expect_code([&] { controller->generate(bad, nullptr); }, ServiceError::Code::InvalidArgument,
              "max_tokens must be at least 1, not 0");
  bad.max_tokens = 2;
  bad.input_ids = {3, 512};
  expect_code([&] { controller->generate(bad, nullptr); }, ServiceError::Code::InvalidArgument,
              "input_ids[1] is 512, outside llama-tiny's vocabulary [0, 512)");
  bad.input_ids = {};
  expect_code([&] { controller->generate(bad, nullptr); }, ServiceError::Code::InvalidArgument, "the prompt is empty");
  bad.model = "gpt2";
  expect_code([&] { controller->generate(bad, nullptr); }, ServiceError::Code::NotFound, "'gpt2' is not served here");
  // The longest prompt and the last position: the context is full, and the server goes on.
  GenerateRequest full;
  full.model = "llama-tiny";
  full.input_ids.assign(255, 7);
  full.max_tokens = 1;
  EXPECT_EQ(controller->generate(full, nullptr).output_ids.size(), 1u);
  EXPECT_EQ(controller->generate(full, nullptr).prompt_bucket, 255);
  EXPECT_EQ(controller->stats().worker_restarts, 0);
  EXPECT_EQ(controller->stats().failed_requests, 0);
}

// Note [Training checkpoint] served: a job started from the user's weights (training.weights) on
// the user's labelled set (training.dataset, its state at step 2 the in-process job's) and
// checkpointed at step 2 on a client's request goes on to step 3 and is checkpointed again at
// shutdown (training.checkpoint); a second server resumes from the first file, reaches step 3, and
// its state and its checkpoint equal the first server's, byte for byte. Bad requests are refused
// naming what is wrong. (The job is BERT-Tiny's, of small state, and one worker each: with
// ResNet-152's state this was CI's longest test; ServesModelsBesideTrainingAndPreemptsItWithoutLoss
// keeps a BatchNorm model's job.)
TEST(Controller, ACheckpointedJobResumesInAnotherServerBitForBit) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-controller-checkpoints-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // The user's labelled set (training.dataset): six sequences of 16 tokens, three steps of two.
  auto gen = at::detail::createCPUGenerator(11);
  const torch::Tensor tokens = torch::randint(0, 512, {6, 16}, gen, torch::kInt64);
  const torch::Tensor classes = torch::randint(0, 2, {6}, gen, torch::kInt64);
  const auto bytes_of = [](const torch::Tensor& t) { return std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()); };
  std::ofstream(dir / "set.safetensors", std::ios::binary)
      << write_safetensors({{"inputs", TensorDtype::I64, {6, 16}, bytes_of(tokens)},
                            {"labels", TensorDtype::I64, {6}, bytes_of(classes)}});
  const std::string job = R"(models:
  - name: bert_tiny
    batch: 1
training:
  model: bert_tiny
  batch: 2
  input_size: 16
  seed: 3
  autostart: false
  dataset: )" + (dir / "set.safetensors").string() + "\n";
  const auto train_to = [](Controller& c, std::int64_t more, std::int64_t expected) {
    c.start_training("bert_tiny", more);
    ASSERT_TRUE(eventually([&] { return c.training_status("bert_tiny").stopped; }, 300s));
    ASSERT_EQ(c.training_status("bert_tiny").completed_steps, expected);
  };
  std::vector<std::uint8_t> first_state;
  {
    // The first job starts from the user's weights (training.weights), not from its seed's.
    const std::filesystem::path weights = dir / "bert_tiny-seed-8.safetensors";
    exec::save_weights(*exec::make_model("bert_tiny", 8), weights);
    const ServeConfig first_config =
        write_host_config("checkpoint-first", "workers: 1\n" + job + "  checkpoint: " + (dir / "at-exit.safetensors").string() +
                                             "\n  weights: " + weights.string() + "\n");
    auto first = start(first_config);
    TrainingJobConfig seed_8 = *first_config.training;
    seed_8.seed = 8;
    seed_8.weights.clear();
    const torch::Tensor initial = uninterrupted_state(seed_8, 0);
    const auto [start_data, start_size] = served_committed_state(*first, 0);
    ASSERT_EQ(start_size, static_cast<std::size_t>(initial.numel()));
    EXPECT_EQ(std::memcmp(start_data, initial.data_ptr(), start_size), 0) << "the job did not start from the weights";
    std::filesystem::remove(weights);
    train_to(*first, 2, 2);
    // The served job learns the user's set: its state is the in-process job's on the same set.
    const torch::Tensor at_2_reference = uninterrupted_state(seed_8, 2);
    const auto [data_2, size_2] = served_committed_state(*first, 2);
    ASSERT_EQ(size_2, static_cast<std::size_t>(at_2_reference.numel()));
    EXPECT_EQ(std::memcmp(data_2, at_2_reference.data_ptr(), size_2), 0) << "the served job did not learn the user's set";
    TrainingJobConfig seeded_set = seed_8;
    seeded_set.dataset.clear();
    EXPECT_FALSE(torch::equal(uninterrupted_state(seeded_set, 2), at_2_reference)) << "the set made no difference";
    const TrainingCheckpointStatus at_2 = first->checkpoint_training("bert_tiny", (dir / "at-2.safetensors").string());
    EXPECT_EQ(at_2.completed_steps, 2);
    EXPECT_EQ(at_2.path, (dir / "at-2.safetensors").string());
    EXPECT_EQ(at_2.loss, first->training_status("bert_tiny").last_loss);
    EXPECT_EQ(static_cast<std::uintmax_t>(at_2.bytes), std::filesystem::file_size(at_2.path));
    expect_code([&] { first->checkpoint_training("bert_tiny", (dir / "no/such/folder/x.safetensors").string()); },
                ServiceError::Code::InvalidArgument, "does not exist on the server's host");
    expect_code([&] { first->checkpoint_training("resnet152", ""); }, ServiceError::Code::NotFound,
                "no training job of model 'resnet152'");
    train_to(*first, 1, 3);
    const auto [data, size] = served_committed_state(*first, 3);
    first_state.assign(data, data + size);
  }  // shut down: the state at step 5 written to training.checkpoint
  const SafetensorsHeader at_exit = read_safetensors_header(dir / "at-exit.safetensors");
  EXPECT_EQ(at_exit.metadata.at("psw_completed_steps"), "3");

  auto second = start(write_host_config("checkpoint-second", "workers: 1\n" + job + "  resume_from: " +
                                                          (dir / "at-2.safetensors").string() + "\n"));
  EXPECT_EQ(second->training_status("bert_tiny").completed_steps, 2);
  expect_code([&] { second->checkpoint_training("bert_tiny", ""); }, ServiceError::Code::InvalidArgument,
              "the serve config names no training.checkpoint");
  train_to(*second, 1, 3);
  const auto [data, size] = served_committed_state(*second, 3);
  ASSERT_EQ(size, first_state.size());
  EXPECT_EQ(std::memcmp(data, first_state.data(), size), 0) << "the resumed job's state differs";
  second->checkpoint_training("bert_tiny", (dir / "resumed.safetensors").string());
  const auto bytes_of_file = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(bytes_of_file(dir / "resumed.safetensors") == bytes_of_file(dir / "at-exit.safetensors"))
      << "the two checkpoints at step 3 differ";
  second.reset();
  // A checkpoint of another model is refused at start, naming both.
  try {
    start(write_host_config("checkpoint-wrong", "workers: 1\nmodels:\n  - name: bert_tiny\n    batch: 1\ntraining:\n"
                                           "  model: resnet152\n  batch: 2\n  input_size: 16\n  resume_from: " +
                                               (dir / "at-2.safetensors").string() + "\n"));
    ADD_FAILURE() << "a BERT-Tiny checkpoint was taken for ResNet-152";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a checkpoint of model 'bert_tiny', not of 'resnet152'"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Note [TorchScript models] served: a user's TorchScript file (made with python3-torch) beside
// nothing of the zoo, answered as its own module answers, switch after switch; its input checked
// by the controller as any model's.
// A served model's `weights:` (exec/weights.hpp): the daemon loads them before it packs the
// model, so every switch brings the user's values; a file of another model stops the start,
// naming the tensor.
TEST(Controller, ServesTheUsersWeights) {
  const std::string zoo = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto users = exec::make_model(zoo, 7, torch::kFloat32);
  auto seeded = exec::make_model(zoo, 0, torch::kFloat32);  // what the server serves without weights
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-controller-weights-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "folder");
  exec::save_weights(*users, dir / "folder" / "model.safetensors");  // a Hugging Face folder
  const torch::Tensor prompt = exec::as_decoder(*users)->example_tokens(1, 16, 3);
  const std::filesystem::path profiles = decoder_profiles("weights", *users, prompt);
  const auto config_with = [&](const std::filesystem::path& weights) {
    return write_config("weights", "workers: 2\nrequest_timeout_ms: 120000\nmodels:\n  - name: llama-tiny\n    decoder: " +
                                       zoo + "\n    prompt_tokens: 16\n    batch: 1\n    weights: " + weights.string() + "\n",
                        profiles);
  };
  const ServeConfig config = config_with(dir / "folder");
  EXPECT_EQ(config.models.at(0).weights, dir / "folder");
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = users->forward(prompt);
  ASSERT_FALSE(torch::equal(seeded->forward(prompt), expected));
  {
    auto controller = start(config);
    for (int i = 0; i < 2; ++i)
      EXPECT_TRUE(torch::equal(output_of(controller->infer(request_for(config.models.at(0), prompt))), expected)) << i;
    EXPECT_EQ(controller->stats().transfers, 2);
  }
  // A file of another model: the start fails, naming the file's first tensor that is not the model's.
  std::vector<SafetensorsTensor> foreign{{"encoder.layer.0.output.dense.bias", TensorDtype::F32, {4}, std::string(16, '\0')}};
  const std::filesystem::path wrong = dir / "bert.safetensors";
  std::ofstream(wrong, std::ios::binary) << write_safetensors(foreign);
  try {
    auto refused = start(config_with(wrong));
    ADD_FAILURE() << "a server started with another model's weights";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tensor \"encoder.layer.0.output.dense.bias\" is not one of llama-tiny's"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Controller, ServesAUsersTorchScriptModel) {
  const std::filesystem::path dir = make_torchscript_files("controller-torchscript");
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto reference = exec::load_torchscript(dir / "cnn.pt", exec::InputSpec{{2, 3, 16, 16}, torch::kFloat32});
  const torch::Tensor input = reference->example_input(2, 9);
  write_made_up_profile(dir / "profiles", *reference, input);
  // The same file as `stated`, whose config states an output shape, and as `misstated`, whose
  // config states another than the forward gives.
  for (const char* name : {"stated", "misstated"}) {
    const std::filesystem::path copy = dir / (std::string(name) + ".pt");
    std::filesystem::copy_file(dir / "cnn.pt", copy);
    write_made_up_profile(dir / "profiles", *exec::load_torchscript(copy, exec::InputSpec{{2, 3, 16, 16}, torch::kFloat32}),
                          input);
  }
  std::string models;
  for (const auto& [name, output] : {std::pair{"cnn", ""}, {"stated", "[5]"}, {"misstated", "[7]"}}) {
    models += std::string("  - name: ") + name + "\n    torchscript: " + (dir / (std::string(name) + ".pt")).string() +
              "\n    input_shape: [3, 16, 16]\n    batch: 2\n" +
              (std::string(output).empty() ? "" : "    output_shape: " + std::string(output) + "\n");
  }
  const ServeConfig config = write_config("torchscript", "workers: 2\nmodels:\n" + models, dir / "profiles");
  const ModelInfo info = served_model_info(config.models.at(0));
  EXPECT_EQ(info.inputs.at(0).name, "input");
  EXPECT_EQ(info.inputs.at(0).shape, (std::vector<std::int64_t>{-1, 3, 16, 16}));
  EXPECT_EQ(info.outputs.at(0).shape, (std::vector<std::int64_t>{-1}));  // not stated: the rank comes with the answer
  EXPECT_EQ(served_model_info(config.models.at(1)).outputs.at(0).shape, (std::vector<std::int64_t>{-1, 5}));
  auto controller = start(config);
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = reference->forward(input);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(torch::equal(output_of(controller->infer(request_for(config.models.at(0), input))), expected)) << i;
  }
  EXPECT_TRUE(torch::equal(output_of(controller->infer(request_for(config.models.at(1), input))), expected));
  expect_code([&] { controller->infer(request_for(config.models.at(2), input)); }, ServiceError::Code::InvalidArgument,
              "model 'misstated' answered Float [2, 5], but its output_shape in the serve config is [7] per sample");
  EXPECT_EQ(controller->stats().transfers, 4);
  expect_code([&] { controller->infer(request_for(config.models.at(0), torch::zeros({2, 3, 17, 16}))); },
              ServiceError::Code::InvalidArgument, "cnn's input dimension 2 must be 16, got 17");
  controller.reset();
  std::filesystem::remove_all(dir);
}

// Note [TorchScript training] served: the job trains the user's TorchScript module of a models:
// entry (tests/exec/make_torchscript.py's scripted classifier) while requests of the same entry
// preempt it; the requests are answered with the file's weights (the job trains its own copy),
// the job learns, and its state equals as many uninterrupted steps in this process, bit for bit.
// input_size and weights are refused for it, naming why.
TEST(Controller, TrainsAUsersTorchScriptModelBesideItsRequests) {
  const std::filesystem::path dir = make_torchscript_files("controller-torchscript-training");
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto reference = exec::load_torchscript(dir / "classifier.pt", exec::InputSpec{{2, 3, 16, 16}, torch::kFloat32});
  const torch::Tensor input = reference->example_input(2, 9);
  write_made_up_profile(dir / "profiles", *reference, input);
  const std::string models = "workers: 2\nrequest_timeout_ms: 120000\nmodels:\n  - name: classifier\n    torchscript: " +
                             (dir / "classifier.pt").string() + "\n    input_shape: [3, 16, 16]\n    batch: 2\n";
  const std::string training = "training:\n  model: classifier\n  batch: 8\n  learning_rate: 0.05\n  seed: 4\n"
                               "  autostart: false\n";
  const ServeConfig config = write_config("torchscript-training", models + training, dir / "profiles");
  ASSERT_TRUE(config.training.has_value());
  EXPECT_EQ(config.training->torchscript_file, dir / "classifier.pt");
  auto controller = start(config);
  controller->start_training("classifier", 0);
  ASSERT_TRUE(eventually([&] { return controller->training_status("classifier").completed_steps >= 100; }, 300s));
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = reference->forward(input);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(torch::equal(output_of(controller->infer(request_for(config.models.at(0), input))), expected)) << i;
    std::this_thread::sleep_for(100ms);
  }
  const std::int64_t steps = stop_and_count_steps(*controller, "classifier");
  EXPECT_GE(controller->stats().preemptions, 1);
  EXPECT_EQ(controller->stats().failed_requests, 0);
  EXPECT_LT(controller->training_status("classifier").last_loss, 1.0) << "5 classes start near ln 5 = 1.61; " << steps << " steps";
  const torch::Tensor state = uninterrupted_state(*config.training, steps);
  const auto [data, size] = served_committed_state(*controller, steps);
  ASSERT_EQ(size, static_cast<std::size_t>(state.numel()));
  EXPECT_EQ(std::memcmp(data, state.data_ptr(), size), 0) << "the served job's state differs from an uninterrupted run";
  controller.reset();
  for (const char* key : {"  input_size: 16\n", "  weights: classifier.pt\n"}) {
    const std::string message = ::psw::test_support::input_error_of(
        [&] { write_config("torchscript-training-bad", models + training + key, dir / "profiles"); });
    EXPECT_NE(message.find("'classifier' is a TorchScript model"), std::string::npos) << message;
  }
  std::filesystem::remove_all(dir);
}

// Note [Several inputs]: a module of two inputs served by their forward's names; the server packs
// them, the worker's model unpacks them, the answer is the module's bit for bit; the inputs are
// checked one by one, and a config that lists them out of the forward's order stops the start.
TEST(Controller, ServesATorchScriptModelOfSeveralInputs) {
  const std::filesystem::path dir = make_torchscript_files("controller-two-inputs");
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::vector<exec::InputSpec> specs{{{2, 6}, torch::kFloat32}, {{2, 4}, torch::kInt64}};
  auto reference = exec::load_torchscript(dir / "two_inputs.pt", specs);
  write_made_up_profile(dir / "profiles", *reference, reference->example_input(2, 1));
  const auto config_listing = [&](const std::string& first, const std::string& second) {
    return write_config("two-inputs", "workers: 2\nmodels:\n  - name: two_inputs\n    torchscript: " +
                                          (dir / "two_inputs.pt").string() + "\n    batch: 2\n    inputs:\n      - {name: " +
                                          first + ", shape: [6]}\n      - {name: " + second +
                                          ", shape: [4], dtype: int64, id_bound: 512}\n",
                        dir / "profiles");
  };
  const ServeConfig config = config_listing("features", "ids");
  const ModelInfo info = served_model_info(config.models.at(0));
  ASSERT_EQ(info.inputs.size(), 2u);
  EXPECT_EQ(info.inputs[1].name, "ids");
  EXPECT_EQ(info.inputs[1].datatype, "INT64");
  EXPECT_EQ(info.inputs[1].shape, (std::vector<std::int64_t>{-1, 4}));
  const torch::Tensor features = torch::randn({2, 6});
  const torch::Tensor ids = torch::randint(0, 512, {2, 4}, torch::kInt64);
  torch::NoGradGuard no_grad;
  // The module's own answer (TorchScript.SeveralInputsArePackedIntoOneAndGivenToTheModuleInOrder).
  const torch::Tensor expected = reference->forward(exec::pack_inputs({features, ids}));
  const auto request = [&](const torch::Tensor& f, const torch::Tensor& i) {
    InferRequest r;
    r.model = "two_inputs";
    r.inputs = {tensor_of("ids", i), tensor_of("features", f)};  // any order: by name
    return r;
  };
  {
    auto controller = start(config);
    for (int k = 0; k < 2; ++k) EXPECT_TRUE(torch::equal(output_of(controller->infer(request(features, ids))), expected)) << k;
    expect_code([&] { controller->infer(request(features, ids.narrow(0, 0, 1))); }, ServiceError::Code::InvalidArgument,
                "two_inputs's input 'ids' has batch 1, 'features' 2: every input has the same batch");
    expect_code([&] { controller->infer(request(features, ids.narrow(1, 0, 3).contiguous())); },
                ServiceError::Code::InvalidArgument, "two_inputs's input 'ids' dimension 1 must be 4, got 3");
    // ids beyond the embedding's 512 rows (id_bound): refused before a worker sees them.
    torch::Tensor beyond = ids.clone();
    beyond[1][2] = 600;
    expect_code([&] { controller->infer(request(features, beyond)); }, ServiceError::Code::InvalidArgument,
                "two_inputs's input 'ids' holds token id 600 at element 6: ids must lie in [0, 512)");
    InferRequest one = request(features, ids);
    one.inputs.pop_back();
    expect_code([&] { controller->infer(one); }, ServiceError::Code::InvalidArgument,
                "two_inputs's input 'features' (FP32 [-1, 6]) is missing from the request");
  }
  try {
    auto refused = start(config_listing("ids", "features"));
    ADD_FAILURE() << "a server started with the inputs out of the forward's order";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 of the forward is 'features', but the serve config lists 'ids' there"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Note [Device memory limit]: within the config's device_memory_bytes a model loads; beyond it
// the load is RESOURCE_EXHAUSTED with the numbers and the server goes on; an unload (refused while
// a request of the model runs) gives its share to the next load (once no worker holds the
// model); a config beyond it does not start.
// Sizes of the packed layouts (aligned per tensor): bert_tiny 17.5 MB, inception_v3 108.8 MB,
// resnet152 241.5 MB.
TEST(Controller, LoadsWithinTheDeviceMemoryLimitAndRefusesBeyondIt) {
  auto controller = start(write_host_config("device-limit", R"(workers: 2
request_timeout_ms: 120000
device_memory_bytes: 300000000
models:
  - name: bert_tiny
    batch: 1
)"));
  controller->load_model("inception_v3", "{name: inception_v3, batch: 1}");
  expect_code([&] { controller->load_model("resnet152", "{name: resnet152, batch: 1}"); },
              ServiceError::Code::ResourceExhausted,
              "model 'resnet152' needs 241456640 bytes of device memory for its 241456640 bytes of parameters, but the "
              "server's models and training state take 126382080 of its device_memory_bytes 300000000: unload another "
              "model first");
  auto bert = exec::make_model("bert_tiny", 0);
  const torch::Tensor tokens = bert->example_input(1, 5);
  torch::NoGradGuard no_grad;
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  // Note [Repository load]: not unloaded while a request of it runs (four images: a second or
  // more on the host), and the request is answered; then it is.
  auto inception = exec::make_model("inception_v3", 0);
  const torch::Tensor images = inception->example_input(4, 9);
  const std::int64_t transfers = controller->stats().transfers;
  auto running = std::async(std::launch::async, [&] { return controller->infer(request_for("inception_v3", images)); });
  ASSERT_TRUE(eventually([&] { return controller->stats().transfers > transfers; }, 120s));
  expect_code([&] { controller->unload_model("inception_v3"); }, ServiceError::Code::FailedPrecondition,
              "model 'inception_v3' is in use: a request of it waits or runs");
  EXPECT_LT(relative_error(output_of(running.get()), inception->forward(images)), 1e-5);
  controller->unload_model("inception_v3");
  // The daemon frees a model's region once no worker holds it (the workers drop it when they next
  // read their sockets): until then the limit still counts it.
  ASSERT_TRUE(eventually(
      [&] {
        try {
          controller->load_model("resnet152", "{name: resnet152, batch: 1}");
          return true;
        } catch (const ServiceError& e) {
          EXPECT_EQ(e.code(), ServiceError::Code::ResourceExhausted) << e.what();
          return false;
        }
      },
      120s));
  EXPECT_LT(relative_error(output_of(controller->infer(request_for("bert_tiny", tokens))), bert->forward(tokens)), 1e-5);
  EXPECT_EQ(controller->stats().failed_requests, 0);
  try {
    start(write_host_config("device-limit-start", "workers: 1\ndevice_memory_bytes: 10000000\nmodels:\n  - name: bert_tiny\n    batch: 1\n"));
    ADD_FAILURE() << "a config beyond its device_memory_bytes started";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("need 17543680 bytes of device memory, more than the config's "
                                         "device_memory_bytes 10000000"),
              std::string::npos)
        << e.what();
  }
}

// Note [Device memory limit]: a decoder's KV caches count too, every worker's (Note [Decode
// graph]): llama-tiny's fp32 parameters (0.71 MB) fit 850,000 bytes, with two workers' caches
// (0.46 MB) they do not, and the refusal says so; with room for both it starts and generates.
TEST(Controller, ADecodersKvCachesCountAgainstTheDeviceMemoryLimit) {
  const std::string zoo = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto decoder = exec::make_model(zoo, 0);
  const torch::Tensor prompt = exec::as_decoder(*decoder)->example_tokens(1, 16, 3);
  const std::filesystem::path profiles = decoder_profiles("decoder-limit", *decoder, prompt);
  const auto config_of = [&](const std::string& limit) {
    return write_config("decoder-limit-" + limit, "workers: 2\nrequest_timeout_ms: 120000\ndevice_memory_bytes: " + limit +
                                                      "\nmodels:\n  - name: llama-tiny\n    decoder: " + zoo +
                                                      "\n    prompt_tokens: 16\n    batch: 1\n",
                        profiles);
  };
  // Two workers, each with caches of 64, 128 and 256 positions: 2 layers x keys and values x 2
  // kv_heads x 16 (head_dim) x 4 bytes a position.
  const Bytes caches = 2 * (64 + 128 + 256) * 2 * 2 * 2 * 16 * 4;
  EXPECT_EQ(2 * exec::kept_decode_cache_bytes(exec::as_decoder(*decoder)->config(), 4), caches);
  try {
    start(config_of("850000"));
    ADD_FAILURE() << "a config whose decoder's caches do not fit its device_memory_bytes started";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the models' parameter regions, the decoders' KV caches (458752 bytes: each of "
                                         "the 2 workers keeps its own) and the training state need "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("more than the config's device_memory_bytes 850000"), std::string::npos) << e.what();
  }
  auto controller = start(config_of("1300000"));
  GenerateRequest request;
  request.model = "llama-tiny";
  request.input_ids.assign(prompt.data_ptr<std::int64_t>(), prompt.data_ptr<std::int64_t>() + prompt.size(1));
  request.max_tokens = 4;
  EXPECT_EQ(controller->generate(request, nullptr).output_ids.size(), 4u);
  std::filesystem::remove_all(profiles);
}

}  // namespace
}  // namespace psw::runtime
