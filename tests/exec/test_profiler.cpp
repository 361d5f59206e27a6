// The profiler on the host backend: Note [Mark overhead] and the per-layer forward and
// backward times of a training iteration.

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/profiler.hpp"

namespace psw::exec {
namespace {

std::vector<Duration> ns(std::initializer_list<std::int64_t> values) {
  std::vector<Duration> out;
  for (auto v : values) out.push_back(nanoseconds(v));
  return out;
}

Duration sum(const std::vector<Duration>& v) { return std::accumulate(v.begin(), v.end(), Duration::zero()); }

TEST(MarkOverhead, SubtractsAnEqualCostPerRecordAndSumsToTheUninstrumentedTime) {
  // Three layers, one record each, 30 ns of overhead in all: 10 ns per record.
  const auto out = remove_mark_overhead(ns({110, 210, 20}), {1, 1, 1}, nanoseconds(310));
  EXPECT_EQ(out, ns({100, 200, 10}));
  // A layer with two records (a backward hook per parameter) pays twice.
  EXPECT_EQ(remove_mark_overhead(ns({120, 110}), {2, 1}, nanoseconds(200)), ns({100, 100}));
  // A layer that is all overhead goes to zero, not below; the rest is scaled to the total.
  const auto clamped = remove_mark_overhead(ns({5, 1000, 1000}), {1, 1, 1}, nanoseconds(1970));
  EXPECT_EQ(clamped[0], Duration::zero());
  EXPECT_EQ(sum(clamped), nanoseconds(1970));
  EXPECT_EQ(clamped[1], clamped[2]);
  // Layers without records (not run) stay zero.
  EXPECT_EQ(remove_mark_overhead(ns({0, 150}), {0, 1}, nanoseconds(100)), ns({0, 100}));
}

TEST(MarkOverhead, ScalesUpWhenTheInstrumentedRunWasFaster) {
  // Noise can make the instrumented sum the smaller one: nothing is subtracted, all scaled.
  const auto out = remove_mark_overhead(ns({100, 300}), {1, 1}, nanoseconds(800));
  EXPECT_EQ(out, ns({200, 600}));
}

TEST(MarkOverhead, RoundingKeepsTheTotalExact) {
  const auto out = remove_mark_overhead(ns({333, 333, 334}), {1, 1, 1}, nanoseconds(1001));
  EXPECT_EQ(sum(out), nanoseconds(1001));
}

TEST(MarkOverhead, RejectsBadInput) {
  EXPECT_THROW(remove_mark_overhead(ns({1, 2}), {1}, nanoseconds(3)), InputError);
  EXPECT_THROW(remove_mark_overhead(ns({-1, 2}), {1, 1}, nanoseconds(3)), InputError);
  EXPECT_THROW(remove_mark_overhead(ns({1, 2}), {1, 1}, nanoseconds(-3)), InputError);
}

TEST(Profiler, TrainingTimesCoverEveryLayerAndSumToTheirPhase) {
  auto backend = make_host_backend();
  auto model = make_model("bert_tiny", 0);
  const torch::Tensor input = model->example_input(1, 1).narrow(1, 0, 16);
  const TrainingTimes t = profile_training(*backend, *model, input, 1);
  const std::size_t n = model->layers().size();
  ASSERT_EQ(t.forward.per_layer.size(), n);
  ASSERT_EQ(t.backward.per_layer.size(), n);
  EXPECT_EQ(sum(t.forward.per_layer), t.forward.total);
  EXPECT_EQ(sum(t.backward.per_layer), t.backward.total);
  EXPECT_GT(t.backward.total, Duration::zero());
  EXPECT_GT(t.backward.instrumented, Duration::zero());
  // The word embedding's gradient (a dense table, 16 MB in BERT-Tiny) is ready last and costs real time.
  EXPECT_GT(t.backward.per_layer[0], Duration::zero());
  // The hooks are gone and the model is in eval mode again: a plain backward runs, and the
  // inference forward gates only the running layers.
  std::size_t gates = 0;
  model->forward(input, [&](std::size_t) { ++gates; });
  EXPECT_EQ(gates, n);
  model->training_loss(input, [](std::size_t) {}).backward();
}

TEST(Profiler, ForwardTimesSumToTheUninstrumentedForward) {
  auto backend = make_host_backend();
  auto model = make_model("inception_v3", 0);
  const torch::Tensor input = model->example_input(1, 1).narrow(2, 0, 75).narrow(3, 0, 75).contiguous();
  const PhaseTimes t = profile_forward(*backend, *model, input, 2);
  ASSERT_EQ(t.per_layer.size(), model->layers().size());
  EXPECT_EQ(sum(t.per_layer), t.total);
  // Inception's auxiliary head does not run in inference: zero.
  for (std::size_t i = 0; i < model->layers().size(); ++i) {
    if (model->layers()[i].name.rfind("AuxLogits", 0) == 0) EXPECT_EQ(t.per_layer[i], Duration::zero()) << i;
  }
  EXPECT_THROW(profile_forward(*backend, *model, input, 0), InputError);
}

}  // namespace
}  // namespace psw::exec
