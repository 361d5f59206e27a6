// Request traces (common/src/trace.cpp): each reader's happy path on small fixtures
// (tests/data/traces/) and on the shipped public traces (traces/), determinism, and
// every kind of bad input as an InputError naming the file, the line and the complaint.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/common/trace.hpp"

namespace psw {
namespace {

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(PSW_TEST_DATA_DIR) / "traces" / name;
}

std::filesystem::path public_trace(const std::string& relative) {
  return std::filesystem::path(PSW_SOURCE_DIR) / "traces" / relative;
}
const char* const kAzure2019 = "azure-functions-2019/invocations.csv";
const char* const kAzure2021 = "azure-functions-2021/Azure2021_200.csv";
const char* const kAzureLlm = "azure-llm-2023/AzureLLMInferenceTrace_code.csv";

const std::map<std::string, std::uint32_t> kModels = {
    {"resnet152", 0}, {"inception_v3", 1}, {"bert_base", 2}};

std::vector<Request> drain(RequestSource& source) {
  std::vector<Request> out;
  while (auto r = source.next()) out.push_back(*r);
  EXPECT_FALSE(source.next().has_value()) << "an exhausted source must stay exhausted";
  return out;
}

std::vector<Request> drain(const std::unique_ptr<RequestSource>& source) { return drain(*source); }

void expect_sorted(const std::vector<Request>& requests) {
  for (std::size_t i = 1; i < requests.size(); ++i) {
    ASSERT_LE(requests[i - 1].arrival, requests[i].arrival) << "at request " << i;
  }
}

bool same(const Request& a, const Request& b) {
  return a.arrival == b.arrival && a.model == b.model && a.task == b.task && a.batch == b.batch &&
         a.slo == b.slo;
}

// Runs `fn` (opening and draining a source) and checks that it throws an InputError whose
// message contains every one of `parts`.
void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message '" << message << "' lacks '" << part << "'";
    }
    return;
  } catch (const std::exception& e) {
    FAIL() << "expected an InputError, got another exception: " << e.what();
  }
  FAIL() << "expected an InputError";
}

void expect_project_error(const std::string& file, std::initializer_list<std::string> parts) {
  SCOPED_TRACE(file);
  expect_input_error([&] { drain(open_project_csv(fixture(file), kModels)); }, parts);
  // The file name is always in the message.
  expect_input_error([&] { drain(open_project_csv(fixture(file), kModels)); }, {file});
}

TraceMapping default_mapping() {
  TraceMapping mapping;
  mapping.default_model = 7;
  mapping.batch = 4;
  mapping.slo = milliseconds(100);
  return mapping;
}

// The sum of columns [first, first + minutes) over every function row of a 2019 trace,
// computed independently of the reader.
std::int64_t sum_minutes(const std::filesystem::path& path, int first, int minutes) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  std::int64_t total = 0;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::string cell;
    for (int column = 0; std::getline(row, cell, ','); ++column) {
      const int minute = column - 3;
      if (minute >= first && minute < first + minutes) total += std::stoll(cell);
    }
  }
  return total;
}

// ---------------------------------------------------------------------------------------
// parse_spread

TEST(TraceSpread, ParsesBothKindsAndRejectsOthers) {
  EXPECT_EQ(parse_spread("uniform"), SpreadKind::Uniform);
  EXPECT_EQ(parse_spread("poisson"), SpreadKind::Poisson);
  expect_input_error([] { parse_spread("Uniform"); }, {"unknown spread 'Uniform'", "uniform", "poisson"});
  expect_input_error([] { parse_spread(""); }, {"unknown spread ''"});
}

// ---------------------------------------------------------------------------------------
// Project CSV

TEST(TraceProjectCsv, ReadsRowsWithCommentsAndTrailingBlankLines) {
  const auto requests = drain(open_project_csv(fixture("project_ok.csv"), kModels));
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].arrival, nanoseconds(0));
  EXPECT_EQ(requests[0].model, 0u);
  EXPECT_EQ(requests[0].task, Task::Inference);
  EXPECT_EQ(requests[0].batch, 8);
  EXPECT_EQ(requests[0].slo, milliseconds(10));
  EXPECT_EQ(requests[1].arrival, nanoseconds(1500));
  EXPECT_EQ(requests[1].model, 2u);
  EXPECT_EQ(requests[1].task, Task::Training);
  EXPECT_EQ(requests[1].batch, 32);
  EXPECT_EQ(requests[1].slo, Duration::zero());
  EXPECT_EQ(requests[2].arrival, nanoseconds(1500));  // equal arrivals are fine
  EXPECT_EQ(requests[2].model, 1u);
  EXPECT_EQ(requests[2].batch, 1);
  EXPECT_EQ(requests[3].arrival, seconds(2));
  EXPECT_EQ(requests[3].batch, 16);
}

