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
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
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
// cancel() is lazy and O(1): it marks the event, whose entry stays in the queue as a
// tombstone until the queue reaches it (when the entry's part of the queue is reorganised,
// or at the latest when it comes to the front); it is then dropped without running or being
// counted, and its callback, with what that captured, is destroyed. pending() therefore may
// include cancelled events. Cancelling an event that already ran, was already cancelled, or
// was never issued is a no-op. Memory stays bounded by the peak number of queued entries:
// an event's bookkeeping is recycled as soon as it leaves the queue, and EventIds stay unique
// through a per-slot generation counter (Note [Engine data structures] in simulator.cpp).
//
// Note [Callback]
// ~~~~~~~~~~~~~~~
// Simulator::Callback is a small type-erased `void()` callable, used instead of
// std::function<void()> because the queue moves pending callbacks around with memcpy (see
// Note [Engine data structures] in simulator.cpp), which std::function does not allow:
//  - callables that are trivially copyable and at most 16 bytes (the same as libstdc++'s
//    std::function: a lambda capturing `this` and an int, two pointers, or two references;
//    a function pointer) are stored inline: no allocation, and a move is a 24-byte copy;
//  - anything else (a lambda capturing a std::string or a shared_ptr, or three pointers; a
//    std::function) is copied to the heap once, when the Callback is made, and the Callback
//    holds the pointer.
// Like std::function it is copyable (so the callable must be copy-constructible), testable
// with `if (cb)`, and converts implicitly from any callable; an empty one (default, nullptr, a
// null function pointer, an empty std::function) cannot be scheduled. The destructor of a
// callable must not call into the Simulator (it may run while the queue is reorganised).
class Simulator {
 public:
  class Callback;

  Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;
  Simulator(Simulator&& other) noexcept;             // `other` is left empty, at time zero
  Simulator& operator=(Simulator&& other) noexcept;  // destroys this one's pending callbacks
  ~Simulator();

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
  // A callback's bytes without ownership: what the queue stores and moves with memcpy.
  struct RawCallback {
    struct Ops {
      void (*invoke)(void* storage);
      void (*destroy)(void* storage);                      // null: nothing to do
      void (*clone)(void* storage, const void* from);      // null: memcpy is a copy
    };
    static constexpr std::size_t kInlineSize = 16;
    const Ops* ops = nullptr;                              // null: empty
    alignas(void*) unsigned char storage[kInlineSize];
  };

 public:
  // See Note [Callback].
  class Callback {
   public:
    Callback() noexcept = default;
    Callback(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)
    template <typename F, typename D = std::decay_t<F>>
      requires(!std::is_same_v<D, Callback> && std::is_invocable_r_v<void, D&> &&
               std::is_copy_constructible_v<D>)
    Callback(F&& f) {  // NOLINT(google-explicit-constructor): like std::function
      if constexpr (std::is_pointer_v<D> || std::is_same_v<D, std::function<void()>>) {
        if (!f) return;
      }
      if constexpr (kInline<D>) {
        ::new (static_cast<void*>(raw_.storage)) D(std::forward<F>(f));
        raw_.ops = &kInlineOps<D>;
      } else {
        D* p = new D(std::forward<F>(f));
        std::memcpy(raw_.storage, &p, sizeof p);
        raw_.ops = &kHeapOps<D>;
      }
    }
    Callback(const Callback& other) { copy_from(other); }
    Callback(Callback&& other) noexcept : raw_(other.raw_) { other.raw_.ops = nullptr; }
    Callback& operator=(const Callback& other) {
      if (this != &other) {
        Callback copy(other);
        *this = std::move(copy);
      }
      return *this;
    }
    Callback& operator=(Callback&& other) noexcept {
      if (this != &other) {
        reset();
        raw_ = other.raw_;
        other.raw_.ops = nullptr;
      }
      return *this;
    }
    ~Callback() { reset(); }

    explicit operator bool() const noexcept { return raw_.ops != nullptr; }
    friend bool operator==(const Callback& c, std::nullptr_t) noexcept { return !c; }
    // Calls the callable; the Callback must not be empty.
    void operator()() const { raw_.ops->invoke(const_cast<unsigned char*>(raw_.storage)); }

   private:
    friend class Simulator;
    template <typename D>
    static constexpr bool kInline = sizeof(D) <= RawCallback::kInlineSize &&
                                    alignof(D) <= alignof(void*) &&
                                    std::is_trivially_copyable_v<D>;
    template <typename D>
    static constexpr RawCallback::Ops kInlineOps{
        [](void* s) { (*static_cast<D*>(s))(); }, nullptr, nullptr};
    template <typename D>
    static D* heap_ptr(const void* s) {
      D* p;
      std::memcpy(&p, s, sizeof p);
      return p;
    }
    template <typename D>
    static constexpr RawCallback::Ops kHeapOps{
        [](void* s) { (*heap_ptr<D>(s))(); },
        [](void* s) { delete heap_ptr<D>(s); },
        [](void* s, const void* from) {
          D* p = new D(*heap_ptr<D>(from));
          std::memcpy(s, &p, sizeof p);
        }};

