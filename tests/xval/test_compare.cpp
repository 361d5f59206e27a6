// The server's measurement beside the simulator's prediction (xval/compare.hpp): reading both
// sides, the join, rows on one side only, and malformed input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/xval/compare.hpp"

namespace {

namespace fs = std::filesystem;
using psw::xval::ComparisonStatus;

const fs::path kData = fs::path(PSW_TEST_DATA_DIR) / "compare-serve";

const std::string kHeader =
    "point,mechanism,workload.models,seed,mechanism,hardware,requests,mean_ms,min_ms,p50_ms,p90_ms,p99_ms,p999_ms,"
    "max_ms,slo_attainment,throughput_rps,gpu_busy_fraction,training_iterations_per_s,switches,training_switch_ins,"
    "startup_overhead_ms,total_overhead_ms\n";

std::string sweep_row(int point, const std::string& mechanism, const std::string& models, const std::string& p50) {
  return std::to_string(point) + "," + mechanism + "," + models + ",1," + mechanism + ",h200-pcie5,10,4.5,4.0," + p50 +
         ",5.0,6.0,6.0,6.0,1.0,0.04,1.0,72.8,10,10,0.02,0.5\n";
}

// The InputError message of `work`; fails the test when it throws nothing or another error.
template <typename Work>
std::string input_error(Work work) {
  try {
    work();
  } catch (const psw::InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

psw::xval::MeasuredLatency measured(const std::string& mechanism, const std::string& model, double median) {
  psw::xval::MeasuredLatency m;
  m.mechanism = mechanism;
  m.model = model;
  m.requests = 10;
  m.median_ms = median;
  m.p99_ms = median * 2;
  m.source = "mechanism-" + mechanism + ".json";
  return m;
}

psw::xval::PredictedLatency predicted(const std::string& mechanism, const std::string& model, double p50,
                                     std::size_t line) {
  psw::xval::PredictedLatency p;
  p.mechanism = mechanism;
  p.model = model;
  p.requests = 10;
  p.mean_ms = p50;
  p.p50_ms = p50;
  p.p99_ms = p50;
  p.source = "sweep.csv";
  p.line = line;
  return p;
}

TEST(CompareServe, ReadsTheSweepsMechanismAndSingleModel) {
  const std::string csv = kHeader + sweep_row(0, "pipeswitch", "[resnet152]", "4.25") +
                          sweep_row(1, "ready", "\"[ 'bert_base' ]\"", "5.5");
  const auto p = psw::xval::parse_sweep_predictions(csv, "sweep.csv");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].mechanism, "pipeswitch");
  EXPECT_EQ(p[0].model, "resnet152");
  EXPECT_DOUBLE_EQ(p[0].p50_ms, 4.25);
  EXPECT_DOUBLE_EQ(p[0].mean_ms, 4.5);
  EXPECT_DOUBLE_EQ(p[0].p99_ms, 6.0);
  EXPECT_EQ(p[0].requests, 10);
  EXPECT_EQ(p[0].line, 2u);
  EXPECT_EQ(p[1].model, "bert_base");
  EXPECT_EQ(p[1].line, 3u);
}

// A grid without mechanism has the summary's mechanism column only; CRLF line ends read the same.
TEST(CompareServe, ReadsASweepWithoutAMechanismGridAndWithCrlf) {
  std::string csv =
      "point,workload.models,seed,mechanism,hardware,requests,mean_ms,min_ms,p50_ms,p90_ms,p99_ms\r\n"
      "0,[inception_v3],1,mps,h200,3,1.5,1.0,1.25,2.0,3.0\r\n";
  const auto p = psw::xval::parse_sweep_predictions(csv, "s.csv");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].mechanism, "mps");
  EXPECT_EQ(p[0].model, "inception_v3");
  EXPECT_DOUBLE_EQ(p[0].p99_ms, 3.0);
}

