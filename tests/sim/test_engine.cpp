// The discrete-event engine (sim/src/simulator.cpp) and the random streams
// (common/src/random_streams.cpp): same-time order, cancellation, run_until/stop semantics,
// agreement with a plain ordered-set engine on random workloads, Simulator::Callback,
// determinism, and the distribution helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/common/random_streams.hpp"
#include "psw/sim/simulator.hpp"

namespace psw::sim {
namespace {

// ---------------------------------------------------------------------------------------
// Ordering

TEST(EngineOrder, ByTime) {
  Simulator s;
  std::vector<std::int64_t> seen;
  for (const std::int64_t t : {50, 10, 40, 20, 30}) {
    s.schedule_at(nanoseconds(t), 0, [&, t] {
      EXPECT_EQ(s.now(), nanoseconds(t));
      seen.push_back(t);
    });
  }
  s.run();
  EXPECT_EQ(seen, (std::vector<std::int64_t>{10, 20, 30, 40, 50}));
  EXPECT_EQ(s.now(), nanoseconds(50));
  EXPECT_EQ(s.events_processed(), 5u);
  EXPECT_EQ(s.pending(), 0u);
}

TEST(EngineOrder, SameTimeByPriorityThenInsertion) {
  Simulator s;
  std::vector<std::string> seen;
  auto at = [&](std::int64_t t, int prio, std::string name) {
    s.schedule_at(nanoseconds(t), prio, [&seen, name] { seen.push_back(name); });
  };
  at(10, 5, "t10p5a");
  at(10, -1, "t10p-1");
  at(5, 9, "t5p9");
  at(10, 5, "t10p5b");
  at(10, 0, "t10p0a");
  at(10, 0, "t10p0b");
  at(10, 5, "t10p5c");
  s.run();
  EXPECT_EQ(seen, (std::vector<std::string>{"t5p9", "t10p-1", "t10p0a", "t10p0b", "t10p5a",
                                            "t10p5b", "t10p5c"}));
}

TEST(EngineOrder, ManyTiesKeepInsertionOrder) {
  // Enough equal keys to exercise every level of the heap.
  Simulator s;
  std::vector<int> seen;
  for (int i = 0; i < 5000; ++i) {
    s.schedule_at(nanoseconds(7), i % 3, [&seen, i] { seen.push_back(i); });
  }
  s.run();
  ASSERT_EQ(seen.size(), 5000u);
  std::vector<int> expected;
  for (int p = 0; p < 3; ++p) {
    for (int i = p; i < 5000; i += 3) expected.push_back(i);
  }
  EXPECT_EQ(seen, expected);
}

TEST(EngineOrder, MatchesSortedKeysOnRandomSchedule) {
  // A random mix against std::sort on (time, priority, insertion).
  std::mt19937_64 rng(7);
  Simulator s;
  using Key = std::tuple<std::int64_t, int, int>;
  std::vector<Key> keys;
  std::vector<Key> seen;
  for (int i = 0; i < 20000; ++i) {
    const auto t = static_cast<std::int64_t>(rng() % 500);
    const int prio = static_cast<int>(rng() % 5) - 2;
    keys.emplace_back(t, prio, i);
    s.schedule_at(nanoseconds(t), prio, [&seen, t, prio, i] { seen.emplace_back(t, prio, i); });
  }
  s.run();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(seen, keys);
}

TEST(EngineOrder, ScheduledFromCallbacks) {
  Simulator s;
  std::vector<std::string> seen;
  s.schedule_at(nanoseconds(10), 0, [&] {
    seen.push_back("a@10");
    // Same time, higher priority value than a pending event: runs after it.
    s.schedule_after(nanoseconds(0), 1, [&] { seen.push_back("c@10p1"); });
    // Same time, lower priority value: runs before the pending p0 event.
    s.schedule_after(nanoseconds(0), -1, [&] { seen.push_back("d@10p-1"); });
    s.schedule_after(nanoseconds(5), 0, [&] {
      seen.push_back("e@15");
      EXPECT_EQ(s.now(), nanoseconds(15));
    });
  });
  s.schedule_at(nanoseconds(10), 0, [&] { seen.push_back("b@10"); });
  s.schedule_at(nanoseconds(12), 0, [&] { seen.push_back("f@12"); });
  s.run();
  EXPECT_EQ(seen,
            (std::vector<std::string>{"a@10", "d@10p-1", "b@10", "c@10p1", "f@12", "e@15"}));
  EXPECT_EQ(s.events_processed(), 6u);
}

TEST(EngineOrder, ChainOfSelfReschedules) {
  Simulator s;
  int count = 0;
  std::function<void()> tick = [&] {
    if (++count < 100) s.schedule_after(microseconds(1), 0, tick);
  };
  s.schedule_at(Duration::zero(), 0, tick);
  s.run();
  EXPECT_EQ(count, 100);
  EXPECT_EQ(s.now(), microseconds(99));
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(EngineErrors, ScheduleInThePastThrows) {
  Simulator s;
  s.schedule_at(nanoseconds(100), 0, [] {});
  s.run();
  EXPECT_THROW(s.schedule_at(nanoseconds(99), 0, [] {}), Error);
  EXPECT_NO_THROW(s.schedule_at(nanoseconds(100), 0, [] {}));  // now() itself is fine
  EXPECT_THROW(s.schedule_after(nanoseconds(-1), 0, [] {}), Error);
  EXPECT_THROW(s.schedule_after(Duration::max(), 0, [] {}), Error);  // overflows
  EXPECT_THROW(s.schedule_at(nanoseconds(200), 0, Simulator::Callback{}), Error);
  EXPECT_EQ(s.pending(), 1u);
}

TEST(EngineErrors, ScheduleInThePastFromCallbackThrows) {
  Simulator s;
  bool threw = false;
  s.schedule_at(nanoseconds(50), 0, [&] {
    try {
      s.schedule_at(nanoseconds(49), 0, [] {});
    } catch (const Error&) {
      threw = true;
    }
  });
  s.run();
  EXPECT_TRUE(threw);
}

TEST(EngineErrors, CallbackExceptionPropagatesAndEngineStaysUsable) {
  Simulator s;
  std::vector<int> seen;
  s.schedule_at(nanoseconds(1), 0, [] { throw std::runtime_error("boom"); });
  s.schedule_at(nanoseconds(2), 0, [&] { seen.push_back(2); });
  EXPECT_THROW(s.run(), std::runtime_error);
  EXPECT_EQ(s.now(), nanoseconds(1));
  EXPECT_EQ(s.events_processed(), 1u);
  s.run();
  EXPECT_EQ(seen, std::vector<int>{2});
}

// ---------------------------------------------------------------------------------------
// Cancellation

TEST(EngineCancel, BeforeFiring) {
  Simulator s;
  std::vector<int> seen;
  s.schedule_at(nanoseconds(1), 0, [&] { seen.push_back(1); });
  const EventId id = s.schedule_at(nanoseconds(2), 0, [&] { seen.push_back(2); });
  s.schedule_at(nanoseconds(3), 0, [&] { seen.push_back(3); });
  s.cancel(id);
  EXPECT_EQ(s.pending(), 3u);  // lazy: the tombstone stays queued
  s.run();
  EXPECT_EQ(seen, (std::vector<int>{1, 3}));
  EXPECT_EQ(s.events_processed(), 2u);  // the cancelled event is not counted
  EXPECT_EQ(s.pending(), 0u);
}

TEST(EngineCancel, FromInsideACallback) {
  Simulator s;
  std::vector<int> seen;
  EventId later = 0;
  s.schedule_at(nanoseconds(1), 0, [&] {
    seen.push_back(1);
    s.cancel(later);
  });
  later = s.schedule_at(nanoseconds(5), 0, [&] { seen.push_back(5); });
  // An event cancelled at the very time it would run, by an earlier same-time event.
  EventId same = 0;
  s.schedule_at(nanoseconds(7), 0, [&] { s.cancel(same); });
  same = s.schedule_at(nanoseconds(7), 0, [&] { seen.push_back(7); });
  s.run();
  EXPECT_EQ(seen, std::vector<int>{1});
  EXPECT_EQ(s.events_processed(), 2u);
}

TEST(EngineCancel, AfterFiringIsANoOp) {
  Simulator s;
  int runs = 0;
  const EventId a = s.schedule_at(nanoseconds(1), 0, [&] { ++runs; });
  s.run();
  // The slot of `a` is recycled for `b`; cancelling the stale id must not touch `b`.
  const EventId b = s.schedule_at(nanoseconds(2), 0, [&] { ++runs; });
  EXPECT_NE(a, b);
  s.cancel(a);
  s.cancel(a);
  s.run();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(s.events_processed(), 2u);
}

TEST(EngineCancel, UnknownAndRepeatedIdsAreNoOps) {
  Simulator s;
  int runs = 0;
  const EventId id = s.schedule_at(nanoseconds(1), 0, [&] { ++runs; });
  s.schedule_at(nanoseconds(2), 0, [&] { ++runs; });
  s.cancel(0);
  s.cancel(12345);
  s.cancel(~EventId{0});
  s.cancel(id + (EventId{1} << 32));  // same slot, another generation
  s.cancel(id);
  s.cancel(id);
  s.run();
  EXPECT_EQ(runs, 1);
}

TEST(EngineCancel, ReleasesCapturedStateWhenDropped) {
  Simulator s;
  auto token = std::make_shared<int>(1);
  const EventId id = s.schedule_at(nanoseconds(1), 0, [token] {});
  s.schedule_at(nanoseconds(2), 0, [token] {});
  EXPECT_EQ(token.use_count(), 3);
  s.cancel(id);
  EXPECT_TRUE(s.step());  // drops the tombstone, runs the second event
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(s.events_processed(), 1u);
}

TEST(EngineCancel, DestructorReleasesPendingCallbacks) {
  auto token = std::make_shared<int>(1);
  {
    Simulator s;
    for (int i = 0; i < 100; ++i) s.schedule_at(nanoseconds(i * 1000), i % 3, [token] {});
    s.cancel(s.schedule_at(nanoseconds(5), 0, [token] {}));
    s.run_until(nanoseconds(10'000));
    EXPECT_EQ(token.use_count(), 1 + 89);
  }
  EXPECT_EQ(token.use_count(), 1);
}

TEST(EngineCancel, IdsAreUniqueAcrossSlotReuse) {
  Simulator s;
  std::set<EventId> ids;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(ids.insert(s.schedule_after(nanoseconds(i), 0, [] {})).second);
    }
    s.run();
  }
  EXPECT_EQ(ids.count(0), 0u);
}

TEST(EngineCancel, StepSkipsCancelledAndReportsEmpty) {
  Simulator s;
  const EventId a = s.schedule_at(nanoseconds(1), 0, [] {});
  const EventId b = s.schedule_at(nanoseconds(2), 0, [] {});
  s.cancel(a);
  s.cancel(b);
  EXPECT_FALSE(s.step());
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.events_processed(), 0u);
  EXPECT_EQ(s.now(), Duration::zero());  // dropping tombstones does not move the clock
}

// ---------------------------------------------------------------------------------------
// step / run_until / stop

TEST(EngineRun, StepRunsOneEventAtATime) {
  Simulator s;
  std::vector<int> seen;
  s.schedule_at(nanoseconds(3), 0, [&] { seen.push_back(3); });
  s.schedule_at(nanoseconds(1), 0, [&] { seen.push_back(1); });
  EXPECT_TRUE(s.step());
  EXPECT_EQ(seen, std::vector<int>{1});
  EXPECT_EQ(s.now(), nanoseconds(1));
  EXPECT_TRUE(s.step());
  EXPECT_FALSE(s.step());
  EXPECT_EQ(seen, (std::vector<int>{1, 3}));
}

TEST(EngineRun, RunUntilRunsEventsAtOrBeforeAndAdvancesClock) {
  Simulator s;
  std::vector<std::int64_t> seen;
  for (const std::int64_t t : {10, 20, 30}) {
    s.schedule_at(nanoseconds(t), 0, [&, t] { seen.push_back(t); });
  }
  s.run_until(nanoseconds(20));  // inclusive
  EXPECT_EQ(seen, (std::vector<std::int64_t>{10, 20}));
  EXPECT_EQ(s.now(), nanoseconds(20));
  s.run_until(nanoseconds(25));  // nothing to run, clock advances
  EXPECT_EQ(s.now(), nanoseconds(25));
  EXPECT_EQ(s.pending(), 1u);
  EXPECT_THROW(s.schedule_at(nanoseconds(24), 0, [] {}), Error);
  s.run_until(nanoseconds(5));  // earlier than now: nothing happens
  EXPECT_EQ(s.now(), nanoseconds(25));
  s.run_until(nanoseconds(100));
  EXPECT_EQ(seen, (std::vector<std::int64_t>{10, 20, 30}));
  EXPECT_EQ(s.now(), nanoseconds(100));
}

TEST(EngineRun, RunUntilIncludesEventsScheduledInsideTheWindow) {
  Simulator s;
  std::vector<std::int64_t> seen;
  s.schedule_at(nanoseconds(10), 0, [&] {
    seen.push_back(10);
    s.schedule_after(nanoseconds(5), 0, [&] { seen.push_back(15); });   // inside
    s.schedule_after(nanoseconds(10), 0, [&] { seen.push_back(20); });  // at the boundary
    s.schedule_after(nanoseconds(11), 0, [&] { seen.push_back(21); });  // outside
  });
  s.run_until(nanoseconds(20));
  EXPECT_EQ(seen, (std::vector<std::int64_t>{10, 15, 20}));
  EXPECT_EQ(s.pending(), 1u);
}

TEST(EngineRun, RunUntilDropsCancelledWithoutOverrunning) {
  Simulator s;
  std::vector<std::int64_t> seen;
  const EventId a = s.schedule_at(nanoseconds(100), 0, [&] { seen.push_back(100); });
  s.schedule_at(nanoseconds(200), 0, [&] { seen.push_back(200); });
  s.cancel(a);
  s.run_until(nanoseconds(150));  // drops the tombstone at 100; must not run the event at 200
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(s.now(), nanoseconds(150));
  s.schedule_at(nanoseconds(160), 0, [&] { seen.push_back(160); });
  s.schedule_at(nanoseconds(150), 0, [&] { seen.push_back(150); });
  s.run();
  EXPECT_EQ(seen, (std::vector<std::int64_t>{150, 160, 200}));
}

TEST(EngineRun, RunUntilOnEmptyQueueAdvancesClock) {
  Simulator s;
  s.run_until(milliseconds(3));
  EXPECT_EQ(s.now(), milliseconds(3));
  EXPECT_EQ(s.events_processed(), 0u);
  s.run_until(nanoseconds(-5));
  EXPECT_EQ(s.now(), milliseconds(3));
}

TEST(EngineRun, RunUntilTheEndOfTime) {
  Simulator s;
  int runs = 0;
  s.schedule_at(Duration::max(), 0, [&] { ++runs; });
  s.schedule_at(seconds(1), 0, [&] { ++runs; });
  s.run_until(Duration::max());
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(s.now(), Duration::max());
}

TEST(EngineRun, StopEndsRunAfterCurrentEvent) {
  Simulator s;
  std::vector<int> seen;
  s.schedule_at(nanoseconds(1), 0, [&] { seen.push_back(1); });
  s.schedule_at(nanoseconds(2), 0, [&] {
    seen.push_back(2);
    s.stop();
    seen.push_back(22);  // the current event finishes
  });
  s.schedule_at(nanoseconds(2), 1, [&] { seen.push_back(3); });
  s.schedule_at(nanoseconds(4), 0, [&] { seen.push_back(4); });
  s.run();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 22}));
  EXPECT_EQ(s.now(), nanoseconds(2));
  EXPECT_EQ(s.pending(), 2u);
  s.run();  // resumes
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 22, 3, 4}));
}

