#include "psw/common/planner.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/common/timeline.hpp"

namespace psw {


namespace {

// Both searches work on partial schedules: layers 0..i-1 grouped, the last transfer
// ending at `transfer_end` and the last compute at `compute_end`.
struct Partial {
  Duration transfer_end;
  Duration compute_end;
};

// Shared arithmetic of the searches over one SwitchCosts.
class SearchContext {
 public:
  explicit SearchContext(const SwitchCosts& costs)
      : costs_(costs), n_(costs.num_layers()), bytes_ceil_ns_(n_ + 1), pipe_suffix_(n_ + 1) {
    // Note [Pipeline lower bound]: whatever the grouping of layers i..n-1, layer k's group
    // arrives no earlier than T + copy_fixed + bytes(i..k)/bandwidth, and its compute then
    // runs layers k..n-1 after one sync. bytes(i..k)/bandwidth >= floor(P[k+1]) - ceil(P[i])
    // with P[m] = prefix bytes in ns of link time, so the suffix maximum of
    // floor(P[k+1]) + compute(k..n-1) gives the bound for every i in O(1).
    const auto& bw = costs.link().bandwidth;
    const auto to_ns_floor = [&bw](Bytes b) {
      return static_cast<std::int64_t>(static_cast<Uint128>(b) * 1'000'000'000u /
                                       static_cast<Uint128>(bw.bytes_per_second()));
    };
    for (std::size_t m = 0; m <= n_; ++m) {
      bytes_ceil_ns_[m] = m == 0 ? 0 : bw.transfer_time(costs.bytes(0, m - 1)).ns();
    }
    pipe_suffix_[n_] = std::numeric_limits<std::int64_t>::min();
    for (std::size_t k = n_; k-- > 0;) {
      const std::int64_t here = to_ns_floor(costs.bytes(0, k)) + costs.compute(k, n_ - 1).ns();
      pipe_suffix_[k] = std::max(pipe_suffix_[k + 1], here);
    }
  }

  std::size_t n() const { return n_; }

  // The partial schedule after appending group [i, j] to `p` (not normalised).
  Partial extend(const Partial& p, std::size_t i, std::size_t j) const {
    const Duration t = p.transfer_end + costs_.transfer_time(i, j);
    return {t, max(t, p.compute_end) + costs_.group_sync() + costs_.compute(i, j)};
  }

  // Note [Idle GPU normalisation]: with next layer i, the next group arrives no earlier
  // than T + transfer_time(i, i). A compute end E before that never matters (the next
  // group starts at its arrival either way), so E can be raised to it without changing
  // any completion's total. This makes partials that differ only in how early the GPU
  // went idle comparable, which collapses the fronts of transfer-bound models.
  Partial normalise(Partial p, std::size_t i) const {
    if (i < n_) p.compute_end = max(p.compute_end, p.transfer_end + costs_.transfer_time(i, i));
    return p;
  }

  // A lower bound on the total of any completion of `p`, whose next layer is `i` (< n).
  // Pruning 1 of PAPER.md §5.3, made valid: the GPU must still run layers i..n-1 after at
  // least one more sync (compute side), and no layer can start before its bytes arrived
  // (Note [Pipeline lower bound]).
  Duration lower_bound(const Partial& p, std::size_t i) const {
    const Duration compute_side = p.compute_end + costs_.group_sync() + costs_.compute(i, n_ - 1);
    const Duration pipe_side = p.transfer_end + costs_.link().copy_fixed + costs_.group_sync() +
                               nanoseconds(pipe_suffix_[i] - bytes_ceil_ns_[i]);
    return max(compute_side, pipe_side) + costs_.tail();
  }

  // The compute-side part of lower_bound for the partial after group [i, j]; it never
  // decreases as j grows (for j < n-1), so once it reaches the incumbent no longer group
  // that leaves layers behind can win.
  Duration compute_side_bound(const Partial& after, std::size_t j) const {
    return after.compute_end + costs_.group_sync() + costs_.compute(j + 1, n_ - 1) + costs_.tail();
  }

  Duration finish(const Partial& p) const { return p.compute_end + costs_.tail(); }

