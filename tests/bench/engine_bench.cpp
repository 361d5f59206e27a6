// Event-engine throughput (sim/src/simulator.cpp). scripts/bench-engine.sh runs this pinned
// to one core and prints the table for results/sim/perf.md. Target (issue 3): at least 10
// million events per second on one core.
//
// - BM_Hold/N: the classic hold model. N events are pending; each, when it runs, schedules
//   one successor at now + an exponential delay (mean 1 us), so the queue stays at N. The
//   delays come from a precomputed table of 2^16 exponential draws, so the time measured is
//   the engine's (pop, run a callback, push), not the random-number generator's.
//   items_per_second = events executed per second.
// - BM_HoldRng/N: the same with a live draw (mt19937_64 + log) per event, as a model would
//   do it; shows what the generator adds.
// - BM_ScheduleCancel/N: N flows, each a hold event plus a timeout (a retransmission timer).
//   When a flow's event runs it schedules its successor, schedules a new timeout at
//   now + 4 us and cancels the previous one, so half of all scheduled events are cancelled
//   (about 2% of timeouts fire before being cancelled: exp(-4)). items_per_second = events
//   scheduled per second, each of which either runs or is cancelled and dropped; the
//   counter `executed` is the rate of events actually run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "psw/sim/random_streams.hpp"
#include "psw/sim/simulator.hpp"

namespace {

using namespace psw;
using psw::sim::EventId;
using psw::sim::Simulator;

constexpr Duration kMeanDelay = milliseconds(1);
constexpr std::size_t kTableSize = std::size_t{1} << 16;

std::vector<Duration> delay_table() {
  std::mt19937_64 rng = sim::RandomStreams(42).stream("bench.delays");
  std::vector<Duration> table(kTableSize);
  for (Duration& d : table) d = sim::exponential(rng, kMeanDelay);
  return table;
}

// Runs `n` events untimed, so the queue reaches its steady-state shape.
void warm_up(Simulator& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) s.step();
}

// One step() per benchmark iteration (a step may also drop cancelled events).
void run_events(benchmark::State& state, Simulator& s) {
  const std::uint64_t before = s.events_processed();
  for (auto _ : state) {
    s.step();
  }
  state.counters["executed"] = benchmark::Counter(
      static_cast<double>(s.events_processed() - before), benchmark::Counter::kIsRate);
}

struct Hold {
  Simulator s;
  std::vector<Duration> delays = delay_table();
  std::size_t next = 0;

  void fire() {
    s.schedule_after(delays[next++ & (kTableSize - 1)], 0, [this] { fire(); });
  }
};

void BM_Hold(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto h = std::make_unique<Hold>();
  for (std::size_t i = 0; i < n; ++i) h->fire();
  warm_up(h->s, 2 * n);
  run_events(state, h->s);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

struct HoldRng {
  Simulator s;
  std::mt19937_64 rng = sim::RandomStreams(42).stream("bench.hold");

  void fire() {
    s.schedule_after(sim::exponential(rng, kMeanDelay), 0, [this] { fire(); });
  }
};

void BM_HoldRng(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto h = std::make_unique<HoldRng>();
  for (std::size_t i = 0; i < n; ++i) h->fire();
  warm_up(h->s, 2 * n);
  run_events(state, h->s);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

struct Flows {
  struct Flow {
    Flows* owner;
    EventId timer = 0;
  };
  Simulator s;
  std::vector<Duration> delays = delay_table();
  std::vector<Flow> flows;
  std::size_t next = 0;
  std::uint64_t scheduled = 0;

  void fire(Flow* f) {
    s.schedule_after(delays[next++ & (kTableSize - 1)], 0, [f] { f->owner->fire(f); });
    s.cancel(f->timer);
    f->timer = s.schedule_after(kMeanDelay * 4, 1, [] {});
    scheduled += 2;
  }
};

void BM_ScheduleCancel(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto fl = std::make_unique<Flows>();
  fl->flows.assign(n, Flows::Flow{fl.get()});
  for (Flows::Flow& f : fl->flows) fl->fire(&f);
  warm_up(fl->s, 2 * n);
  const std::uint64_t before = fl->scheduled;
  run_events(state, fl->s);
  state.SetItemsProcessed(static_cast<std::int64_t>(fl->scheduled - before));
}

BENCHMARK(BM_Hold)->Arg(1'000)->Arg(100'000);
BENCHMARK(BM_HoldRng)->Arg(1'000)->Arg(100'000);
BENCHMARK(BM_ScheduleCancel)->Arg(1'000)->Arg(100'000);

}  // namespace

BENCHMARK_MAIN();