TEST(EngineRun, StopInsideRunUntilKeepsClock) {
  Simulator s;
  s.schedule_at(nanoseconds(5), 0, [&] { s.stop(); });
  s.schedule_at(nanoseconds(6), 0, [] {});
  s.run_until(nanoseconds(100));
  EXPECT_EQ(s.now(), nanoseconds(5));
  EXPECT_EQ(s.pending(), 1u);
  s.run_until(nanoseconds(100));
  EXPECT_EQ(s.now(), nanoseconds(100));
  EXPECT_EQ(s.pending(), 0u);
}

TEST(EngineRun, StopOutsideARunIsForgotten) {
  Simulator s;
  int runs = 0;
  s.schedule_at(nanoseconds(1), 0, [&] { ++runs; });
  s.schedule_at(nanoseconds(2), 0, [&] { ++runs; });
  s.stop();
  s.run();
  EXPECT_EQ(runs, 2);
}

// ---------------------------------------------------------------------------------------
// Determinism and scale

// A randomised model: K sources with their own streams, each event logging itself, sometimes
// spawning same-time work at a random priority and sometimes cancelling a pending timer.
std::vector<std::string> run_random_model(std::uint64_t seed) {
  Simulator s;
  RandomStreams streams(seed);
  struct Source {
    std::mt19937_64 rng;
    EventId timer = 0;
    int id = 0;
  };
  std::vector<Source> sources;
  for (int k = 0; k < 8; ++k) {
    sources.push_back(Source{streams.stream(static_cast<std::uint64_t>(k)), 0, k});
  }
  std::vector<std::string> log;
  std::function<void(Source*)> fire = [&](Source* src) {
    log.push_back(std::to_string(s.now().ns()) + " src" + std::to_string(src->id));
    if (s.events_processed() > 20000) return;
    s.schedule_after(exponential(src->rng, microseconds(3)), 0, [&fire, src] { fire(src); });
    const double u = uniform01(src->rng);
    if (u < 0.3) {
      const int prio = static_cast<int>(src->rng() % 3);
      s.schedule_after(Duration::zero(), prio, [&log, &s, src, prio] {
        log.push_back(std::to_string(s.now().ns()) + " work" + std::to_string(src->id) + "p" +
                      std::to_string(prio));
      });
    } else if (u < 0.6) {
      s.cancel(src->timer);
      src->timer = s.schedule_after(microseconds(4), 0, [&log, &s, src] {
        log.push_back(std::to_string(s.now().ns()) + " timeout" + std::to_string(src->id));
      });
    }
  };
  for (Source& src : sources) {
    s.schedule_at(Duration::zero(), 0, [&fire, p = &src] { fire(p); });
  }
  s.run();
  log.push_back("processed " + std::to_string(s.events_processed()));
  return log;
}

