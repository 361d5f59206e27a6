#pragma once
// The discrete-event engine: a clock, a future-event list and the loop that runs it.
//
//   Simulator sim;
//   sim.schedule_after(microseconds(5), 0, [&] { ... sim.schedule_after(...); ... });
//   sim.run();                       // or run_until(t), or step() one event at a time
//
// Models keep their own state and talk to the engine only through schedule/cancel. Time is
// integer nanoseconds (psw::Duration), starts at zero and never goes backwards. The engine is
// single-threaded; one Simulator per thread.

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "psw/common/units.hpp"

namespace psw::sim {

// Names one scheduled event. Unique per scheduled event for the life of the Simulator and
// never reused (0 is never issued, so it can mean "no event").
using EventId = std::uint64_t;

// Note [Same-time order]
// ~~~~~~~~~~~~~~~~~~~~~~
// Events run in increasing order of the key (time, priority, insertion order):
//  1. earlier time first;
//  2. at equal time, lower priority value first (priority is any int; 0 is a fine default,
//     negative values run before it);
//  3. at equal time and priority, the event scheduled first (by the schedule_* call order,
//     counted over the Simulator's whole life) runs first.
// The key is a strict total order (no two events share an insertion number), so a run is
// fully determined by the sequence of schedule/cancel calls: no dependence on queue layout,
// addresses or the standard library. An event scheduled from inside a callback for the
// current time runs in the same instant, after every already-pending event with a key below
// its own; if its priority value is lower than theirs it runs before them.
//
// Note [Cancellation]
// ~~~~~~~~~~~~~~~~~~~
// cancel() is lazy and O(1): the event's callback is destroyed at once (releasing what it
// captured), and its entry stays in the queue as a tombstone until it reaches the front,
// where it is dropped without running or counting. pending() therefore may include cancelled
// events. Cancelling an event that already ran, was already cancelled, or was never issued is
// a no-op. Memory is bounded by the number of queued entries: the bookkeeping of an event is
// recycled as soon as it leaves the queue (EventIds stay unique through a per-slot generation
// counter; see simulator.cpp).
class Simulator {
 public:
  // Callbacks take no arguments and return nothing; capture what they need. libstdc++ stores
  // callables of up to 16 bytes (e.g. `[this, i]`, `[ctx]`) inline, so such lambdas never
  // allocate.
  using Callback = std::function<void()>;

  Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;
  Simulator(Simulator&&) = default;
  Simulator& operator=(Simulator&&) = default;
  ~Simulator() = default;

  // The time of the event being run (or last run; or the time run_until() advanced to).
  Duration now() const { return Duration::from_ns(now_); }

  // Schedules `fn` at absolute `time`, ordered as in Note [Same-time order]. Throws
  // psw::Error if time < now() or fn is empty.
  EventId schedule_at(Duration time, int priority, Callback fn);
  // Same at now() + delay; throws psw::Error if delay < 0 (or now() + delay overflows).
  EventId schedule_after(Duration delay, int priority, Callback fn);
  // See Note [Cancellation].
  void cancel(EventId id);

  // Runs the next live event (dropping cancelled ones in front of it); false if none is left.
  bool step();
  // Runs events until none is left or a callback calls stop(). Exceptions thrown by a
  // callback propagate out with the engine consistent (that event counts as processed).
  void run();
  // Runs every event with time <= `time` (events they schedule at or before `time` included),
  // then advances now() to `time` if it is later. If a callback calls stop(), returns after
  // that event without advancing the clock. A `time` before now() runs nothing.
  void run_until(Duration time);
  // Makes the run() / run_until() in progress return after the current event. Only affects a
  // run in progress: each run() / run_until() starts with the request cleared.
  void stop() { stop_requested_ = true; }

  // Events executed so far (cancelled events are not counted).
  std::uint64_t events_processed() const { return processed_; }
  // Events in the queue: scheduled, not yet run; may include cancelled ones.
  std::size_t pending() const { return size_; }

 private:
  // One queued event, 24 bytes; the callback lives in slots_[slot] so that moving entries
  // between buckets never touches it. See Note [Engine data structures] in simulator.cpp.
  struct Entry {
    std::uint64_t time;  // ns, >= 0
    std::uint64_t seq;   // insertion number (64 bits: never wraps)
    std::int32_t priority;
    std::uint32_t slot;
  };
  enum class SlotState : std::uint8_t { Free, Pending, Cancelled };
  struct Slot {
    Callback fn;
    std::uint32_t generation = 1;  // the generation of the next (or current) occupant
    SlotState state = SlotState::Free;
  };
  // The radix queue's shape (Note [Engine data structures]): 64-bit times as 11 digits of
  // 6 bits, 64 buckets per digit.
  static constexpr int kDigitBits = 6;
  static constexpr int kFanout = 1 << kDigitBits;
  static constexpr int kLevels = (64 + kDigitBits - 1) / kDigitBits;

  EventId enqueue(std::uint64_t time, int priority, Callback& fn);  // takes fn's target
  void insert(const Entry& e);          // into the radix queue; requires e.time >= base_
  int lowest_bucket() const;            // index of the earliest non-empty bucket (if any)
  bool fill_current();                  // makes current_ non-empty; false if the queue is empty
  bool next_time(std::uint64_t& time) const;  // earliest queued time (maybe a tombstone's)
  Entry pop_current();                  // removes the first of current_
  void run_entry(const Entry& e);       // runs a live entry popped from current_
  void release(std::uint32_t slot);     // recycles a slot whose entry left the queue

  // The radix queue (Note [Engine data structures]).
  std::uint64_t base_ = 0;              // every queued time is >= base_; base_ <= now_ between calls
  std::vector<Entry> current_;          // entries with time == base_: binary heap on (priority, seq)
  // buckets_[level * kFanout + digit]: the entries whose highest digit that differs from
  // base_'s is `level`, and whose value of that digit is `digit`; unordered.
  std::array<std::vector<Entry>, kLevels * kFanout> buckets_;
  std::array<std::uint64_t, kLevels * kFanout> bucket_min_;  // earliest time in each bucket
  std::array<std::uint64_t, kLevels> level_mask_{};  // bit d: bucket (level, d) is non-empty
  std::uint32_t levels_nonempty_ = 0;   // bit l: level_mask_[l] != 0
  std::size_t size_ = 0;                // queued entries, tombstones included

  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::int64_t now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
  bool stop_requested_ = false;
};

}  // namespace psw::sim
