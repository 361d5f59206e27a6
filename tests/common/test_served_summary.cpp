// Note [Served summary]: psw sim's and psw load's summaries read into the one type psw validate
// joins, a part a side lacks absent, a malformed one refused naming where.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "input_error.hpp"
#include "psw/common/served_summary.hpp"

namespace psw {
// Named, not anonymous: the unity build compiles the test files together.
namespace served_summary_test {

nlohmann::json latency(std::int64_t count, double mean) {
  return {{"count", count},       {"mean_ms", mean},       {"min_ms", mean / 2}, {"p50_ms", mean},
          {"p90_ms", mean * 1.5}, {"p99_ms", mean * 2},    {"p999_ms", mean * 3}, {"max_ms", mean * 4}};
}

// A psw load summary as it writes one: per model, the parts only where the server reported them.
nlohmann::json load_summary() {
  return {{"name", "x"},
          {"requests", 3},
          {"errors", 0},
          {"latency", latency(3, 5.0)},
          {"throughput_rps", 2.5},
          {"makespan_s", 1.2},
          {"models",
           {{"resnet152", {{"latency", latency(2, 4.0)}, {"errors", 0}, {"engine_latency", latency(2, 3.0)}}},
            {"bert_base", {{"latency", latency(1, 7.0)}, {"errors", 0}, {"first_token_latency", latency(1, 2.0)}}},
            {"inception_v3", {{"latency", latency(0, 0.0)}, {"errors", 4}}}}}};
}

TEST(ServedSummary, ReadsWhatASideHasAndLeavesTheRestAbsent) {
  const ServedSummary s = served_summary_from_json(load_summary(), "the measured summary");
  ASSERT_TRUE(s.latency.has_value());
  EXPECT_EQ(s.latency->count, 3);
  EXPECT_DOUBLE_EQ(s.latency->p99_ms, 10.0);
  EXPECT_DOUBLE_EQ(s.throughput_rps, 2.5);
  EXPECT_DOUBLE_EQ(s.makespan_s, 1.2);
  EXPECT_FALSE(s.training_iterations_per_s.has_value());
  ASSERT_EQ(s.models.size(), 3u);
  EXPECT_DOUBLE_EQ(s.models.at("resnet152").engine_latency->mean_ms, 3.0);
  EXPECT_FALSE(s.models.at("resnet152").server_latency.has_value());
  EXPECT_FALSE(s.models.at("bert_base").engine_latency.has_value());
  EXPECT_DOUBLE_EQ(s.models.at("bert_base").first_token_latency->p50_ms, 2.0);  // a model that decoded
  EXPECT_FALSE(s.models.at("resnet152").first_token_latency.has_value());
  EXPECT_FALSE(s.models.at("inception_v3").latency.has_value());  // answered none
}

TEST(ServedSummary, RefusesAMalformedSummaryNamingWhere) {
  auto refused = [](nlohmann::json j, const std::string& part) {
    const std::string message =
        test_support::input_error_of([&] { (void)served_summary_from_json(j, "the measured summary"); });
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  nlohmann::json j = load_summary();
  j.erase("throughput_rps");
  refused(j, "the measured summary has no number 'throughput_rps'");
  j = load_summary();
  j.erase("latency");
  refused(j, "the measured summary has no latency object");
  j = load_summary();
  j["models"]["bert_base"]["latency"].erase("p50_ms");
  refused(j, "the measured summary: models.bert_base.latency: the latency summary has no number 'p50_ms'");
  j = load_summary();
  j["makespan_s"] = "long";
  refused(j, "'makespan_s' must be a number");
}

}  // namespace served_summary_test
}  // namespace psw
