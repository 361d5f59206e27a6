// Reproducible random streams (see random_streams.hpp).

#include "psw/common/random_streams.hpp"

#include <cmath>
#include <limits>

#include "psw/common/error.hpp"

namespace psw {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325u;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3u;
  }
  return h;
}

std::mt19937_64 RandomStreams::stream(std::uint64_t stream_id) const {
  return std::mt19937_64(splitmix64(splitmix64(seed_) ^ stream_id));
}

std::mt19937_64 RandomStreams::stream(std::string_view name) const {
  return stream(fnv1a64(name));
}

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

Duration exponential(std::mt19937_64& rng, Duration mean) {
  PSW_CHECK(mean.ns() >= 0, "exponential: negative mean (", mean.ns(), " ns)");
  const double u = uniform01(rng);
  // 1 - u is exact (u is a multiple of 2^-53 below 1) and in (0, 1], so the log is finite
  // and <= 0; -log(1 - u) <= 53 ln 2 < 37.
  const double x = -static_cast<double>(mean.ns()) * std::log(1.0 - u);
  PSW_CHECK(x < 9.2e18, "exponential: mean ", mean.ns(), " ns is too large");
  return Duration::from_ns(std::llround(x));
}

}  // namespace psw
