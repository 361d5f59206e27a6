#pragma once
// Timeline evaluation: the one function that says when every group of a plan is
// transferred and computed. The planners, the simulator and the executor's prediction
// all call it, with these semantics (DESIGN.md §3):
//  - group g's transfer starts when group g-1's ends (the first at 0) and lasts
//    copy_fixed + ceil(bytes_g / bandwidth);
//  - group g's compute starts at max(transfer_end_g, compute_end_{g-1}) + group_sync
//    (compute_end_0 is when the GPU is free) and lasts the sum of its layers' times;
//  - total = compute end of the last group + tail (backward, training only);
//    startup = compute start of the first group; overhead = total - ready.

#include <vector>

#include "psw/common/plan.hpp"
#include "psw/common/switch_costs.hpp"

namespace psw {

struct GroupTiming {
  LayerGroup group;
  Bytes bytes = 0;
  Duration transfer_start;
  Duration transfer_end;
  Duration compute_start;
  Duration compute_end;
};

struct Timeline {
  std::vector<GroupTiming> groups;
  Duration total;
  Duration startup;
  Duration overhead;
  Duration ready;
};

// Where a switch's time went, for reports of a measured (or predicted) timeline: when the
// GPU first computed, when the last copy ended, how long it computed, and how long it sat
// between two groups' computes waiting for a copy (the gaps between one non-empty group's
// compute end and the next one's start; a group with no compute, such as one of parameterless
// layers, neither opens nor closes a gap).
struct TimelineBreakdown {
  std::size_t groups = 0;
  Duration total;
  Duration first_compute_start;  // of the first group that computes; total when none does
  Duration last_transfer_end;
  Duration compute_busy;         // the groups' compute, summed
  Duration compute_waits;
};
TimelineBreakdown break_down(const Timeline& timeline);

// Validates the grouping (InputError) and evaluates it.
Timeline evaluate_timeline(const SwitchCosts& costs, const Grouping& groups);

// The total only, without allocation or validation: the planners' inner loop.
Duration evaluate_total(const SwitchCosts& costs, const Grouping& groups);

// The pipeline bound (DESIGN.md §6): the largest, over layers k, of the time to copy
// layers 0..k at full bandwidth with one copy_fixed, plus the compute of layers k..n-1.
// No grouping finishes earlier, and no group_sync is charged.
Duration pipeline_bound(const SwitchCosts& costs);

}  // namespace psw
