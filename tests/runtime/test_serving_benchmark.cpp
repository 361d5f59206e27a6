// psw bench-serve's arithmetic (Note [Training windows]): the job's rate slice by slice.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "../common/input_error.hpp"
#include "psw/runtime/client/serving_benchmark.hpp"

namespace psw::runtime {
namespace {

// A job sampled every second: 10 steps/s alone for 25 s, then 5 steps/s beside requests for 20 s.
std::vector<TrainingLossSample> samples_of_two_rates() {
  std::vector<TrainingLossSample> samples;
  for (int t = 0; t <= 45; ++t) {
    const std::int64_t step = t <= 25 ? 10 * t : 250 + 5 * (t - 25);
    samples.push_back({static_cast<double>(t), step, 1.0});
  }
  std::shuffle(samples.begin(), samples.end(), std::mt19937(7));  // the two kinds' lists, joined
  return samples;
}

const std::vector<TrainingWindow> kWindows = {{false, 0, 25, 250, 0, 0}, {true, 25, 20, 100, 0.5, 20}};

TEST(TrainingRateSlices, EachWindowsWholeSlicesGiveItsRate) {
  const std::vector<TrainingRateSlice> slices = training_rate_slices(kWindows, samples_of_two_rates(), 10);
  ASSERT_EQ(slices.size(), 4u);  // 25 s: two whole slices; 20 s: two
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const bool loaded = i >= 2;
    EXPECT_EQ(slices[i].with_requests, loaded) << i;
    EXPECT_DOUBLE_EQ(slices[i].start_s, (loaded ? 25.0 : 0.0) + 10.0 * static_cast<double>(i % 2)) << i;
    EXPECT_DOUBLE_EQ(slices[i].seconds, 10) << i;
    EXPECT_EQ(slices[i].steps, loaded ? 50 : 100) << i;
  }
}

// A slice opens and closes at the samples at or before its ends: sampled every 4 s, the slice
// [10, 20] runs from the sample at 8 s to the one at 20 s.
TEST(TrainingRateSlices, ASliceRunsBetweenTheSamplesAtOrBeforeItsEnds) {
  std::vector<TrainingLossSample> sparse;
  for (const TrainingLossSample& s : samples_of_two_rates()) {
    if (static_cast<int>(s.elapsed_s) % 4 == 0) sparse.push_back(s);
  }
  const std::vector<TrainingRateSlice> slices = training_rate_slices({kWindows[0]}, sparse, 10);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_DOUBLE_EQ(slices[0].start_s, 0);
  EXPECT_DOUBLE_EQ(slices[0].seconds, 8);
  EXPECT_EQ(slices[0].steps, 80);
  EXPECT_DOUBLE_EQ(slices[1].start_s, 8);
  EXPECT_DOUBLE_EQ(slices[1].seconds, 12);
  EXPECT_EQ(slices[1].steps, 120);
}

TEST(TrainingRateSlices, NoSamplesOrNoWholeSliceGiveNone) {
  EXPECT_TRUE(training_rate_slices(kWindows, {}, 10).empty());
  EXPECT_TRUE(training_rate_slices(kWindows, samples_of_two_rates(), 30).empty());  // both windows shorter
  // Samples only before the window: every slice opens and closes at the same one.
  EXPECT_TRUE(training_rate_slices({{false, 100, 20, 0, 0, 0}}, samples_of_two_rates(), 10).empty());
  EXPECT_NE(psw::test_support::input_error_of([] { training_rate_slices(kWindows, samples_of_two_rates(), 0); })
                .find("longer than zero"),
            std::string::npos);
}

}  // namespace
}  // namespace psw::runtime
