#pragma once
// Integer units shared by the planner, the simulator and the executor.
//
// Time is integer nanoseconds and sizes are integer bytes (DESIGN.md §3): two runs
// of the same plan must give byte-identical outputs, so no floating point enters a
// timeline. Floating point appears only when printing or fitting.

#include <compare>
#include <cstdint>
#include <limits>
#include <string>

namespace psw {

// Note [Checked units]
// ~~~~~~~~~~~~~~~~~~~~
// Every input number is bounded at its reader (1 PiB, 100 TB/s, one day per layer time, ...),
// but bounded inputs still combine into results outside int64 nanoseconds (292 years): a
// petabyte over a link of 3 B/s, or a trace whose arrivals start near the int64 limit. Wrapped
// arithmetic would print meaningless totals, so Duration's arithmetic, the unit factories and
// Bandwidth::transfer_time check for overflow and throw RangeError, an input error (exit 2);
// the commands add which inputs they were working on. The checks are one predictable branch
// each: in tests/bench/planner_bench.cpp, run side by side with the unchecked build on the same
// profiles, they cost 4-8% on 1,000-layer models and nothing measurable on the shipped ones.
namespace units_detail {
[[noreturn, gnu::cold]] void throw_overflow(const char* what);
}  // namespace units_detail

// 128-bit intermediate for exact bytes*1e9/bandwidth (a GCC/Clang extension; `__extension__`
// keeps -Wpedantic quiet about it).
__extension__ using Uint128 = unsigned __int128;

// A span of time in integer nanoseconds. Construct with the unit factories
// (`nanoseconds(5)`, `microseconds(2)`, ...), never from a bare number, so the unit is
// always visible at the call site.
class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ns(std::int64_t ns) { return Duration(ns); }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ns() const { return ns_; }
  constexpr double us() const { return static_cast<double>(ns_) / 1e3; }
  constexpr double ms() const { return static_cast<double>(ns_) / 1e6; }
  constexpr double seconds() const { return static_cast<double>(ns_) / 1e9; }

  // Checked: an overflow throws RangeError (Note [Checked units]).
  constexpr Duration operator+(Duration o) const {
    std::int64_t r = 0;
    if (__builtin_add_overflow(ns_, o.ns_, &r)) [[unlikely]] units_detail::throw_overflow("sum of durations");
    return Duration(r);
  }
  constexpr Duration operator-(Duration o) const {
    std::int64_t r = 0;
    if (__builtin_sub_overflow(ns_, o.ns_, &r)) [[unlikely]] units_detail::throw_overflow("difference of durations");
    return Duration(r);
  }
  constexpr Duration& operator+=(Duration o) { return *this = *this + o; }
  constexpr Duration& operator-=(Duration o) { return *this = *this - o; }
  constexpr Duration operator*(std::int64_t k) const {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(ns_, k, &r)) [[unlikely]] units_detail::throw_overflow("multiple of a duration");
    return Duration(r);
  }
  // From a floating-point count of nanoseconds (a scaled time), truncated toward zero like
  // static_cast; NaN or a value outside int64 throws RangeError instead of the undefined
  // conversion.
  static Duration from_ns_truncated(double ns);
  constexpr auto operator<=>(const Duration&) const = default;

 private:
  constexpr explicit Duration(std::int64_t ns) : ns_(ns) {}
  std::int64_t ns_ = 0;
};

constexpr Duration nanoseconds(std::int64_t v) { return Duration::from_ns(v); }
constexpr Duration microseconds(std::int64_t v) { return Duration::from_ns(v) * 1'000; }
constexpr Duration milliseconds(std::int64_t v) { return Duration::from_ns(v) * 1'000'000; }
constexpr Duration seconds(std::int64_t v) { return Duration::from_ns(v) * 1'000'000'000; }

constexpr Duration max(Duration a, Duration b) { return a < b ? b : a; }
constexpr Duration min(Duration a, Duration b) { return a < b ? a : b; }

// A size in bytes.
using Bytes = std::int64_t;

constexpr Bytes kKiB = 1024;
constexpr Bytes kMiB = 1024 * kKiB;
constexpr Bytes kGiB = 1024 * kMiB;

// Bandwidth in bytes per second, an integer like every other unit. 1 B/s resolution is
// far finer than any measurement of a link.
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bytes_per_second(std::int64_t bps) { return Bandwidth(bps); }
  constexpr std::int64_t bytes_per_second() const { return bps_; }
  constexpr double gb_per_second() const { return static_cast<double>(bps_) / 1e9; }
  constexpr auto operator<=>(const Bandwidth&) const = default;

  // Time to move `bytes` at this rate, rounded up to the next nanosecond:
  // ceil(bytes * 1e9 / bandwidth). Exact for any bytes up to 2^63 (128-bit product); a result
  // past int64 nanoseconds throws RangeError.
  constexpr Duration transfer_time(Bytes bytes) const {
    // Fast path: below ~9.2 GB the product fits 64 bits, and a 64-bit division is several
    // times cheaper than a 128-bit one (the planners' inner loop calls this).
    if (bytes >= 0 && bytes <= kMaxBytesFor64BitProduct) {
      const auto num = static_cast<std::uint64_t>(bytes) * 1'000'000'000u;
      const auto den = static_cast<std::uint64_t>(bps_);
      return Duration::from_ns(static_cast<std::int64_t>((num + den - 1) / den));
    }
    if (bytes < 0) units_detail::throw_overflow("transfer of a negative size");
    const auto num = static_cast<Uint128>(bytes) * 1'000'000'000u;
    const auto den = static_cast<Uint128>(bps_);
    const Uint128 ns = (num + den - 1) / den;
    if (ns > static_cast<Uint128>(std::numeric_limits<std::int64_t>::max())) {
      units_detail::throw_overflow("transfer time (size over bandwidth)");
    }
    return Duration::from_ns(static_cast<std::int64_t>(ns));
  }

 private:
  static constexpr Bytes kMaxBytesFor64BitProduct = 9'000'000'000;
  constexpr explicit Bandwidth(std::int64_t bps) : bps_(bps) {}
  std::int64_t bps_ = 1;
};

// "4.36 ms", "812 us", "12 ns": the most readable unit for a table.
std::string format_duration(Duration d);
// "241.4 MB" (decimal units, like the profile totals in DESIGN.md).
std::string format_bytes(Bytes b);

}  // namespace psw
