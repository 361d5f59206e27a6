// The discrete-event engine (see simulator.hpp).
//
// Note [Engine data structures]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The future-event list is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan 1990) with 6-bit
// digits, which works because simulated time is monotone: nothing is scheduled before now().
// A time is a 64-bit number of 11 digits.
//  - base_ is <= every queued time, and <= now_ whenever user code runs.
//  - current_ holds the entries with time == base_, as a binary heap on (priority, seq):
//    the same-time order of Note [Same-time order] is decided only here.
//  - Every other entry is in bucket (level, digit), where `level` is the highest digit in
//    which its time differs from base_ and `digit` is its time's value of that digit (above
//    base_'s). Buckets are unordered; bucket_min_ holds each one's earliest time, and two
//    levels of bit masks find the earliest non-empty bucket with two count-trailing-zeros.
// Every time in bucket (l, d) is below every time in (l, d') for d < d' and below every time
// at a higher level. Scheduling appends to one bucket: O(1). When current_ runs empty, the
// earliest bucket is split: base_ becomes its earliest time, and each of its entries moves to
// current_ (if at that time) or to a bucket of a lower level (they all share base_'s digits
// from that level up); entries in other buckets stay where they are. An entry thus moves at
// most 11 times, in practice 2 or 3 (an event 1 ms ahead starts at level 3), and every move
// is a sequential read and an append. Cancelled entries are dropped when their bucket is
// split (or when they reach the front of current_), not moved on.
//
// Buckets are lists of 32-entry chunks from one pool with a LIFO free list. Splitting a bucket
// frees each chunk right after reading it, so the moved entries are written into chunks just
// read, still in cache; with one std::vector per bucket they went to memory untouched for a
// long time, which cost 1.3x the time per event with 100,000 pending events. The pool keeps
// its peak size: about (peak queued entries / 32 + buckets in use) chunks of 1.5 KB.
//
// Entries carry their callback (RawCallback, Note [Callback] in simulator.hpp), so running an
// event reads nothing outside the queue's sequential memory but one word of slot_state_. A
// first version kept the callbacks in a side table indexed by slot and the queue as a 4-ary
// heap of 24-byte keys: 12 M events/s on the hold benchmark with 1,000 pending events, 5 M/s
// with 100,000, because of cache misses in the heap and in the table.
//
// run_until() looks at bucket_min_ before splitting a bucket, so base_ only advances to a time
// that is about to run or whose entries are all cancelled; in the latter case base_ may pass
// now_ inside step()/run_until(), which is why both restore base_ <= now_ before returning.
//
// Slots name events for cancel(). A slot is taken when an event is scheduled and recycled
// (LIFO free list) when its entry leaves the queue; slot_state_[slot] holds the slot's
// generation (31 bits), which advances on every recycle, and a cancelled bit. EventId =
// generation << 32 | slot names one occupancy of one slot: cancel(id) compares generations and
// so ignores ids of events that already left the queue. A slot whose generation would wrap is
// retired instead of reused, which keeps ids unique forever at a cost of 4 bytes per 2
// billion events through that slot.
//
// std::bad_alloc from schedule_*() leaves the engine as it was (the callable stays with the
// caller's Callback); from step()/run*() (a bucket split needing a new chunk) it leaks the
// callables being moved and leaves the Simulator fit only for destruction.

#include "psw/sim/simulator.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "psw/common/error.hpp"

