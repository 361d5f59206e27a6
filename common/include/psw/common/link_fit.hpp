#pragma once
// Fitting the copy-cost model of a link, copy(bytes) = copy_fixed + bytes / bandwidth, to
// measured copies (DESIGN.md §3: least squares with Eigen).

#include <vector>

#include "psw/common/hardware_profile.hpp"

namespace psw {

struct CopySample {
  Bytes bytes = 0;
  Duration time;
};

// Least squares on relative error (each equation divided by its measured time), so that a
// 4 KiB copy weighs as much as a 1 GiB one: the fixed cost comes from the small copies and
// the bandwidth from the large. Throws InputError with fewer than two distinct sizes or
// a fit that gives a non-positive bandwidth.
LinkCost fit_link(const std::vector<CopySample>& samples);

}  // namespace psw
