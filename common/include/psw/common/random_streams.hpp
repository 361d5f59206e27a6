#pragma once
// Reproducible random numbers for the simulator (ns-3's rule: one stream per source).
//
// Each random source (the arrival process, the model choice, a service-time jitter, ...) draws
// from its own stream, derived from the run's seed and the source's stream id or name. Adding
// a source, or drawing more numbers from one, does not change what any other source draws,
// and the same seed gives the same numbers on every platform and standard library:
// std::mt19937_64 and its seeding are specified exactly by the standard, and the helpers below
// replace std::*_distribution, whose algorithms are implementation-defined.

#include <cstdint>
#include <random>
#include <string_view>

#include "psw/common/units.hpp"

namespace psw {

class RandomStreams {
 public:
  explicit RandomStreams(std::uint64_t seed) : seed_(seed) {}

  // A fresh generator for stream `stream_id`, seeded with
  // splitmix64(splitmix64(seed) ^ stream_id): a bijection in each argument, so distinct ids
  // (for one seed) and distinct seeds (for one id) give distinct generator seeds. Calling it
  // twice with the same id gives two generators with identical sequences.
  std::mt19937_64 stream(std::uint64_t stream_id) const;
  // The stream whose id is the 64-bit FNV-1a hash of `name` (stable across runs, platforms
  // and releases): stream("arrivals").
  std::mt19937_64 stream(std::string_view name) const;

  std::uint64_t seed() const { return seed_; }

 private:
  std::uint64_t seed_;
};

// The splitmix64 finalizer (Steele, Lea and Flood 2014) applied to x + 0x9e3779b97f4a7c15.
std::uint64_t splitmix64(std::uint64_t x);
// 64-bit FNV-1a of the bytes of `s`.
std::uint64_t fnv1a64(std::string_view s);

// Uniform in [0, 1): the 53 high bits of one draw, times 2^-53.
double uniform01(std::mt19937_64& rng);
// Exponentially distributed with the given mean (>= 0): -mean * log(1 - u) with
// u = uniform01(rng), rounded to the nearest nanosecond; always >= 0. One draw per call.
Duration exponential(std::mt19937_64& rng, Duration mean);

}  // namespace psw
