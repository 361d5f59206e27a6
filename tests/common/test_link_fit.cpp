// Fitting copy_fixed and bandwidth to measured copies.
#include <gtest/gtest.h>

#include "psw/common/error.hpp"
#include "psw/common/link_fit.hpp"

namespace psw {
namespace {

TEST(LinkFit, RecoversAnExactLinearModel) {
  const LinkCost truth{nanoseconds(2600), Bandwidth::bytes_per_second(55'400'000'000)};
  std::vector<CopySample> samples;
  for (Bytes b = 4 * kKiB; b <= kGiB; b *= 4) samples.push_back({b, truth.copy_time(b)});
  const LinkCost fit = fit_link(samples);
  EXPECT_NEAR(static_cast<double>(fit.copy_fixed.ns()), 2600.0, 2.0);
  EXPECT_NEAR(fit.bandwidth.gb_per_second(), 55.4, 0.01);
}

TEST(LinkFit, SmallCopiesSetTheFixedCostDespiteNoise) {
  // +-5% noise on every sample: the fit stays within 10% on both parameters.
  const LinkCost truth{nanoseconds(8000), Bandwidth::bytes_per_second(12'000'000'000)};
  std::vector<CopySample> samples;
  int sign = 1;
  for (Bytes b = 4 * kKiB; b <= kGiB; b *= 2) {
    const double t = static_cast<double>(truth.copy_time(b).ns()) * (1.0 + 0.05 * sign);
    samples.push_back({b, nanoseconds(static_cast<std::int64_t>(t))});
    sign = -sign;
  }
  const LinkCost fit = fit_link(samples);
  EXPECT_NEAR(static_cast<double>(fit.copy_fixed.ns()), 8000.0, 800.0);
  EXPECT_NEAR(fit.bandwidth.gb_per_second(), 12.0, 1.2);
}

TEST(LinkFit, RejectsTooFewOrBadSamples) {
  EXPECT_THROW(fit_link({}), InputError);
  EXPECT_THROW(fit_link({{4096, microseconds(3)}, {4096, microseconds(4)}}), InputError);
  EXPECT_THROW(fit_link({{4096, microseconds(3)}, {-1, microseconds(4)}}), InputError);
}

}  // namespace
}  // namespace psw