TEST(EngineDeterminism, SameSeedSameLog) {
  const auto a = run_random_model(2020);
  const auto b = run_random_model(2020);
  EXPECT_GT(a.size(), 20000u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, run_random_model(2021));
}

TEST(EngineScale, MillionEventRun) {
  Simulator s;
  std::mt19937_64 rng = RandomStreams(1).stream("scale");
  std::uint64_t fired = 0;
  std::int64_t last = 0;
  bool monotone = true;
  std::function<void()> hold = [&] {
    monotone = monotone && s.now().ns() >= last;
    last = s.now().ns();
    if (++fired + 1000 <= 1'000'000) s.schedule_after(exponential(rng, microseconds(1)), 0, hold);
  };
  for (int i = 0; i < 1000; ++i) s.schedule_after(exponential(rng, microseconds(1)), 0, hold);
  s.run();
  EXPECT_EQ(fired, 1'000'000u);
  EXPECT_EQ(s.events_processed(), 1'000'000u);
  EXPECT_TRUE(monotone);
  EXPECT_EQ(s.pending(), 0u);
}

// ---------------------------------------------------------------------------------------
// Against a reference: a plain ordered set with eager cancellation. Random interleavings of
// schedule (delays from 0 ns to 2^60 ns, so every level of the radix queue is used), cancel
// (of pending, fired and cancelled events), step, run_until and callbacks that schedule and
// cancel must give the same log of (time, event) in both.

