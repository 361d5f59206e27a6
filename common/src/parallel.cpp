#include "psw/common/parallel.hpp"

#include <algorithm>

#include "psw/common/error.hpp"

namespace psw {

ParallelCosts::ParallelCosts(SwitchCosts costs, std::vector<HelperPath> helpers)
    : costs_(std::move(costs)), helpers_(std::move(helpers)) {
  for (std::size_t h = 0; h < helpers_.size(); ++h) {
    const HelperPath& path = helpers_[h];
    if (path.host.bandwidth.bytes_per_second() <= 0 || path.peer.bandwidth.bytes_per_second() <= 0) {
      throw InputError(detail::concat("helper ", h + 1, ": link bandwidths must be positive"));
    }
    if (path.host.copy_fixed < Duration::zero() || path.peer.copy_fixed < Duration::zero()) {
      throw InputError(detail::concat("helper ", h + 1, ": copy_fixed must be non-negative"));
    }
    if (path.chunk_bytes <= 0) throw InputError(detail::concat("helper ", h + 1, ": chunk_bytes must be positive"));
  }
}

ParallelCosts make_parallel_costs(SwitchCosts costs, const HardwareProfile& hardware, int gpus,
                                  bool helpers_training) {
  if (gpus < 1) throw InputError(detail::concat("a switch needs at least one GPU, got ", gpus));
  std::vector<HelperPath> helpers;
  if (gpus > 1) {
    if (!hardware.multi_gpu) {
      throw InputError(detail::concat("hardware profile '", hardware.name, "' has no multi_gpu section: it cannot ",
                                      "switch with ", gpus, " GPUs (Note [Parallel paths])"));
    }
    const MultiGpuModel& multi = *hardware.multi_gpu;
    if (gpus > multi.gpus) {
      throw InputError(detail::concat("hardware profile '", hardware.name, "' has ", multi.gpus, " GPUs, not ", gpus));
    }
    for (int h = 0; h + 1 < gpus; ++h) {
      HelperPath path;
      path.host = multi.helper_links.at(static_cast<std::size_t>(h));
      if (helpers_training) {
        const auto shared = static_cast<std::int64_t>(
            static_cast<Uint128>(path.host.bandwidth.bytes_per_second()) *
            static_cast<Uint128>(multi.helper_busy_share_percent) / 100u);
        path.host.bandwidth = Bandwidth::bytes_per_second(std::max<std::int64_t>(1, shared));
      }
      path.peer = multi.peer_link;
      if (multi.peer_ingress) {  // Note [Parallel paths]: the target's ingress shared evenly
        const std::int64_t share = multi.peer_ingress->bytes_per_second() / (gpus - 1);
        path.peer.bandwidth = Bandwidth::bytes_per_second(
            std::max<std::int64_t>(1, std::min(share, path.peer.bandwidth.bytes_per_second())));
      }
      path.chunk_bytes = multi.chunk_bytes;
      helpers.push_back(path);
    }
  }
  return ParallelCosts(std::move(costs), std::move(helpers));
}

ParallelPlan all_direct(const ParallelCosts& costs, const Grouping& groups) {
  ParallelPlan plan;
  plan.groups = groups;
  for (const LayerGroup& g : groups) {
    PathSplit split(costs.num_paths(), 0);
    split[0] = costs.costs().bytes(g.first, g.last);
    plan.splits.push_back(std::move(split));
  }
  return plan;
}

namespace {

// When each path's queues are free: host[p] the host link's (path 0: the direct link),
// peer[p] the helper's peer link (unused for path 0).
struct PathQueues {
  explicit PathQueues(std::size_t paths) : host(paths, Duration::zero()), peer(paths, Duration::zero()) {}
  std::vector<Duration> host;
  std::vector<Duration> peer;
};

struct HelperEnds {
  Duration host_end;
  Duration end;
};

// Note [Parallel paths]: b > 0 bytes through helper `h` whose host link is free at
// `host_free` and peer link at `peer_free`. The makespan of the chunk flow shop is the
// largest, over the chunk u that starts the critical run of hops, of u's arrival on the
// helper plus the hops of chunks u..k; chunks 1..k-1 are equal, so only u = 1, k - 1 and
// k can be largest.
HelperEnds helper_ends(const HelperPath& h, Duration host_free, Duration peer_free, Bytes b) {
  const Bytes chunk = h.chunk_bytes;
  const std::int64_t k = (b + chunk - 1) / chunk;
  const Bytes last = b - (k - 1) * chunk;
  const Duration a_start = host_free + h.host.copy_fixed;
  const Duration a_end = a_start + h.host.bandwidth.transfer_time(b);
  const Duration first_on_helper = a_start + h.host.bandwidth.transfer_time(std::min(b, chunk));
  Duration end = max(peer_free, first_on_helper) + h.peer.copy_fixed * k + h.peer.bandwidth.transfer_time(b);
  if (k >= 3) {
    const Duration on_helper = a_start + h.host.bandwidth.transfer_time((k - 1) * chunk);
    end = max(end, on_helper + h.peer.copy_fixed * 2 + h.peer.bandwidth.transfer_time(chunk + last));
  }
  end = max(end, a_end + h.peer.copy_fixed + h.peer.bandwidth.transfer_time(last));
  return {a_end, end};
}

// Moves one group, split as `split` (one entry per path), through the queues; returns its
// arrival (the last path's end). The direct path carries a copy when it has bytes or when
// no helper has any (a group of zero bytes still pays one copy, as on one GPU). `paths`,
// when given, receives each path's timing.
Duration advance(const ParallelCosts& costs, PathQueues& q, const Bytes* split, PathTiming* paths) {
  const auto& helpers = costs.helpers();
  bool via_helper = false;
  Duration arrival = Duration::zero();
  bool any = false;
  for (std::size_t p = 1; p <= helpers.size(); ++p) {
    if (split[p] == 0) {
      if (paths) paths[p] = PathTiming{};
      continue;
    }
    const HelperEnds e = helper_ends(helpers[p - 1], q.host[p], q.peer[p], split[p]);
    if (paths) paths[p] = {true, split[p], q.host[p], e.host_end, e.end};
    q.host[p] = e.host_end;
    q.peer[p] = e.end;
    arrival = any ? max(arrival, e.end) : e.end;
    any = true;
    via_helper = true;
  }
  if (split[0] > 0 || !via_helper) {
    const Duration start = q.host[0];
    const Duration end = start + costs.costs().link().copy_time(split[0]);
    if (paths) paths[0] = {true, split[0], start, end, end};
    q.host[0] = end;
    arrival = any ? max(arrival, end) : end;
  } else if (paths) {
    paths[0] = PathTiming{};
  }
  return arrival;
}

// The largest b in [0, limit] that path p delivers by `level` from the queues' state.
Bytes deliverable(const ParallelCosts& costs, const PathQueues& q, std::size_t p, Duration level, Bytes limit) {
  if (p == 0) {
    const LinkCost& link = costs.costs().link();
    const std::int64_t room = (level - q.host[0] - link.copy_fixed).ns();
    if (room < 0) return 0;
    // ceil(b * 1e9 / bw) <= room  <=>  b <= floor(room * bw / 1e9)
    const Uint128 b = static_cast<Uint128>(room) * static_cast<Uint128>(link.bandwidth.bytes_per_second()) /
                      1'000'000'000u;
    return b >= static_cast<Uint128>(limit) ? limit : static_cast<Bytes>(b);
  }
  const HelperPath& h = costs.helpers()[p - 1];
  if (helper_ends(h, q.host[p], q.peer[p], 1).end > level) return 0;
  if (helper_ends(h, q.host[p], q.peer[p], limit).end <= level) return limit;
  Bytes lo = 1;      // delivered by level
  Bytes hi = limit;  // not
  while (hi - lo > 1) {
    const Bytes mid = lo + (hi - lo) / 2;
    if (helper_ends(h, q.host[p], q.peer[p], mid).end <= level) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Note [Balanced split]: the split of `bytes` that arrives earliest from the queues' state,
// written into `split` (num_paths entries).
void balance(const ParallelCosts& costs, const PathQueues& q, Bytes bytes, Bytes* split) {
  const std::size_t paths = costs.num_paths();
  std::fill(split, split + paths, Bytes{0});
  split[0] = bytes;
  if (paths == 1 || bytes == 0) return;
  // Invariant: the paths cannot deliver `bytes` by lo, they can by hi (all direct).
  std::int64_t lo = -1;
  std::int64_t hi = (q.host[0] + costs.costs().link().copy_time(bytes)).ns();
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    Bytes sum = 0;
    for (std::size_t p = 0; p < paths && sum < bytes; ++p) sum += deliverable(costs, q, p, nanoseconds(mid), bytes);
    if (sum >= bytes) hi = mid;
    else lo = mid;
  }
  Bytes left = bytes;
  for (std::size_t p = 0; p < paths; ++p) {
    split[p] = std::min(left, deliverable(costs, q, p, nanoseconds(hi), bytes));
    left -= split[p];
  }
  PSW_CHECK(left == 0, "balanced split left ", left, " bytes");
}

void validate_splits(const ParallelCosts& costs, const ParallelPlan& plan) {
  validate_grouping(plan.groups, costs.costs().num_layers(), "parallel timeline");
  if (plan.splits.size() != plan.groups.size()) {
    throw InputError(detail::concat("a parallel plan of ", plan.groups.size(), " groups has ", plan.splits.size(),
                                    " splits"));
  }
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const PathSplit& split = plan.splits[g];
    if (split.size() != costs.num_paths()) {
      throw InputError(detail::concat("group ", g, " splits over ", split.size(), " paths, but the switch has ",
                                      costs.num_paths(), " (direct and ", costs.helpers().size(), " helpers)"));
    }
    Bytes sum = 0;
    for (const Bytes b : split) {
      if (b < 0) throw InputError(detail::concat("group ", g, " sends a negative number of bytes over a path"));
      sum += b;
    }
    const Bytes expected = costs.costs().bytes(plan.groups[g].first, plan.groups[g].last);
    if (sum != expected) {
      throw InputError(detail::concat("group ", g, " splits ", sum, " bytes, but its layers hold ", expected));
    }
  }
}

}  // namespace

ParallelTimeline evaluate_parallel_timeline(const ParallelCosts& costs, const ParallelPlan& plan) {
  validate_splits(costs, plan);
  const SwitchCosts& c = costs.costs();
  ParallelTimeline timeline;
  timeline.groups.reserve(plan.groups.size());
  PathQueues q(costs.num_paths());
  Duration compute_end = c.gpu_free_at();
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const LayerGroup& group = plan.groups[g];
    ParallelGroupTiming timing;
    timing.paths.resize(costs.num_paths());
    const Duration arrival = advance(costs, q, plan.splits[g].data(), timing.paths.data());
    timing.timing.group = group;
    timing.timing.bytes = c.bytes(group.first, group.last);
    Duration start = arrival;
    for (const PathTiming& p : timing.paths) {
      if (p.used) start = min(start, p.start);
    }
    timing.timing.transfer_start = start;
    timing.timing.transfer_end = arrival;
    timing.timing.compute_start = max(arrival, compute_end) + c.group_sync();
    timing.timing.compute_end = timing.timing.compute_start + c.compute(group.first, group.last);
    compute_end = timing.timing.compute_end;
    timeline.groups.push_back(std::move(timing));
  }
  timeline.ready = c.ready_time();
  timeline.total = compute_end + c.tail();
  timeline.startup = timeline.groups.front().timing.compute_start;
  timeline.overhead = timeline.total - timeline.ready;
  return timeline;
}