namespace psw::sim {

namespace {

constexpr std::uint64_t kNoTime = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint32_t kPrefetchAhead = 8;  // entries; 4 to 16 measured alike

// std::push_heap/pop_heap build max-heaps; "later" as the comparison makes current_ a
// min-heap on (priority, seq).
template <typename E>
bool later(const E& a, const E& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.seq > b.seq;
}

}  // namespace

Simulator::Simulator() { bucket_min_.fill(kNoTime); }

Simulator::Simulator(Simulator&& other) noexcept : Simulator() { swap_state(other); }

Simulator& Simulator::operator=(Simulator&& other) noexcept {
  if (this != &other) {
    Simulator taken(std::move(other));
    swap_state(taken);
  }
  return *this;
}

Simulator::~Simulator() { destroy_all(); }

void Simulator::swap_state(Simulator& other) noexcept {
  using std::swap;
  swap(base_, other.base_);
  swap(current_, other.current_);
  swap(buckets_, other.buckets_);
  swap(bucket_min_, other.bucket_min_);
  swap(bucket_mask_, other.bucket_mask_);
  swap(words_nonempty_, other.words_nonempty_);
  swap(size_, other.size_);
  swap(chunks_, other.chunks_);
  swap(free_chunks_, other.free_chunks_);
  swap(slot_state_, other.slot_state_);
  swap(free_slots_, other.free_slots_);
  swap(now_, other.now_);
  swap(next_seq_, other.next_seq_);
  swap(processed_, other.processed_);
  swap(stop_requested_, other.stop_requested_);
}

void Simulator::destroy_all() noexcept {
  // Each adopted temporary's destructor destroys the callable.
  for (const Entry& e : current_) (void)Callback::adopt(e.fn);
  current_.clear();
  for (Bucket& bucket : buckets_) {
    for (Chunk* c = bucket.head; c != nullptr; c = c->next) {
      for (std::uint32_t i = 0; i < c->count; ++i) (void)Callback::adopt(c->entries[i].fn);
    }
    bucket = Bucket{};
  }
  size_ = 0;
}

// ---------------------------------------------------------------------------------------
// Scheduling and cancelling

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
    slot_state_[slot] &= ~1u;  // a cancel() of a never-issued id may have set it
  } else {
    PSW_CHECK(slot_state_.size() < std::numeric_limits<std::uint32_t>::max(),
              "too many pending events");
    slot = static_cast<std::uint32_t>(slot_state_.size());
    slot_state_.push_back(1u << 1);  // generation 1: EventId 0 is never issued
  }
  // The entry is written where it will live: building it on the stack and copying it made
  // the copy wait for the stores (store forwarding fails on the mixed-size writes).
  if (time == base_) {
    try {
      push_current(Entry{time, next_seq_, fn.raw_, static_cast<std::int32_t>(priority), slot});
    } catch (...) {  // out of memory: the caller's Callback still owns the callable
      release(slot);
      throw;
    }
  } else {
    Entry* e;
    try {
      e = bucket_entry(time);
    } catch (...) {
      release(slot);
      throw;
    }
    e->time = time;
    e->seq = next_seq_;
    e->priority = static_cast<std::int32_t>(priority);
    e->slot = slot;
    e->fn = fn.raw_;
  }
  fn.raw_.ops = nullptr;  // the queue owns the callable now
  ++next_seq_;
  ++size_;
  return (static_cast<EventId>(slot_state_[slot] >> 1) << 32) | slot;
}

