// psw validate's wait for a server's training job that is between tasks (Note [Validating the
// same case] in validation_run.hpp): preempted, or resuming in a fresh process after a
// stop-and-start request, it is waited for; stopped by a client, done or never started, it is not.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/runtime/client/load_generator.hpp"
#include "psw/xval/validation_run.hpp"
#include "psw/xval/validation.hpp"

namespace psw::runtime {
namespace {

using std::chrono::milliseconds;

// A job of `model` that is between tasks for the first `between` polls, then `after`.
struct ScriptedJob {
  int between = 0;
  TrainingStatus after;
  int polls = 0;

  TrainingStatus operator()() {
    ++polls;
    if (polls <= between) {
      TrainingStatus waiting;
      waiting.model = after.model;
      waiting.active = true;  // started, not running now
      return waiting;
    }
    return after;
  }
};

TrainingStatus running_job() {
  TrainingStatus s;
  s.model = "resnet152";
  s.running = true;
  s.active = true;
  return s;
}

TEST(ValidationWait, WaitsForAJobThatResumes) {
  ScriptedJob job{3, running_job()};
  std::vector<std::string> said;
  const TrainingStatus status = xval::wait_while_between_tasks(std::ref(job), milliseconds(10'000),
                                                         [&](const std::string& line) { said.push_back(line); });
  EXPECT_TRUE(status.running);
  EXPECT_EQ(job.polls, 4);
  ASSERT_EQ(said.size(), 1U);  // said once, not once per poll
  EXPECT_NE(said[0].find("resnet152"), std::string::npos) << said[0];
}

TEST(ValidationWait, DoesNotWaitForAStoppedJobANeverStartedOneOrNone) {
  TrainingStatus stopped;
  stopped.model = "resnet152";
  stopped.stopped = true;
  ScriptedJob job{0, stopped};
  EXPECT_TRUE(xval::wait_while_between_tasks(std::ref(job), milliseconds(10'000), nullptr).stopped);
  EXPECT_EQ(job.polls, 1);
  ScriptedJob none{0, TrainingStatus{}};  // the server has no training job
  EXPECT_TRUE(xval::wait_while_between_tasks(std::ref(none), milliseconds(10'000), nullptr).model.empty());
  EXPECT_EQ(none.polls, 1);
  TrainingStatus idle;  // configured, never started
  idle.model = "resnet152";
  ScriptedJob never{0, idle};
  const TrainingStatus status = xval::wait_while_between_tasks(std::ref(never), milliseconds(10'000), nullptr);
  EXPECT_FALSE(status.running);
  EXPECT_FALSE(status.active);
  EXPECT_EQ(never.polls, 1);
}

TEST(ValidationWait, GivesUpAfterItsPatience) {
  ScriptedJob job{1'000'000, running_job()};  // never resumes within the test
  const auto start = std::chrono::steady_clock::now();
  const TrainingStatus status = xval::wait_while_between_tasks(std::ref(job), milliseconds(50), nullptr);
  EXPECT_FALSE(status.running);
  EXPECT_FALSE(status.stopped);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
  EXPECT_GT(job.polls, 1);
}

// Note [Protocol under load]: the growth per request in flight is fitted from a load's requests
// (least squares over a model's requests), and the median and quantiles are of the protocol
// less it; a model seldom sent with company gets none.
TEST(ProtocolUnderLoad, TheGrowthPerRequestInFlightIsFittedFromALoad) {
  std::string csv = "id,model,task,arrival_ns,scheduled_ns,send_start_ns,send_late_ns,finish_ns,latency_ns,server_ns,"
                    "engine_ns,status,error\n";
  int id = 0;
  auto add = [&](const char* model, std::int64_t send, std::int64_t protocol, std::int64_t server) {
    const std::int64_t latency = server + protocol;
    csv += std::to_string(id++) + "," + model + ",inference," + std::to_string(send) + "," + std::to_string(send) + "," +
           std::to_string(send) + ",0," + std::to_string(send + latency) + "," + std::to_string(latency) + "," +
           std::to_string(server) + "," + std::to_string(server - 1'000'000) + ",ok,\n";
  };
  // ResNet-152 in 34 bursts of three (102 requests) sent 1 ms apart, each answered 20 ms after
  // its send: the first alone (1 ms of protocol), the second with one in flight (4 ms), the third
  // with two (7 ms): 3 ms per request in flight. BERT-base alone, 1 s apart, but for 5
  // overlapping pairs.
  std::int64_t t = 0;
  for (int b = 0; b < 34; ++b, t += 1'000'000'000) {
    for (int k = 0; k < 3; ++k) add("resnet152", t + k * 1'000'000, 1'000'000 + 3'000'000 * k, 20'000'000 - 1'000'000 - 3'000'000 * k);
  }
  for (int b = 0; b < 30; ++b, t += 1'000'000'000) {
    add("bert_base", t, 500'000, 2'000'000);
    if (b < 5) add("bert_base", t + 100'000, 900'000, 2'000'000);
  }
  const ServingProfile profile = serving_profile_from_load(csv, "load.csv", "fit", "cpu", InputTransport::Raw);
  const RequestPathCost* resnet = profile.path_of("resnet152");
  ASSERT_NE(resnet, nullptr);
  EXPECT_EQ(resnet->protocol_per_in_flight, nanoseconds(3'000'000));
  EXPECT_EQ(resnet->protocol, nanoseconds(1'000'000));  // every request less its growth: 1 ms
  EXPECT_EQ(resnet->protocol_quantiles.back(), nanoseconds(1'000'000));
  EXPECT_EQ(resnet->requests, 102);
  // Note [Protocol spread]: 101 quantiles from at least 101 requests, else 21.
  EXPECT_EQ(resnet->protocol_quantiles.size(), static_cast<std::size_t>(kFineProtocolQuantiles));
  // Five requests with company are too few to fit a growth (kMinLoadedRequests): none.
  const RequestPathCost* bert = profile.path_of("bert_base");
  ASSERT_NE(bert, nullptr);
  static_assert(kMinLoadedRequests > 5);
  EXPECT_EQ(bert->protocol_per_in_flight, Duration::zero());
  EXPECT_EQ(bert->protocol, nanoseconds(500'000));
  EXPECT_EQ(bert->protocol_quantiles.size(), static_cast<std::size_t>(kProtocolQuantiles));
  // The growth given by another profile (fitted where more requests overlapped): kept, and the
  // levels are of the protocol less it (BERT-base's five loaded requests: 0.9 - 0.4 ms).
  ServingProfile given;
  given.name = "given";
  for (const auto& [model, growth] : {std::pair{"resnet152", 1'000'000}, std::pair{"bert_base", 400'000}}) {
    RequestPathCost path;
    path.model = model;
    path.protocol_per_in_flight = nanoseconds(growth);
    given.request_path.push_back(path);
  }
  const ServingProfile with_given = serving_profile_from_load(csv, "load.csv", "fit", "cpu", InputTransport::Raw, &given);
  EXPECT_EQ(with_given.path_of("resnet152")->protocol_per_in_flight, nanoseconds(1'000'000));
  EXPECT_EQ(with_given.path_of("resnet152")->protocol, nanoseconds(3'000'000));  // 1, 3, 5 ms less 0, 1, 2: median 3
  EXPECT_EQ(with_given.path_of("bert_base")->protocol_quantiles.back(), nanoseconds(500'000));
  given.request_path.pop_back();  // a profile without a model of the load: refused, named
  try {
    serving_profile_from_load(csv, "load.csv", "fit", "cpu", InputTransport::Raw, &given);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model 'bert_base' has no request path in the profile 'given'"), std::string::npos)
        << e.what();
  }
  // A request answered before it was sent is refused, named.
  try {
    serving_profile_from_load(csv + "999,resnet152,inference,10,10,50,0,40,5000000,3000000,2000000,ok,\n", "load.csv",
                              "fit", "cpu", InputTransport::Raw);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("finish_ns 40 before send_start_ns 50"), std::string::npos) << e.what();
  }
}


// Note [Worker starts measured]: the two metrics read from the server's text, the starts between
// two readings turned into summary.json's means, and a text with half of them refused.
TEST(WorkerStartsMeasured, TheStartsOfTheWorkloadAreTheDifferenceOfTwoReadings) {
  auto text = [](int starts, double process_s, double models_s) {
    return "# HELP psw_worker_starts_total x\npsw_worker_starts_total " + std::to_string(starts) +
           "\npsw_worker_start_seconds_total{phase=\"process\"} " + std::to_string(process_s) +
           "\npsw_worker_start_seconds_total{phase=\"context\"} 0.5\n"
           "psw_worker_start_seconds_total{phase=\"memory\"} 0\n"
           "psw_worker_start_seconds_total{phase=\"models\"} " + std::to_string(models_s) +
           "\npsw_worker_start_seconds_total{phase=\"training\"} 1\n"
           "psw_worker_start_seconds_total{phase=\"other\"} 0.25\npsw_requests_total 7\n";
  };
  const std::optional<WorkerStartTotals> before = parse_worker_start_totals(text(2, 0.6, 4.0));
  const std::optional<WorkerStartTotals> after = parse_worker_start_totals(text(6, 1.8, 12.0));
  ASSERT_TRUE(before && after);
  EXPECT_EQ(before->starts, 2);
  EXPECT_DOUBLE_EQ(after->seconds[static_cast<std::size_t>(WorkerStartPhase::Models)], 12.0);
  const std::optional<WorkerStartMeans> starts = worker_starts_between(*before, *after);
  ASSERT_TRUE(starts);
  EXPECT_EQ(starts->count, 4);
  EXPECT_DOUBLE_EQ(starts->mean_ms.at("process"), 300.0);  // 1.2 s over 4 starts
  EXPECT_DOUBLE_EQ(starts->mean_ms.at("models"), 2000.0);
  EXPECT_DOUBLE_EQ(starts->mean_ms.at("context"), 0.0);  // unchanged
  EXPECT_DOUBLE_EQ(starts->total_mean_ms, 2300.0);
  EXPECT_FALSE(worker_starts_between(*after, *after).has_value());  // none started: no key
  EXPECT_THROW((void)worker_starts_between(*after, *before), InputError);  // fewer after: another server
  EXPECT_FALSE(parse_worker_start_totals("psw_requests_total 7\n").has_value());  // not a psw serve
  EXPECT_THROW((void)parse_worker_start_totals("psw_worker_starts_total 3\n"), InputError);  // no phases
  EXPECT_THROW((void)parse_worker_start_totals(text(2, 0.6, 4.0) + "psw_worker_start_seconds_total{phase=\"lunch\"} 1\n"),
               InputError);
  std::string negative = text(2, 0.6, 4.0);
  negative.replace(negative.find("} 0.5"), 5, "} -0.5");
  EXPECT_THROW((void)parse_worker_start_totals(negative), InputError);
  EXPECT_EQ(starts->kills, 0) << "a server that counts no kills";
  LoadSummary summary;
  summary.worker_starts = starts;
  EXPECT_FALSE(to_json(summary).at("worker_starts").contains("kills")) << "no kills: no kill keys";
  // Note [Worker kill]: the kills of the span beside the starts, both metrics or neither.
  auto killed = [&](int kills, double seconds) {
    return text(2, 0.6, 4.0) + "psw_worker_kills_total " + std::to_string(kills) +
           "\npsw_worker_kill_seconds_total " + std::to_string(seconds) + "\n";
  };
  const std::optional<WorkerStartTotals> kills_before = parse_worker_start_totals(killed(1, 0.2));
  std::optional<WorkerStartTotals> kills_after = parse_worker_start_totals(killed(5, 1.0));
  ASSERT_TRUE(kills_before && kills_after);
  EXPECT_EQ(kills_after->kills, 5);
  kills_after->starts = 6;
  const std::optional<WorkerStartMeans> with_kills = worker_starts_between(*kills_before, *kills_after);
  ASSERT_TRUE(with_kills);
  EXPECT_EQ(with_kills->kills, 4);
  EXPECT_NEAR(*with_kills->kill_mean_ms, 200.0, 1e-9);  // 0.8 s over 4 kills
  EXPECT_THROW((void)worker_starts_between(*kills_after, *kills_before), InputError) << "fewer starts and kills after";
  EXPECT_THROW((void)parse_worker_start_totals(text(2, 0.6, 4.0) + "psw_worker_kills_total 3\n"), InputError);
  EXPECT_THROW((void)parse_worker_start_totals("psw_worker_kills_total 3\npsw_worker_kill_seconds_total 1\n"),
               InputError)
      << "kills without starts";
}

// summary.json's worker_starts and eager_switches, written and read back typed; a recorded
// summary whose entries are not numbers is refused, naming the key.
TEST(WorkerStartsMeasured, TheSummaryReadsBackWhatItWrote) {
  LoadSummary summary;
  summary.name = "x";
  summary.target = "unix:/tmp/s";
  summary.worker_starts = WorkerStartMeans{3, {{"process", 250.0}, {"context", 400.0}}, 650.0, 2, 120.0};
  summary.eager_switches["resnet152"] = {4, 5.0, 2.0};
  const nlohmann::json written = nlohmann::json::parse(to_json(summary).dump());
  EXPECT_EQ(written["worker_starts"]["kill_mean_ms"], 120.0);
  EXPECT_EQ(written["eager_switches"]["resnet152"]["count"], 4);
  EXPECT_EQ(load_summary_from_json(written, "summary.json"), summary);
  nlohmann::json bad = written;
  bad["worker_starts"]["mean_ms"]["process"] = "slow";
  try {
    (void)load_summary_from_json(bad, "summary.json");
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("summary.json.worker_starts.mean_ms"), std::string::npos) << e.what();
  }
  bad = written;
  bad["eager_switches"]["resnet152"].erase("forward_mean_ms");
  EXPECT_THROW((void)load_summary_from_json(bad, "summary.json"), InputError);
}

// Note [Processes a server starts with]: the gauge read from the server's text, and the
// simulator's start from a recorded summary: its count, else none after a warm-up (the recordings
// from before the gauge), else as a server starts.
TEST(FreshStandbyWorkers, TheSimulatorStartsWhereTheMeasuredServerStood) {
  EXPECT_EQ(parse_fresh_standby_workers("psw_resident_models 3\npsw_fresh_standby_workers 1\n"), 1);
  EXPECT_FALSE(parse_fresh_standby_workers("psw_requests_total 7\n").has_value()) << "a server before the gauge";
  EXPECT_THROW((void)parse_fresh_standby_workers("psw_fresh_standby_workers -1\n"), InputError);
  EXPECT_EQ(xval::simulation_options_of_run({{"fresh_standby_workers", 1}, {"warmup_per_model", 2}}, "s.json")
                .fresh_standby_processes,
            1);
  EXPECT_EQ(xval::simulation_options_of_run({{"warmup_per_model", 2}}, "s.json").fresh_standby_processes, 0);
  EXPECT_FALSE(xval::simulation_options_of_run({{"warmup_per_model", 0}}, "s.json").fresh_standby_processes);
  EXPECT_FALSE(xval::simulation_options_of_run(nlohmann::json::object(), "s.json").fresh_standby_processes);
  try {
    (void)xval::simulation_options_of_run({{"fresh_standby_workers", "two"}}, "s.json");
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: 'fresh_standby_workers' must be an integer"), std::string::npos) << e.what();
  }
}

TEST(EagerSwitchesMeasured, PerModelTheMeanHostTimeOfTheWorkloadsEagerSwitches) {
  auto text = [](int resnet, double prepare_s, double forward_s) {
    return "psw_eager_switches_total{model=\"resnet152\"} " + std::to_string(resnet) +
           "\npsw_eager_switches_total{model=\"bert_base\"} 3\n"
           "psw_eager_switch_host_seconds_total{model=\"resnet152\",part=\"prepare\"} " + std::to_string(prepare_s) +
           "\npsw_eager_switch_host_seconds_total{model=\"resnet152\",part=\"forward\"} " + std::to_string(forward_s) +
           "\npsw_eager_switch_host_seconds_total{model=\"bert_base\",part=\"prepare\"} 0.003\n"
           "psw_eager_switch_host_seconds_total{model=\"bert_base\",part=\"forward\"} 0.006\npsw_requests_total 7\n";
  };
  const auto before = parse_eager_switch_totals(text(2, 0.01, 0.004));
  const auto after = parse_eager_switch_totals(text(6, 0.03, 0.012));
  ASSERT_EQ(after.size(), 2U);
  EXPECT_EQ(after.at("resnet152").switches, 6);
  EXPECT_DOUBLE_EQ(after.at("bert_base").forward_seconds, 0.006);
  const std::map<std::string, EagerSwitchMeans> eager = eager_switches_between(before, after);
  EXPECT_EQ(eager.at("resnet152").count, 4);
  EXPECT_NEAR(eager.at("resnet152").prepare_mean_ms, 5.0, 1e-9);  // 20 ms over 4 switches
  EXPECT_NEAR(eager.at("resnet152").forward_mean_ms, 2.0, 1e-9);
  EXPECT_FALSE(eager.contains("bert_base"));  // no eager switch of it in between
  // A model first counted during the workload: all of its switches are the workload's.
  const std::map<std::string, EagerSwitchMeans> from_nothing = eager_switches_between({}, after);
  EXPECT_EQ(from_nothing.at("bert_base").count, 3);
  EXPECT_NEAR(from_nothing.at("bert_base").forward_mean_ms, 2.0, 1e-9);
  EXPECT_TRUE(eager_switches_between(after, after).empty());  // none switched eagerly: no key
  EXPECT_THROW((void)eager_switches_between(after, before), InputError);  // fewer after: another server
  EXPECT_THROW((void)eager_switches_between(after, {}), InputError);      // a model gone: another server
  EXPECT_TRUE(parse_eager_switch_totals("psw_requests_total 7\n").empty());  // graphs only, or not a psw serve
  EXPECT_THROW((void)parse_eager_switch_totals("psw_eager_switches_total{model=\"resnet152\"} 3\n"), InputError);
  EXPECT_THROW((void)parse_eager_switch_totals(text(2, 0.01, 0.004) +
                                               "psw_eager_switch_host_seconds_total{model=\"resnet152\",part=\"lunch\"} 1\n"),
               InputError);
  std::string negative = text(2, 0.01, 0.004);
  negative.replace(negative.find("} 0.003"), 7, "} -0.003");
  EXPECT_THROW((void)parse_eager_switch_totals(negative), InputError);
}

}  // namespace
}  // namespace psw::runtime
