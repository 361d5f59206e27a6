// The discrete-event engine (see simulator.hpp).
//
// Note [Engine data structures]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The future-event list is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan 1990) on time,
// which works because simulated time is monotone: nothing is ever scheduled before now().
//  - base_ is a time <= every queued time (and <= now_ whenever user code can run).
//  - current_ holds the entries with time == base_, as a binary heap on (priority, seq):
//    the same-time order of Note [Same-time order] is decided only here.
//  - buckets_[b] holds the entries whose time differs from base_ first at bit b (the
//    highest set bit of time ^ base_ is b), unordered; bucket_min_[b] is its earliest time
//    and bit b of nonempty_ says whether it has any entries.
// Scheduling appends to one bucket: O(1). When current_ runs empty, the lowest non-empty
// bucket b is emptied: base_ becomes its earliest time and each of its entries moves to
// current_ or to a bucket below b (they all share base_'s bits above b, and bit b, with the
// new base_). Entries only ever move down, so each moves at most 64 times and in practice a
// few times; all moves are sequential scans and appends, so the cost per event does not grow
// with the number of pending events the way a binary heap's cache misses do (a 4-ary heap
// with branch-free compares ran the hold benchmark at 5 M events/s with 100,000 pending
// events, against 12 M/s with 1,000).
//
// Peeking at the next time (run_until) reads bucket_min_ and moves nothing, so base_ only
// advances to a time that is about to run or whose entries are all cancelled; in the latter
// case base_ may pass now_ inside step()/run_until(), which is why both restore
// base_ <= now_ before returning (see the comments there).
//
// The callbacks live in slots_, indexed by Entry::slot, so that moving entries never touches
// a callback. A slot is reused (LIFO free list: recently touched memory) once its entry has
// left the queue, and its generation counter then advances. EventId = generation << 32 | slot
// names one occupancy of one slot: cancel(id) compares the generation and ignores stale ids.
// A slot whose 32-bit generation would wrap is retired instead of reused, which keeps ids
// unique forever at a cost of one slot (40 bytes) per 4 billion events through it.
// Cancellation marks the slot Cancelled and destroys the callback; the entry is a tombstone
// dropped when it reaches the front of current_ (Note [Cancellation] in simulator.hpp).

#include "psw/sim/simulator.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "psw/common/error.hpp"

