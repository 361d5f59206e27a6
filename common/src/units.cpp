#include "psw/common/units.hpp"

#include <cmath>
#include <cstdio>

#include "psw/common/error.hpp"

namespace psw {

namespace units_detail {
void throw_overflow(const char* what) {
  throw RangeError(std::string("out of range: the ") + what +
                   " exceeds the integer time or size range (int64 nanoseconds, about 292 years)");
}
}  // namespace units_detail

Duration Duration::from_ns_truncated(double ns) {
  // 2^63 is exactly representable; every double below it converts without overflow.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(ns > -kLimit && ns < kLimit)) units_detail::throw_overflow("scaled duration");
  return Duration(static_cast<std::int64_t>(ns));
}

std::string format_duration(Duration d) {
  char buf[64];
  const double ns = static_cast<double>(d.ns());
  const double mag = std::fabs(ns);
  if (mag >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  } else if (mag >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3f ms", ns / 1e6);
  } else if (mag >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(d.ns()));
  }
  return buf;
}

std::string format_bytes(Bytes b) {
  char buf[64];
  const double v = static_cast<double>(b);
  if (v >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1f kB", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

}  // namespace psw