class ReferenceEngine {
 public:
  using Id = std::uint64_t;
  Duration now() const { return nanoseconds(now_); }
  Id schedule_at(Duration time, int priority, std::function<void()> fn) {
    if (time.ns() < now_) throw Error("past");
    const std::uint64_t seq = next_seq_++;
    queue_.emplace(Key{time.ns(), priority, seq}, std::move(fn));
    by_id_[seq] = Key{time.ns(), priority, seq};
    return seq;
  }
  void cancel(Id id) {
    const auto it = by_id_.find(id);
    if (it == by_id_.end()) return;
    queue_.erase(it->second);
    by_id_.erase(it);
  }
  bool step() {
    if (queue_.empty()) return false;
    auto node = queue_.extract(queue_.begin());
    by_id_.erase(std::get<2>(node.key()));
    now_ = std::get<0>(node.key());
    ++processed_;
    node.mapped()();
    return true;
  }
  void run() {
    while (step()) {
    }
  }
  void run_until(Duration t) {
    while (!queue_.empty() && std::get<0>(queue_.begin()->first) <= t.ns()) step();
    if (t.ns() > now_) now_ = t.ns();
  }
  std::uint64_t events_processed() const { return processed_; }

 private:
  using Key = std::tuple<std::int64_t, int, std::uint64_t>;
  std::map<Key, std::function<void()>> queue_;
  std::map<std::uint64_t, Key> by_id_;
  std::int64_t now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
};

