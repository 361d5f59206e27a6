#include "psw/common/metrics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "psw/common/error.hpp"

namespace psw {

// Named, not anonymous: the unity build compiles this file with the rest of psw_core.
namespace latency_histogram {
constexpr std::int64_t kLinearLimit = std::int64_t{1} << LatencyHistogram::kSubBits;
}  // namespace latency_histogram


std::size_t LatencyHistogram::bucket_of(std::int64_t ns) {
  if (ns < latency_histogram::kLinearLimit) return static_cast<std::size_t>(ns);
  const int exponent = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(ns))) - 1;  // >= kSubBits
  const int shift = exponent - kSubBits;
  const auto mantissa = static_cast<std::size_t>((ns >> shift) - latency_histogram::kLinearLimit);  // 0..2^kSubBits-1
  return static_cast<std::size_t>(latency_histogram::kLinearLimit) +
         static_cast<std::size_t>(shift) * static_cast<std::size_t>(latency_histogram::kLinearLimit) + mantissa;
}

std::int64_t LatencyHistogram::bucket_value(std::size_t bucket) {
  if (bucket < static_cast<std::size_t>(latency_histogram::kLinearLimit)) return static_cast<std::int64_t>(bucket);
  const std::size_t rest = bucket - static_cast<std::size_t>(latency_histogram::kLinearLimit);
  const int shift = static_cast<int>(rest / static_cast<std::size_t>(latency_histogram::kLinearLimit));
  const auto mantissa = static_cast<std::int64_t>(rest % static_cast<std::size_t>(latency_histogram::kLinearLimit));
  // Middle of the bucket [lo, lo + 2^shift).
  const std::int64_t lo = (latency_histogram::kLinearLimit + mantissa) << shift;
  return lo + ((std::int64_t{1} << shift) >> 1);
}

void LatencyHistogram::add(Duration d) {
  const std::int64_t ns = std::max<std::int64_t>(d.ns(), 0);
  const std::size_t b = bucket_of(ns);
  if (b >= buckets_.size()) buckets_.resize(b + 1, 0);
  ++buckets_[b];
  ++count_;
  min_ = std::min(min_, nanoseconds(ns));
  max_ = std::max(max_, nanoseconds(ns));
  sum_ns_ += static_cast<long double>(ns);
}

Duration LatencyHistogram::mean() const {
  if (count_ == 0) return Duration::zero();
  return nanoseconds(static_cast<std::int64_t>(std::llround(sum_ns_ / static_cast<long double>(count_))));
}

Duration LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return Duration::zero();
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(q * static_cast<double>(count_))));
  std::int64_t seen = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= rank) {
      // Never report outside the observed range.
      return std::clamp(nanoseconds(bucket_value(b)), min_, max_);
    }
  }
  return max_;
}

LatencySummary summarize(const LatencyHistogram& h) {
  auto ms = [](Duration d) { return static_cast<double>(d.ns()) / 1e6; };
  return {h.count(),         ms(h.mean()),           ms(h.min()),           ms(h.quantile(0.5)), ms(h.quantile(0.9)),
          ms(h.quantile(0.99)), ms(h.quantile(0.999)), ms(h.max())};
}

nlohmann::json to_json(const LatencySummary& s) {
  return {{"count", s.count},   {"mean_ms", s.mean_ms}, {"min_ms", s.min_ms},   {"p50_ms", s.p50_ms},
          {"p90_ms", s.p90_ms}, {"p99_ms", s.p99_ms},   {"p999_ms", s.p999_ms}, {"max_ms", s.max_ms}};
}

LatencySummary latency_summary_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw InputError(where + ": expected a latency summary (an object with count, mean_ms, ...)");
  auto number = [&](const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number()) throw InputError(where + ": the latency summary has no number '" + key + "'");
    return it->get<double>();
  };
  const auto count = j.find("count");
  if (count == j.end() || !count->is_number_integer() || count->get<std::int64_t>() < 0) {
    throw InputError(where + ": the latency summary has no count (a non-negative integer)");
  }
  return {count->get<std::int64_t>(), number("mean_ms"), number("min_ms"), number("p50_ms"),
          number("p90_ms"),           number("p99_ms"),  number("p999_ms"), number("max_ms")};
}

nlohmann::json latency_summary_json(const LatencyHistogram& h) { return to_json(summarize(h)); }

}  // namespace psw
