#pragma once
// Streaming statistics: memory stays flat in the number of requests (a day of the Azure
// trace is ~13 million), so latencies go into a log-linear histogram rather than a list.

#include <array>
#include <cstdint>
#include <string>
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
// Note [Latency summary]: the one summary of a latency distribution that psw sim, psw load and
// psw validate write and read (summary.json's `latency` objects).
struct LatencySummary {
  std::int64_t count = 0;
  double mean_ms = 0;
  double min_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double p999_ms = 0;
  double max_ms = 0;

  bool operator==(const LatencySummary&) const = default;
};
LatencySummary summarize(const LatencyHistogram& h);
nlohmann::json to_json(const LatencySummary& s);
// InputError naming `where` and the key for a missing key or a value of the wrong type.
LatencySummary latency_summary_from_json(const nlohmann::json& j, const std::string& where);
// to_json(summarize(h)).
nlohmann::json latency_summary_json(const LatencyHistogram& h);

}  // namespace psw