TEST(CompareServe, MalformedSweepCsvNamesFileLineAndColumn) {
  EXPECT_EQ(input_error([] { psw::xval::parse_sweep_predictions("", "s.csv"); }),
            "s.csv: empty (expected a psw sweep CSV with a header)");
  EXPECT_NE(input_error([] {
              psw::xval::parse_sweep_predictions("point,seed,mechanism,requests,mean_ms,p50_ms,p99_ms\n", "s.csv");
            }).find("s.csv:1: no column 'workload.models': the comparison needs each point's model"),
            std::string::npos);
  EXPECT_EQ(input_error([] {
              psw::xval::parse_sweep_predictions(kHeader + sweep_row(0, "ready", "[resnet152]", "abc"), "s.csv");
            }),
            "s.csv:2: column 'p50_ms': expected a non-negative number, got 'abc'");
  EXPECT_EQ(input_error([] {
              psw::xval::parse_sweep_predictions(
                  kHeader + sweep_row(0, "ready", "[resnet152]", "1") + sweep_row(1, "ready", "[bert_base]", "-2"),
                  "s.csv");
            }),
            "s.csv:3: column 'p50_ms': expected a non-negative number, got '-2'");
  EXPECT_EQ(input_error([] {
              psw::xval::parse_sweep_predictions(kHeader + sweep_row(0, "ready", "\"[resnet152, bert_base]\"", "1"),
                                                "s.csv");
            }),
            "s.csv:2: column 'workload.models' is '[resnet152, bert_base]': the comparison needs exactly one model "
            "per point");
  EXPECT_EQ(input_error([] { psw::xval::parse_sweep_predictions(kHeader + "0,ready,[resnet152],1\n", "s.csv"); }),
            "s.csv:2: 4 fields, the header has 22");
  EXPECT_EQ(input_error([] {
              psw::xval::parse_sweep_predictions(kHeader + "0,\"ready,[resnet152],1\n1,2\n", "s.csv");
            }),
            "s.csv:2: a quoted field is not closed");
}

TEST(CompareServe, ReadsABenchServeReportAndSkipsModelsWithoutRequests) {
  const std::string json = R"({"cold_latency_ms": {
      "resnet152": {"count": 10, "median_ms": 20.5, "p99_ms": 28.0, "min_ms": 16.0, "max_ms": 28.0},
      "bert_base": {"count": 0, "median_ms": 0.0, "p99_ms": 0.0, "min_ms": 0.0, "max_ms": 0.0}}})";
  const auto m = psw::xval::parse_bench_serve_report(json, "mechanism-pipeswitch.json", "pipeswitch");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].mechanism, "pipeswitch");
  EXPECT_EQ(m[0].model, "resnet152");
  EXPECT_EQ(m[0].requests, 10);
  EXPECT_DOUBLE_EQ(m[0].median_ms, 20.5);
  EXPECT_DOUBLE_EQ(m[0].p99_ms, 28.0);
}

