// Checked integer units (Note [Checked units]): arithmetic that would leave int64 nanoseconds
// throws RangeError, an input error, instead of wrapping.
#include <gtest/gtest.h>

#include <limits>

#include "psw/common/error.hpp"
#include "psw/common/units.hpp"

namespace psw {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

TEST(CheckedUnits, ArithmeticInRangeIsExact) {
  EXPECT_EQ((nanoseconds(kMax - 5) + nanoseconds(5)).ns(), kMax);
  EXPECT_EQ((nanoseconds(kMin + 5) - nanoseconds(5)).ns(), kMin);
  EXPECT_EQ((microseconds(3) * 4).ns(), 12'000);
  EXPECT_EQ(seconds(9'223'372'036).ns(), 9'223'372'036'000'000'000);
}

TEST(CheckedUnits, OverflowThrowsRangeError) {
  EXPECT_THROW(nanoseconds(kMax) + nanoseconds(1), RangeError);
  EXPECT_THROW(nanoseconds(kMin) - nanoseconds(1), RangeError);
  EXPECT_THROW(nanoseconds(kMax / 2 + 1) * 2, RangeError);
  Duration d = nanoseconds(kMax);
  EXPECT_THROW(d += nanoseconds(1), RangeError);
  EXPECT_EQ(d.ns(), kMax);  // unchanged after the failed update
  EXPECT_THROW(seconds(9'223'372'037), RangeError);
  EXPECT_THROW(milliseconds(kMax / 1000), RangeError);
}

TEST(CheckedUnits, RangeErrorIsAnInputError) {
  try {
    (void)(nanoseconds(kMax) + nanoseconds(1));
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

TEST(CheckedUnits, TransferTimeOverflowThrows) {
  const Bandwidth three = Bandwidth::bytes_per_second(3);
  // 1 PiB at 3 B/s is ~3.8e23 ns, far past int64.
  EXPECT_THROW(three.transfer_time(std::int64_t{1} << 50), RangeError);
  // The largest size that still fits: ceil(b * 1e9 / 3) <= 2^63 - 1.
  EXPECT_EQ(three.transfer_time(27'670'116'110).ns(), 9'223'372'036'666'666'667);
  EXPECT_THROW(three.transfer_time(27'670'116'111), RangeError);
  // The 64-bit fast path and the 128-bit path agree at their boundary.
  const Bandwidth link = Bandwidth::bytes_per_second(53'000'000'000);
  EXPECT_EQ(link.transfer_time(9'000'000'000).ns(), 169'811'321);
  EXPECT_EQ(link.transfer_time(9'000'000'001).ns(), 169'811'321);
  EXPECT_THROW(link.transfer_time(-1), RangeError);
}

TEST(CheckedUnits, ScaledDurationsAreChecked) {
  EXPECT_EQ(Duration::from_ns_truncated(1234.9).ns(), 1234);
  EXPECT_EQ(Duration::from_ns_truncated(-1234.9).ns(), -1234);
  EXPECT_THROW(Duration::from_ns_truncated(9.3e18), RangeError);
  EXPECT_THROW(Duration::from_ns_truncated(-9.3e18), RangeError);
  EXPECT_THROW(Duration::from_ns_truncated(std::numeric_limits<double>::quiet_NaN()), RangeError);
  EXPECT_THROW(Duration::from_ns_truncated(std::numeric_limits<double>::infinity()), RangeError);
}

TEST(CheckedUnits, RangeContextNamesTheInputs) {
  try {
    with_range_context("model.yaml on slow.yaml", [] { return nanoseconds(kMax) + nanoseconds(1); });
    FAIL() << "no exception";
  } catch (const RangeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("model.yaml on slow.yaml: out of range", 0), 0u) << e.what();
  }
  // Other errors pass through unchanged.
  EXPECT_THROW(with_range_context("x", []() -> int { throw InputError("bad key"); }), InputError);
  EXPECT_EQ(with_range_context("x", [] { return 7; }), 7);
}

}  // namespace
}  // namespace psw
