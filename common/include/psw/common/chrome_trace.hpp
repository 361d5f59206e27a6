#pragma once
// Chrome traces (chrome://tracing, Perfetto), written by one writer (Note [One Chrome trace
// writer]): a timeline's (each group's transfer on the "PCIe copy" track and its compute on the
// "GPU compute" track), the simulator's (psw sim --trace-out) and the live server's (psw serve
// --trace).

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "psw/common/timeline.hpp"

namespace psw {

class OutputFile;

// Note [One Chrome trace writer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every Chrome trace the project writes goes through this writer, so that they agree on the
// format: complete slices ("ph": "X") with times in exact microseconds from integer nanoseconds
// (chrome_trace_us), names JSON-escaped, process and thread names as metadata events, and
// `otherData` with what the writer of the trace adds and `events_dropped`, the slices left out
// beyond `max_slices` (a day's simulation has tens of millions). To a file it writes as it goes,
// in constant memory, each write checked (Note [Checked writes]); in memory it returns the text.
class ChromeTraceWriter {
 public:
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
  // Written to `path` as it goes; InputError when it cannot be opened.
  explicit ChromeTraceWriter(const std::filesystem::path& path, std::size_t max_slices = kUnlimited);
  // Kept in memory: finish() returns the text.
  explicit ChromeTraceWriter(std::size_t max_slices = kUnlimited);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void process_name(int pid, std::string_view name);
  void thread_name(int pid, int tid, std::string_view name);
  // A slice from `start` to `end` on thread `tid` of process `pid`; `category` may be empty;
  // `args` (a JSON object) may be null. Error for an end before the start.
  void slice(std::string_view name, std::string_view category, int pid, int tid, Duration start, Duration end,
             const nlohmann::json* args = nullptr);
  // Closes the trace with `other` (a JSON object, or null) as otherData, events_dropped added.
  // A file is flushed and closed, checked; in memory, the text is returned (else empty).
  std::string finish(const nlohmann::json* other = nullptr);

  std::size_t slices() const { return written_; }
  std::size_t dropped() const { return dropped_; }

 private:
  void event(const std::string& text);
  void flush();
  std::unique_ptr<OutputFile> out_;  // null: in memory
  std::string buffer_;
  std::size_t max_slices_;
  std::size_t written_ = 0;
  std::size_t dropped_ = 0;
  bool first_ = true;
  bool finished_ = false;
};

std::string timeline_to_chrome_trace(const Timeline& timeline, const std::string& title);

// A time as Chrome trace microseconds, exactly: the integer nanoseconds as a fixed decimal
// with three fractional digits ("3600001234.567", "-0.005"), never through a double, so that
// a trace keeps nanosecond resolution however long the run (a double printed with 6
// significant digits keeps only 10 us after one simulated second).
std::string chrome_trace_us(Duration d);

// Several timelines in one trace, one process each, in order (e.g. a switch measured on the
// GPU beside the timeline predicted for it). otherData holds the first one's totals and, under
// "timelines", every one's.
std::string timelines_to_chrome_trace(const std::vector<std::pair<std::string, Timeline>>& timelines);

}  // namespace psw