template <typename Engine>
class Workload {
 public:
  explicit Workload(std::uint64_t seed) : driver_(seed) {}

  std::vector<std::pair<std::int64_t, int>> run() {
    for (int op = 0; op < 4000; ++op) {
      switch (driver_() % 10) {
        case 0:
        case 1:
        case 2:
        case 3:
          schedule(driver_);
          break;
        case 4:
          cancel_some(driver_);
          break;
        case 5:
        case 6:
        case 7:
          engine_.step();
          break;
        case 8:
          engine_.run_until(nanoseconds(engine_.now().ns() + delay(driver_)));
          break;
        default:
          break;
      }
      log_.emplace_back(engine_.now().ns(), -1);  // the clock after each operation
    }
    engine_.run();
    log_.emplace_back(static_cast<std::int64_t>(engine_.events_processed()), -2);
    return log_;
  }

 private:
  std::int64_t delay(std::mt19937_64& r) {
    std::int64_t d = 0;
    switch (r() % 6) {
      case 0: d = 0; break;                                               // same time
      case 1: d = static_cast<std::int64_t>(r() % 64); break;             // level 0
      case 2: d = static_cast<std::int64_t>(r() % 100'000); break;        // levels 1-2
      case 3: d = static_cast<std::int64_t>(r() % 5'000'000); break;      // ms
      case 4: d = static_cast<std::int64_t>(r() % (std::int64_t{1} << 40)); break;
      default: d = static_cast<std::int64_t>(r() >> 4) >> (r() % 60); break;  // up to 2^60
    }
    const std::int64_t room = (std::int64_t{1} << 62) - engine_.now().ns();
    return std::min(d, room);
  }

  void schedule(std::mt19937_64& r) {
    const int label = next_label_++;
    const int priority = static_cast<int>(r() % 5) - 2;
    const std::int64_t at = engine_.now().ns() + delay(r);
    ids_.push_back(engine_.schedule_at(nanoseconds(at), priority, [this, label] { fire(label); }));
  }

  void cancel_some(std::mt19937_64& r) {
    if (ids_.empty()) return;
    // Recent ids are mostly pending; old ones mostly fired already.
    const std::size_t back = std::min<std::size_t>(ids_.size(), 1 + r() % 64);
    engine_.cancel(ids_[ids_.size() - back]);
  }

  void fire(int label) {
    log_.emplace_back(engine_.now().ns(), label);
    std::mt19937_64 r(static_cast<std::uint64_t>(label) * 7919u + 17u);  // its own actions
    if (next_label_ < 30'000) {
      const int children = static_cast<int>(r() % 3);
      for (int i = 0; i < children; ++i) schedule(r);
    }
    if (r() % 4 == 0) cancel_some(r);
  }

  Engine engine_;
  std::mt19937_64 driver_;
  std::vector<typename std::conditional_t<std::is_same_v<Engine, Simulator>, EventId,
                                          ReferenceEngine::Id>>
      ids_;
  std::vector<std::pair<std::int64_t, int>> log_;
  int next_label_ = 0;
};

TEST(EngineReference, RandomOperationsMatchAnOrderedSet) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const auto expected = Workload<ReferenceEngine>(seed).run();
    const auto actual = Workload<Simulator>(seed).run();
    for (std::size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
      ASSERT_EQ(actual[i], expected[i]) << "seed " << seed << ", log line " << i;
    }
    ASSERT_EQ(actual.size(), expected.size()) << "seed " << seed;
    EXPECT_GT(expected.size(), 8000u);
  }
}

