#pragma once
// Parallel transmission through peer GPUs: the costs, the plan and the timeline
// of a switch whose groups' bytes split over the direct host link and helper GPUs' host
// links plus NVLink. The path model is Note [Parallel paths] (hardware_profile.hpp); with
// no helpers, or every byte direct, everything here is timeline.hpp's single-GPU result
// exactly.

#include <cstddef>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"

namespace psw {

// One helper's path: stage A host -> helper, stage B helper -> target, chunked.
struct HelperPath {
  LinkCost host;  // the helper's host link as a switch gets it (shared when it trains)
  LinkCost peer;  // helper -> target, one copy per chunk
  Bytes chunk_bytes = 0;
};

// A switch's per-layer costs (the direct path is costs.link()) and its helpers.
class ParallelCosts {
 public:
  // Validates: positive bandwidths and chunk size, non-negative fixed costs (InputError).
  ParallelCosts(SwitchCosts costs, std::vector<HelperPath> helpers);

  const SwitchCosts& costs() const { return costs_; }
  const std::vector<HelperPath>& helpers() const { return helpers_; }
  // Path 0 is direct; path h (1..helpers) goes through helper h.
  std::size_t num_paths() const { return helpers_.size() + 1; }

 private:
  SwitchCosts costs_;
  std::vector<HelperPath> helpers_;
};

// The helpers of a switch onto one of `gpus` GPUs of `hardware` (its multi_gpu section;
// `gpus` at most its count): the first gpus - 1 helper links, each at
// helper_busy_share_percent of its bandwidth when `helpers_training`, each peer link at most
// peer_ingress / (gpus - 1) when the profile sets the target's ingress. InputError when
// `gpus` > 1 and the profile has no multi_gpu section, or more GPUs than it lists.
ParallelCosts make_parallel_costs(SwitchCosts costs, const HardwareProfile& hardware, int gpus,
                                  bool helpers_training);

// Per group, the bytes each path carries (index = path), summing to the group's bytes.
using PathSplit = std::vector<Bytes>;

struct ParallelPlan {
  Grouping groups;
  std::vector<PathSplit> splits;  // per group
};

// Every byte on the direct path: the single-GPU plan of `groups`.
ParallelPlan all_direct(const ParallelCosts& costs, const Grouping& groups);

struct PathTiming {
  bool used = false;  // the path carries a copy of the group (times are zero otherwise)
  Bytes bytes = 0;
  Duration start;     // the path's first copy of the group starts
  Duration host_end;  // the host link's copy ends (direct: the same as end)
  Duration end;       // the bytes are on the target
};

struct ParallelGroupTiming {
  GroupTiming timing;  // transfer_start: the first path's start; transfer_end: the last path's end
  std::vector<PathTiming> paths;  // per path
};

struct ParallelTimeline {
  std::vector<ParallelGroupTiming> groups;
  Duration total;
  Duration startup;
  Duration overhead;
  Duration ready;
};

// Validates the grouping and the splits (InputError) and evaluates the plan.
ParallelTimeline evaluate_parallel_timeline(const ParallelCosts& costs, const ParallelPlan& plan);
// The total only, without validation and with no per-group allocation (the planners' inner loop).
Duration evaluate_parallel_total(const ParallelCosts& costs, const ParallelPlan& plan);

// Note [Balanced split]
// ~~~~~~~~~~~~~~~~~~~~~
// For a fixed grouping, the split of each group in turn that makes it arrive earliest given
// what the earlier groups left on the paths: the least level L such that the paths can
// deliver the group's bytes by L (each path p can deliver a largest b_p(L), non-decreasing
// in L: found by bisection), filled direct first, then helper 1, 2, ... (so a group that no
// helper speeds up stays all direct, and with no helpers this is the single-GPU timeline).
// Why this split: in the fluid limit (no fixed costs, no chunk fill, no rounding) each path
// delivers at a constant rate from time 0, so the first g groups cannot all have arrived
// before the least time L_g at which the paths together can deliver their bytes; filling
// the paths to equal finish times makes group g arrive at exactly L_g for every g at once,
// and the total is non-decreasing in every arrival: the balanced split is optimal for the
// grouping. With fixed costs per copy and the helper path's chunk fill it is a heuristic:
// using a path for a group costs a fixed amount, and a helper started late delivers less
// by a given time than one started early. Its gap is measured against brute force over
// discretized splits (tests/common/test_parallel.cpp, Note [Parallel planner]).
ParallelPlan balanced_splits(const ParallelCosts& costs, const Grouping& groups);
// evaluate_parallel_total(costs, balanced_splits(costs, groups)) without building the plan.
Duration balanced_total(const ParallelCosts& costs, const Grouping& groups);

// The multi-link analogue of pipeline_bound (DESIGN.md §6): the largest, over layers k, of
// the time to deliver layers 0..k over all paths at once (the least fixed cost of a path,
// then the bytes at the sum of the paths' rates, a helper's rate the lesser of its two
// links) plus the compute of layers k..n-1. No plan finishes earlier. With no helpers this
// is pipeline_bound exactly; with two GPUs it is the "two-link pipeline bound".
Duration parallel_pipeline_bound(const ParallelCosts& costs);

// Note [Parallel planner]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Groups and splits chosen jointly. With no helpers: the single-GPU planner's plan
// (make_plan(Optimal)), every byte direct, the same total exactly. With helpers:
//  1. candidate groupings: the single-GPU optimal one, and the exact optimum (plan_optimal,
//     and with prefer_early_start) for a virtual single link that moves bytes at the sum of
//     the paths' rates (a helper's rate the lesser of its two links) with, in turn, the direct
//     link's fixed cost and a helper's (host and peer fixed costs plus one chunk's hop);
//  2. each with balanced splits (Note [Balanced split]); the best is improved by local search
//     (move a group boundary by one layer, merge two groups, cut a group at its byte
//     midpoint) until no move lowers the total;
//  3. the single-GPU plan all direct is kept if it is still better, so the result is never
//     slower than one GPU.
// Not exact: the grouping is searched locally and the splits are balanced, not optimised.
// tests/common/test_parallel.cpp bounds it against plan_parallel_brute_force on random
// small models (1 helper: 5 and 6 layers, splits in quarters; 2 helpers: 5 layers, thirds;
// 3 helpers: 4 layers, halves): the planner's total is at most kParallelPlannerBound times
// the brute force's (which it often beats: its splits are not limited to those steps).
// Measured worst on those instances: 1.005. On the shipped
// models on the H200 profile with 2 to 8 GPUs it is within 0.5% of parallel_pipeline_bound.
struct ParallelPlanResult {
  ParallelPlan plan;
  Duration total;
  Duration single_gpu_total;  // the single-GPU planner's total on the direct link alone
};

// The documented bound of Note [Parallel planner], as a factor over the brute force.
inline constexpr double kParallelPlannerBound = 1.02;

ParallelPlanResult plan_parallel(const ParallelCosts& costs);
// Every grouping, and for each group every split of its bytes over the paths in multiples of
// 1/steps (the direct path taking the rounding remainder); the test oracle. Refuses more than
// 12 layers, or steps outside 1..16.
ParallelPlanResult plan_parallel_brute_force(const ParallelCosts& costs, int steps);

}  // namespace psw
