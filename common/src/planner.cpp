#include "psw/common/planner.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/common/timeline.hpp"

namespace psw {


namespace {

// The forward searches (pipeswitch and the label-setting DP) work on partial schedules:
// layers 0..i-1 grouped, the last transfer ending at `transfer_end` and the last compute at
// `compute_end`.
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

// The incumbent that seeds the exact searches: the best of one group, one group per
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
// The label-setting DP over layer boundaries that `optimal` used before the group-count
// DP (see Note [Exactness] in the header); kept as the reference the tests compare with.
PlanResult planner_detail::plan_label_setting(const SwitchCosts& costs) {
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

// ---------------------------------------------------------------------------------
// optimal: a dynamic program over (first layer of a suffix, groups in the suffix).
//
// Note [Suffix form of the total]: unrolling E_g = max(T_g, E_{g-1}) + sync + compute_g
// from E_0 = gpu_free_at over m groups gives
//
//   E_m = max(gpu_free_at + m sync + compute(0..n-1),
//             max over groups k of T_k + (m - k + 1) sync + compute(s_k..n-1))
//
// with s_k the first layer of group k and T_k = t_1 + ... + t_k, where t_g is group g's
// own transfer time, copy_fixed + ceil(bytes / bandwidth). Transfer ends add up over groups
// exactly, whatever the rounding inside a group. For a suffix, layers i..n-1 in r groups
// with transfers counted from the suffix's first one (T'_k), let
//
//   V(i, r) = min over groupings of the suffix of
//             max over its groups k of T'_k + (r - k + 1) sync + compute(s_k..n-1).
//
// Splitting off the first group [i, j] delays every later T' by t(i, j), so
//
//   V(n, 0) = -inf,  V(i, r) = min over j of t(i, j) + max(a_i(r), V(j+1, r-1)),
//   a_i(r) = r sync + compute(i..n-1),
//
// and the optimum is min over r of max(gpu_free_at + r sync + compute(0..n-1), V(0, r))
// + tail. Integer nanoseconds throughout, and nothing is assumed of t but that it does
// not shrink as a group grows. Where the label-setting DP keeps a front of (T, E) per
// boundary and extends each label by every group length, this keeps one value per
// (boundary, group count) and finds each in O(log n) (Note [Two candidates per state]).
//
// Note [Two candidates per state]: let b be the first j >= i with V(j+1, r-1) <= a_i(r).
// Group [i, b] costs t(i, b) + a_i(r), and no longer group costs less (t does not shrink;
// max(a, V) >= a). Every shorter group has V(j+1, r-1) > a_i(r), so it costs
// t(i, j) + V(j+1, r-1). So V(i, r) is the lesser of a segment-tree descent (b) and a range
// minimum over j in [i, b). For the minimum, write N_m = bytes(0..m-1) * 1e9 =
// q_m * bandwidth + rho_m with 0 <= rho_m < bandwidth; then exactly
//
//   ceil((N_{j+1} - N_i) / bandwidth) = q_{j+1} - q_i + [rho_{j+1} > rho_i],
//
// so t(i, j) + V(j+1, r-1) = copy_fixed - q_i + (q_{j+1} + V(j+1, r-1)) + [rho_{j+1} > rho_i].
// The j with the lexicographically least (q_{j+1} + V(j+1, r-1), rho_{j+1}) in the range
// attains the minimum: its key k0 is the least key, and it adds the 1 only when every j
// with key k0 has rho_{j+1} > rho_i, when no j in the range does better than k0 + 1.
//
// Note [Pruning by group count]: group counts run upwards, r = 1, 2, .... A state (i, r)
// with i > 0 follows at least one group of layers 0..i-1. Those groups' transfers end at
// or after copy_fixed + ceil(N_i / bandwidth) (a sum of ceilings is at least the ceiling
// of the sum), and their compute at or after max(gpu_free_at, t(0, 0)) + sync +
// compute(0..i-1). So no plan through the state totals less than
//
//   max(max(gpu_free_at, t(0, 0)) + (r + 1) sync + compute(0..n-1),
//       copy_fixed + ceil(N_i / bandwidth) + V(i, r)) + tail,
//
// and a state whose bound exceeds the best total so far gets V = +inf. That never drops a
// state of an optimal plan: by induction over r, such a state's V is at most the value of
// the plan's own suffix, so its bound is at most the optimum. (A dropped state only makes
// other V larger, never smaller: every finite V is still the value of a real grouping.)
// The search ends at the first
// r from which no plan can beat the best: r or more groups take at least r syncs besides
// all the compute, and at least r copy_fixed + ceil(N_n / bandwidth) of transfer before
// the last group's sync and the last layer's compute. (A model with no copy_fixed and no
// sync may have no such r below n; it then takes O(n^2 log n).)
namespace planner_detail {

constexpr std::int64_t kNoSuffixPlan = std::numeric_limits<std::int64_t>::max() / 4;  // V = +inf
constexpr std::int64_t kNoLayersLeft = -kNoSuffixPlan;                                // V(n, 0)

// One j of the range minimum of Note [Two candidates per state], as boundary j + 1.
struct ShortGroupKey {
  std::int64_t key;        // q_{j+1} + V(j+1, r-1); kNoSuffixPlan when that suffix has none
  std::int64_t remainder;  // rho_{j+1}
  std::uint32_t boundary;  // j + 1
};

inline const ShortGroupKey& lesser_key(const ShortGroupKey& a, const ShortGroupKey& b) {
  return (b.key < a.key || (b.key == a.key && b.remainder < a.remainder)) ? b : a;
}

// Two bottom-up segment trees over the boundaries 0..n holding V(b, r-1) for one r: the
// minimum of V (for the descent to b) and the least ShortGroupKey (for the range minimum).
class SuffixValueTrees {
 public:
  explicit SuffixValueTrees(std::size_t boundaries) : boundaries_(boundaries) {
    while (leaves_ < boundaries) leaves_ *= 2;
    value_.assign(2 * leaves_, kNoSuffixPlan);
    key_.assign(2 * leaves_, ShortGroupKey{kNoSuffixPlan, 0, 0});
  }

  void load(const std::vector<std::int64_t>& suffix_value, const std::vector<std::int64_t>& floor_ns,
            const std::vector<std::int64_t>& remainder) {
    for (std::size_t b = 0; b < boundaries_; ++b) {
      const std::int64_t v = suffix_value[b];
      value_[leaves_ + b] = v;
      const bool has_plan = v < kNoSuffixPlan && v > kNoLayersLeft;
      key_[leaves_ + b] = ShortGroupKey{has_plan ? floor_ns[b] + v : kNoSuffixPlan, remainder[b],
                                        static_cast<std::uint32_t>(b)};
    }
    for (std::size_t k = leaves_; k-- > 1;) {
      value_[k] = std::min(value_[2 * k], value_[2 * k + 1]);
      key_[k] = lesser_key(key_[2 * k], key_[2 * k + 1]);
    }
  }

  // The first boundary b >= from with V(b) <= limit; `boundaries` when there is none.
  std::size_t first_at_most(std::size_t from, std::int64_t limit) const {
    if (from >= boundaries_) return boundaries_;
    std::size_t k = from + leaves_;
    do {
      while (k % 2 == 0) k /= 2;
      if (value_[k] <= limit) {
        while (k < leaves_) {
          k *= 2;
          if (value_[k] > limit) ++k;
        }
        return k - leaves_;
      }
      ++k;
    } while ((k & (k - 1)) != 0);  // stop once k wrapped to the leftmost node of a level
    return boundaries_;
  }

  // The least key over boundaries [from, to); key kNoSuffixPlan when the range is empty.
  ShortGroupKey least_key(std::size_t from, std::size_t to) const {
    ShortGroupKey best{kNoSuffixPlan, 0, 0};
    for (std::size_t lo = from + leaves_, hi = to + leaves_; lo < hi; lo /= 2, hi /= 2) {
      if (lo % 2 == 1) best = lesser_key(best, key_[lo++]);
      if (hi % 2 == 1) best = lesser_key(best, key_[--hi]);
    }
    return best;
  }

 private:
  std::size_t boundaries_;
  std::size_t leaves_ = 1;
  std::vector<std::int64_t> value_;
  std::vector<ShortGroupKey> key_;
};

// Note [Suffix form of the total] on a model whose every layer may start a group.
PlanResult plan_group_counts(const SwitchCosts& costs) {
  const std::size_t n = costs.num_layers();
  const std::int64_t copy_fixed = costs.link().copy_fixed.ns();
  const std::int64_t sync = costs.group_sync().ns();
  const std::int64_t tail = costs.tail().ns();
  const std::int64_t gpu_free_at = costs.gpu_free_at().ns();
  const auto bandwidth = static_cast<Uint128>(costs.link().bandwidth.bytes_per_second());

  // floor_ns[m] = q_m, remainder[m] = rho_m, ceil_ns[m] = ceil(N_m / bandwidth) (Note [Two
  // candidates per state]); compute_suffix[i] = compute(i..n-1).
  std::vector<std::int64_t> floor_ns(n + 1), remainder(n + 1), ceil_ns(n + 1), compute_suffix(n + 1, 0);
  for (std::size_t m = 0; m <= n; ++m) {
    const Uint128 scaled = m == 0 ? 0 : static_cast<Uint128>(costs.bytes(0, m - 1)) * 1'000'000'000u;
    floor_ns[m] = static_cast<std::int64_t>(scaled / bandwidth);
    remainder[m] = static_cast<std::int64_t>(scaled % bandwidth);
    ceil_ns[m] = floor_ns[m] + (remainder[m] > 0 ? 1 : 0);
  }
  for (std::size_t i = n; i-- > 0;) compute_suffix[i] = compute_suffix[i + 1] + costs.layer_compute(i).ns();
  // t(i, b - 1): the transfer of the group from layer i up to boundary b.
  const auto transfer = [&](std::size_t i, std::size_t b) {
    return copy_fixed + floor_ns[b] - floor_ns[i] + (remainder[b] > remainder[i] ? 1 : 0);
  };
  const std::int64_t total_compute = compute_suffix[0];
  const std::int64_t last_layer_compute = costs.layer_compute(n - 1).ns();
  const std::int64_t first_compute_floor = std::max(gpu_free_at, transfer(0, 1)) + sync;

  // The seed bounds the pruning from the start. Its own plan is never pruned (bounds
  // are compared with `>`), so the search below always ends with a plan of its own.
  const PlanResult seed = seed_incumbent(costs);
  std::int64_t best = seed.total.ns();
  // Times of centuries: the sums below would not fit next to the +inf marker.
  if (best >= kNoSuffixPlan / 4 || n >= std::numeric_limits<std::uint32_t>::max()) return plan_label_setting(costs);
  std::size_t best_groups = 0;

  std::vector<std::int64_t> previous(n + 1, kNoSuffixPlan);  // V(b, r-1) for b in 0..n
  std::vector<std::int64_t> current(n + 1, kNoSuffixPlan);   // V(i, r)
  previous[n] = kNoLayersLeft;
  // first_group_end[r-1][i]: the boundary that ends the first group of the suffix (i, r).
  std::vector<std::vector<std::uint32_t>> first_group_end;
  SuffixValueTrees trees(n + 1);
  SearchStats stats;

  for (std::size_t r = 1; r <= n; ++r) {
    const std::int64_t syncs = static_cast<std::int64_t>(r) * sync;
    const std::int64_t copies = static_cast<std::int64_t>(r) * copy_fixed;
    if (std::max(gpu_free_at + syncs + total_compute, copies + ceil_ns[n] + sync + last_layer_compute) + tail >
        best) {
      break;  // Note [Pruning by group count]: r or more groups cannot win
    }
    // Whether any state (i > 0, r) can still lead to a plan within `best`.
    const bool suffixes_open = first_compute_floor + syncs + total_compute + tail <= best;
    trees.load(previous, floor_ns, remainder);
    std::fill(current.begin(), current.end(), kNoSuffixPlan);
    auto& ends = first_group_end.emplace_back(n - r + 1, 0);
    std::size_t open_states = 0;
    for (std::size_t i = 0; i + r <= n; ++i) {
      if (i > 0 && !suffixes_open) break;
      const std::int64_t prefix_transfer = i == 0 ? 0 : copy_fixed + ceil_ns[i];
      const std::int64_t a = syncs + compute_suffix[i];
      if (i > 0 && prefix_transfer + transfer(i, i + 1) + a + tail > best) {
        ++stats.pruned;  // V(i, r) >= t(i, i) + a_i(r)
        continue;
      }
      ++stats.nodes;
      std::int64_t value = kNoSuffixPlan;
      std::size_t end = 0;
      const std::size_t long_end = trees.first_at_most(i + 1, a);
      if (long_end <= n) {
        value = transfer(i, long_end) + a;
        end = long_end;
      }
      const ShortGroupKey shorter = trees.least_key(i + 1, std::min(long_end, n + 1));
      if (shorter.key < kNoSuffixPlan) {
        const std::int64_t v =
            copy_fixed - floor_ns[i] + shorter.key + (shorter.remainder > remainder[i] ? 1 : 0);
        if (v < value) {
          value = v;
          end = shorter.boundary;
        }
      }
      if (value >= kNoSuffixPlan) continue;
      ends[i] = static_cast<std::uint32_t>(end);
      if (i == 0) {
        const std::int64_t total = std::max(gpu_free_at + syncs + total_compute, value) + tail;
        // Ties go to the fewest groups, and to the DP's own plan over the seed's.
        if (total < best || (total == best && best_groups == 0)) {
          best = total;
          best_groups = r;
        }
        continue;  // V(0, r) extends nothing
      }
      if (std::max(first_compute_floor + syncs + total_compute, prefix_transfer + value) + tail > best) {
        ++stats.pruned;
        continue;
      }
      current[i] = value;
      ++open_states;
    }
    std::swap(previous, current);
    if (open_states == 0) break;  // nothing left for r + 1 groups to extend
  }

  PSW_CHECK(best_groups > 0, "group-count DP lost the seed plan");
  std::vector<std::size_t> ends;
  std::size_t boundary = 0;
  for (std::size_t r = best_groups; r >= 1; --r) {
    boundary = first_group_end[r - 1][boundary];
    ends.push_back(boundary);
  }
  PSW_CHECK(boundary == n, "group-count DP plan does not cover the model");
  PlanResult result;
  result.groups = grouping_from_ends(ends);
  result.total = nanoseconds(best);
  result.stats = stats;
  PSW_CHECK(evaluate_total(costs, result.groups) == result.total, "group-count DP plan disagrees");
  return result;
}

}  // namespace planner_detail

// Note [Parameterless layers]: a layer that reads no parameters (zero bytes; many kernels
// of a model captured from CUDA graphs are such), other than layer 0, never needs to start
// a group. Moving it (compute c) from the start of group g+1 to the end of group g leaves
// every group's bytes, so every transfer end, as they were, and gives E_g' = E_g + c and
// E_{g+1}' = max(T_{g+1}, E_g + c) + sync + C_{g+1} - c <= max(T_{g+1}, E_g) + sync +
// C_{g+1} = E_{g+1}. When it was all of group g+1, that group and its copy_fixed go:
// E_g' = E_g + c <= E_{g+1}, and every later transfer ends earlier. Later ends are sums
// and maxima of these, so none grows; gpu_free_at only enters E_0 (g >= 1 here) and the
// tail adds to the last E. Repeating the move gives an optimal plan in which every group
// but the first starts at a layer with parameters. So `optimal` plans blocks of one layer
// with parameters (or layer 0, which absorbs the leading parameterless layers) and the
// parameterless layers after it, as one layer each, and expands the plan. Kernel-level
// profiles shrink to their layers with parameters.
PlanResult plan_optimal(const SwitchCosts& costs) {
  const std::size_t n = costs.num_layers();
  std::vector<std::size_t> block_first;  // first layer of each block
  for (std::size_t i = 0; i < n; ++i) {
    if (i == 0 || costs.layer_bytes(i) > 0) block_first.push_back(i);
  }
  if (block_first.size() == n) return planner_detail::plan_group_counts(costs);
  const auto block_last = [&](std::size_t k) { return k + 1 < block_first.size() ? block_first[k + 1] - 1 : n - 1; };
  std::vector<Bytes> bytes;
  std::vector<Duration> compute;
  for (std::size_t k = 0; k < block_first.size(); ++k) {
    bytes.push_back(costs.bytes(block_first[k], block_last(k)));
    compute.push_back(costs.compute(block_first[k], block_last(k)));
  }
  const SwitchCosts blocks(std::move(bytes), std::move(compute), costs.link(), costs.group_sync(), costs.tail(),
                           costs.gpu_free_at());
  PlanResult result = planner_detail::plan_group_counts(blocks);
  for (LayerGroup& g : result.groups) {
    g.last = block_last(g.last);
    g.first = block_first[g.first];
  }
  PSW_CHECK(evaluate_total(costs, result.groups) == result.total, "expanded plan disagrees");
  return result;
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
// It shares the lower bound and the normalisation with the label-setting DP but not its
// arrival-driven shortcut, and nothing but the seed with `optimal`'s group-count DP, so
// they remain independent checks of each other.
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
