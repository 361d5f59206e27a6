#pragma once
// Chrome trace (chrome://tracing, Perfetto) of a timeline: each group's transfer on the
// "PCIe copy" track and its compute on the "GPU compute" track.

#include <string>

#include "psw/common/timeline.hpp"

namespace psw {

std::string timeline_to_chrome_trace(const Timeline& timeline, const std::string& title);

}  // namespace psw
