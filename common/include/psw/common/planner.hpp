#pragma once
// Planners: choose the grouping of consecutive layers for one switch.
//
//  single      one group: transfer everything, then compute (no pipelining)
//  per-layer   one group per layer: maximal overlap, maximal per-group overhead
//  pipeswitch  the paper's depth-first search with its two pruning rules
//              (PAPER.md §5.3), plus a dominance memo; exact
//  optimal     dynamic program over (first layer of a suffix, groups in it) on the
//              total's suffix form (Note [Suffix form of the total] in planner.cpp), after
//              folding parameterless layers into the layer before them; exact
//  fixed       groups read from a YAML file
//
// Note [Exactness]: the future of a partial schedule (layers 0..i-1 grouped) depends
// only on its transfer end T and compute end E, and the final total is non-decreasing in
// both. So a partial schedule with T' <= T and E' <= E dominates, for any transfer-time
// function of a group's contents. The label-setting DP (planner_detail::plan_label_setting,
// `optimal` until it became the group-count DP) keeps only non-dominated (T, E) per
// boundary; this stays exact although per-group ceil() rounding makes transfer times not
// additive (which breaks the simpler (layer, groups-so-far) DP of PAPER.md §5.4 by a few
// ns). The group-count DP of `optimal` needs no dominance: for a given number of groups, a
// suffix's cost is a maximum of per-group terms in which each group's transfer is one ceil()
// of its own bytes, and transfer ends add up over groups exactly (Note [Suffix form of the
// total] in planner.cpp).

#include <cstdint>
#include <string>

#include "psw/common/plan.hpp"
#include "psw/common/switch_costs.hpp"

namespace psw {

// Strategy, to_string(Strategy) and parse_strategy live in plan.hpp (a plan records its strategy).

struct SearchStats {
  std::int64_t nodes = 0;   // partial schedules expanded
  std::int64_t pruned = 0;  // candidate groups cut by a bound or a dominance test
};

struct PlanResult {
  Grouping groups;
  Duration total;
  SearchStats stats;
};

PlanResult plan_single(const SwitchCosts& costs);
PlanResult plan_per_layer(const SwitchCosts& costs);
PlanResult plan_pipeswitch(const SwitchCosts& costs);
PlanResult plan_optimal(const SwitchCosts& costs);
// Every one of the 2^(n-1) groupings; the test oracle. Refuses n > 24.
PlanResult plan_brute_force(const SwitchCosts& costs);

namespace planner_detail {
// The label-setting DP that `optimal` was before the group-count DP: exact, roughly cubic in
// the layers (over 2 minutes at 10,000). The tests compare `optimal` with it on models too
// deep for brute force; nothing else should call it.
PlanResult plan_label_setting(const SwitchCosts& costs);
}  // namespace planner_detail

// Note [Early start]: a transfer-bound model finishes when its last bytes arrive however large
// its first group is, yet a large first group delays the first computation (the startup
// overhead the executor reports). An extra group costs only its fixed costs (copy_fixed +
// group_sync: 4.5 µs on the H200 profile, 108 µs on the V100 and T4 profiles, whose group_sync
// is fitted to the artifact), so the exact optimum is often a plan with a large first group
// that wins by those µs and starts the GPU 0.5 ms late. This returns the plan whose first group
// is the first of 1, 2, 4, 8, ... layers that keeps the total within one group's fixed costs
// of `optimal` (the rest planned exactly); `optimal` itself when no smaller first group does.
// About log2(first group) more exact searches; not necessarily the least startup.
PlanResult prefer_early_start(const SwitchCosts& costs, const PlanResult& optimal);

// Dispatches on a strategy; Fixed needs `fixed_groups` (validated here). Optimal includes
// prefer_early_start (so its total may exceed the exact optimum by one group's fixed costs).
PlanResult make_plan(Strategy strategy, const SwitchCosts& costs,
                     const Grouping* fixed_groups = nullptr);

}  // namespace psw