TEST(TraceProjectCsv, AcceptsCrlfLineEndings) {
  const auto requests = drain(open_project_csv(fixture("project_crlf.csv"), kModels));
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].arrival, nanoseconds(10));
  EXPECT_EQ(requests[0].model, 2u);
  EXPECT_EQ(requests[1].task, Task::Training);
  EXPECT_EQ(requests[1].slo, nanoseconds(7));  // no '\r' left in the last column
}

TEST(TraceProjectCsv, MissingFile) {
  expect_project_error("project_does_not_exist.csv", {"does not exist"});
}

TEST(TraceProjectCsv, EmptyAndHeaderOnly) {
  expect_project_error("project_empty.csv", {"the trace has no requests"});
  expect_project_error("project_header_only.csv", {":2:", "the trace has no requests"});
}

TEST(TraceProjectCsv, WrongHeaderNamesTheExpectedColumns) {
  expect_project_error("project_bad_header.csv",
                       {":1:", "wrong header", "arrival_ns,model,task,batch,slo_ns",
                        "column 1 is 'arrival'"});
}

TEST(TraceProjectCsv, WrongColumnCount) {
  expect_project_error("project_wrong_columns.csv", {":3:", "expected 5 columns", "found 4"});
}

TEST(TraceProjectCsv, NonNumericAndNegative) {
  expect_project_error("project_non_numeric.csv",
                       {":3:", "column 'batch'", "'eight' is not a non-negative integer"});
  expect_project_error("project_negative.csv", {":3:", "column 'slo_ns' is negative (-1)"});
}

TEST(TraceProjectCsv, BatchMustBePositive) {
  expect_project_error("project_batch_zero.csv", {":2:", "column 'batch'", "at least 1"});
}

TEST(TraceProjectCsv, OutOfOrderNamesBothTimesAndLines) {
  expect_project_error("project_out_of_order.csv",
                       {":4:", "arrival_ns 500 is before 700 on line 3", "non-decreasing"});
}

TEST(TraceProjectCsv, UnknownModelListsTheKnownOnes) {
  expect_project_error("project_unknown_model.csv",
                       {":3:", "unknown model 'vgg16'", "bert_base, inception_v3, resnet152"});
}

TEST(TraceProjectCsv, UnknownTask) {
  expect_project_error("project_unknown_task.csv",
                       {":3:", "unknown task 'serving'", "inference or training"});
}

TEST(TraceProjectCsv, BlankLineInsideIsAnError) {
  expect_project_error("project_blank_inside.csv", {":3:", "blank line"});
}

TEST(TraceProjectCsv, ErrorsSurfaceWhenTheBadRowIsReached) {
  // Streaming: the good first row comes out before the bad third row is read.
  auto source = open_project_csv(fixture("project_out_of_order.csv"), kModels);
  ASSERT_TRUE(source->next().has_value());
  ASSERT_TRUE(source->next().has_value());
  EXPECT_THROW(source->next(), InputError);
}

// ---------------------------------------------------------------------------------------
// Azure Functions 2019