TEST(EngineOrder, ExtremeTimes) {
  Simulator s;
  std::vector<std::int64_t> seen;
  const std::vector<std::int64_t> times = {Duration::max().ns(), 0, std::int64_t{1} << 62, 1,
                                           (std::int64_t{1} << 32) + 5, 63, 64,
                                           Duration::max().ns() - 1, std::int64_t{1} << 32};
  for (const std::int64_t t : times) {
    s.schedule_at(nanoseconds(t), 0, [&seen, &s] { seen.push_back(s.now().ns()); });
  }
  s.run();
  std::vector<std::int64_t> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(seen, sorted);
  EXPECT_EQ(s.now(), Duration::max());
}

// ---------------------------------------------------------------------------------------
// Moving a Simulator

TEST(EngineMove, MoveConstructAndAssignCarryTheQueue) {
  auto token = std::make_shared<int>(0);
  std::vector<int> seen;
  Simulator a;
  a.schedule_at(nanoseconds(5), 0, [&seen, token] { seen.push_back(5); });
  a.schedule_at(nanoseconds(1), 0, [&seen] { seen.push_back(1); });
  ASSERT_TRUE(a.step());
  Simulator b(std::move(a));
  EXPECT_EQ(b.now(), nanoseconds(1));
  EXPECT_EQ(b.pending(), 1u);
  EXPECT_EQ(a.pending(), 0u);  // NOLINT(bugprone-use-after-move): documented as empty
  EXPECT_FALSE(a.step());      // NOLINT(bugprone-use-after-move)

  Simulator c;
  c.schedule_at(nanoseconds(9), 0, [token] {});
  EXPECT_EQ(token.use_count(), 3);
  c = std::move(b);  // c's own pending callback is destroyed
  EXPECT_EQ(token.use_count(), 2);
  c.run();
  EXPECT_EQ(seen, (std::vector<int>{1, 5}));
  EXPECT_EQ(c.events_processed(), 2u);
  EXPECT_EQ(token.use_count(), 1);
}