void Simulator::cancel(EventId id) {
  const auto slot = static_cast<std::uint32_t>(id & 0xffff'ffffu);
  if (slot >= slot_state_.size()) return;
  if ((slot_state_[slot] >> 1) != (id >> 32)) return;  // left the queue, or never issued
  slot_state_[slot] |= 1u;
}

void Simulator::release(std::uint32_t slot) {
  // Next generation, cancelled bit cleared; a wrapped generation retires the slot.
  const std::uint32_t state = (slot_state_[slot] & ~1u) + 2u;
  slot_state_[slot] = state;
  if (state != 0) free_slots_.push_back(slot);
}

// ---------------------------------------------------------------------------------------
// The radix queue

void Simulator::push_current(const Entry& e) {
  current_.push_back(e);
  if (current_.size() > 1) std::push_heap(current_.begin(), current_.end(), later<Entry>);
}

Simulator::Chunk* Simulator::new_chunk() {
  Chunk* c = free_chunks_;
  if (c != nullptr) {
    free_chunks_ = c->next;
  } else {
    chunks_.push_back(std::make_unique<Chunk>());
    c = chunks_.back().get();
  }
  c->next = nullptr;
  c->count = 0;
  return c;
}

void Simulator::free_chunk(Chunk* c) noexcept {
  c->next = free_chunks_;
  free_chunks_ = c;
}

inline Simulator::Entry* Simulator::bucket_entry(std::uint64_t time) {
  const int level = (static_cast<int>(std::bit_width(time ^ base_)) - 1) / kDigitBits;
  const auto digit = static_cast<int>((time >> (level * kDigitBits)) & (kFanout - 1));
  const int index = level * kFanout + digit;
  Bucket& bucket = buckets_[index];
  Chunk* tail = bucket.tail;
  if (tail == nullptr || tail->count == Chunk::kCapacity) [[unlikely]] {
    Chunk* c = new_chunk();
    if (tail == nullptr) {
      bucket.head = c;
    } else {
      tail->next = c;
    }
    bucket.tail = tail = c;
  }
  bucket_min_[index] = std::min(bucket_min_[index], time);
  bucket_mask_[index / 64] |= std::uint64_t{1} << (index % 64);
  words_nonempty_ |= 1u << (index / 64);
  return &tail->entries[tail->count++];
}

int Simulator::lowest_bucket() const {
  const int word = std::countr_zero(words_nonempty_);
  return word * 64 + std::countr_zero(bucket_mask_[word]);
}

void Simulator::split_lowest_bucket() {
  const int index = lowest_bucket();
  Chunk* c = buckets_[index].head;
  buckets_[index] = Bucket{};
  base_ = bucket_min_[index];
  bucket_min_[index] = kNoTime;
  bucket_mask_[index / 64] &= ~(std::uint64_t{1} << (index % 64));
  if (bucket_mask_[index / 64] == 0) words_nonempty_ &= ~(1u << (index / 64));
  // Every entry shares base_'s digits from this level up, so it goes to current_ or to a
  // lower level, never back into this bucket. Each chunk is freed right after it is read, so
  // the next chunk the inserts take is that one, still in cache. Tombstones are dropped here
  // rather than moved on, so current_ may stay empty.
  while (c != nullptr) {
    const std::uint32_t count = c->count;
    Chunk* const next_chunk = c->next;
    for (std::uint32_t i = 0; i < count; ++i) {
      // A bucket waited long and its chunks are scattered, and the cancelled bits of a large
      // queue are spread over more memory than the cache holds: ask for the next chunk one
      // chunk ahead and for the bits a few entries ahead.
      if (next_chunk != nullptr) __builtin_prefetch(&next_chunk->entries[i]);
      if (i + kPrefetchAhead < count) {
        __builtin_prefetch(&slot_state_[c->entries[i + kPrefetchAhead].slot]);
      }
      const Entry& e = c->entries[i];
      if (is_cancelled(e)) {
        drop(e);
        --size_;
      } else if (e.time == base_) {
        push_current(e);
      } else {
        *bucket_entry(e.time) = e;
      }
    }
    free_chunk(c);
    c = next_chunk;
  }
}

bool Simulator::fill_current() {
  while (current_.empty()) {
    if (words_nonempty_ == 0) return false;
    split_lowest_bucket();
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Running

void Simulator::drop(const Entry& e) {
  const Callback fn = Callback::adopt(e.fn);  // destroyed here
  release(e.slot);
}

bool Simulator::run_front() {
  if (current_.size() > 1) std::pop_heap(current_.begin(), current_.end(), later<Entry>);
  // Read the fields in place rather than copying the entry out whole: a copy read back at
  // other widths than it was written waits for the stores to retire (no store forwarding).
  const Entry& e = current_.back();
  const std::uint32_t slot = e.slot;
  const auto time = static_cast<std::int64_t>(e.time);
  const Callback fn = Callback::adopt(e.fn);  // owns the callable from here, even if it throws
  current_.pop_back();
  --size_;
  const bool cancelled = (slot_state_[slot] & 1u) != 0;
  release(slot);
  if (cancelled) return false;  // fn destroys the callable
  // ns-3's rule: the clock never goes backwards. schedule_at rejects past times, so this
  // only fails if the queue is broken.
  PSW_CHECK(time >= now_, "event time ", time, " ns is before now ", now_, " ns");
  now_ = time;
  ++processed_;
  fn();
  return true;
}

bool Simulator::step() {
  while (fill_current()) {
    if (run_front()) return true;  // now_ = base_
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
  const std::uint64_t limit = time.ns() < 0 ? 0 : static_cast<std::uint64_t>(time.ns()) + 1;
  for (;;) {  // runs the events with time < limit
    if (current_.empty()) {
      if (words_nonempty_ == 0 || bucket_min_[lowest_bucket()] >= limit) break;
      split_lowest_bucket();  // base_ < limit
      continue;
    }
    if (base_ >= limit) break;
    if (!run_front()) continue;  // now_ = base_
    if (stop_requested_) {
      stop_requested_ = false;
      return;
    }
  }
  // base_ only advanced to times <= `time`, so base_ <= now_ after this.
  if (time.ns() > now_) now_ = time.ns();
  if (size_ == 0) base_ = static_cast<std::uint64_t>(now_);
}

}  // namespace psw::sim