    static Callback adopt(const RawCallback& raw) noexcept {
      Callback c;
      c.raw_ = raw;
      return c;
    }
    void reset() noexcept {
      if (raw_.ops != nullptr && raw_.ops->destroy != nullptr) raw_.ops->destroy(raw_.storage);
      raw_.ops = nullptr;
    }
    void copy_from(const Callback& other) {
      if (other.raw_.ops != nullptr && other.raw_.ops->clone != nullptr) {
        other.raw_.ops->clone(raw_.storage, other.raw_.storage);
        raw_.ops = other.raw_.ops;
      } else {
        raw_ = other.raw_;
      }
    }

    RawCallback raw_;
  };

 private:
  // One queued event, 48 bytes, trivially copyable: the queue moves entries with memcpy and
  // destroys their callbacks itself. See Note [Engine data structures] in simulator.cpp.
  // (fn sits at a 16-byte offset so that copies of it line up with copies of the entry.)
  struct Entry {
    std::uint64_t time;  // ns, >= 0
    std::uint64_t seq;   // insertion number (64 bits: never wraps)
    RawCallback fn;
    std::int32_t priority;
    std::uint32_t slot;  // names the event for cancel(); see slot_state_
  };
  static_assert(sizeof(Entry) == 48 && std::is_trivially_copyable_v<Entry>);
  // A bucket's entries: a list of chunks from one pool.
  struct Chunk {
    static constexpr std::uint32_t kCapacity = 32;
    Chunk* next;
    std::uint32_t count;
    Entry entries[kCapacity];
  };
  struct Bucket {
    Chunk* head = nullptr;
    Chunk* tail = nullptr;
  };
  // The radix queue's shape: times as 11 digits of 6 bits, 64 buckets per digit.
  static constexpr int kDigitBits = 6;
  static constexpr int kFanout = 1 << kDigitBits;
  static constexpr int kLevels = (64 + kDigitBits - 1) / kDigitBits;
  static constexpr int kBuckets = kLevels * kFanout;
  static constexpr int kMaskWords = (kBuckets + 63) / 64;
  static_assert(kMaskWords <= 32, "words_nonempty_ has one bit per mask word");

  EventId enqueue(std::uint64_t time, int priority, Callback& fn);  // takes fn's callable
  Entry* bucket_entry(std::uint64_t time);  // room for an entry at `time` > base_
  void push_current(const Entry& e);    // into current_; requires e.time == base_
  Chunk* new_chunk();
  void free_chunk(Chunk* c) noexcept;
  int lowest_bucket() const;            // index of the earliest non-empty bucket (if any)
  void split_lowest_bucket();           // moves its entries to current_ and lower buckets
  bool fill_current();                  // makes current_ non-empty; false if the queue is empty
  bool run_front();                     // pops current_'s first; runs it unless cancelled
  bool is_cancelled(const Entry& e) const { return (slot_state_[e.slot] & 1u) != 0; }
  void drop(const Entry& e);            // discards a tombstone taken out of the queue
  void release(std::uint32_t slot);     // recycles a slot whose entry left the queue
  void destroy_all() noexcept;          // destroys every queued callback
  void swap_state(Simulator& other) noexcept;

  // The radix queue (Note [Engine data structures] in simulator.cpp).
  std::uint64_t base_ = 0;              // <= every queued time; <= now_ between calls
  std::vector<Entry> current_;          // time == base_; binary heap on (priority, seq)
  // buckets_[level * kFanout + digit]: the entries whose highest digit that differs from
  // base_'s is `level`, and whose value of that digit is `digit`; unordered.
  std::array<Bucket, kBuckets> buckets_{};
  std::array<std::uint64_t, kBuckets> bucket_min_;  // earliest time in each bucket
  std::array<std::uint64_t, kMaskWords> bucket_mask_{};  // bit i % 64 of word i / 64: non-empty
  std::uint32_t words_nonempty_ = 0;    // bit w: bucket_mask_[w] != 0
  std::size_t size_ = 0;                // queued entries, tombstones included
  std::vector<std::unique_ptr<Chunk>> chunks_;  // owns every chunk
  Chunk* free_chunks_ = nullptr;        // LIFO through Chunk::next: the last freed is warm

  // Per slot: generation << 1 | cancelled. An EventId is generation << 32 | slot.
  std::vector<std::uint32_t> slot_state_;
  std::vector<std::uint32_t> free_slots_;
  std::int64_t now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
  bool stop_requested_ = false;
};

}  // namespace psw::sim