TEST(CompareServe, MalformedReportNamesFileAndLineOrKey) {
  const auto parse = [](const std::string& json) {
    return input_error([&] { psw::xval::parse_bench_serve_report(json, "m.json", "ready"); });
  };
  const std::string syntax = parse("{\n  \"cold_latency_ms\": {\n    \"resnet152\": {\"count\": 10,,}\n}");
  EXPECT_EQ(syntax.rfind("m.json:3:", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("not JSON"), std::string::npos) << syntax;
  EXPECT_EQ(parse("[1, 2]"), "m.json: expected a JSON object (a psw bench-serve report)");
  EXPECT_EQ(parse("{\"spec\": {}}"), "m.json: no 'cold_latency_ms' (not a psw bench-serve report)");
  EXPECT_EQ(parse(R"({"cold_latency_ms": {"resnet152": {"count": 10, "p99_ms": 1.0}}})"),
            "m.json: cold_latency_ms.resnet152: missing 'median_ms'");
  EXPECT_EQ(parse(R"({"cold_latency_ms": {"resnet152": {"count": 10, "median_ms": "fast", "p99_ms": 1.0}}})"),
            "m.json: cold_latency_ms.resnet152.median_ms: expected a non-negative number, got \"fast\"");
  EXPECT_EQ(parse(R"({"cold_latency_ms": {"resnet152": {"count": 2.5, "median_ms": 1.0, "p99_ms": 1.0}}})"),
            "m.json: cold_latency_ms.resnet152.count: expected a non-negative whole number, got 2.5");
  EXPECT_EQ(parse(R"({"mechanism": "pipeswitch", "cold_latency_ms": {}})"),
            "m.json: its 'mechanism' \"pipeswitch\" differs from its file name's 'ready'");
}

TEST(CompareServe, JoinsOnMechanismAndModelAndReportsEitherSideMissing) {
  const std::vector<psw::xval::MeasuredLatency> m = {measured("pipeswitch", "resnet152", 20.0),
                                                    measured("pipeswitch", "bert_base", 10.0),
                                                    measured("mps", "resnet152", 30.0)};
  const std::vector<psw::xval::PredictedLatency> p = {predicted("ready", "resnet152", 3.0, 2),
                                                     predicted("pipeswitch", "resnet152", 19.5, 3),
                                                     predicted("pipeswitch", "bert_base", 8.0, 4)};
  const auto rows = psw::xval::compare_serve(m, p);
  ASSERT_EQ(rows.size(), 4u);
  // The sweep's order first, then what only the measurement has.
  EXPECT_EQ(rows[0].mechanism, "ready");
  EXPECT_EQ(rows[0].status(), ComparisonStatus::NoMeasurement);
  EXPECT_FALSE(rows[0].p50_relative_error());
  EXPECT_EQ(rows[1].mechanism, "pipeswitch");
  EXPECT_EQ(rows[1].model, "resnet152");
  EXPECT_EQ(rows[1].status(), ComparisonStatus::Both);
  EXPECT_NEAR(*rows[1].p50_relative_error(), -0.025, 1e-12);
  EXPECT_EQ(rows[2].model, "bert_base");
  EXPECT_NEAR(*rows[2].p50_relative_error(), -0.2, 1e-12);
  EXPECT_EQ(rows[3].mechanism, "mps");
  EXPECT_EQ(rows[3].status(), ComparisonStatus::NoPrediction);
  EXPECT_FALSE(rows[3].p50_relative_error());

  const psw::xval::ComparisonSummary s = psw::xval::summarize(rows);
  EXPECT_EQ(s.rows, 4u);
  EXPECT_EQ(s.compared, 2u);
  EXPECT_EQ(s.within_5_percent, 1u);
  EXPECT_EQ(s.within_15_percent, 1u);
  EXPECT_EQ(s.no_prediction, 1u);
  EXPECT_EQ(s.no_measurement, 1u);

  EXPECT_EQ(psw::xval::comparison_csv(rows),
            "mechanism,model,status,measured_median_ms,measured_p99_ms,measured_requests,predicted_mean_ms,"
            "predicted_p50_ms,predicted_p99_ms,predicted_requests,p50_relative_error\n"
            "ready,resnet152,no-measurement,,,,3.0,3.0,3.0,10,\n"
            "pipeswitch,resnet152,ok,20.0,40.0,10,19.5,19.5,19.5,10,-0.025\n"
            "pipeswitch,bert_base,ok,10.0,20.0,10,8.0,8.0,8.0,10,-0.2\n"
            "mps,resnet152,no-prediction,30.0,60.0,10,,,,,\n");
  const std::string md = psw::xval::comparison_markdown(rows);
  EXPECT_NE(md.find("| pipeswitch | resnet152 | ok | 20.000 | 40.000 | 10 | 19.500 | 19.500 | 19.500 | 10 | -2.5% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| mps | resnet152 | no-prediction | 30.000 | 60.000 | 10 | - | - | - | - | - |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("2 pairs compared (predicted p50 against measured median): 1 within 5%, 1 within 15%; "
                    "1 measured without a prediction; 1 predicted without a measurement."),
            std::string::npos)
      << md;
}

TEST(CompareServe, RefusesTwoPointsOrReportsForOneMechanismAndModel) {
  EXPECT_EQ(input_error([] {
              psw::xval::compare_serve({}, {predicted("ready", "resnet152", 3.0, 2), predicted("ready", "resnet152", 3.1, 7)});
            }),
            "sweep.csv:7: a second point for ready and resnet152 (the first at line 2): the comparison needs one "
            "point per mechanism and model");
  EXPECT_NE(input_error([] {
              psw::xval::compare_serve({measured("ready", "resnet152", 3.0), measured("ready", "resnet152", 3.0)}, {});
            }).find("a second measurement of ready and resnet152"),
            std::string::npos);
}

// The folder reader: only mechanism-<name>.json, the mechanism from the name, models without
// requests left out.
TEST(CompareServe, LoadsTheMeasuredFolderAndTheSweepFolder) {
  const auto m = psw::xval::load_measured_serve(kData / "measured");
  ASSERT_EQ(m.size(), 4u);  // mps: 1, pipeswitch: 2, ready: 1 (bert_base had no requests)
  EXPECT_EQ(m[0].mechanism, "mps");
  EXPECT_EQ(m[3].mechanism, "ready");
  EXPECT_EQ(m[3].model, "resnet152");
  const auto p = psw::xval::load_predicted_sweep(kData / "predicted");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[4].mechanism, "no-optimization");
  EXPECT_EQ(p[4].source, kData / "predicted" / "sweep.csv");
  EXPECT_EQ(p[4].line, 6u);

  EXPECT_NE(input_error([] { psw::xval::load_measured_serve(kData / "predicted"); })
                .find("no mechanism-<name>.json (psw bench-serve reports) here"),
            std::string::npos);
  EXPECT_NE(input_error([] { psw::xval::load_measured_serve(kData / "nowhere"); }).find("nowhere: not a folder"),
            std::string::npos);
  EXPECT_NE(input_error([] { psw::xval::load_predicted_sweep(kData / "measured"); })
                .find("sweep.csv: no such file"),
            std::string::npos);
  const std::string bad = input_error([] { psw::xval::load_measured_serve(kData / "bad"); });
  EXPECT_NE(bad.find("mechanism-pipeswitch.json:4:"), std::string::npos) << bad;
}

}  // namespace
