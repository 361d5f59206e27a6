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

// Note [Link fit weighting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A pinned copy (and a kernel reading mapped memory) is well described by a fixed cost plus a
// rate at every size, so its fit minimises the relative error of each sample: a 4 KiB copy
// weighs as much as a 1 GiB one, the fixed cost comes from the small copies and the bandwidth
// from the large. A pageable copy is not linear: the driver stages it through a bounce buffer,
// and on the H200 (the profile of 2026-11-29) it ran at 13-16 GB/s for 0.26-17 MB but
// 8.7-9.5 GB/s from 67 MB on; the next run (results/profiles/h200-pcie5.yaml) moved the drop
// past 67 MB. A relative fit averages the two regimes (12.7 GB/s) and
// predicted no-pinned-memory switches about 40% too fast. Its fit keeps the fixed cost of the
// relative fit (the small copies') and then chooses the rate that minimises the absolute error
// in time, so the large copies that make up most of a switch's time set it: on those samples
// 9.1 GB/s, within 5% of every copy from 67 MB on, and up to 50% slow for copies of 1-17 MB
// (the groups of a pageable switch plan are mostly 8-250 MB). A rate fitted on absolute error
// together with the fixed cost would trade a few percent on the large copies for a fixed cost of
// hundreds of µs (518 µs on one H200 run), which every small group would then pay in a plan.
// A negative fixed cost from the relative fit refits the rate through the origin.
enum class LinkFitWeighting { RelativeError, AbsoluteError };

// Throws InputError with fewer than two distinct sizes or a fit that gives a non-positive
// bandwidth.
LinkCost fit_link(const std::vector<CopySample>& samples,
                  LinkFitWeighting weighting = LinkFitWeighting::RelativeError);

}  // namespace psw
