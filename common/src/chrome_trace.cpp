#include "psw/common/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw {

std::string chrome_trace_us(Duration d) {
  const std::int64_t ns = d.ns();
  // Magnitude in unsigned arithmetic: -INT64_MIN does not fit an int64.
  const std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  const auto thousandths = static_cast<unsigned>(magnitude % 1000);
  const char fraction[4] = {static_cast<char>('0' + thousandths / 100), static_cast<char>('0' + thousandths / 10 % 10),
                            static_cast<char>('0' + thousandths % 10), '\0'};
  std::string out = ns < 0 ? "-" : "";
  out += std::to_string(magnitude / 1000);
  out += '.';
  out += fraction;
  return out;
}

std::string timeline_to_chrome_trace(const Timeline& timeline, const std::string& title) {
  return timelines_to_chrome_trace({{title, timeline}});
}

std::string timelines_to_chrome_trace(const std::vector<std::pair<std::string, Timeline>>& timelines) {
  using nlohmann::json;
  PSW_CHECK(!timelines.empty(), "a Chrome trace needs at least one timeline");
  constexpr int kCopyTrack = 1;
  constexpr int kComputeTrack = 2;
  // Chrome trace timestamps are microseconds; fractions keep nanosecond detail.
  auto us = [](Duration d) { return static_cast<double>(d.ns()) / 1e3; };
  json events = json::array();
  json totals = json::array();
  for (std::size_t k = 0; k < timelines.size(); ++k) {
    const auto& [title, timeline] = timelines[k];
    const int pid = static_cast<int>(k) + 1;
    auto meta = [&](const char* name, int tid, const std::string& value) {
      events.push_back({{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}});
    };
    meta("process_name", 0, title);
    meta("thread_name", kCopyTrack, "PCIe copy (host to device)");
    meta("thread_name", kComputeTrack, "GPU compute");
    for (std::size_t g = 0; g < timeline.groups.size(); ++g) {
      const auto& t = timeline.groups[g];
      const json args = {{"group", g}, {"first_layer", t.group.first}, {"last_layer", t.group.last}, {"bytes", t.bytes}};
      events.push_back({{"name", "copy group " + std::to_string(g)}, {"cat", "transfer"}, {"ph", "X"},
                        {"pid", pid}, {"tid", kCopyTrack}, {"ts", us(t.transfer_start)},
                        {"dur", us(t.transfer_end - t.transfer_start)}, {"args", args}});
      events.push_back({{"name", "compute group " + std::to_string(g)}, {"cat", "compute"}, {"ph", "X"},
                        {"pid", pid}, {"tid", kComputeTrack}, {"ts", us(t.compute_start)},
                        {"dur", us(t.compute_end - t.compute_start)}, {"args", args}});
    }
    totals.push_back({{"title", title},
                      {"total_ns", timeline.total.ns()},
                      {"startup_ns", timeline.startup.ns()},
                      {"overhead_ns", timeline.overhead.ns()},
                      {"ready_ns", timeline.ready.ns()}});
  }
  json other = totals[0];
  other["timelines"] = totals;
  const json trace = {{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", other}};
  return trace.dump(1) + "\n";
}

}  // namespace psw