namespace psw::sim {

namespace {

constexpr std::uint64_t kNoTime = std::numeric_limits<std::uint64_t>::max();

// std::push_heap/pop_heap build max-heaps; "later" as the comparison makes current_ a
// min-heap on (priority, seq).
template <typename E>
bool later(const E& a, const E& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.seq > b.seq;
}

}  // namespace

Simulator::Simulator() { bucket_min_.fill(kNoTime); }

EventId Simulator::schedule_at(Duration time, int priority, Callback fn) {
  PSW_CHECK(time.ns() >= now_, "cannot schedule an event in the past (at ", time.ns(),
            " ns, now ", now_, " ns)");
  return enqueue(static_cast<std::uint64_t>(time.ns()), priority, fn);
}

EventId Simulator::schedule_after(Duration delay, int priority, Callback fn) {
  PSW_CHECK(delay.ns() >= 0, "negative delay (", delay.ns(), " ns)");
  PSW_CHECK(delay.ns() <= std::numeric_limits<std::int64_t>::max() - now_,
            "now + delay overflows (delay ", delay.ns(), " ns)");
  return enqueue(static_cast<std::uint64_t>(now_ + delay.ns()), priority, fn);
}

EventId Simulator::enqueue(std::uint64_t time, int priority, Callback& fn) {
  PSW_CHECK(static_cast<bool>(fn), "cannot schedule an empty callback");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    PSW_CHECK(slots_.size() < std::numeric_limits<std::uint32_t>::max(),
              "too many pending events");
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.fn = std::move(fn);
  s.state = SlotState::Pending;
  insert(Entry{time, next_seq_++, static_cast<std::int32_t>(priority), slot});
  ++size_;
  return (static_cast<EventId>(s.generation) << 32) | slot;
}

void Simulator::cancel(EventId id) {
  const auto slot = static_cast<std::uint32_t>(id & 0xffff'ffffu);
  const auto generation = static_cast<std::uint32_t>(id >> 32);
  if (slot >= slots_.size()) return;
  Slot& s = slots_[slot];
  if (s.generation != generation || s.state != SlotState::Pending) return;
  s.state = SlotState::Cancelled;
  s.fn = nullptr;
}

bool Simulator::step() {
  while (fill_current()) {
    const Entry e = pop_current();
    if (slots_[e.slot].state == SlotState::Cancelled) {
      release(e.slot);
      continue;
    }
    run_entry(e);
    return true;
  }
  // Empty: base_ may have passed now_ while dropping tombstones; any base_ is valid for an
  // empty queue.
  base_ = static_cast<std::uint64_t>(now_);
  return false;
}

void Simulator::run() {
  stop_requested_ = false;
  while (!stop_requested_ && step()) {
  }
  stop_requested_ = false;
}

void Simulator::run_until(Duration time) {
  stop_requested_ = false;
  std::uint64_t next = 0;
  while (next_time(next) && static_cast<std::int64_t>(next) <= time.ns()) {
    fill_current();
    const Entry e = pop_current();
    if (slots_[e.slot].state == SlotState::Cancelled) {
      release(e.slot);
      continue;
    }
    run_entry(e);  // now_ = base_
    if (stop_requested_) {
      stop_requested_ = false;
      return;
    }
  }
  // base_ <= `time` here (it only advances to times <= `time`), so base_ <= now_ after this.
  if (time.ns() > now_) now_ = time.ns();
  if (size_ == 0) base_ = static_cast<std::uint64_t>(now_);
}

void Simulator::insert(const Entry& e) {
  if (e.time == base_) {
    current_.push_back(e);
    std::push_heap(current_.begin(), current_.end(), later<Entry>);
    return;
  }
  const int level = (std::bit_width(e.time ^ base_) - 1) / kDigitBits;
  const auto digit = static_cast<int>((e.time >> (level * kDigitBits)) & (kFanout - 1));
  const int index = level * kFanout + digit;
  buckets_[index].push_back(e);
  bucket_min_[index] = std::min(bucket_min_[index], e.time);
  level_mask_[level] |= std::uint64_t{1} << digit;
  levels_nonempty_ |= 1u << level;
}

int Simulator::lowest_bucket() const {
  const int level = std::countr_zero(levels_nonempty_);
  return level * kFanout + std::countr_zero(level_mask_[level]);
}

bool Simulator::fill_current() {
  if (!current_.empty()) return true;
  if (levels_nonempty_ == 0) return false;
  const int index = lowest_bucket();
  std::vector<Entry>& from = buckets_[index];
  base_ = bucket_min_[index];
  // Every entry shares base_'s digits from this level up, so it goes to current_ or to a
  // lower level, never back into `from`.
  for (const Entry& e : from) insert(e);
  from.clear();
  bucket_min_[index] = kNoTime;
  const int level = index / kFanout;
  level_mask_[level] &= ~(std::uint64_t{1} << (index % kFanout));
  if (level_mask_[level] == 0) levels_nonempty_ &= ~(1u << level);
  return true;
}

bool Simulator::next_time(std::uint64_t& time) const {
  if (!current_.empty()) {
    time = base_;
    return true;
  }
  if (levels_nonempty_ == 0) return false;
  time = bucket_min_[lowest_bucket()];
  return true;
}

Simulator::Entry Simulator::pop_current() {
  std::pop_heap(current_.begin(), current_.end(), later<Entry>);
  const Entry e = current_.back();
  current_.pop_back();
  --size_;
  return e;
}

void Simulator::run_entry(const Entry& e) {
  const auto time = static_cast<std::int64_t>(e.time);
  // ns-3's rule: the clock never goes backwards. schedule_at rejects past times, so this
  // only fails if the queue is broken.
  PSW_CHECK(time >= now_, "event time ", time, " ns is before now ", now_, " ns");
  now_ = time;
  // Move the callback out before running it: it may schedule events, which can grow slots_.
  Callback fn = std::move(slots_[e.slot].fn);
  release(e.slot);
  ++processed_;
  fn();
}

void Simulator::release(std::uint32_t slot) {
  Slot& s = slots_[slot];
  s.fn = nullptr;
  s.state = SlotState::Free;
  if (++s.generation != 0) free_slots_.push_back(slot);  // else retired: see the Note above
}

}  // namespace psw::sim
