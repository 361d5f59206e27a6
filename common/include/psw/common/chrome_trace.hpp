#pragma once
// Chrome trace (chrome://tracing, Perfetto) of a timeline: each group's transfer on the
// "PCIe copy" track and its compute on the "GPU compute" track.

#include <string>
#include <utility>
#include <vector>

#include "psw/common/timeline.hpp"

namespace psw {

std::string timeline_to_chrome_trace(const Timeline& timeline, const std::string& title);

// Several timelines in one trace, one process each, in order (e.g. a switch measured on the
// GPU beside the timeline predicted for it). otherData holds the first one's totals and, under
// "timelines", every one's.
std::string timelines_to_chrome_trace(const std::vector<std::pair<std::string, Timeline>>& timelines);

}  // namespace psw