TEST(TraceAzure2019, UniformGivesExactCountsPerMinuteAndFunction) {
  TraceMapping mapping;
  mapping.function_model = {{"fa", 0}, {"fb", 1}, {"fc", 2}};
  mapping.batch = 2;
  mapping.slo = milliseconds(50);
  const auto requests = drain(
      open_azure_functions_2019(fixture("af2019_small.csv"), mapping, SpreadKind::Uniform, 1));
  // fa: 3 + 1 + 2, fb: 2 + 4 + 1, fc: 5 + 1.
  ASSERT_EQ(requests.size(), 19u);
  expect_sorted(requests);
  // count[minute][model]
  std::map<std::int64_t, std::map<std::uint32_t, int>> count;
  for (const Request& r : requests) {
    ++count[r.arrival.ns() / seconds(60).ns()][r.model];
    EXPECT_EQ(r.batch, 2);
    EXPECT_EQ(r.slo, milliseconds(50));
    EXPECT_EQ(r.task, Task::Inference);
  }
  EXPECT_EQ(count[0][0], 3);
  EXPECT_EQ(count[0][1], 2);
  EXPECT_EQ(count[1][0], 1);
  EXPECT_EQ(count[1][2], 5);
  EXPECT_EQ(count[2][1], 4);
  EXPECT_EQ(count[1438][2], 1);
  EXPECT_EQ(count[1439][0], 2);
  EXPECT_EQ(count[1439][1], 1);
  EXPECT_EQ(count.size(), 5u);
  EXPECT_LT(requests.back().arrival, seconds(86'400));
}

TEST(TraceAzure2019, WindowIsRelativeToFirstMinute) {
  const auto requests = drain(open_azure_functions_2019(
      fixture("af2019_small.csv"), default_mapping(), SpreadKind::Uniform, 3, 2, 2));
  // Minutes 2 and 3: fa 1, fc 5, fb 4.
  ASSERT_EQ(requests.size(), 10u);
  for (const Request& r : requests) {
    EXPECT_GE(r.arrival, Duration::zero());
    EXPECT_LT(r.arrival, seconds(120));
    EXPECT_EQ(r.model, 7u);  // the default model
    EXPECT_EQ(r.batch, 4);
  }
  int in_second_minute = 0;
  for (const Request& r : requests) in_second_minute += r.arrival >= seconds(60) ? 1 : 0;
  EXPECT_EQ(in_second_minute, 4);  // minute 3: fb's 4
  const auto last = drain(open_azure_functions_2019(
      fixture("af2019_small.csv"), default_mapping(), SpreadKind::Uniform, 3, 1440, 1));
  EXPECT_EQ(last.size(), 3u);
}

TEST(TraceAzure2019, DeterministicForASeedAndDifferentAcrossSeeds) {
  for (SpreadKind spread : {SpreadKind::Uniform, SpreadKind::Poisson}) {
    const auto a = drain(
        open_azure_functions_2019(fixture("af2019_small.csv"), default_mapping(), spread, 42));
    const auto b = drain(
        open_azure_functions_2019(fixture("af2019_small.csv"), default_mapping(), spread, 42));
    const auto c = drain(
        open_azure_functions_2019(fixture("af2019_small.csv"), default_mapping(), spread, 43));
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same(a[i], b[i])) << "at " << i;
    bool differs = a.size() != c.size();
    for (std::size_t i = 0; !differs && i < a.size(); ++i) differs = !same(a[i], c[i]);
    EXPECT_TRUE(differs);
  }
}

TEST(TraceAzure2019, TiesAreBrokenByFunctionRowOrder) {
  // With one minute and many arrivals from two functions, all within the minute and sorted;
  // equal times (if any) must list the lower function row first. Checked on the shipped
  // trace's first minute, where ~9,000 arrivals make ties plausible but not required.
  TraceMapping mapping;
  std::ifstream in(public_trace(kAzure2019));
  ASSERT_TRUE(in) << "missing " << public_trace(kAzure2019);
  std::string line;
  std::getline(in, line);
  std::uint32_t row = 0;
  while (std::getline(in, line)) {
    std::stringstream cells(line);
    std::string cell;
    for (int k = 0; k < 3; ++k) std::getline(cells, cell, ',');
    mapping.function_model[cell] = row++;
  }
  const auto requests = drain(
      open_azure_functions_2019(public_trace(kAzure2019), mapping, SpreadKind::Uniform, 9, 1, 1));
  for (std::size_t i = 1; i < requests.size(); ++i) {
    ASSERT_LE(requests[i - 1].arrival, requests[i].arrival);
    if (requests[i - 1].arrival == requests[i].arrival) {
      EXPECT_LE(requests[i - 1].model, requests[i].model);
    }
  }
}

TEST(TraceAzure2019, PoissonSpreadKeepsTheMeanCount) {
  // Poisson spread: per (minute, function) a Poisson(count) number of arrivals. Over the
  // shipped trace's first 30 minutes (272,540 invocations) the total is within 1%.
  const std::int64_t expected = sum_minutes(public_trace(kAzure2019), 1, 30);
  const auto source = open_azure_functions_2019(public_trace(kAzure2019), default_mapping(),
                                                SpreadKind::Poisson, 5, 1, 30);
  std::int64_t n = 0;
  Duration previous = Duration::zero();
  while (auto r = source->next()) {
    ASSERT_GE(r->arrival, previous);
    previous = r->arrival;
    ++n;
  }
  EXPECT_NEAR(static_cast<double>(n), static_cast<double>(expected), 0.01 * static_cast<double>(expected));
  EXPECT_NE(n, expected);  // it is random, not exact (fails with negligible probability)
  EXPECT_LT(previous, seconds(30 * 60));
}

TEST(TraceAzure2019, ShippedTraceFirst30MinutesUniform) {
  const auto path = public_trace(kAzure2019);
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing " << path;
  const std::int64_t expected = sum_minutes(path, 1, 30);
  EXPECT_EQ(expected, 272'540);
  const auto source =
      open_azure_functions_2019(path, default_mapping(), SpreadKind::Uniform, 1, 1, 30);
  std::int64_t n = 0;
  std::vector<std::int64_t> per_minute(30, 0);
  Duration previous = Duration::zero();
  while (auto r = source->next()) {
    ASSERT_GE(r->arrival, previous);
    previous = r->arrival;
    ASSERT_LT(r->arrival, seconds(30 * 60));
    ++per_minute[static_cast<std::size_t>(r->arrival.ns() / seconds(60).ns())];
    ++n;
  }
  EXPECT_EQ(n, expected);
  for (int m = 0; m < 30; ++m) {
    EXPECT_EQ(per_minute[static_cast<std::size_t>(m)], sum_minutes(path, m + 1, 1)) << "minute " << m + 1;
  }
}

TEST(TraceAzure2019, UnknownFunctionWithoutDefault) {
  TraceMapping mapping;
  mapping.function_model = {{"fa", 0}, {"fc", 2}};
  expect_input_error(
      [&] {
        open_azure_functions_2019(fixture("af2019_small.csv"), mapping, SpreadKind::Uniform, 1);
      },
      {"af2019_small.csv:3:", "function 'fb'", "HashFunction", "no default"});
}

TEST(TraceAzure2019, BadFiles) {
  const TraceMapping mapping = default_mapping();
  auto open = [&](const std::string& file) {
    return [&mapping, file] {
      drain(open_azure_functions_2019(fixture(file), mapping, SpreadKind::Uniform, 1));
    };
  };
  expect_input_error(open("af2019_missing.csv"), {"af2019_missing.csv", "does not exist"});
  expect_input_error(open("af2019_header_only.csv"),
                     {"af2019_header_only.csv:1:", "the trace has no requests"});
  expect_input_error(open("af2019_bad_header.csv"),
                     {"af2019_bad_header.csv:1:", "wrong header",
                      "HashOwner,HashApp,HashFunction,Trigger,1,2,...,1440",
                      "column 21 is 'seventeen', expected '17'"});
  expect_input_error(open("af2019_wrong_columns.csv"),
                     {"af2019_wrong_columns.csv:3:", "expected 1444 columns", "found 1443"});
  expect_input_error(open("af2019_negative.csv"),
                     {"af2019_negative.csv:3:", "column '10' is negative (-3)"});
  expect_input_error(open("af2019_non_numeric.csv"),
                     {"af2019_non_numeric.csv:3:", "column '10'", "'x7' is not a non-negative integer"});
}

TEST(TraceAzure2019, NegativeCountOutsideTheWindowIsStillAnError) {
  expect_input_error(
      [] {
        open_azure_functions_2019(fixture("af2019_negative.csv"), default_mapping(),
                                  SpreadKind::Uniform, 1, 100, 5);
      },
      {"af2019_negative.csv:3:", "column '10' is negative"});
}

TEST(TraceAzure2019, WindowOutOfRange) {
  const TraceMapping mapping = default_mapping();
  auto open = [&](int first, int minutes) {
    return [&mapping, first, minutes] {
      open_azure_functions_2019(fixture("af2019_small.csv"), mapping, SpreadKind::Uniform, 1, first,
                                minutes);
    };
  };
  expect_input_error(open(0, 10), {"af2019_small.csv", "first_minute must be in 1..1440, got 0"});
  expect_input_error(open(1441, 1), {"first_minute must be in 1..1440, got 1441"});
  expect_input_error(open(1, 0), {"minutes must be in 1..1440", "got 0"});
  expect_input_error(open(1431, 11), {"minutes must be in 1..10", "got 11"});
  EXPECT_NO_THROW(open(1431, 10)());
}

// ---------------------------------------------------------------------------------------
// Azure Functions 2021

TEST(TraceAzure2021, SortsByEndMinusDurationExactly) {
  TraceMapping mapping;
  mapping.function_model = {{"f1", 0}, {"f2", 1}, {"f3", 2}};
  mapping.batch = 1;
  mapping.slo = seconds(1);
  const auto requests = drain(open_azure_functions_2021(fixture("af2021_small.csv"), mapping));
  ASSERT_EQ(requests.size(), 5u);
  EXPECT_EQ(requests[0].arrival, nanoseconds(0));  // 5e-05 - 5e-05
  EXPECT_EQ(requests[0].model, 0u);
  EXPECT_EQ(requests[1].arrival, milliseconds(250));  // 3.25 - 3.0
  EXPECT_EQ(requests[1].model, 1u);
  EXPECT_EQ(requests[2].arrival, nanoseconds(5'000'000'001));  // 7.000000001 - 2
  EXPECT_EQ(requests[2].model, 2u);
  EXPECT_EQ(requests[3].arrival, seconds(10));  // 10.5 - 0.5 (f1, earlier in the file)
  EXPECT_EQ(requests[3].model, 0u);
  EXPECT_EQ(requests[4].arrival, seconds(10));  // 10.25 - 0.25 (f2)
  EXPECT_EQ(requests[4].model, 1u);
  for (const Request& r : requests) {
    EXPECT_EQ(r.batch, 1);
    EXPECT_EQ(r.slo, seconds(1));
  }
}

TEST(TraceAzure2021, ShippedTrace) {
  const auto path = public_trace(kAzure2021);
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing " << path;
  const auto requests = drain(open_azure_functions_2021(path, default_mapping()));
  EXPECT_EQ(requests.size(), 199u);  // 200 lines: the header and 199 invocations
  expect_sorted(requests);
  EXPECT_GE(requests.front().arrival, Duration::zero());
  // Row 2: end 0.07949090003967285, duration 0.078 -> 1.4909 ms, the earliest arrival.
  EXPECT_EQ(requests.front().arrival, nanoseconds(1'490'900));
}

TEST(TraceAzure2021, UnknownFunctionWithoutDefault) {
  TraceMapping mapping;
  mapping.function_model = {{"f1", 0}, {"f3", 2}};
  expect_input_error([&] { open_azure_functions_2021(fixture("af2021_small.csv"), mapping); },
                     {"af2021_small.csv:3:", "function 'f2'", "'func'", "no default"});
}

TEST(TraceAzure2021, BadFiles) {
  const TraceMapping mapping = default_mapping();
  auto open = [&](const std::string& file) {
    return [&mapping, file] { drain(open_azure_functions_2021(fixture(file), mapping)); };
  };
  expect_input_error(open("af2021_missing.csv"), {"af2021_missing.csv", "does not exist"});
  expect_input_error(open("af2021_header_only.csv"),
                     {"af2021_header_only.csv:1:", "the trace has no requests"});
  expect_input_error(open("af2021_bad_header.csv"),
                     {"af2021_bad_header.csv:1:", "app,func,end_timestamp,duration",
                      "column 3 is 'end'"});
  expect_input_error(open("af2021_negative_arrival.csv"),
                     {"af2021_negative_arrival.csv:3:", "end_timestamp 1.5 is less than duration 2.25",
                      "negative"});
  expect_input_error(open("af2021_non_numeric.csv"),
                     {"af2021_non_numeric.csv:3:", "column 'end_timestamp'", "'abc'"});
  expect_input_error(open("af2021_wrong_columns.csv"),
                     {"af2021_wrong_columns.csv:3:", "expected 4 columns", "found 3"});
}

// ---------------------------------------------------------------------------------------
// Azure LLM inference 2023

const std::vector<TokenBucket> kBuckets = {{1024, 0}, {4096, 1}, {8192, 2}};

TEST(TraceAzureLlm, ArrivalsRelativeToFirstRowAcrossDaysAndLeapYear) {
  const auto requests =
      drain(open_azure_llm_2023(fixture("llm2023_small.csv"), kBuckets, 2, milliseconds(30)));
  ASSERT_EQ(requests.size(), 5u);
  EXPECT_EQ(requests[0].arrival, nanoseconds(0));
  EXPECT_EQ(requests[1].arrival, milliseconds(250));
  EXPECT_EQ(requests[2].arrival, milliseconds(1500));  // past midnight
  EXPECT_EQ(requests[3].arrival, nanoseconds(1'500'000'001));
  // 2023-11-16 23:59:59.5 -> 2024-03-01 00:00:00: 105 days (29 in February 2024) + 0.5 s.
  EXPECT_EQ(requests[4].arrival, seconds(105 * 86'400) + milliseconds(500));
  EXPECT_EQ(requests[0].model, 0u);  // 100 tokens
  EXPECT_EQ(requests[1].model, 1u);  // 2000
  EXPECT_EQ(requests[2].model, 1u);  // 4000
  EXPECT_EQ(requests[3].model, 2u);  // 8000
  EXPECT_EQ(requests[4].model, 0u);  // 50
  for (const Request& r : requests) {
    EXPECT_EQ(r.batch, 2);
    EXPECT_EQ(r.slo, milliseconds(30));
  }
  // Each request's prompt is its row's ContextTokens (Note [Prefill curve]).
  const std::vector<std::int64_t> prompts = {100, 2000, 4000, 8000, 50};
  for (std::size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(requests[i].prompt_tokens, prompts[i]) << i;
}

// Note [Decode in the simulator]: with decode, GeneratedTokens less the first one.
TEST(TraceAzureLlm, DecodeTakesGeneratedTokensAfterTheFirst) {
  const auto plain = drain(open_azure_llm_2023(fixture("llm2023_small.csv"), kBuckets, 1, {}));
  for (const Request& r : plain) EXPECT_EQ(r.decode_tokens, 0);
  const auto decoding = drain(open_azure_llm_2023(fixture("llm2023_small.csv"), kBuckets, 1, {}, /*decode=*/true));
  const std::vector<std::int64_t> after_first = {9, 4, 6, 0, 1};
  ASSERT_EQ(decoding.size(), after_first.size());
  for (std::size_t i = 0; i < decoding.size(); ++i) EXPECT_EQ(decoding[i].decode_tokens, after_first[i]) << i;
}

TEST(TraceAzureLlm, BucketBoundaryIsInclusive) {
  const std::vector<TokenBucket> buckets = {{100, 3}, {1'000'000, 4}};
  const auto requests = drain(open_azure_llm_2023(fixture("llm2023_small.csv"), buckets, 1, {}));
  EXPECT_EQ(requests[0].model, 3u);  // exactly 100
  EXPECT_EQ(requests[1].model, 4u);
}

TEST(TraceAzureLlm, ShippedTrace) {
  const auto path = public_trace(kAzureLlm);
  ASSERT_TRUE(std::filesystem::exists(path)) << "missing " << path;
  const auto requests = drain(open_azure_llm_2023(path, kBuckets, 8, Duration::zero()));
  EXPECT_EQ(requests.size(), 8819u);
  expect_sorted(requests);
  // First row 2023-11-16 18:17:03.9799600, last 19:14:19.9280160.
  EXPECT_EQ(requests.back().arrival, nanoseconds(3'435'948'056'000));
}

TEST(TraceAzureLlm, ContextLargerThanEveryBucket) {
  const std::vector<TokenBucket> small = {{1000, 0}, {3000, 1}};
  expect_input_error(
      [&] { drain(open_azure_llm_2023(fixture("llm2023_small.csv"), small, 8, {})); },
      {"llm2023_small.csv:4:", "ContextTokens", "4000 is larger than every bucket",
       "largest is 3000"});
}

TEST(TraceAzureLlm, BadFiles) {
  auto open = [](const std::string& file) {
    return [file] { drain(open_azure_llm_2023(fixture(file), kBuckets, 8, {})); };
  };
  expect_input_error(open("llm2023_missing.csv"), {"llm2023_missing.csv", "does not exist"});
  expect_input_error(open("llm2023_header_only.csv"),
                     {"llm2023_header_only.csv:1:", "the trace has no requests"});
  expect_input_error(open("llm2023_bad_timestamp.csv"),
                     {"llm2023_bad_timestamp.csv:3:", "'2023/11/16 18:17:04'",
                      "YYYY-MM-DD HH:MM:SS"});
  expect_input_error(open("llm2023_long_fraction.csv"),
                     {"llm2023_long_fraction.csv:2:", "more than 9 digits"});
  expect_input_error(open("llm2023_bad_date.csv"),
                     {"llm2023_bad_date.csv:2:", "'2023-02-29 18:17:03'", "day out of range"});
  expect_input_error(open("llm2023_out_of_order.csv"),
                     {"llm2023_out_of_order.csv:4:", "2023-11-16 18:17:03.9 is before",
                      "2023-11-16 18:17:04 on line 3"});
  expect_input_error(open("llm2023_negative.csv"),
                     {"llm2023_negative.csv:2:", "column 'ContextTokens' is negative (-10)"});
  expect_input_error([] { open_azure_llm_2023(fixture("llm2023_small.csv"), {}, 8, {}); },
                     {"llm2023_small.csv", "no token buckets"});
}

// ---------------------------------------------------------------------------------------
// Synthetic sources

PoissonSpec poisson_spec() {
  PoissonSpec spec;
  spec.rate_per_second = 1000;
  spec.duration = seconds(200);
  spec.model_weights = {1, 3, 0};
  spec.batch = 4;
  spec.slo = milliseconds(20);
  spec.seed = 11;
  return spec;
}

TEST(TracePoisson, MeanRateAndModelWeights) {
  const auto requests = drain(make_poisson_source(poisson_spec()));
  expect_sorted(requests);
  const double expected = 1000.0 * 200;  // sd ~ 450
  EXPECT_NEAR(static_cast<double>(requests.size()), expected, 0.05 * expected);
  EXPECT_NEAR(static_cast<double>(requests.size()), expected, 0.01 * expected);
  std::vector<std::int64_t> per_model(3, 0);
  for (const Request& r : requests) {
    ASSERT_LT(r.model, 3u);
    ++per_model[r.model];
    EXPECT_EQ(r.batch, 4);
    EXPECT_EQ(r.slo, milliseconds(20));
    ASSERT_GE(r.arrival, Duration::zero());
    ASSERT_LT(r.arrival, seconds(200));
  }
  EXPECT_EQ(per_model[2], 0);  // zero weight: never drawn
  EXPECT_NEAR(static_cast<double>(per_model[1]) / static_cast<double>(requests.size()), 0.75, 0.01);
  // Inter-arrival mean ~ 1 ms.
  const double mean_gap =
      requests.back().arrival.seconds() / static_cast<double>(requests.size() - 1);
  EXPECT_NEAR(mean_gap, 1e-3, 0.05e-3);
}

TEST(TracePoisson, Deterministic) {
  const auto a = drain(make_poisson_source(poisson_spec()));
  const auto b = drain(make_poisson_source(poisson_spec()));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same(a[i], b[i])) << "at " << i;
  PoissonSpec other = poisson_spec();
  other.seed = 12;
  const auto c = drain(make_poisson_source(other));
  bool differs = a.size() != c.size();
  for (std::size_t i = 0; !differs && i < a.size(); ++i) differs = !same(a[i], c[i]);
  EXPECT_TRUE(differs);
}

TEST(TracePoisson, InvalidSpecs) {
  auto make = [](const PoissonSpec& spec) { return [spec] { make_poisson_source(spec); }; };
  PoissonSpec s = poisson_spec();
  s.rate_per_second = 0;
  expect_input_error(make(s), {"rate_per_second must be positive"});
  s.rate_per_second = -3;
  expect_input_error(make(s), {"rate_per_second must be positive", "-3"});
  s = poisson_spec();
  s.duration = Duration::zero();
  expect_input_error(make(s), {"duration must be positive"});
  s = poisson_spec();
  s.model_weights = {};
  expect_input_error(make(s), {"model_weights is empty"});
  s.model_weights = {0, 0};
  expect_input_error(make(s), {"model_weights are all zero"});
  s.model_weights = {1, -1};
  expect_input_error(make(s), {"model_weights[1]", "non-negative", "-1"});
  s = poisson_spec();
  s.batch = 0;
  expect_input_error(make(s), {"batch must be at least 1"});
}

BurstySpec bursty_spec() {
  BurstySpec spec;
  spec.high_rate_per_second = 2000;
  spec.low_rate_per_second = 20;
  spec.mean_high = seconds(1);
  spec.mean_low = seconds(4);
  spec.duration = seconds(600);
  spec.model_weights = {1, 1};
  spec.seed = 3;
  return spec;
}

TEST(TraceBursty, HasHighAndLowPhases) {
  const auto requests = drain(make_bursty_source(bursty_spec()));
  expect_sorted(requests);
  // Long-run rate: (2000 * 1 + 20 * 4) / 5 = 416 per second.
  const double expected = 416.0 * 600;
  EXPECT_NEAR(static_cast<double>(requests.size()), expected, 0.25 * expected);
  // Per 100 ms window counts: high windows see ~200, low ones ~2. Both must occur often.
  std::vector<int> windows(6000, 0);
  for (const Request& r : requests) {
    ASSERT_LT(r.arrival, seconds(600));
    ++windows[static_cast<std::size_t>(r.arrival.ns() / milliseconds(100).ns())];
  }
  int high = 0;
  int low = 0;
  std::int64_t in_high = 0;
  std::int64_t in_low = 0;
  for (int w : windows) {
    if (w >= 100) {
      ++high;
      in_high += w;
    } else if (w <= 10) {
      ++low;
      in_low += w;
    }
  }
  EXPECT_GT(high, 600);   // ~20% of windows
  EXPECT_GT(low, 3000);   // ~80% of windows
  EXPECT_GT(static_cast<double>(in_high) / high, 50.0 * static_cast<double>(in_low) / low);
  // Starts in the high state.
  EXPECT_LT(requests[10].arrival, milliseconds(100));
}

TEST(TraceBursty, Deterministic) {
  const auto a = drain(make_bursty_source(bursty_spec()));
  const auto b = drain(make_bursty_source(bursty_spec()));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same(a[i], b[i])) << "at " << i;
}

TEST(TraceBursty, InvalidSpecs) {
  auto make = [](const BurstySpec& spec) { return [spec] { make_bursty_source(spec); }; };
  BurstySpec s = bursty_spec();
  s.high_rate_per_second = 0;
  expect_input_error(make(s), {"high_rate_per_second must be positive"});
  s = bursty_spec();
  s.low_rate_per_second = -1;
  expect_input_error(make(s), {"low_rate_per_second must be positive"});
  s = bursty_spec();
  s.mean_high = Duration::zero();
  expect_input_error(make(s), {"mean_high must be positive"});
  s = bursty_spec();
  s.mean_low = nanoseconds(-5);
  expect_input_error(make(s), {"mean_low must be positive"});
  s = bursty_spec();
  s.duration = Duration::zero();
  expect_input_error(make(s), {"duration must be positive"});
  s = bursty_spec();
  s.model_weights = {0};
  expect_input_error(make(s), {"model_weights are all zero"});
}

// Hardening of the inputs: traces are regular files, lines are bounded.
TEST(TraceFiles, DevicesAndFifosAreRefusedWithoutReading) {
  expect_input_error([] { open_project_csv("/dev/zero", {{"resnet152", 0}}); }, {"/dev/zero", "not a regular file"});
  const auto fifo = std::filesystem::temp_directory_path() / ("psw-trace-fifo-" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  TraceMapping mapping;
  mapping.default_model = 0;
  expect_input_error([&] { open_azure_functions_2021(fifo, mapping); }, {fifo.string(), "not a regular file"});
  std::filesystem::remove(fifo);
}

TEST(TraceFiles, ALineLongerThanTheBoundIsRefused) {
  const auto path = std::filesystem::temp_directory_path() / ("psw-trace-long-" + std::to_string(::getpid()) + ".csv");
  {
    std::ofstream out(path, std::ios::binary);
    out << "arrival_ns,model,task,batch,slo_ns\n" << std::string(std::size_t{3} << 20, '1');
  }
  expect_input_error([&] { drain(open_project_csv(path, {{"resnet152", 0}})); }, {path.string() + ":2:", "longer than 1 MiB"});
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace psw