// ---------------------------------------------------------------------------------------
// Simulator::Callback

using Callback = Simulator::Callback;

void free_function_target(int* p) { ++*p; }
int free_function_counter = 0;
void free_function() { ++free_function_counter; }

TEST(EngineCallback, EmptyCallablesAreEmpty) {
  EXPECT_FALSE(Callback{});
  EXPECT_FALSE(Callback{nullptr});
  void (*null_fn)() = nullptr;
  EXPECT_FALSE(Callback{null_fn});
  EXPECT_FALSE(Callback{std::function<void()>{}});
  EXPECT_TRUE(Callback{} == nullptr);
  EXPECT_TRUE(Callback{[] {}} != nullptr);
  Simulator s;
  EXPECT_THROW(s.schedule_at(nanoseconds(1), 0, std::function<void()>{}), Error);
  EXPECT_THROW(s.schedule_at(nanoseconds(1), 0, null_fn), Error);
  EXPECT_EQ(s.pending(), 0u);
}

TEST(EngineCallback, InlineAndHeapCallablesRunAndCopy) {
  int calls = 0;
  const Callback small = [&calls] { ++calls; };  // one reference: stored inline
  Callback copy = small;
  small();
  copy();
  EXPECT_EQ(calls, 2);

  auto token = std::make_shared<int>(0);
  std::string text = "a long string that does not fit the small buffer of std::string";
  Callback big = [token, text, &calls] { calls += static_cast<int>(text.size() > 10); };
  EXPECT_EQ(token.use_count(), 2);
  Callback big_copy = big;  // deep copy of the heap-stored lambda
  EXPECT_EQ(token.use_count(), 3);
  Callback moved = std::move(big);
  EXPECT_FALSE(big);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(token.use_count(), 3);
  moved();
  big_copy();
  EXPECT_EQ(calls, 4);
  big_copy = small;  // assignment destroys the old target
  EXPECT_EQ(token.use_count(), 2);
  moved = nullptr;
  EXPECT_EQ(token.use_count(), 1);

  free_function_counter = 0;
  Callback fp = &free_function;
  fp();
  EXPECT_EQ(free_function_counter, 1);
  int target = 0;
  Callback bound = std::bind(&free_function_target, &target);
  bound();
  EXPECT_EQ(target, 1);
}

