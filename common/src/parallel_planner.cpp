// The parallel planner (Note [Parallel planner] in parallel.hpp) and its brute-force oracle.
#include <algorithm>
#include <functional>

#include "psw/common/error.hpp"
#include "psw/common/parallel.hpp"

namespace psw {

namespace {

// The exact single-link optimum for a virtual link of `link`, with this switch's layers.
std::vector<Grouping> virtual_link_groupings(const SwitchCosts& c, LinkCost link) {
  std::vector<Bytes> bytes;
  std::vector<Duration> compute;
  for (std::size_t i = 0; i < c.num_layers(); ++i) {
    bytes.push_back(c.layer_bytes(i));
    compute.push_back(c.layer_compute(i));
  }
  const SwitchCosts virtual_costs(std::move(bytes), std::move(compute), link, c.group_sync(), c.tail(),
                                  c.gpu_free_at());
  const PlanResult exact = plan_optimal(virtual_costs);
  return {exact.groups, prefer_early_start(virtual_costs, exact).groups};
}

// The groupings one local move away from `groups`: a boundary moved by one layer, two
// neighbours merged, a group cut where its bytes are halved.
std::vector<Grouping> neighbours(const SwitchCosts& c, const Grouping& groups) {
  std::vector<Grouping> out;
  for (std::size_t g = 0; g + 1 < groups.size(); ++g) {
    // The boundary after group g, one layer earlier or later.
    if (groups[g].size() > 1) {
      Grouping moved = groups;
      --moved[g].last;
      --moved[g + 1].first;
      out.push_back(std::move(moved));
    }
    if (groups[g + 1].size() > 1) {
      Grouping moved = groups;
      ++moved[g].last;
      ++moved[g + 1].first;
      out.push_back(std::move(moved));
    }
    Grouping merged = groups;
    merged[g].last = merged[g + 1].last;
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(g) + 1);
    out.push_back(std::move(merged));
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const LayerGroup group = groups[g];
    if (group.size() < 2) continue;
    const Bytes half = c.bytes(group.first, group.last) / 2;
    std::size_t cut = group.first;  // the last layer of the first half
    while (cut + 1 < group.last && c.bytes(group.first, cut) < half) ++cut;
    Grouping split = groups;
    split[g].last = cut;
    split.insert(split.begin() + static_cast<std::ptrdiff_t>(g) + 1, LayerGroup{cut + 1, group.last});
    out.push_back(std::move(split));
  }
  return out;
}

}  // namespace

ParallelPlanResult plan_parallel(const ParallelCosts& costs) {
  const SwitchCosts& c = costs.costs();
  const PlanResult single = make_plan(Strategy::Optimal, c);
  ParallelPlanResult result;
  result.single_gpu_total = single.total;
  result.plan = all_direct(costs, single.groups);
  result.total = single.total;
  if (costs.helpers().empty()) return result;

  // 1. Candidate groupings.
  std::int64_t rate = c.link().bandwidth.bytes_per_second();
  Duration helper_fixed = Duration::max();
  for (const HelperPath& h : costs.helpers()) {
    rate += std::min(h.host.bandwidth.bytes_per_second(), h.peer.bandwidth.bytes_per_second());
    helper_fixed = min(helper_fixed, h.host.copy_fixed + h.peer.copy_fixed + h.peer.bandwidth.transfer_time(h.chunk_bytes));
  }
  const Bandwidth aggregate = Bandwidth::bytes_per_second(rate);
  std::vector<Grouping> candidates{single.groups};
  for (const Duration fixed : {c.link().copy_fixed, helper_fixed}) {
    for (Grouping& g : virtual_link_groupings(c, LinkCost{fixed, aggregate})) candidates.push_back(std::move(g));
  }
  Grouping best = candidates.front();
  Duration best_total = balanced_total(costs, best);
  for (const Grouping& g : candidates) {
    const Duration total = balanced_total(costs, g);
    if (total < best_total) {
      best_total = total;
      best = g;
    }
  }
  // 2. Local search, best improvement per pass; each pass lowers the total, so it ends.
  for (bool improved = true; improved;) {
    improved = false;
    for (Grouping& g : neighbours(c, best)) {
      const Duration total = balanced_total(costs, g);
      if (total < best_total) {
        best_total = total;
        best = std::move(g);
        improved = true;
      }
    }
  }
  // 3. Never slower than one GPU.
  if (best_total < result.total) {
    result.plan = balanced_splits(costs, best);
    result.total = best_total;
    PSW_CHECK(evaluate_parallel_total(costs, result.plan) == best_total, "balanced plan disagrees");
  }
  return result;
}

ParallelPlanResult plan_parallel_brute_force(const ParallelCosts& costs, int steps) {
  const SwitchCosts& c = costs.costs();
  const std::size_t n = c.num_layers();
  if (n > 12) throw InputError(detail::concat("parallel brute force refuses ", n, " layers; use at most 12"));
  if (steps < 1 || steps > 16) throw InputError(detail::concat("parallel brute force takes 1..16 steps, got ", steps));
  const std::size_t paths = costs.num_paths();
  // Every way of writing `steps` as an ordered sum of `paths` non-negative parts.
  std::vector<std::vector<int>> shares;
  std::vector<int> share(paths, 0);
  const std::function<void(std::size_t, int)> compose = [&](std::size_t p, int left) {
    if (p + 1 == paths) {
      share[p] = left;
      shares.push_back(share);
      return;
    }
    for (int k = 0; k <= left; ++k) {
      share[p] = k;
      compose(p + 1, left - k);
    }
  };
  compose(0, steps);

  ParallelPlanResult result;
  result.single_gpu_total = make_plan(Strategy::Optimal, c).total;
  result.total = Duration::max();
  ParallelPlan current;
  // Depth-first over (next layer, the plan so far); the timeline is re-evaluated at the
  // leaves, which keeps the oracle independent of the planner's incremental arithmetic.
  const std::function<void(std::size_t)> search = [&](std::size_t i) {
    if (i == n) {
      const Duration total = evaluate_parallel_total(costs, current);
      if (total < result.total) {
        result.total = total;
        result.plan = current;
      }
      return;
    }
    for (std::size_t j = i; j < n; ++j) {
      const Bytes bytes = c.bytes(i, j);
      current.groups.push_back({i, j});
      for (const std::vector<int>& s : shares) {
        PathSplit split(paths, 0);
        Bytes rest = bytes;
        for (std::size_t p = 1; p < paths; ++p) {
          split[p] = bytes * s[p] / steps;
          rest -= split[p];
        }
        split[0] = rest;
        current.splits.push_back(std::move(split));
        search(j + 1);
        current.splits.pop_back();
      }
      current.groups.pop_back();
    }
  };
  search(0);
  return result;
}

}  // namespace psw