  // j*: the last j >= i whose group [i, j] arrives no later than the GPU is free. A
  // normalised partial always has one (Note [Idle GPU normalisation]).
  std::size_t last_arriving_by(const Partial& p, std::size_t i) const {
    std::size_t lo = i;
    std::size_t hi = n_ - 1;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo + 1) / 2;
      if (p.transfer_end + costs_.transfer_time(i, mid) <= p.compute_end) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

 private:
  const SwitchCosts& costs_;
  std::size_t n_;
  std::vector<std::int64_t> bytes_ceil_ns_;  // ceil(prefix bytes / bandwidth) in ns
  std::vector<std::int64_t> pipe_suffix_;    // max over k >= i of floor(P[k+1]) + compute(k..n-1)
};

// The incumbent that seeds both exact searches: the best of one group, one group per
// layer, and K groups of about equal bytes for K up to 64. A tight seed lets the lower
// bound cut most of the search from the start; it never affects exactness.
PlanResult seed_incumbent(const SwitchCosts& costs) {
  PlanResult best = plan_single(costs);
  PlanResult per_layer = plan_per_layer(costs);
  if (per_layer.total < best.total) best = per_layer;
  const std::size_t n = costs.num_layers();
  const Bytes total_bytes = costs.total_bytes();
  std::vector<std::size_t> ends;
  for (std::size_t k = 2; k <= std::min<std::size_t>(64, n); ++k) {
    // Group g ends at the first layer boundary holding at least g/k of the bytes.
    ends.clear();
    std::size_t end = 0;
    for (std::size_t g = 1; g < k; ++g) {
      const auto target = static_cast<Bytes>(static_cast<double>(total_bytes) *
                                             static_cast<double>(g) / static_cast<double>(k));
      while (end < n && costs.bytes(0, end == 0 ? 0 : end - 1) < target) ++end;
      if (end >= n) break;
      if (end > 0 && (ends.empty() || end > ends.back())) ends.push_back(end);
    }
    ends.push_back(n);
    const Grouping groups = grouping_from_ends(ends);
    const Duration total = evaluate_total(costs, groups);
    if (total < best.total) {
      best.total = total;
      best.groups = groups;
    }
  }
  return best;
}

// Rebuilds the winning grouping of a label-setting search: the final group starts at
// boundary `start` and extends partial `label`; every partial in `pool` records the
// boundary its last group started at and the partial it extended.
template <typename Partials>
PlanResult finish_search(const SwitchCosts& costs, const Partials& pool, std::size_t label, std::size_t start,
                         Duration total, const SearchStats& stats) {
  std::vector<std::size_t> ends{costs.num_layers()};
  while (start != 0) {
    ends.push_back(start);
    start = pool[label].start;
    label = pool[label].parent;
  }
  std::reverse(ends.begin(), ends.end());
  PlanResult result;
  result.groups = grouping_from_ends(ends);
  result.total = total;
  result.stats = stats;
  PSW_CHECK(evaluate_total(costs, result.groups) == total, "reconstructed plan disagrees");
  return result;
}

}  // namespace

PlanResult plan_single(const SwitchCosts& costs) {
  PlanResult result;
  result.groups = single_group(costs.num_layers());
  result.total = evaluate_total(costs, result.groups);
  return result;
}

PlanResult plan_per_layer(const SwitchCosts& costs) {
  PlanResult result;
  result.groups = per_layer_groups(costs.num_layers());
  result.total = evaluate_total(costs, result.groups);
  return result;
}

// ---------------------------------------------------------------------------------
// optimal: label-setting DP over layer boundaries (see Note [Exactness] in the header).
PlanResult plan_optimal(const SwitchCosts& costs) {
  const SearchContext ctx(costs);
  const std::size_t n = ctx.n();

  // Labels live in one pool so that parent links stay valid while fronts change.
  struct Label {
    Partial partial;
    std::size_t parent;  // pool index of the label the last group extended
    std::size_t start;   // boundary (first layer) of the last group
  };
  constexpr std::size_t kNoParent = static_cast<std::size_t>(-1);
  std::vector<Label> pool;
  pool.push_back({ctx.normalise({Duration::zero(), costs.gpu_free_at()}, 0), kNoParent, 0});
  // fronts[i]: pool indices of the non-dominated partials whose next layer is i, sorted
  // by transfer end ascending; compute ends are then strictly descending.
  std::vector<std::vector<std::size_t>> fronts(n + 1);
  fronts[0].push_back(0);

  PlanResult incumbent = seed_incumbent(costs);
  Duration best = incumbent.total;
  bool found = false;
  std::size_t best_label = 0;  // the partial the winning final group extended
  std::size_t best_start = 0;
  SearchStats stats;

  auto insert = [&](std::size_t boundary, const Label& label) {
    auto& front = fronts[boundary];
    const Duration t = label.partial.transfer_end;
    const Duration e = label.partial.compute_end;
    // The predecessor with the largest transfer end <= t has the smallest compute end
    // among all labels with transfer end <= t: it alone decides whether t,e is dominated.
    auto upper = std::upper_bound(front.begin(), front.end(), t, [&](Duration v, std::size_t idx) {
      return v < pool[idx].partial.transfer_end;
    });
    if (upper != front.begin() && pool[*std::prev(upper)].partial.compute_end <= e) {
      ++stats.pruned;
      return;
    }
    // Labels with transfer end >= t and compute end >= e are dominated by the new one;
    // they form a contiguous run starting at the first transfer end >= t.
    auto lower = std::lower_bound(front.begin(), front.end(), t, [&](std::size_t idx, Duration v) {
      return pool[idx].partial.transfer_end < v;
    });
    auto stop = lower;
    while (stop != front.end() && pool[*stop].partial.compute_end >= e) ++stop;
    pool.push_back(label);
    if (stop != lower) {
      *lower = pool.size() - 1;
      front.erase(std::next(lower), stop);
    } else {
      front.insert(lower, pool.size() - 1);
    }
  };

  for (std::size_t i = 0; i < n; ++i) {
    bool first_at_boundary = true;
    std::size_t previous_j_star = n - 1;
    for (const std::size_t li : fronts[i]) {
      const Partial start = pool[li].partial;
      if (ctx.lower_bound(start, i) >= best) {
        // A pruned label still shadows the arrival-driven groups of the labels after it
        // (their extensions are dominated by its own, which cannot win either).
        previous_j_star = ctx.last_arriving_by(start, i);
        first_at_boundary = false;
        ++stats.pruned;
        continue;
      }
      ++stats.nodes;
      // Note [Arrival-driven groups]: for j > j*(L) (group [i, j] arrives after the GPU
      // is free) the new partial is (T + t, T + t + sync + compute), which depends on T
      // alone; the label before this one in the front has a smaller T, so for
      // j > j*(previous label) its extension dominates ours. The fronts are sorted by T
      // with j* non-increasing, so each label only needs j <= j*(previous label).
      const std::size_t j_star = ctx.last_arriving_by(start, i);
      const std::size_t upper = first_at_boundary ? n - 1 : previous_j_star;
      first_at_boundary = false;
      previous_j_star = j_star;
      for (std::size_t j = i; j <= upper; ++j) {
        const Partial after = ctx.extend(start, i, j);
        if (j + 1 == n) {
          const Duration total = ctx.finish(after);
          if (total < best) {
            best = total;
            found = true;
            best_label = li;
            best_start = i;
          }
          break;
        }
        if (ctx.compute_side_bound(after, j) >= best) {
          // Every longer group that leaves layers behind is cut too; only the group that
          // takes all remaining layers is still worth a look.
          stats.pruned += static_cast<std::int64_t>(upper - j);
          if (upper + 1 < n) break;
          j = n - 2;
          continue;
        }
        const Partial next = ctx.normalise(after, j + 1);
        if (ctx.lower_bound(next, j + 1) >= best) {
          ++stats.pruned;
          continue;
        }
        insert(j + 1, Label{next, li, i});
      }
    }
  }

  if (!found) {
    incumbent.stats = stats;
    return incumbent;
  }
  return finish_search(costs, pool, best_label, best_start, best, stats);
}

PlanResult prefer_early_start(const SwitchCosts& costs, const PlanResult& optimal) {
  PSW_CHECK(!optimal.groups.empty(), "prefer_early_start needs a plan");
  const std::size_t first_size = optimal.groups.front().size();
  const std::size_t n = costs.num_layers();
  const Duration slack = costs.link().copy_fixed + costs.group_sync();  // one more group's fixed costs
  for (std::size_t k = 1; k < first_size; k *= 2) {
    // First group [0, k-1]; the rest is the same problem shifted by the first transfer's end
    // T: its transfers start at 0 and the GPU is free at E - T, where E is the first group's
    // compute end.
    const Duration t = costs.transfer_time(0, k - 1);
    const Duration e = max(t, costs.gpu_free_at()) + costs.group_sync() + costs.compute(0, k - 1);
    std::vector<Bytes> bytes;
    std::vector<Duration> compute;
    for (std::size_t i = k; i < n; ++i) {
      bytes.push_back(costs.layer_bytes(i));
      compute.push_back(costs.layer_compute(i));
    }
    const SwitchCosts rest(std::move(bytes), std::move(compute), costs.link(), costs.group_sync(), costs.tail(),
                           e - t);
    const PlanResult rest_plan = plan_optimal(rest);
    if (t + rest_plan.total > optimal.total + slack) continue;
    PlanResult result;
    result.groups.push_back({0, k - 1});
    for (const LayerGroup& g : rest_plan.groups) result.groups.push_back({g.first + k, g.last + k});
    result.total = t + rest_plan.total;
    result.stats = optimal.stats;
    result.stats.nodes += rest_plan.stats.nodes;
    result.stats.pruned += rest_plan.stats.pruned;
    PSW_CHECK(evaluate_total(costs, result.groups) == result.total, "early-start plan disagrees");
    return result;
  }
  return optimal;
}

// ---------------------------------------------------------------------------------
// pipeswitch: the paper's recursion F(B, i) = min_j F(B + [i, j], j + 1) with its two
// pruning rules (PAPER.md §5.2-5.3).
//
// Pruning 1: cut a branch whose lower bound cannot beat the best total so far.
// Pruning 2 (a group that arrives early should grow): let j* be the last layer such
// that group [i, j*] arrives no later than the GPU frees up. A first group [i, j] with
// j < j* followed by a group ending at or before j* is never better than merging the
// two, because the merged group arrives in time, runs back to back and pays one sync
// less (and transfer times are subadditive). So for j < j* the next group must end after
// j*. This merge-only form stays exact with per-group ceil() rounding, where the
// truncating argument of PAPER.md §5.3 can lose a nanosecond.
//
// Note [Search order]: a plain depth-first recursion re-expands the same boundary from
// many partial groupings and is exponential on deep models (it did not finish 1,000-layer
// models in minutes). The recursion here is expanded boundary by boundary with a memo of
// the partials already reached at each boundary, (T, E, constraint), dropping dominated
// ones, so a partial is expanded only once nothing reaching its boundary can dominate it.
// It shares the lower bound and the normalisation with `optimal` but not its
// arrival-driven shortcut, so the two remain independent checks of each other.
PlanResult plan_pipeswitch(const SwitchCosts& costs) {
  const SearchContext ctx(costs);
  const std::size_t n = ctx.n();
  struct Node {
    Partial partial;
    std::size_t min_end;  // pruning 2: the group starting here must end at or after this
    std::size_t parent;
    std::size_t start;
    bool alive;
  };
  constexpr std::size_t kNoParent = static_cast<std::size_t>(-1);
  std::vector<Node> pool;
  pool.push_back({ctx.normalise({Duration::zero(), costs.gpu_free_at()}, 0), 0, kNoParent, 0, true});
  std::vector<std::vector<std::size_t>> memo(n + 1);
  memo[0].push_back(0);

  PlanResult incumbent = seed_incumbent(costs);
  Duration best = incumbent.total;
  bool found = false;
  std::size_t best_node = 0;
  std::size_t best_start = 0;
  SearchStats stats;

  auto reach = [&](std::size_t boundary, const Node& node) {
    auto& entries = memo[boundary];
    for (const std::size_t idx : entries) {
      const Node& e = pool[idx];
      if (e.alive && e.partial.transfer_end <= node.partial.transfer_end &&
          e.partial.compute_end <= node.partial.compute_end && e.min_end <= node.min_end) {
        ++stats.pruned;
        return;
      }
    }
    for (const std::size_t idx : entries) {
      Node& e = pool[idx];
      if (e.alive && node.partial.transfer_end <= e.partial.transfer_end &&
          node.partial.compute_end <= e.partial.compute_end && node.min_end <= e.min_end) {
        e.alive = false;
      }
    }
    std::erase_if(entries, [&](std::size_t idx) { return !pool[idx].alive; });
    pool.push_back(node);
    entries.push_back(pool.size() - 1);
  };

  // Tries group [i, j] after node `ni`; false when the compute-side bound shows that no
  // longer group leaving layers behind can win.
  auto visit = [&](std::size_t ni, std::size_t i, std::size_t j, std::size_t next_min_end) {
    const Partial after = ctx.extend(pool[ni].partial, i, j);
    if (j + 1 == n) {
      const Duration total = ctx.finish(after);
      if (total < best) {
        best = total;
        found = true;
        best_node = ni;
        best_start = i;
      }
      return true;
    }
    if (ctx.compute_side_bound(after, j) >= best) {
      ++stats.pruned;
      return false;
    }
    const Partial next = ctx.normalise(after, j + 1);
    if (ctx.lower_bound(next, j + 1) >= best) {
      ++stats.pruned;
      return true;
    }
    reach(j + 1, Node{next, std::max(next_min_end, j + 1), ni, i, true});
    return true;
  };

  for (std::size_t i = 0; i < n; ++i) {
    const std::vector<std::size_t> nodes = memo[i];
    for (const std::size_t ni : nodes) {
      if (!pool[ni].alive) continue;
      const Partial p = pool[ni].partial;
      const std::size_t min_end = pool[ni].min_end;
      if (ctx.lower_bound(p, i) >= best) {
        ++stats.pruned;
        continue;
      }
      ++stats.nodes;
      const std::size_t j_star = ctx.last_arriving_by(p, i);
      // The paper's order: from j* upward, then the shorter groups pruning 2 still allows.
      for (std::size_t j = std::max(j_star, min_end); j < n; ++j) {
        if (!visit(ni, i, j, i) && j + 1 < n) j = n - 2;
      }
      for (std::size_t j = std::max(i, min_end); j < j_star; ++j) {
        if (!visit(ni, i, j, j_star + 1)) break;
      }
    }
  }

  if (!found) {
    incumbent.stats = stats;
    return incumbent;
  }
  return finish_search(costs, pool, best_node, best_start, best, stats);
}

// ---------------------------------------------------------------------------------
PlanResult plan_brute_force(const SwitchCosts& costs) {
  const std::size_t n = costs.num_layers();
  if (n > 24) {
    throw InputError(detail::concat("brute force refuses ", n, " layers (2^", n - 1,
                                    " groupings); use at most 24"));
  }
  const std::uint32_t count = 1u << (n - 1);
  Duration best = Duration::max();
  std::uint32_t best_mask = 0;
  for (std::uint32_t mask = 0; mask < count; ++mask) {
    // Bit k set: a group ends after layer k.
    Duration transfer_end = Duration::zero();
    Duration compute_end = costs.gpu_free_at();
    std::size_t first = 0;
    for (std::size_t k = 0; k < n; ++k) {
      if (k + 1 == n || (mask >> k & 1u)) {
        transfer_end += costs.transfer_time(first, k);
        compute_end = max(transfer_end, compute_end) + costs.group_sync() + costs.compute(first, k);
        first = k + 1;
      }
    }
    const Duration total = compute_end + costs.tail();
    if (total < best) {
      best = total;
      best_mask = mask;
    }
  }
  std::vector<std::size_t> ends;
  for (std::size_t k = 0; k + 1 < n; ++k) {
    if (best_mask >> k & 1u) ends.push_back(k + 1);
  }
  ends.push_back(n);
  PlanResult result;
  result.groups = grouping_from_ends(ends);
  result.total = best;
  result.stats.nodes = count;
  return result;
}

PlanResult make_plan(Strategy strategy, const SwitchCosts& costs, const Grouping* fixed_groups) {
  switch (strategy) {
    case Strategy::Single: return plan_single(costs);
    case Strategy::PerLayer: return plan_per_layer(costs);
    case Strategy::PipeSwitch: return plan_pipeswitch(costs);
    case Strategy::Optimal: return prefer_early_start(costs, plan_optimal(costs));
    case Strategy::Fixed: {
      if (fixed_groups == nullptr) throw InputError("strategy 'fixed' needs a groups file (--groups)");
      validate_grouping(*fixed_groups, costs.num_layers(), "fixed groups");
      PlanResult result;
      result.groups = *fixed_groups;
      result.total = evaluate_total(costs, result.groups);
      return result;
    }
  }
  throw Error("unhandled strategy");
}

}  // namespace psw
