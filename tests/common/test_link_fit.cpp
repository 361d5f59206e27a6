// Fitting copy_fixed and bandwidth to measured copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

// The per-size rates of the pageable link measured on the H200 (results/profiles/h200-pcie5.yaml):
// fast for mid-sized copies, about 9 GB/s for model-sized ones.
std::vector<CopySample> h200_pageable_samples() {
  const std::vector<std::pair<Bytes, double>> rates = {
      {4096, 1.56},       {16384, 4.72},       {65536, 8.26},        {262144, 13.30},     {1048576, 16.05},
      {4194304, 13.14},   {16777216, 13.60},   {67108864, 9.51},     {268435456, 8.73},   {1073741824, 9.14}};
  std::vector<CopySample> samples;
  for (const auto& [bytes, gbps] : rates) {
    samples.push_back({bytes, nanoseconds(static_cast<std::int64_t>(static_cast<double>(bytes) / gbps))});
  }
  return samples;
}

TEST(LinkFit, AbsoluteErrorFollowsTheLargeCopiesOfANonLinearLink) {
  const auto samples = h200_pageable_samples();
  const LinkCost relative = fit_link(samples, LinkFitWeighting::RelativeError);
  const LinkCost absolute = fit_link(samples, LinkFitWeighting::AbsoluteError);
  // The relative fit averages the regimes; the absolute fit predicts the model-sized copies.
  EXPECT_GT(relative.bandwidth.gb_per_second(), 11.0);
  for (const Bytes bytes : {Bytes{67108864}, Bytes{268435456}, Bytes{1073741824}}) {
    const auto measured = std::find_if(samples.begin(), samples.end(), [&](const CopySample& s) { return s.bytes == bytes; });
    const double error = static_cast<double>(absolute.copy_time(bytes).ns()) / static_cast<double>(measured->time.ns()) - 1;
    EXPECT_LT(std::abs(error), 0.07) << bytes;
  }
  EXPECT_GE(absolute.copy_fixed.ns(), 0);
}

TEST(LinkFit, AbsoluteErrorRecoversAnExactLinearModel) {
  const LinkCost truth{nanoseconds(2600), Bandwidth::bytes_per_second(55'400'000'000)};
  std::vector<CopySample> samples;
  for (Bytes b = 4 * kKiB; b <= kGiB; b *= 4) samples.push_back({b, truth.copy_time(b)});
  const LinkCost fit = fit_link(samples, LinkFitWeighting::AbsoluteError);
  EXPECT_NEAR(fit.bandwidth.gb_per_second(), 55.4, 0.01);
  EXPECT_NEAR(static_cast<double>(fit.copy_fixed.ns()), 2600.0, 50.0);
}

TEST(LinkFit, NegativeInterceptRefitsThroughTheOrigin) {
  // Faster per byte for small copies than the line through the large ones: the unconstrained
  // intercept is negative; the fit reports no fixed cost and a rate through the origin.
  const std::vector<CopySample> samples = {{kMiB, microseconds(50)}, {64 * kMiB, microseconds(7000)}};
  const LinkCost fit = fit_link(samples, LinkFitWeighting::AbsoluteError);
  EXPECT_EQ(fit.copy_fixed.ns(), 0);
  EXPECT_GT(fit.bandwidth.gb_per_second(), 9.0);
  EXPECT_LT(fit.bandwidth.gb_per_second(), 9.7);
}

TEST(LinkFit, RejectsTooFewOrBadSamples) {
  EXPECT_THROW(fit_link({}), InputError);
  EXPECT_THROW(fit_link({{4096, microseconds(3)}, {4096, microseconds(4)}}), InputError);
  EXPECT_THROW(fit_link({{4096, microseconds(3)}, {-1, microseconds(4)}}), InputError);
}

}  // namespace
}  // namespace psw
