// psw validate's comparison (xval/validation.hpp): the join of two summaries, the tolerances and
// the one-sided rows.
#include <gtest/gtest.h>

#include <optional>

#include "psw/common/error.hpp"
#include "psw/xval/validation.hpp"

namespace psw::xval {
namespace {

nlohmann::json latency(std::int64_t count, double mean, double p50, double p99) {
  return {{"count", count}, {"mean_ms", mean}, {"min_ms", p50},   {"p50_ms", p50},
          {"p90_ms", p99},   {"p99_ms", p99},   {"p999_ms", p99}, {"max_ms", p99}};
}

const ValidationRow& row(const ValidationReport& report, const std::string& scope, const std::string& measure) {
  for (const auto& r : report.rows) {
    if (r.scope == scope && r.measure == measure) return r;
  }
  throw std::runtime_error("no row " + scope + " " + measure);
}

TEST(Validation, JoinsTheTwoSummariesPerScopeAndMeasure) {
  const nlohmann::json simulated = {
      {"latency", latency(4, 10.0, 9.0, 20.0)},
      {"throughput_rps", 2.0},
      {"training_iterations_per_s", 50.0},
      {"models", {{"bert_base", {{"latency", latency(2, 10.0, 9.0, 20.0)}}}, {"resnet152", {{"latency", latency(2, 5.0, 5.0, 5.0)}}}}}};
  const nlohmann::json measured = {
      {"latency", latency(4, 10.4, 9.0, 25.0)},
      {"throughput_rps", 2.0},
      {"models", {{"bert_base", {{"latency", latency(2, 12.5, 9.0, 20.0)}}}, {"resnet152", {{"latency", latency(0, 0, 0, 0)}}}}}};
  const ValidationReport report = compare_summaries("x", Mechanism::PipeSwitch, {"bert_base", "resnet152"}, simulated,
                                                    measured, MeasuredTraining{100, 2.5});
  // all + two models, three latency measures each, then throughput and training.
  ASSERT_EQ(report.rows.size(), 3u * 3u + 2u);
  EXPECT_EQ(report.rows[0].scope, "all");
  EXPECT_EQ(report.rows[3].scope, "bert_base");
  EXPECT_EQ(report.rows[6].scope, "resnet152");

  const ValidationRow& mean = row(report, "all", "mean_ms");
  ASSERT_TRUE(mean.relative_error());
  EXPECT_NEAR(*mean.relative_error(), (10.0 - 10.4) / 10.4, 1e-12);
  EXPECT_EQ(mean.status(), ValidationStatus::Within);  // 3.8% <= 5%
  EXPECT_EQ(row(report, "all", "p99_ms").status(), ValidationStatus::Outside);       // -20%
  EXPECT_EQ(row(report, "bert_base", "mean_ms").status(), ValidationStatus::Outside);  // -20%
  // A model the server answered nothing of: one-sided, no error.
  const ValidationRow& unanswered = row(report, "resnet152", "p50_ms");
  EXPECT_TRUE(unanswered.simulated);
  EXPECT_FALSE(unanswered.measured);
  EXPECT_EQ(unanswered.status(), ValidationStatus::OneSided);
  // Training: 100 steps over 2.5 s = 40 steps/s against 50 simulated: +25%.
  const ValidationRow& training = row(report, "all", "training_steps_per_s");
  EXPECT_DOUBLE_EQ(*training.measured, 40.0);
  EXPECT_DOUBLE_EQ(training.tolerance, kTrainingTolerance);
  EXPECT_EQ(training.status(), ValidationStatus::Outside);
  EXPECT_EQ(report.within(), 5);   // all mean, p50; bert p50, p99; throughput
  EXPECT_EQ(report.outside(), 3);  // all p99, bert mean, training
}

// Note [Request path]: per model, the engine's part on its own rows where a side reports it;
// a model only one side has it of is one-sided there.
TEST(Validation, EngineRowsComparePerModelWhereASideHasThem) {
  nlohmann::json simulated = {
      {"latency", latency(4, 10.0, 9.0, 20.0)},
      {"throughput_rps", 2.0},
      {"models", {{"bert_base", {{"latency", latency(2, 10.0, 9.0, 20.0)}, {"engine_latency", latency(2, 8.0, 8.0, 8.0)}}},
                  {"resnet152", {{"latency", latency(2, 5.0, 5.0, 5.0)}, {"engine_latency", latency(2, 4.0, 4.0, 4.0)}}}}}};
  const nlohmann::json measured = {
      {"latency", latency(4, 10.4, 9.0, 25.0)},
      {"throughput_rps", 2.0},
      {"models", {{"bert_base", {{"latency", latency(2, 12.5, 9.0, 20.0)}, {"engine_latency", latency(2, 8.2, 7.0, 9.0)}}},
                  {"resnet152", {{"latency", latency(2, 5.0, 5.0, 5.0)}}}}}};
  const ValidationReport report = compare_summaries("x", Mechanism::PipeSwitch, {"bert_base", "resnet152"}, simulated,
                                                    measured, std::nullopt);
  // all: three; each model: three latency measures and two engine measures; throughput.
  ASSERT_EQ(report.rows.size(), 3u + 2u * 5u + 1u);
  EXPECT_EQ(report.rows[6].measure, "engine_mean_ms");
  const ValidationRow& engine = row(report, "bert_base", "engine_mean_ms");
  EXPECT_NEAR(*engine.relative_error(), (8.0 - 8.2) / 8.2, 1e-12);
  EXPECT_EQ(engine.status(), ValidationStatus::Within);
  EXPECT_EQ(row(report, "bert_base", "engine_p50_ms").status(), ValidationStatus::Outside);  // +14%
  EXPECT_EQ(row(report, "resnet152", "engine_mean_ms").status(), ValidationStatus::OneSided);
  // Neither side with engine times: no engine rows at all.
  simulated["models"]["resnet152"].erase("engine_latency");
  const ValidationReport without = compare_summaries("x", Mechanism::PipeSwitch, {"bert_base", "resnet152"}, simulated,
                                                     measured, std::nullopt);
  EXPECT_EQ(without.rows.size(), report.rows.size() - 2);
}

// Note [Latency parts]: the server's and the protocol's parts are rows only where both sides
// split the latency, so that a latency outside the tolerance says which part moved.
TEST(Validation, ServerAndProtocolRowsSayWhichPartMoved) {
  auto model = [](double latency_ms, double server_ms, double protocol_ms) {
    return nlohmann::json{{"latency", latency(2, latency_ms, latency_ms, latency_ms)},
                          {"server_latency", latency(2, server_ms, server_ms, server_ms)},
                          {"protocol_latency", latency(2, protocol_ms, protocol_ms, protocol_ms)}};
  };
  nlohmann::json simulated = {{"latency", latency(4, 10.0, 10.0, 10.0)},
                              {"throughput_rps", 2.0},
                              {"models", {{"bert_base", model(10.0, 6.0, 4.0)}, {"resnet152", model(10.0, 6.0, 4.0)}}}};
  // The server as simulated, the protocol 25% longer: only the protocol rows are outside.
  const nlohmann::json measured = {{"latency", latency(4, 11.0, 11.0, 11.0)},
                                   {"throughput_rps", 2.0},
                                   {"models", {{"bert_base", model(11.0, 6.0, 5.0)}, {"resnet152", model(11.0, 6.0, 5.0)}}}};
  const ValidationReport report = compare_summaries("x", Mechanism::PipeSwitch, {"bert_base", "resnet152"}, simulated,
                                                    measured, std::nullopt);
  // all: three; each model: three latency measures, three server, three protocol; throughput.
  ASSERT_EQ(report.rows.size(), 3u + 2u * 9u + 1u);
  EXPECT_EQ(report.rows[6].measure, "server_mean_ms");
  EXPECT_EQ(report.rows[9].measure, "protocol_mean_ms");
  for (const char* measure : {"server_mean_ms", "server_p50_ms", "server_p99_ms"}) {
    EXPECT_EQ(row(report, "bert_base", measure).status(), ValidationStatus::Within) << measure;
  }
  for (const char* measure : {"protocol_mean_ms", "protocol_p50_ms", "protocol_p99_ms"}) {
    EXPECT_EQ(row(report, "bert_base", measure).status(), ValidationStatus::Outside) << measure;
    EXPECT_NEAR(*row(report, "bert_base", measure).relative_error(), -0.2, 1e-12) << measure;
  }
  // One side without the split (a simulation without a serving profile): no part rows there.
  simulated["models"]["resnet152"].erase("server_latency");
  simulated["models"]["resnet152"].erase("protocol_latency");
  const ValidationReport without = compare_summaries("x", Mechanism::PipeSwitch, {"bert_base", "resnet152"}, simulated,
                                                     measured, std::nullopt);
  EXPECT_EQ(without.rows.size(), report.rows.size() - 6);
}

// Note [Generate requests]: decoding requests' first token is a row where both sides have it.
TEST(Validation, FirstTokenRowsWhereBothSidesDecoded) {
  auto model = [](double latency_ms, std::optional<double> first_token_ms) {
    nlohmann::json m = {{"latency", latency(3, latency_ms, latency_ms, latency_ms)}};
    if (first_token_ms) m["first_token_latency"] = latency(3, *first_token_ms, *first_token_ms, *first_token_ms);
    return m;
  };
  const nlohmann::json simulated = {{"latency", latency(3, 50.0, 50.0, 50.0)},
                                    {"throughput_rps", 1.0},
                                    {"models", {{"llama-tiny", model(50.0, 20.0)}}}};
  nlohmann::json measured = {{"latency", latency(3, 51.0, 51.0, 51.0)},
                             {"throughput_rps", 1.0},
                             {"models", {{"llama-tiny", model(51.0, 25.0)}}}};
  const ValidationReport report =
      compare_summaries("x", Mechanism::PipeSwitch, {"llama-tiny"}, simulated, measured, std::nullopt);
  ASSERT_EQ(report.rows.size(), 3u + 3u + 3u + 1u);
  EXPECT_EQ(row(report, "llama-tiny", "mean_ms").status(), ValidationStatus::Within);
  const ValidationRow& first = row(report, "llama-tiny", "first_token_p50_ms");
  EXPECT_NEAR(*first.relative_error(), (20.0 - 25.0) / 25.0, 1e-12);
  EXPECT_EQ(first.status(), ValidationStatus::Outside);
  measured["models"]["llama-tiny"].erase("first_token_latency");
  EXPECT_EQ(compare_summaries("x", Mechanism::PipeSwitch, {"llama-tiny"}, simulated, measured, std::nullopt).rows.size(),
            report.rows.size() - 3);
}

TEST(Validation, ToleranceFollowsTheMechanism) {
  EXPECT_DOUBLE_EQ(latency_tolerance(Mechanism::PipeSwitch), 0.05);
  EXPECT_DOUBLE_EQ(latency_tolerance(Mechanism::StopAndStart), 0.05);
  EXPECT_DOUBLE_EQ(latency_tolerance(Mechanism::Mps), 0.15);
  EXPECT_DOUBLE_EQ(latency_tolerance(Mechanism::UnifiedMemory), 0.15);
  const nlohmann::json simulated = {{"latency", latency(1, 11.0, 11.0, 11.0)}, {"throughput_rps", 1.0}};
  const nlohmann::json measured = {{"latency", latency(1, 10.0, 10.0, 10.0)}, {"throughput_rps", 1.0}};
  EXPECT_EQ(row(compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured, std::nullopt), "all", "mean_ms")
                .status(),
            ValidationStatus::Outside);  // +10% > 5%
  EXPECT_EQ(row(compare_summaries("x", Mechanism::Mps, {}, simulated, measured, std::nullopt), "all", "mean_ms").status(),
            ValidationStatus::Within);  // +10% <= 15%
}

TEST(Validation, NoTrainingOnEitherSideIsNoRow) {
  const nlohmann::json simulated = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0},
                                    {"training_iterations_per_s", 0.0}};
  const nlohmann::json measured = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0}};
  const ValidationReport report = compare_summaries("x", Mechanism::Ready, {}, simulated, measured, MeasuredTraining{0, 3});
  for (const auto& r : report.rows) EXPECT_NE(r.measure, "training_steps_per_s");
  // Training on the server only: a one-sided row, so that the report shows it.
  const ValidationReport one = compare_summaries("x", Mechanism::Ready, {}, simulated, measured, MeasuredTraining{30, 3});
  EXPECT_EQ(row(one, "all", "training_steps_per_s").status(), ValidationStatus::OneSided);
}

