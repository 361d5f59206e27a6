#include "psw/common/chrome_trace.hpp"

#include <nlohmann/json.hpp>

namespace psw {

std::string timeline_to_chrome_trace(const Timeline& timeline, const std::string& title) {
  using nlohmann::json;
  constexpr int kPid = 1;
  constexpr int kCopyTrack = 1;
  constexpr int kComputeTrack = 2;
  json events = json::array();
  auto meta = [&](const char* name, int tid, const std::string& value) {
    events.push_back({{"name", name}, {"ph", "M"}, {"pid", kPid}, {"tid", tid},
                      {"args", {{"name", value}}}});
  };
  meta("process_name", 0, title);
  meta("thread_name", kCopyTrack, "PCIe copy (host to device)");
  meta("thread_name", kComputeTrack, "GPU compute");
  // Chrome trace timestamps are microseconds; fractions keep nanosecond detail.
  auto us = [](Duration d) { return static_cast<double>(d.ns()) / 1e3; };
  for (std::size_t g = 0; g < timeline.groups.size(); ++g) {
    const auto& t = timeline.groups[g];
    const json args = {{"group", g},
                       {"first_layer", t.group.first},
                       {"last_layer", t.group.last},
                       {"bytes", t.bytes}};
    events.push_back({{"name", "copy group " + std::to_string(g)}, {"cat", "transfer"},
                      {"ph", "X"}, {"pid", kPid}, {"tid", kCopyTrack},
                      {"ts", us(t.transfer_start)}, {"dur", us(t.transfer_end - t.transfer_start)},
                      {"args", args}});
    events.push_back({{"name", "compute group " + std::to_string(g)}, {"cat", "compute"},
                      {"ph", "X"}, {"pid", kPid}, {"tid", kComputeTrack},
                      {"ts", us(t.compute_start)}, {"dur", us(t.compute_end - t.compute_start)},
                      {"args", args}});
  }
  const json trace = {{"traceEvents", events},
                      {"displayTimeUnit", "ns"},
                      {"otherData",
                       {{"title", title},
                        {"total_ns", timeline.total.ns()},
                        {"startup_ns", timeline.startup.ns()},
                        {"overhead_ns", timeline.overhead.ns()},
                        {"ready_ns", timeline.ready.ns()}}}};
  return trace.dump(1) + "\n";
}

}  // namespace psw
