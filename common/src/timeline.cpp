#include "psw/common/timeline.hpp"

#include <optional>

namespace psw {

Timeline evaluate_timeline(const SwitchCosts& costs, const Grouping& groups) {
  validate_grouping(groups, costs.num_layers(), "timeline");
  Timeline timeline;
  timeline.groups.reserve(groups.size());
  Duration transfer_end = Duration::zero();
  Duration compute_end = costs.gpu_free_at();
  for (const auto& group : groups) {
    GroupTiming timing;
    timing.group = group;
    timing.bytes = costs.bytes(group.first, group.last);
    timing.transfer_start = transfer_end;
    timing.transfer_end = transfer_end + costs.transfer_time(group.first, group.last);
    timing.compute_start = max(timing.transfer_end, compute_end) + costs.group_sync();
    timing.compute_end = timing.compute_start + costs.compute(group.first, group.last);
    transfer_end = timing.transfer_end;
    compute_end = timing.compute_end;
    timeline.groups.push_back(timing);
  }
  timeline.ready = costs.ready_time();
  timeline.total = compute_end + costs.tail();
  timeline.startup = timeline.groups.front().compute_start;
  timeline.overhead = timeline.total - timeline.ready;
  return timeline;
}

TimelineBreakdown break_down(const Timeline& timeline) {
  TimelineBreakdown b;
  b.groups = timeline.groups.size();
  b.total = timeline.total;
  b.first_compute_start = timeline.total;
  std::optional<Duration> previous_end;
  for (const GroupTiming& g : timeline.groups) {
    b.last_transfer_end = max(b.last_transfer_end, g.transfer_end);
    const Duration compute = g.compute_end - g.compute_start;
    if (compute <= Duration::zero()) continue;
    b.compute_busy += compute;
    if (previous_end) {
      b.compute_waits += max(Duration::zero(), g.compute_start - *previous_end);
    } else {
      b.first_compute_start = g.compute_start;
    }
    previous_end = g.compute_end;
  }
  return b;
}

Duration evaluate_total(const SwitchCosts& costs, const Grouping& groups) {
  Duration transfer_end = Duration::zero();
  Duration compute_end = costs.gpu_free_at();
  for (const auto& group : groups) {
    transfer_end += costs.transfer_time(group.first, group.last);
    compute_end = max(transfer_end, compute_end) + costs.group_sync() +
                  costs.compute(group.first, group.last);
  }
  return compute_end + costs.tail();
}

Duration pipeline_bound(const SwitchCosts& costs) {
  const std::size_t n = costs.num_layers();
  Duration bound = costs.gpu_free_at() + costs.total_compute();
  for (std::size_t k = 0; k < n; ++k) {
    const Duration arrival = costs.link().copy_fixed + costs.link().bandwidth.transfer_time(costs.bytes(0, k));
    bound = max(bound, arrival + costs.compute(k, n - 1));
  }
  return bound + costs.tail();
}

}  // namespace psw