// Note [Training share]: the rate beside the requests over the rate alone, each side its own.
TEST(Validation, TrainingShareComparesEachSidesRateWithItsRateAlone) {
  const nlohmann::json simulated = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0},
                                    {"training_iterations_per_s", 18.0}};
  const nlohmann::json measured = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0}};
  // The server: 540 steps in 30 s beside requests, 100 in 5 s alone: 18 / 20 = 0.9 of its rate.
  // The simulator: 18 steps/s with a 50 ms step (20/s alone): 0.9 as well, although its
  // absolute rate is the same 18 only by this choice of numbers.
  const MeasuredTraining training{540, 30.0, 100, 5.0};
  const ValidationReport report =
      compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured, training, milliseconds(50));
  const ValidationRow& share = row(report, "all", "training_share");
  EXPECT_DOUBLE_EQ(*share.simulated, 0.9);
  EXPECT_DOUBLE_EQ(*share.measured, 0.9);
  EXPECT_EQ(share.status(), ValidationStatus::Within);
  // A machine whose step is 10% slower: the absolute rate is 10% off, the share is not.
  const MeasuredTraining slower{486, 30.0, 90, 5.0};
  const ValidationReport on_slower =
      compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured, slower, milliseconds(50));
  EXPECT_EQ(row(on_slower, "all", "training_steps_per_s").status(), ValidationStatus::Outside);
  EXPECT_NEAR(*row(on_slower, "all", "training_share").relative_error(), 0.0, 1e-12);
  // The simulator's model of the slowdown off by 10 points: outside.
  const ValidationReport off = compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured,
                                                 MeasuredTraining{480, 30.0, 100, 5.0}, milliseconds(50));
  EXPECT_NEAR(*row(off, "all", "training_share").relative_error(), 0.9 / 0.8 - 1.0, 1e-12);
  EXPECT_EQ(row(off, "all", "training_share").status(), ValidationStatus::Outside);
  // No alone window (a run recorded before it was measured): no row.
  const ValidationReport without =
      compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured, MeasuredTraining{540, 30.0}, milliseconds(50));
  for (const auto& r : without.rows) EXPECT_NE(r.measure, "training_share");
  // The simulator without a training job: one-sided, as training_steps_per_s.
  const nlohmann::json untrained = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0}};
  EXPECT_EQ(row(compare_summaries("x", Mechanism::PipeSwitch, {}, untrained, measured, training, std::nullopt), "all",
                "training_share")
                .status(),
            ValidationStatus::OneSided);
}

