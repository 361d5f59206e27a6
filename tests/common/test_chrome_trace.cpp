// The Chrome trace of a timeline: valid JSON, one copy and one compute event per group on
// two tracks, timestamps in microseconds matching the timeline.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace psw
