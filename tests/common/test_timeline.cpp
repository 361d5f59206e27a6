// Timeline evaluation: the semantics every engine shares, checked on hand-computed cases.
#include <gtest/gtest.h>

#include "psw/common/error.hpp"
#include "psw/common/timeline.hpp"

namespace psw {
namespace {

// 1 byte per nanosecond (1 GB/s), 10 ns per copy, 1 ns per group sync.
SwitchCosts small_costs(Duration gpu_free_at = Duration::zero(), Duration tail = Duration::zero()) {
  return SwitchCosts({100, 50, 200}, {nanoseconds(30), nanoseconds(80), nanoseconds(40)},
                     LinkCost{nanoseconds(10), Bandwidth::bytes_per_second(1'000'000'000)},
                     nanoseconds(1), tail, gpu_free_at);
}

TEST(Timeline, SingleGroupTransfersThenComputes) {
  const Timeline t = evaluate_timeline(small_costs(), single_group(3));
  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_EQ(t.groups[0].transfer_end, nanoseconds(10 + 350));
  EXPECT_EQ(t.groups[0].compute_start, nanoseconds(361));
  EXPECT_EQ(t.total, nanoseconds(361 + 150));
  EXPECT_EQ(t.startup, nanoseconds(361));
  EXPECT_EQ(t.ready, nanoseconds(150));
  EXPECT_EQ(t.overhead, nanoseconds(361));
}

TEST(Timeline, PerLayerPipelinesTransferAndCompute) {
  const Timeline t = evaluate_timeline(small_costs(), per_layer_groups(3));
  // transfers: [0,110], [110,170], [170,380]
  EXPECT_EQ(t.groups[1].transfer_start, nanoseconds(110));
  EXPECT_EQ(t.groups[2].transfer_end, nanoseconds(380));
  // computes: 111..141, max(170,141)+1=171..251, max(380,251)+1=381..421
  EXPECT_EQ(t.groups[0].compute_end, nanoseconds(141));
  EXPECT_EQ(t.groups[1].compute_start, nanoseconds(171));
  EXPECT_EQ(t.groups[2].compute_start, nanoseconds(381));
  EXPECT_EQ(t.total, nanoseconds(421));
  EXPECT_EQ(t.startup, nanoseconds(111));
  EXPECT_EQ(evaluate_total(small_costs(), per_layer_groups(3)), t.total);
}

TEST(Timeline, BreakdownSumsComputeAndTheWaitsForCopies) {
  const Timeline t = evaluate_timeline(small_costs(), per_layer_groups(3));
  const TimelineBreakdown b = break_down(t);
  EXPECT_EQ(b.groups, 3u);
  EXPECT_EQ(b.total, nanoseconds(421));
  EXPECT_EQ(b.first_compute_start, nanoseconds(111));
  EXPECT_EQ(b.last_transfer_end, nanoseconds(380));
  EXPECT_EQ(b.compute_busy, nanoseconds(30 + 80 + 40));
  // Computes 111..141, 171..251, 381..421: waits of 30 and 130.
  EXPECT_EQ(b.compute_waits, nanoseconds(30 + 130));

  // A group without compute neither opens nor closes a gap.
  Timeline with_empty = t;
  with_empty.groups[1].compute_end = with_empty.groups[1].compute_start;
  const TimelineBreakdown e = break_down(with_empty);
  EXPECT_EQ(e.compute_busy, nanoseconds(30 + 40));
  EXPECT_EQ(e.compute_waits, nanoseconds(381 - 141));
  with_empty.groups[0].compute_end = with_empty.groups[0].compute_start;
  EXPECT_EQ(break_down(with_empty).first_compute_start, nanoseconds(381));
}

TEST(Timeline, BusyGpuDelaysTheFirstGroupAndTailIsAdded) {
  const SwitchCosts costs = small_costs(nanoseconds(500), nanoseconds(7));
  const Timeline t = evaluate_timeline(costs, per_layer_groups(3));
  EXPECT_EQ(t.groups[0].compute_start, nanoseconds(501));
  EXPECT_EQ(t.total, nanoseconds(501 + 150 + 2 + 7));
  EXPECT_EQ(t.ready, nanoseconds(157));
}

TEST(Timeline, TransferRoundsUpPerGroup) {
  // 3 bytes at 2 B/s: 1.5 s rounds up to 1,500,000,000 ns exactly; 1 byte at 3 B/s rounds up.
  EXPECT_EQ(Bandwidth::bytes_per_second(2).transfer_time(3), nanoseconds(1'500'000'000));
  EXPECT_EQ(Bandwidth::bytes_per_second(3).transfer_time(1), nanoseconds(333'333'334));
  // Huge sizes do not overflow although bytes * 1e9 exceeds 64 bits: 1 TiB at 1 GB/s.
  EXPECT_EQ(Bandwidth::bytes_per_second(1'000'000'000).transfer_time(kGiB * 1024).ns(),
            kGiB * 1024);
}

TEST(Timeline, PipelineBoundIsBelowEveryGrouping) {
  const SwitchCosts costs = small_costs();
  const Duration bound = pipeline_bound(costs);
  // Layer 2 waits for all 350 bytes plus one fixed cost, then computes 40 ns.
  EXPECT_EQ(bound, nanoseconds(10 + 350 + 40));
  EXPECT_LE(bound, evaluate_total(costs, per_layer_groups(3)));
  EXPECT_LE(bound, evaluate_total(costs, single_group(3)));
}

TEST(Timeline, RejectsGroupingsThatDoNotCoverTheModel) {
  const SwitchCosts costs = small_costs();
  EXPECT_THROW(evaluate_timeline(costs, {}), InputError);
  EXPECT_THROW(evaluate_timeline(costs, {{0, 0}, {2, 2}}), InputError);   // gap
  EXPECT_THROW(evaluate_timeline(costs, {{0, 1}, {1, 2}}), InputError);   // overlap
  EXPECT_THROW(evaluate_timeline(costs, {{0, 1}}), InputError);           // short
  EXPECT_THROW(evaluate_timeline(costs, {{0, 3}}), InputError);           // past the end
  EXPECT_THROW(evaluate_timeline(costs, {{1, 0}, {1, 2}}), InputError);   // wrong start
}

TEST(SwitchCosts, ValidatesAtConstruction) {
  const LinkCost link{nanoseconds(1), Bandwidth::bytes_per_second(1)};
  EXPECT_THROW(SwitchCosts({}, {}, link, nanoseconds(0)), InputError);
  EXPECT_THROW(SwitchCosts({1, 2}, {nanoseconds(1)}, link, nanoseconds(0)), InputError);
  EXPECT_THROW(SwitchCosts({-1}, {nanoseconds(1)}, link, nanoseconds(0)), InputError);
  EXPECT_THROW(SwitchCosts({1}, {nanoseconds(-1)}, link, nanoseconds(0)), InputError);
  EXPECT_THROW(SwitchCosts({1}, {nanoseconds(1)}, LinkCost{nanoseconds(1), Bandwidth::bytes_per_second(0)},
                           nanoseconds(0)),
               InputError);
}

TEST(MemoryLayout, GroupsAreContiguousAndLayersAligned) {
  const MemoryLayout layout = make_memory_layout({100, 600, 1}, {{0, 1}, {2, 2}}, 512);
  EXPECT_EQ(layout.layer_offset, (std::vector<Bytes>{0, 512, 1536}));
  EXPECT_EQ(layout.group_offset, (std::vector<Bytes>{0, 1536}));
  EXPECT_EQ(layout.group_span, (std::vector<Bytes>{1536, 512}));
  EXPECT_EQ(layout.total_bytes, 2048);
  EXPECT_THROW(make_memory_layout({1}, {{0, 0}}, 384), InputError);
}

TEST(Units, FormatPicksReadableUnits) {
  EXPECT_EQ(format_duration(nanoseconds(12)), "12 ns");
  EXPECT_EQ(format_duration(microseconds(812)), "812.00 us");
  EXPECT_EQ(format_duration(nanoseconds(4'360'000)), "4.360 ms");
  EXPECT_EQ(format_bytes(241'378'168), "241.4 MB");
}

}  // namespace
}  // namespace psw