// Note [Training held]: the share split into the time held and the rate while not held.
TEST(Validation, TrainingHeldSplitsTheShareIntoHoldAndRunningRate) {
  // The simulator: 18 steps/s over a 30 s makespan, held 3 s of it (0.1), a 50 ms step: share
  // 0.9, all of it the hold (running share 1).
  const nlohmann::json simulated = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0},
                                    {"training_iterations_per_s", 18.0}, {"makespan_s", 30.0},
                                    {"training_held_ms", 3000.0}};
  const nlohmann::json measured = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0}};
  // The server: held as long (3 of 30 s), but 432 steps where alone it would do 540 (20/s):
  // a share of 0.72, of which the running share 0.8 is the cost the hold does not explain.
  MeasuredTraining training{432, 30.0, 100, 5.0};
  training.held_seconds = 3.0;
  const ValidationReport report =
      compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured, training, milliseconds(50));
  const ValidationRow& held = row(report, "all", "training_held_fraction");
  EXPECT_DOUBLE_EQ(*held.simulated, 0.1);
  EXPECT_DOUBLE_EQ(*held.measured, 0.1);
  EXPECT_EQ(held.status(), ValidationStatus::Within);
  const ValidationRow& running = row(report, "all", "training_running_share");
  EXPECT_NEAR(*running.simulated, 1.0, 1e-12);
  EXPECT_NEAR(*running.measured, 0.8, 1e-12);
  EXPECT_EQ(running.status(), ValidationStatus::Outside);
  // Held twice as long, running at its rate alone: the other row is off.
  training = MeasuredTraining{480, 30.0, 100, 5.0};
  training.held_seconds = 6.0;
  const ValidationReport longer =
      compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured, training, milliseconds(50));
  EXPECT_EQ(row(longer, "all", "training_held_fraction").status(), ValidationStatus::Outside);
  EXPECT_NEAR(*row(longer, "all", "training_running_share").measured, 1.0, 1e-12);
  // The server did not count its hold (a recording from before it did): no rows, whatever
  // the simulator says.
  const ValidationReport without = compare_summaries("x", Mechanism::PipeSwitch, {}, simulated, measured,
                                                     MeasuredTraining{432, 30.0, 100, 5.0}, milliseconds(50));
  for (const auto& r : without.rows) {
    EXPECT_NE(r.measure, "training_held_fraction");
    EXPECT_NE(r.measure, "training_running_share");
  }
  // The simulator without the count (an older summary): one-sided rows.
  const nlohmann::json old_simulated = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0},
                                        {"training_iterations_per_s", 18.0}};
  const ValidationReport measured_only =
      compare_summaries("x", Mechanism::PipeSwitch, {}, old_simulated, measured, training, milliseconds(50));
  EXPECT_EQ(row(measured_only, "all", "training_held_fraction").status(), ValidationStatus::OneSided);
}

