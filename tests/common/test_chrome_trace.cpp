// The Chrome trace of a timeline: valid JSON, one copy and one compute event per group on
// two tracks, timestamps in microseconds matching the timeline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

#include "psw/common/chrome_trace.hpp"

namespace psw {
namespace {

TEST(ChromeTrace, OneCopyAndOneComputeEventPerGroup) {
  const SwitchCosts costs({1000, 2000, 3000}, {microseconds(5), microseconds(6), microseconds(7)},
                          LinkCost{microseconds(2), Bandwidth::bytes_per_second(1'000'000'000)},
                          microseconds(1));
  const Timeline timeline = evaluate_timeline(costs, {{0, 0}, {1, 2}});
  const auto trace = nlohmann::json::parse(timeline_to_chrome_trace(timeline, "test"));
  int copies = 0;
  int computes = 0;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    const auto g = event.at("args").at("group").get<std::size_t>();
    const auto& t = timeline.groups.at(g);
    if (event.at("cat") == "transfer") {
      ++copies;
      EXPECT_EQ(event.at("tid"), 1);
      EXPECT_DOUBLE_EQ(event.at("ts").get<double>(), t.transfer_start.us());
      EXPECT_DOUBLE_EQ(event.at("dur").get<double>(), (t.transfer_end - t.transfer_start).us());
    } else {
      ++computes;
      EXPECT_EQ(event.at("tid"), 2);
      EXPECT_DOUBLE_EQ(event.at("ts").get<double>(), t.compute_start.us());
    }
  }
  EXPECT_EQ(copies, 2);
  EXPECT_EQ(computes, 2);
  EXPECT_EQ(trace.at("otherData").at("total_ns").get<std::int64_t>(), timeline.total.ns());
}

TEST(ChromeTrace, SeveralTimelinesGetOneProcessEach) {
  const SwitchCosts costs({1000, 2000}, {microseconds(5), microseconds(6)},
                          LinkCost{microseconds(2), Bandwidth::bytes_per_second(1'000'000'000)},
                          microseconds(1));
  const Timeline a = evaluate_timeline(costs, {{0, 0}, {1, 1}});
  const Timeline b = evaluate_timeline(costs, {{0, 1}});
  const auto trace = nlohmann::json::parse(timelines_to_chrome_trace({{"measured", a}, {"predicted", b}}));
  std::map<int, int> events_of_pid;
  std::map<int, std::string> name_of_pid;
  for (const auto& event : trace.at("traceEvents")) {
    const int pid = event.at("pid").get<int>();
    if (event.at("ph") == "X") ++events_of_pid[pid];
    if (event.at("name") == "process_name") name_of_pid[pid] = event.at("args").at("name").get<std::string>();
  }
  EXPECT_EQ(events_of_pid[1], 4);  // two groups: a copy and a compute each
  EXPECT_EQ(events_of_pid[2], 2);
  EXPECT_EQ(name_of_pid[1], "measured");
  EXPECT_EQ(name_of_pid[2], "predicted");
  ASSERT_EQ(trace.at("otherData").at("timelines").size(), 2u);
  EXPECT_EQ(trace.at("otherData").at("timelines")[1].at("total_ns").get<std::int64_t>(), b.total.ns());
  EXPECT_THROW(timelines_to_chrome_trace({}), Error);
}

}  // namespace
}  // namespace psw

namespace psw {
namespace {

// Microseconds written from integer nanoseconds, exactly, however far into a run.
TEST(ChromeTrace, MicrosecondsAreExactFromIntegerNanoseconds) {
  EXPECT_EQ(chrome_trace_us(Duration::zero()), "0.000");
  EXPECT_EQ(chrome_trace_us(nanoseconds(5)), "0.005");
  EXPECT_EQ(chrome_trace_us(nanoseconds(1'234'567'891)), "1234567.891");
  EXPECT_EQ(chrome_trace_us(nanoseconds(3'600'001'234'567)), "3600001234.567");  // an hour in
  EXPECT_EQ(chrome_trace_us(nanoseconds(-5)), "-0.005");
  EXPECT_EQ(chrome_trace_us(nanoseconds(INT64_MIN)), "-9223372036854775.808");
}

// Note [One Chrome trace writer]: names escaped, times exact, slices past the cap counted as
// dropped, the same text in memory and in a file.
TEST(ChromeTraceWriter, EscapesNamesKeepsNanosecondsAndCountsWhatItDrops) {
  auto write = [](ChromeTraceWriter& trace) {
    trace.process_name(1, "psw \"test\"");
    trace.thread_name(1, 2, "GPU");
    const nlohmann::json args = {{"bytes", 42}};
    trace.slice("infer \"a\"\\b", "compute", 1, 2, nanoseconds(3'600'000'000'001), nanoseconds(3'600'000'001'002),
                &args);
    trace.slice("second", {}, 1, 2, nanoseconds(10), nanoseconds(10));
    trace.slice("third", "queue", 1, 3, nanoseconds(1), nanoseconds(2));  // beyond the cap of 2
    const nlohmann::json other = {{"what", "test"}};
    return trace.finish(&other);
  };
  ChromeTraceWriter in_memory(2);
  const std::string text = write(in_memory);
  EXPECT_EQ(in_memory.slices(), 2u);
  EXPECT_EQ(in_memory.dropped(), 1u);
  const auto trace = nlohmann::json::parse(text);
  const auto& events = trace.at("traceEvents");
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].at("args").at("name"), "psw \"test\"");
  EXPECT_EQ(events[2].at("name"), "infer \"a\"\\b");
  EXPECT_EQ(events[2].at("args").at("bytes"), 42);
  EXPECT_FALSE(events[3].contains("cat"));
  EXPECT_NE(text.find("\"ts\":3600000000.001,\"dur\":1.001"), std::string::npos) << text;
  EXPECT_EQ(trace.at("otherData").at("events_dropped"), 1);
  EXPECT_EQ(trace.at("otherData").at("what"), "test");

  const auto path = std::filesystem::temp_directory_path() / "psw_chrome_trace_writer.json";
  ChromeTraceWriter to_file(path, 2);
  EXPECT_TRUE(write(to_file).empty());
  std::ifstream in(path);
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(file.str(), text);
  std::filesystem::remove(path);

  ChromeTraceWriter backwards;
  EXPECT_THROW(backwards.slice("x", {}, 1, 1, nanoseconds(2), nanoseconds(1)), Error);
}

}  // namespace
}  // namespace psw