TEST(EngineCallback, MutableStateAndStdFunctionsWork) {
  Simulator s;
  std::vector<int> seen;
  int counter = 10;
  s.schedule_at(nanoseconds(1), 0, [&seen, counter]() mutable { seen.push_back(++counter); });
  std::function<void()> f = [&seen] { seen.push_back(99); };
  s.schedule_at(nanoseconds(2), 0, f);  // copied into the Callback; f stays usable
  s.schedule_at(nanoseconds(3), 0, f);
  f();
  // Two references fit inline; four do not; both work.
  int a = 1, b = 2, c = 3, d = 4;
  s.schedule_at(nanoseconds(4), 0, [&seen, &a, &b] { seen.push_back(a + b); });
  s.schedule_at(nanoseconds(5), 0, [&seen, &a, &b, &c, &d] { seen.push_back(a + b + c + d); });
  s.run();
  EXPECT_EQ(seen, (std::vector<int>{99, 11, 99, 99, 3, 10}));
}

TEST(EngineCallback, RequiresCopyableVoidCallables) {
  struct MoveOnly {
    std::unique_ptr<int> p;
    void operator()() const {}
  };
  static_assert(!std::is_constructible_v<Callback, MoveOnly>);
  static_assert(!std::is_constructible_v<Callback, int>);
  static_assert(std::is_constructible_v<Callback, int (*)()>);  // a result is ignored
  static_assert(std::is_nothrow_move_constructible_v<Callback>);
  static_assert(sizeof(Callback) == 24);  // an operations pointer and 16 inline bytes
  SUCCEED();
}

// ---------------------------------------------------------------------------------------
// Random streams

// The first draw of RandomStreams(42).stream("arrivals"): pins the seeding recipe.
constexpr std::uint64_t kArrivalsFirstDraw = 5737732004489357749u;  // checked in Python

std::vector<std::uint64_t> draw(std::mt19937_64 rng, int n) {
  std::vector<std::uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng());
  return out;
}

TEST(EngineRandom, SameSeedAndIdSameSequence) {
  const RandomStreams a(99);
  const RandomStreams b(99);
  EXPECT_EQ(draw(a.stream(3), 100), draw(b.stream(3), 100));
  EXPECT_EQ(draw(a.stream(3), 100), draw(a.stream(3), 100));  // stream() is const and fresh
  EXPECT_EQ(a.seed(), 99u);
}

TEST(EngineRandom, DifferentIdsAndSeedsDiffer) {
  const RandomStreams r(99);
  std::set<std::uint64_t> firsts;
  for (std::uint64_t id = 0; id < 1000; ++id) firsts.insert(r.stream(id)());
  EXPECT_EQ(firsts.size(), 1000u);
  EXPECT_NE(draw(r.stream(0), 10), draw(RandomStreams(100).stream(0), 10));
  EXPECT_NE(draw(r.stream("arrivals"), 10), draw(r.stream("models"), 10));
}

TEST(EngineRandom, NameStreamsAreStable) {
  // Golden values: a change here changes every simulation result for a given seed.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325u);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cu);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8u);
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafu);
  const RandomStreams r(42);
  EXPECT_EQ(draw(r.stream("arrivals"), 5), draw(r.stream(fnv1a64("arrivals")), 5));
  EXPECT_EQ(r.stream("arrivals")(), kArrivalsFirstDraw);
}

TEST(EngineRandom, Uniform01InUnitInterval) {
  std::mt19937_64 rng = RandomStreams(5).stream("u");
  double lo = 1.0;
  double hi = 0.0;
  double sum = 0.0;
  constexpr int kN = 1'000'000;
  for (int i = 0; i < kN; ++i) {
    const double u = uniform01(rng);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_LT(lo, 1e-4);
  EXPECT_GT(hi, 1 - 1e-4);
  EXPECT_NEAR(sum / kN, 0.5, 0.002);
}

TEST(EngineRandom, ExponentialMeanWithinTwoPercent) {
  std::mt19937_64 rng = RandomStreams(11).stream("exp");
  constexpr int kN = 1'000'000;
  const Duration mean = microseconds(10);
  double sum = 0.0;
  for (int i = 0; i < kN; ++i) {
    const Duration d = exponential(rng, mean);
    ASSERT_GE(d.ns(), 0);
    sum += static_cast<double>(d.ns());
  }
  EXPECT_NEAR(sum / kN / static_cast<double>(mean.ns()), 1.0, 0.02);
  EXPECT_EQ(exponential(rng, Duration::zero()), Duration::zero());
  EXPECT_THROW(exponential(rng, nanoseconds(-1)), Error);
}

}  // namespace
}  // namespace psw::sim