TEST(Validation, SummariesWithoutTheSharedKeysAreRefused) {
  const nlohmann::json good = {{"latency", latency(1, 1.0, 1.0, 1.0)}, {"throughput_rps", 1.0}};
  try {
    compare_summaries("x", Mechanism::Ready, {}, nlohmann::json{{"throughput_rps", 1.0}}, good, std::nullopt);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("simulated summary has no latency"), std::string::npos) << e.what();
  }
  try {
    compare_summaries("x", Mechanism::Ready, {}, good, nlohmann::json{{"latency", latency(1, 1.0, 1.0, 1.0)}}, std::nullopt);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("measured summary has no number 'throughput_rps'"), std::string::npos) << e.what();
  }
}

TEST(Validation, CsvAndJsonCarryEveryRow) {
  const nlohmann::json simulated = {{"latency", latency(2, 2.0, 2.0, 2.0)}, {"throughput_rps", 1.0}};
  const nlohmann::json measured = {{"latency", latency(2, 4.0, 2.0, 2.0)}, {"throughput_rps", 1.0}};
  const ValidationReport report = compare_summaries("exp", Mechanism::PipeSwitch, {"m"}, simulated, measured, std::nullopt);
  const std::string csv = validation_csv(report);
  EXPECT_EQ(csv.rfind("scope,measure,simulated,measured,relative_error,tolerance,status\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("all,mean_ms,2,4,-0.5,0.05,outside\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("m,p50_ms,,,,0.05,one-sided\n"), std::string::npos) << csv;
  const nlohmann::json json = validation_json(report);
  EXPECT_EQ(json["rows"].size(), report.rows.size());
  EXPECT_EQ(json["mechanism"], "pipeswitch");
  EXPECT_EQ(json["outside"], 1);
  EXPECT_TRUE(json["rows"][3]["measured"].is_null());
}


// Note [Worker start rows]: a fresh-process mechanism's start beside the server's split of it,
// the framework row holding every phase after the context; none for other mechanisms or a
// measurement without the split.
TEST(Validation, WorkerStartRowsSayWhichPartOfAStartMoved) {
  const nlohmann::json simulated = {{"latency", latency(3, 3000.0, 3000.0, 3000.0)}, {"throughput_rps", 1.0}};
  nlohmann::json measured = {{"latency", latency(3, 4000.0, 4000.0, 4000.0)}, {"throughput_rps", 1.0}};
  measured["worker_starts"] = {
      {"count", 6},
      {"mean_ms",
       {{"process", 300.0}, {"context", 150.0}, {"memory", 1.0}, {"models", 1800.0}, {"training", 500.0}, {"other", 20.0}}},
      {"total_mean_ms", 2771.0}};
  HardwareProfile hardware;
  hardware.process_start = milliseconds(30);
  hardware.cuda_context_create = milliseconds(150);
  hardware.framework_start = milliseconds(3000);
  hardware.cuda_malloc = milliseconds(1);
  const std::optional<SimulatedWorkerStart> charged = simulated_worker_start(Mechanism::StopAndStart, hardware);
  ASSERT_TRUE(charged.has_value());
  EXPECT_EQ(charged->total(), milliseconds(3181));
  EXPECT_FALSE(simulated_worker_start(Mechanism::PipeSwitch, hardware).has_value());
  const ValidationReport report =
      compare_summaries("x", Mechanism::StopAndStart, {}, simulated, measured, std::nullopt, std::nullopt, charged);
  EXPECT_DOUBLE_EQ(*row(report, "all", "worker_start_ms").measured, 2771.0);
  EXPECT_DOUBLE_EQ(*row(report, "all", "worker_start_ms").simulated, 3181.0);
  EXPECT_EQ(row(report, "all", "worker_start_context_ms").status(), ValidationStatus::Within);
  EXPECT_NEAR(*row(report, "all", "worker_start_process_ms").relative_error(), -0.9, 1e-12);
  EXPECT_DOUBLE_EQ(*row(report, "all", "worker_start_framework_ms").measured, 2321.0);
  EXPECT_EQ(row(report, "all", "worker_start_framework_ms").status(), ValidationStatus::Outside);
  // Without the charge or without the split: no rows.
  EXPECT_EQ(compare_summaries("x", Mechanism::StopAndStart, {}, simulated, measured, std::nullopt).rows.size(),
            report.rows.size() - 4);
  measured.erase("worker_starts");
  EXPECT_EQ(compare_summaries("x", Mechanism::StopAndStart, {}, simulated, measured, std::nullopt, std::nullopt, charged)
                .rows.size(),
            report.rows.size() - 4);
  measured["worker_starts"] = {{"count", 1}, {"mean_ms", {{"process", 1.0}}}};
  EXPECT_THROW(
      (void)compare_summaries("x", Mechanism::StopAndStart, {}, simulated, measured, std::nullopt, std::nullopt, charged),
      InputError);
}

// Note [Worker kill]: where the server counted kills, a row of its own beside the start's, which
// the kill does not enter.
TEST(Validation, AKillRowWhereTheServerCountedKills) {
  const nlohmann::json simulated = {{"latency", latency(3, 3000.0, 3000.0, 3000.0)}, {"throughput_rps", 1.0}};
  nlohmann::json measured = {{"latency", latency(3, 3000.0, 3000.0, 3000.0)}, {"throughput_rps", 1.0}};
  measured["worker_starts"] = {
      {"count", 3},
      {"mean_ms",
       {{"process", 300.0}, {"context", 150.0}, {"memory", 1.0}, {"models", 1800.0}, {"training", 500.0}, {"other", 20.0}}},
      {"total_mean_ms", 2771.0},
      {"kills", 3},
      {"kill_mean_ms", 180.0}};
  HardwareProfile hardware;
  hardware.process_start = milliseconds(300);
  hardware.process_kill = milliseconds(150);
  const std::optional<SimulatedWorkerStart> charged = simulated_worker_start(Mechanism::TwoProcesses, hardware);
  ASSERT_TRUE(charged.has_value());
  EXPECT_EQ(charged->total(), milliseconds(300)) << "the kill is not part of the start";
  const ValidationReport report =
      compare_summaries("x", Mechanism::TwoProcesses, {}, simulated, measured, std::nullopt, std::nullopt, charged);
  EXPECT_DOUBLE_EQ(*row(report, "all", "worker_kill_ms").measured, 180.0);
  EXPECT_DOUBLE_EQ(*row(report, "all", "worker_kill_ms").simulated, 150.0);
  EXPECT_EQ(row(report, "all", "worker_kill_ms").status(), ValidationStatus::Outside);
  measured["worker_starts"]["kill_mean_ms"] = "slow";
  EXPECT_THROW(
      (void)compare_summaries("x", Mechanism::TwoProcesses, {}, simulated, measured, std::nullopt, std::nullopt, charged),
      InputError);
}

}  // namespace
}  // namespace psw::xval
