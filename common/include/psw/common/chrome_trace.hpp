#pragma once
// Chrome trace (chrome://tracing, Perfetto) of a timeline: each group's transfer on the
// "PCIe copy" track and its compute on the "GPU compute" track.

#include <string>
#include <utility>
#include <vector>

#include "psw/common/timeline.hpp"

namespace psw {

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