Duration evaluate_parallel_total(const ParallelCosts& costs, const ParallelPlan& plan) {
  const SwitchCosts& c = costs.costs();
  PathQueues q(costs.num_paths());
  Duration compute_end = c.gpu_free_at();
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const LayerGroup& group = plan.groups[g];
    const Duration arrival = advance(costs, q, plan.splits[g].data(), nullptr);
    compute_end = max(arrival, compute_end) + c.group_sync() + c.compute(group.first, group.last);
  }
  return compute_end + c.tail();
}

ParallelPlan balanced_splits(const ParallelCosts& costs, const Grouping& groups) {
  validate_grouping(groups, costs.costs().num_layers(), "parallel plan");
  ParallelPlan plan;
  plan.groups = groups;
  PathQueues q(costs.num_paths());
  for (const LayerGroup& g : groups) {
    PathSplit split(costs.num_paths(), 0);
    balance(costs, q, costs.costs().bytes(g.first, g.last), split.data());
    advance(costs, q, split.data(), nullptr);
    plan.splits.push_back(std::move(split));
  }
  return plan;
}

Duration balanced_total(const ParallelCosts& costs, const Grouping& groups) {
  const SwitchCosts& c = costs.costs();
  PathQueues q(costs.num_paths());
  std::vector<Bytes> split(costs.num_paths(), 0);
  Duration compute_end = c.gpu_free_at();
  for (const LayerGroup& g : groups) {
    balance(costs, q, c.bytes(g.first, g.last), split.data());
    const Duration arrival = advance(costs, q, split.data(), nullptr);
    compute_end = max(arrival, compute_end) + c.group_sync() + c.compute(g.first, g.last);
  }
  return compute_end + c.tail();
}

Duration parallel_pipeline_bound(const ParallelCosts& costs) {
  const SwitchCosts& c = costs.costs();
  Duration fixed = c.link().copy_fixed;
  std::int64_t rate = c.link().bandwidth.bytes_per_second();
  for (const HelperPath& h : costs.helpers()) {
    fixed = min(fixed, h.host.copy_fixed + h.peer.copy_fixed);
    rate += std::min(h.host.bandwidth.bytes_per_second(), h.peer.bandwidth.bytes_per_second());
  }
  const Bandwidth aggregate = Bandwidth::bytes_per_second(rate);
  const std::size_t n = c.num_layers();
  Duration bound = c.gpu_free_at() + c.total_compute();
  for (std::size_t k = 0; k < n; ++k) {
    bound = max(bound, fixed + aggregate.transfer_time(c.bytes(0, k)) + c.compute(k, n - 1));
  }
  return bound + c.tail();
}

}  // namespace psw
