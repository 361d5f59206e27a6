// Note [Trace window and sample] (common/src/workload_source.cpp): a trace's window and sample,
// the same requests on every open, shifted to start at zero.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/workload_source.hpp"

namespace psw::sim {
namespace {

// A project CSV of `count` BERT requests, one every millisecond from 1 ms, and an experiment
// config replaying it with `extra` workload keys.
ExperimentConfig trace_config(const std::string& name, int count, const std::string& extra) {
  const auto dir = std::filesystem::temp_directory_path() / ("psw_workload_source_" + name);
  std::filesystem::create_directories(dir);
  {
    std::ofstream csv(dir / "trace.csv");
    csv << "arrival_ns,model,task,batch,slo_ns\n";
    for (std::int64_t i = 1; i <= count; ++i) csv << i * 1'000'000 << ",bert_base,inference,8,0\n";
  }
  const std::string root = PSW_SOURCE_DIR;
  const std::string text = "name: " + name + "\nhardware: " + root + "/configs/hardware/v100-pcie3-x16.yaml\n" +
                           "models:\n  - {name: bert_base, profile: " + root + "/configs/models/bert_base.yaml}\n" +
                           "mechanism: pipeswitch\nseed: 11\nworkload: {kind: trace, format: csv, path: trace.csv" +
                           extra + "}\n";
  return parse_experiment_config(text, dir / "config.yaml");
}

std::vector<std::int64_t> arrivals(const ExperimentConfig& config) {
  auto source = open_workload_source(config);
  std::vector<std::int64_t> out;
  while (auto r = source->next()) out.push_back(r->arrival.ns());
  return out;
}

TEST(TraceWindow, KeepsTheWindowShiftedToZero) {
  const auto kept = arrivals(trace_config("window", 1000, ", window_start_s: 0.1, window_s: 0.2"));
  // Arrivals 100 ms .. 299 ms of the trace, now 0 .. 199 ms.
  ASSERT_EQ(kept.size(), 200u);
  EXPECT_EQ(kept.front(), 0);
  EXPECT_EQ(kept.back(), 199'000'000);
  // Without a length: to the trace's end.
  EXPECT_EQ(arrivals(trace_config("open-window", 1000, ", window_start_s: 0.9")).size(), 101u);
  // No window, no sample: every request as it is.
  const auto all = arrivals(trace_config("whole", 1000, ""));
  ASSERT_EQ(all.size(), 1000u);
  EXPECT_EQ(all.front(), 1'000'000);
}

TEST(TraceSample, KeepsAboutTheFractionAndTheSameRequestsEveryTime) {
  const ExperimentConfig config = trace_config("sample", 4000, ", sample: 0.25");
  const auto kept = arrivals(config);
  EXPECT_GT(kept.size(), 800u);  // 1000 expected; the binomial's sd is 27
  EXPECT_LT(kept.size(), 1200u);
  EXPECT_EQ(arrivals(config), kept);  // deterministic: psw sim and psw load see the same
  const std::set<std::int64_t> distinct(kept.begin(), kept.end());
  EXPECT_EQ(distinct.size(), kept.size());
  for (std::int64_t a : kept) EXPECT_EQ(a % 1'000'000, 0) << "a kept request is one of the trace's";
  // Another seed keeps other requests.
  ExperimentConfig reseeded = config;
  reseeded.seed = 12;
  EXPECT_NE(arrivals(reseeded), kept);
}

TEST(TraceWindow, BadValuesAreRefusedNamingTheKey) {
  auto message = [](const std::string& extra) {
    try {
      trace_config("bad", 10, extra);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(", sample: 0").find("workload.sample"), std::string::npos) << message(", sample: 0");
  EXPECT_NE(message(", sample: 1.5").find("must be between 0 and 1"), std::string::npos) << message(", sample: 1.5");
  EXPECT_NE(message(", window_s: 0").find("an empty window keeps no request"), std::string::npos)
      << message(", window_s: 0");
  EXPECT_NE(message(", window_start_s: -1").find("workload.window_start_s"), std::string::npos)
      << message(", window_start_s: -1");
}

}  // namespace
}  // namespace psw::sim
