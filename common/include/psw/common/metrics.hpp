#pragma once
// Streaming statistics: memory stays flat in the number of requests (a day of the Azure
// trace is ~13 million), so latencies go into a log-linear histogram rather than a list.

#include <array>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/units.hpp"

namespace psw {

// Log-linear histogram of non-negative durations: 2^kSubBits buckets per power of two, so
// a reported quantile is within 2^-kSubBits (0.1%) of the true value (exact below 1 us).
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 10;

  void add(Duration d);
  std::int64_t count() const { return count_; }
  Duration min() const { return count_ ? min_ : Duration::zero(); }
  Duration max() const { return max_; }
  Duration mean() const;
  // The q-quantile (0 <= q <= 1), by the nearest-rank rule on bucket representatives.
  Duration quantile(double q) const;

 private:
  static std::size_t bucket_of(std::int64_t ns);
  static std::int64_t bucket_value(std::size_t bucket);

  std::vector<std::int64_t> buckets_;
  std::int64_t count_ = 0;
  Duration min_ = Duration::max();
  Duration max_;
  long double sum_ns_ = 0;
};

// The `latency` object of summary.json (count, mean, min, p50, p90, p99, p99.9, max in ms):
// one function, so that psw sim and psw load report latencies with the same keys and rules.
nlohmann::json latency_summary_json(const LatencyHistogram& h);

}  // namespace psw
