// Event-engine throughput (sim/src/simulator.cpp). scripts/bench-engine.sh runs this pinned
// to one core and prints the table for results/sim/perf.md. Target: at least 10
// million events per second on one core.
//
// Every case is named BM_<model>/<N>/<mean delay in ns> and measures one step() per
// benchmark iteration, after 2N untimed events that bring the queue to its steady shape.
// - BM_Hold: the classic hold model. N events are pending; each, when it runs, schedules one
//   successor at now + an exponential delay, so the queue stays at N. The delays come from a
//   precomputed table of 2^16 draws, so the time measured is the engine's (pop, run a
//   callback, push), not the random-number generator's. With a 1 ms mean, events rarely
//   share a nanosecond; with 1 us and N = 100,000 about 100 do, which exercises the
//   same-time order. items_per_second = events run per second.
// - BM_HoldRng: the same with a live draw per event (mt19937_64 + log), as a model would do
//   it; shows what the generator adds.
// - BM_ScheduleCancel: N flows, each a hold event plus a timeout (a retransmission timer), so
//   2N events are pending. When a flow's event runs it schedules its successor, cancels its
//   previous timeout and schedules a new one at now + 4 x mean: half of all scheduled events
//   are cancelled (about 2% of timeouts fire first: exp(-4)). items_per_second = events
//   scheduled per second, each of which either runs or is cancelled and dropped; the counter
//   `executed` is the rate of events run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "psw/common/random_streams.hpp"
#include "psw/sim/simulator.hpp"

namespace {

using namespace psw;
using psw::sim::EventId;
using psw::sim::Simulator;

constexpr std::size_t kTableSize = std::size_t{1} << 16;

std::vector<Duration> delay_table(Duration mean) {
  std::mt19937_64 rng = RandomStreams(42).stream("bench.delays");
  std::vector<Duration> table(kTableSize);
  for (Duration& d : table) d = exponential(rng, mean);
  return table;
}

std::size_t pending_arg(const benchmark::State& state) {
  return static_cast<std::size_t>(state.range(0));
}
Duration mean_arg(const benchmark::State& state) { return nanoseconds(state.range(1)); }

void warm_up(Simulator& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) s.step();
}

// One step() per iteration (a step may also drop cancelled events on its way).
void run_events(benchmark::State& state, Simulator& s) {
  const std::uint64_t before = s.events_processed();
  for (auto _ : state) {
    s.step();
  }
  state.counters["executed"] = benchmark::Counter(
      static_cast<double>(s.events_processed() - before), benchmark::Counter::kIsRate);
}

struct Hold {
  explicit Hold(Duration mean) : delays(delay_table(mean)) {}
  void fire() {
    s.schedule_after(delays[next++ & (kTableSize - 1)], 0, [this] { fire(); });
  }

  Simulator s;
  std::vector<Duration> delays;
  std::size_t next = 0;
};

void BM_Hold(benchmark::State& state) {
  auto h = std::make_unique<Hold>(mean_arg(state));
  for (std::size_t i = 0; i < pending_arg(state); ++i) h->fire();
  warm_up(h->s, 2 * pending_arg(state));
  run_events(state, h->s);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

struct HoldRng {
  explicit HoldRng(Duration m) : mean(m) {}
  void fire() {
    s.schedule_after(exponential(rng, mean), 0, [this] { fire(); });
  }

  Simulator s;
  Duration mean;
  std::mt19937_64 rng = RandomStreams(42).stream("bench.hold");
};

void BM_HoldRng(benchmark::State& state) {
  auto h = std::make_unique<HoldRng>(mean_arg(state));
  for (std::size_t i = 0; i < pending_arg(state); ++i) h->fire();
  warm_up(h->s, 2 * pending_arg(state));
  run_events(state, h->s);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

struct Flows {
  struct Flow {
    Flows* owner;
    EventId timer = 0;
  };
  Flows(std::size_t n, Duration m) : delays(delay_table(m)), timeout(m * 4) {
    flows.assign(n, Flow{this});
  }
  void fire(Flow* f) {
    s.schedule_after(delays[next++ & (kTableSize - 1)], 0, [f] { f->owner->fire(f); });
    s.cancel(f->timer);
    f->timer = s.schedule_after(timeout, 1, [] {});
    scheduled += 2;
  }

  Simulator s;
  std::vector<Duration> delays;
  Duration timeout;
  std::vector<Flow> flows;
  std::size_t next = 0;
  std::uint64_t scheduled = 0;
};

void BM_ScheduleCancel(benchmark::State& state) {
  auto fl = std::make_unique<Flows>(pending_arg(state), mean_arg(state));
  for (Flows::Flow& f : fl->flows) fl->fire(&f);
  warm_up(fl->s, 2 * pending_arg(state));
  const std::uint64_t before = fl->scheduled;
  run_events(state, fl->s);
  state.SetItemsProcessed(static_cast<std::int64_t>(fl->scheduled - before));
}

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kUs = 1'000;

BENCHMARK(BM_Hold)->Args({1'000, kMs})->Args({100'000, kMs})->Args({100'000, kUs});
BENCHMARK(BM_HoldRng)->Args({1'000, kMs})->Args({100'000, kMs});
BENCHMARK(BM_ScheduleCancel)->Args({1'000, kMs})->Args({100'000, kMs});

}  // namespace

BENCHMARK_MAIN();
