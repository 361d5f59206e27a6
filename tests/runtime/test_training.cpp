// Note [Preemption without loss] (training.hpp): a training job stopped at random layer
// boundaries, forward and backward, reaches the same bytes as an uninterrupted run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "psw/common/error.hpp"
#include "psw/common/safetensors.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/torchscript.hpp"
#include "psw/runtime/worker/training.hpp"
#include "controller_test_support.hpp"

namespace psw::runtime {
namespace {

// A small model of the zoo's shape (gated layers, BatchNorm statistics as buffers), so that a
// thousand preemptions take seconds; the same job runs on a real zoo model below. Without
// `batch_norm` it has no buffers at all, as BERT-base (its second layer is then a ReLU alone).
class TinyModel final : public exec::ZooModel {
 public:
  // `hidden`: the width of its two hidden layers (2048 makes fc2 16 MiB: Note [Update in pieces]).
  explicit TinyModel(std::uint64_t seed, bool batch_norm = true, std::int64_t hidden = 32) {
    torch::manual_seed(seed);
    fc1_ = torch::nn::Linear(16, hidden);
    if (batch_norm) bn_ = torch::nn::BatchNorm1d(hidden);
    fc2_ = torch::nn::Linear(hidden, hidden);
    fc3_ = torch::nn::Linear(hidden, 4);
    auto add = [this](const std::string& name, const std::string& kind, torch::nn::Module& m) {
      exec::ZooLayer layer{name, kind, {}};
      for (auto& p : m.named_parameters()) {
        layer.tensors.push_back(p.value());
        layer.tensor_names.push_back(p.key());
      }
      for (auto& b : m.named_buffers()) {
        if (!b.value().is_floating_point()) continue;
        layer.tensors.push_back(b.value());
        layer.tensor_names.push_back(b.key());
      }
      layers_.push_back(layer);
    };
    add("fc1", "linear", *fc1_);
    if (bn_) {
      add("bn", "bn", *bn_);
    } else {
      layers_.push_back(exec::ZooLayer{"relu", "relu", {}});
    }
    add("fc2", "linear", *fc2_);
    add("fc3", "linear", *fc3_);
    if (bn_) bn_->eval();  // forward() has eval semantics, as the zoo's
  }
  torch::ScalarType dtype() const override { return torch::kFloat32; }
  const std::string& name() const override { return name_; }
  std::vector<exec::ZooLayer>& layers() override { return layers_; }
  torch::Tensor example_input(int batch, std::uint64_t seed) const override {
    auto gen = at::detail::createCPUGenerator(seed);
    return torch::randn({batch, 16}, gen);
  }
  torch::Tensor forward(const torch::Tensor& x, const exec::LayerGate& gate) override {
    return run(x, gate);
  }
  std::vector<torch::Tensor> training_outputs(const torch::Tensor& x, const exec::LayerGate& gate) override {
    if (bn_) bn_->train();
    torch::Tensor y = run(x, gate);
    if (bn_) bn_->eval();
    return {y};
  }
  void to(torch::Device) override {}
  std::function<void()> on_gate;  // the test's hook at every forward boundary

 private:
  torch::Tensor run(torch::Tensor x, const exec::LayerGate& gate) {
    auto g = [&](std::size_t i) {
      if (on_gate) on_gate();
      gate(i);
    };
    g(0);
    x = fc1_(x);
    g(1);
    x = torch::relu(bn_ ? bn_(x) : x);
    g(2);
    x = torch::relu(fc2_(x));
    g(3);
    return fc3_(x);
  }
  std::string name_ = "tiny";
  torch::nn::Linear fc1_{nullptr};
  torch::nn::BatchNorm1d bn_{nullptr};
  torch::nn::Linear fc2_{nullptr};
  torch::nn::Linear fc3_{nullptr};
  std::vector<exec::ZooLayer> layers_;
};

struct Segment {
  torch::Tensor bytes;
  std::shared_ptr<TrainingHeader> head = std::make_shared<TrainingHeader>();
  TrainingHeader* header() const { return head.get(); }
};

Segment make_segment(exec::ZooModel& model, const TrainingJobConfig& config) {
  Segment s{torch::empty({TrainingJob::state_bytes(model, config)}, torch::kUInt8)};
  TrainingJob::initialize(model, config, s.bytes, s.header());
  return s;
}

// Whether two jobs' states are equal byte for byte where it counts: the committed slot (Note
// [Committed slot]), its step count and loss.
::testing::AssertionResult same_committed_state(const Segment& a, const Segment& b) {
  if (committed_steps(*a.header()) != committed_steps(*b.header())) {
    return ::testing::AssertionFailure() << committed_steps(*a.header()) << " steps against " << committed_steps(*b.header());
  }
  if (committed_loss(*a.header()) != committed_loss(*b.header())) {
    return ::testing::AssertionFailure() << "loss " << committed_loss(*a.header()) << " against " << committed_loss(*b.header());
  }
  const torch::Tensor x = TrainingJob::committed_state(a.bytes, *a.header());
  const torch::Tensor y = TrainingJob::committed_state(b.bytes, *b.header());
  if (x.numel() != y.numel() || std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.numel())) != 0) {
    return ::testing::AssertionFailure() << "weights, statistics or optimizer state differ";
  }
  return ::testing::AssertionSuccess();
}

// TinyModel's job as the tests that stop it at every point of a step train it.
TrainingJobConfig tiny_config(TrainingOptimizer optimizer) {
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 16;
  config.seed = 3;
  config.optimizer = optimizer;
  return config;
}

// The state of TinyModel(7, true, hidden)'s job after `steps` steps without a stop.
Segment uninterrupted_segment(const TrainingJobConfig& config, std::int64_t steps, std::int64_t hidden = 32) {
  TinyModel model(7, true, hidden);
  Segment s = make_segment(model, config);
  TrainingJob job(model, config, s.bytes, s.header());
  std::atomic<std::uint32_t> never{kStopNone};
  job.run(steps, never);
  return s;
}

// Runs `make()`'s job with `preemptions` stops at random layer boundaries, then an
// uninterrupted job to the same step count, and compares the two segments byte for byte.
// `arm(wire, random)` chooses where the next attempt is stopped.
// The mean of `count` losses of a run from step `from`.
double mean_loss(const std::vector<double>& losses, std::size_t from, std::size_t count) {
  double sum = 0;
  for (std::size_t i = from; i < from + count; ++i) sum += losses.at(i);
  return sum / static_cast<double>(count);
}

struct PreemptionCounts {
  int stopped = 0;
  std::int64_t steps = 0;
};

PreemptionCounts preempt_and_compare(const std::function<std::unique_ptr<exec::ZooModel>()>& make,
                                     const TrainingJobConfig& config, int preemptions,
                                     const std::function<void(exec::ZooModel&, TrainingJob&, std::atomic<std::uint32_t>&,
                                                              std::int64_t target)>& attempt) {
  auto model = make();
  Segment preempted = make_segment(*model, config);
  TrainingJob job(*model, config, preempted.bytes, preempted.header());
  std::atomic<std::uint32_t> stop{0};
  PreemptionCounts counts;
  while (counts.stopped < preemptions) {
    const std::int64_t before = committed_steps(*preempted.header());
    stop.store(0);
    attempt(*model, job, stop, before + 1);
    if (committed_steps(*preempted.header()) == before) {
      ++counts.stopped;
    } else {
      EXPECT_EQ(committed_steps(*preempted.header()), before + 1);
    }
  }
  counts.steps = committed_steps(*preempted.header()) + 1;
  stop.store(0);
  EXPECT_EQ(job.run(counts.steps, stop).outcome, TrainingJob::Outcome::ReachedTarget);

  auto reference_model = make();
  Segment reference = make_segment(*reference_model, config);
  TrainingJob uninterrupted(*reference_model, config, reference.bytes, reference.header());
  std::atomic<std::uint32_t> never{0};
  EXPECT_EQ(uninterrupted.run(counts.steps, never).outcome, TrainingJob::Outcome::ReachedTarget);
  EXPECT_TRUE(same_committed_state(preempted, reference)) << "against the uninterrupted run";
  return counts;
}

TEST(TrainingJob, AThousandPreemptionsLoseNothingBitForBit) {
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 16;
  config.seed = 3;
  // Every layer boundary of a step, counted: the forward gates, then (in the backward) the
  // gradient hooks the test adds after the job's own, so a stop raised at hook k is seen by
  // the job at hook k + 1; a stop at the last hook comes too late and the step completes.
  std::mt19937_64 random(11);
  std::atomic<std::uint32_t>* stop_flag = nullptr;
  std::int64_t passed = 0;
  std::int64_t trip_at = -1;
  std::int64_t forward_boundaries = 0;
  std::int64_t in_forward = 0;
  std::int64_t in_backward = 0;
  auto pass = [&] {
    if (passed++ == trip_at) stop_flag->store(1);
  };
  bool hooked = false;
  const PreemptionCounts counts = preempt_and_compare(
      [] { return std::make_unique<TinyModel>(7); }, config, 1000,
      [&](exec::ZooModel& model, TrainingJob& job, std::atomic<std::uint32_t>& stop, std::int64_t target) {
        if (!hooked) {
          auto& tiny = dynamic_cast<TinyModel&>(model);
          tiny.on_gate = pass;
          for (auto& layer : model.layers()) {
            for (auto& t : layer.tensors) {
              if (t.requires_grad()) t.register_hook([&pass](torch::Tensor g) { pass(); return g; });
            }
          }
          forward_boundaries = static_cast<std::int64_t>(model.layers().size());
          hooked = true;
        }
        const std::int64_t per_step = forward_boundaries + 8;  // 4 gates, 8 parameters
        stop_flag = &stop;
        passed = 0;
        trip_at = std::uniform_int_distribution<std::int64_t>(0, per_step - 1)(random);
        if (job.run(target, stop).outcome == TrainingJob::Outcome::Preempted) {
          ++(trip_at < forward_boundaries ? in_forward : in_backward);
        }
      });
  EXPECT_EQ(counts.stopped, 1000);
  EXPECT_GT(in_forward, 100);
  EXPECT_GT(in_backward, 100);
}

// Paused in place a thousand times at random boundaries (kStopPause with a pause handler that
// resumes at once): the same bytes as never pausing, and no step abandoned.
TEST(TrainingJob, AThousandPausesInPlaceLoseNothingBitForBit) {
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 16;
  config.seed = 3;
  std::mt19937_64 random(13);
  TinyModel model(7);
  Segment paused = make_segment(model, config);
  TrainingJob job(model, config, paused.bytes, paused.header());
  std::atomic<std::uint32_t> stop{kStopNone};
  std::int64_t passed = 0;
  std::int64_t trip_at = -1;
  std::int64_t tripped_ns = 0;
  auto trip = [&] {
    if (passed++ != trip_at) return;
    tripped_ns = monotonic_ns();
    stop.store(kStopPause);
  };
  model.on_gate = trip;
  for (auto& layer : model.layers()) {
    for (auto& t : layer.tensors) {
      if (t.requires_grad()) t.register_hook([&](torch::Tensor g) {
          trip();
          return g;
        });
    }
  }
  int pauses = 0;
  const std::int64_t per_step = 12;  // 4 gates, 8 parameter hooks
  // Note [Preemption phases]: each pause knows when and where in the step the job read its stop.
  std::array<int, kTrainingBoundaries> paused_at{};
  auto pause = [&] {
    ++pauses;
    const TrainingJob::StopSeen& seen = job.stop_seen();
    EXPECT_GE(seen.ns, tripped_ns);
    EXPECT_LE(seen.ns, monotonic_ns());
    ++paused_at.at(static_cast<std::size_t>(seen.where));
    stop.store(kStopNone);
    return true;
  };
  std::int64_t step = 0;
  while (pauses < 1000) {
    passed = 0;
    trip_at = std::uniform_int_distribution<std::int64_t>(0, per_step - 1)(random);
    const TrainingJob::Result r = job.run(++step, stop, {}, pause);
    ASSERT_EQ(r.outcome, TrainingJob::Outcome::ReachedTarget);
  }
  // A pause set at the last hook of a step is seen at the update's first boundary.
  EXPECT_GE(pauses, 1000);
  EXPECT_GT(paused_at[static_cast<std::size_t>(TrainingBoundary::Forward)], 100);
  EXPECT_GT(paused_at[static_cast<std::size_t>(TrainingBoundary::Backward)], 100);
  EXPECT_GT(paused_at[static_cast<std::size_t>(TrainingBoundary::Update)], 0);
  // A stop standing when a step would start is read there.
  stop.store(kStopAbort);
  EXPECT_EQ(job.run(step + 1, stop).outcome, TrainingJob::Outcome::Preempted);
  EXPECT_EQ(job.stop_seen().where, TrainingBoundary::StepStart);
  EXPECT_EQ(committed_steps(*paused.header()), step);
  EXPECT_TRUE(same_committed_state(paused, uninterrupted_segment(config, step)));
}

// Note [Update in pieces]: a model with more than 16 MiB of parameters (fc2 alone is 16 MiB)
// has pause points between the pieces of each update operation and of its slot copy. A pause at
// every point of a step in turn is read where the point is, and the job ends bit for bit where an
// uninterrupted one does.
TEST(TrainingJob, AWideModelPausesInsideItsUpdateAndSlotCopyAndLosesNothing) {
  for (const TrainingOptimizer optimizer : {TrainingOptimizer::Sgd, TrainingOptimizer::Adam}) {
    SCOPED_TRACE(to_string(optimizer));
    const TrainingJobConfig config = tiny_config(optimizer);
    TinyModel model(7, true, 2048);
    Segment paused = make_segment(model, config);
    TrainingJob job(model, config, paused.bytes, paused.header());
    // [fc1's weight and bias, bn's], [fc2's weight], [fc2's bias, fc3's]
    ASSERT_EQ(job.update_pieces(), 3u);
    const Bytes slot = TrainingJob::state_bytes(model, config) / 2;
    ASSERT_EQ(job.piece_bytes(), Bytes{16} << 20);  // the config's default
    const std::int64_t copy_pieces = (slot + job.piece_bytes() - 1) / job.piece_bytes();
    ASSERT_GE(copy_pieces, 2);
    std::atomic<std::uint32_t> stop{kStopNone};
    std::int64_t passed = 0;
    std::int64_t trip_at = -1;
    job.set_boundary_hook([&] {
      if (passed++ == trip_at) stop.store(kStopPause);
    });
    std::array<int, kTrainingBoundaries> paused_at{};
    auto pause = [&] {
      ++paused_at.at(static_cast<std::size_t>(job.stop_seen().where));
      stop.store(kStopNone);
      return true;
    };
    // A step's points: the slot copy's pieces after the first, the copy done, 4 gates, 8
    // gradients, the update's pieces and operations, the commit.
    const std::int64_t groups = optimizer == TrainingOptimizer::Sgd ? 3 : 4;
    const std::int64_t update_points = groups - 1 + groups * 2;
    const std::int64_t per_step = (copy_pieces - 1) + 1 + 4 + 8 + update_points + 1;
    std::int64_t step = 0;
    for (std::int64_t k = 0; k < per_step; ++k) {
      passed = 0;
      trip_at = k;
      ASSERT_EQ(job.run(++step, stop, {}, pause).outcome, TrainingJob::Outcome::ReachedTarget);
    }
    ASSERT_EQ(passed, per_step) << "the points of a step";
    // The commit's pause is read at the next step's start: run it.
    ASSERT_EQ(job.run(++step, stop, {}, pause).outcome, TrainingJob::Outcome::ReachedTarget);
    const auto at = [&](TrainingBoundary b) { return paused_at[static_cast<std::size_t>(b)]; };
    EXPECT_EQ(at(TrainingBoundary::StepStart), copy_pieces);  // between copy pieces, and the commit's
    EXPECT_EQ(at(TrainingBoundary::Forward), 5);  // the gates, and the copy done (read at the first)
    EXPECT_EQ(at(TrainingBoundary::Backward), 8);
    EXPECT_EQ(at(TrainingBoundary::Update), update_points);
    EXPECT_EQ(committed_steps(*paused.header()), step);
    const Segment reference = uninterrupted_segment(config, step, 2048);
    EXPECT_TRUE(same_committed_state(paused, reference));
    // Whole operations (update_piece_mib 0: one piece) reach the same bytes: the pieces change
    // only where the job may pause.
    TrainingJobConfig whole_config = config;
    whole_config.update_piece_mib = 0;
    TinyModel whole_model(7, true, 2048);
    Segment whole = make_segment(whole_model, whole_config);
    EXPECT_EQ(TrainingJob(whole_model, whole_config, whole.bytes, whole.header()).update_pieces(), 1u);
    EXPECT_TRUE(same_committed_state(uninterrupted_segment(whole_config, step, 2048), reference))
        << "whole operations against pieces";
  }
}

TEST(TrainingJob, PreemptedResNet152LosesNothingBitForBit) {
  TrainingJobConfig config;
  config.batch = 2;
  config.input_size = 32;
  config.seed = 1;
  // On a real zoo model the stop comes from another thread at a random time within a step,
  // as the controller raises it: wherever the step is then, forward or backward. Six stops: the
  // thousand at every boundary are TinyModel's above; this one is for a zoo model's BatchNorm and
  // a stop from another thread (each ResNet-152 step costs seconds on CI's cores).
  // The stop's delay is drawn within the last complete step's time. The first step, timed
  // alone, also pays for the job's warm-up (allocations, pages first touched) and took three times
  // as long as the steps after it: with the delays drawn within it, most stops came after their
  // step had ended, and the job ran 27 steps (and its reference as many) to be stopped six times.
  // So a step that completes although a stop was coming times the next delays.
  std::mt19937_64 random(5);
  double step_ms = 0;
  preempt_and_compare(
      [] { return exec::make_model("resnet152", 1); }, config, 6,
      [&](exec::ZooModel&, TrainingJob& job, std::atomic<std::uint32_t>& stop, std::int64_t target) {
        const auto t0 = std::chrono::steady_clock::now();
        if (step_ms == 0) {  // time one complete step first
          job.run(target, stop);
          step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          return;
        }
        const auto delay = std::chrono::microseconds(
            static_cast<std::int64_t>(std::uniform_real_distribution<double>(0.0, 0.9 * step_ms * 1000.0)(random)));
        std::thread stopper([&stop, delay] {
          std::this_thread::sleep_for(delay);
          stop.store(1);
        });
        const TrainingJob::Outcome outcome = job.run(target, stop).outcome;
        if (outcome == TrainingJob::Outcome::ReachedTarget) {
          step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        stopper.join();
      });
}

// Note [Pause and resume]: a resume and the next stop that land between two of the waiting
// worker's reads are not lost: the resume count says the job was resumed, so it goes on (and
// pauses again at its next boundary with a message for the new stop).
TEST(PauseAndResume, AResumeFollowedAtOnceByAStopIsNotLost) {
  WorkerControl control{};
  control.stop.store(kStopPause);
  const std::uint32_t at_pause = control.resumes.load();
  auto gone = [] { return false; };
  // The controller resumes and stops again before the worker looks: stop reads kStopPause as
  // before, and only the count tells. (Without it the wait below would never return.)
  control.resumes.fetch_add(1);
  control.stop.store(kStopNone);
  control.stop.store(kStopPause);
  EXPECT_TRUE(wait_while_paused(control, at_pause, gone));
  // The ordinary cases: a plain resume goes on, an abort or a vanished controller abandons.
  control.stop.store(kStopNone);
  EXPECT_TRUE(wait_while_paused(control, control.resumes.load(), gone));
  control.stop.store(kStopAbort);
  EXPECT_FALSE(wait_while_paused(control, control.resumes.load(), gone));
  control.stop.store(kStopPause);
  EXPECT_FALSE(wait_while_paused(control, control.resumes.load(), [] { return true; }));
  // Still paused: it waits until the resume comes (from another thread, later).
  const std::uint32_t paused_at = control.resumes.load();
  std::atomic<bool> returned{false};
  std::thread worker([&] {
    EXPECT_TRUE(wait_while_paused(control, paused_at, gone));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned.load());
  control.resumes.fetch_add(1);
  control.stop.store(kStopNone);
  worker.join();
  EXPECT_TRUE(returned.load());
}

TEST(TrainingJob, TrainingChangesTheWeightsAndCountsSteps) {
  TinyModel model(7);
  TrainingJobConfig config;
  Segment s = make_segment(model, config);
  const torch::Tensor before = s.bytes.clone();
  config.input_size = 16;
  TrainingJob job(model, config, s.bytes, s.header());
  std::atomic<std::uint32_t> never{0};
  const auto r = job.run(5, never);
  EXPECT_EQ(r.completed_steps, 5);
  EXPECT_FALSE(torch::equal(before, s.bytes));
  // A stop raised before the run stops it between steps, with nothing done.
  std::atomic<std::uint32_t> stop{1};
  EXPECT_EQ(job.run(10, stop).outcome, TrainingJob::Outcome::Preempted);
  EXPECT_EQ(committed_steps(*s.header()), 5);
}

// Note [Rehearsal]: a step run on a scratch copy writes neither slot of the state, and the job
// then runs as one that never rehearsed, bit for bit; whether rehearsed before its first step
// (as a worker does at its start) or later.
TEST(TrainingJob, ARehearsalWritesNoStateAndChangesNothingOfTheRun) {
  for (const TrainingOptimizer optimizer : {TrainingOptimizer::Sgd, TrainingOptimizer::Adam}) {
    SCOPED_TRACE(to_string(optimizer));
    const TrainingJobConfig config = tiny_config(optimizer);
    const Segment reference = uninterrupted_segment(config, 6);
    for (const std::int64_t rehearsed_at : {0, 3}) {
      SCOPED_TRACE(rehearsed_at);
      TinyModel model(7, true);
      Segment s = make_segment(model, config);
      TrainingJob job(model, config, s.bytes, s.header());
      std::atomic<std::uint32_t> never{kStopNone};
      if (rehearsed_at > 0) job.run(rehearsed_at, never);  // run(0) has no target
      const torch::Tensor before = s.bytes.clone();
      torch::Tensor scratch = torch::zeros({job.slot_bytes()}, torch::kUInt8);
      job.rehearse(scratch);
      EXPECT_TRUE(torch::equal(before, s.bytes)) << "the rehearsal wrote the job's state";
      // It ran a step there: the scratch is the committed slot one update on.
      EXPECT_FALSE(torch::equal(scratch, TrainingJob::committed_state(s.bytes, *s.header())));
      EXPECT_EQ(committed_steps(*s.header()), rehearsed_at);
      EXPECT_EQ(job.run(6, never).completed_steps, 6);
      EXPECT_TRUE(same_committed_state(s, reference));
      EXPECT_ANY_THROW(job.rehearse(torch::zeros({job.slot_bytes() - 1}, torch::kUInt8)));
    }
  }
}

// BERT-base has no buffers: its job once failed in psw serve on its first step (the saved
// statistics, a multi-tensor copy of no tensors: "Tensor list must have at least one tensor").
TEST(TrainingJob, AModelWithoutBuffersTrainsAndIsPreemptedWithoutLoss) {
  TinyModel model(7, /*batch_norm=*/false);
  TrainingJobConfig config;
  Segment s = make_segment(model, config);
  const torch::Tensor before = s.bytes.clone();
  config.input_size = 16;
  TrainingJob job(model, config, s.bytes, s.header());
  std::atomic<std::uint32_t> never{0};
  EXPECT_EQ(job.run(3, never).completed_steps, 3);
  EXPECT_FALSE(torch::equal(before, s.bytes));
  const PreemptionCounts counts = preempt_and_compare(
      [] { return std::make_unique<TinyModel>(11, /*batch_norm=*/false); }, config, 20,
      [](exec::ZooModel& m, TrainingJob& j, std::atomic<std::uint32_t>& stop, std::int64_t target) {
        auto& tiny = static_cast<TinyModel&>(m);
        int boundaries = 0;
        tiny.on_gate = [&] {
          if (++boundaries == 3) stop.store(kStopAbort);
        };
        j.run(target, stop);
        tiny.on_gate = nullptr;
      });
  EXPECT_EQ(counts.stopped, 20);
}

TEST(TrainingJob, ASegmentOfAnotherModelIsRefused) {
  TinyModel model(7);
  TrainingJobConfig config;
  Segment s = make_segment(model, config);
  s.header()->fingerprint ^= 1;
  EXPECT_THROW(TrainingJob(model, config, s.bytes, s.header()), InputError);
}

// A state made for SGD (momentum) is not Adam's (two moments, another size): refused by name.
TEST(TrainingJob, AStateOfAnotherOptimizerIsRefused) {
  TinyModel model(7);
  TrainingJobConfig sgd;
  TrainingJobConfig adam;
  adam.optimizer = TrainingOptimizer::Adam;
  EXPECT_EQ(TrainingJob::state_bytes(model, adam) * 2, TrainingJob::state_bytes(model, sgd) * 3);
  Segment s = make_segment(model, sgd);
  try {
    TrainingJob job(model, adam, s.bytes, s.header());
    FAIL() << "an SGD state was taken for Adam";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("adam"), std::string::npos) << e.what();
  }
}

// Note [Training objective]: the job learns its labelled set. With either optimizer the loss of
// the tiny model falls well below its first steps' (cross-entropy of 4 classes starts near
// ln 4 = 1.39), and below the same threshold when preempted on every step.
class TrainingObjective : public ::testing::TestWithParam<TrainingOptimizer> {};

TEST_P(TrainingObjective, TheLossFallsWithAndWithoutPreemptions) {
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 16;
  config.seed = 5;
  config.optimizer = GetParam();
  config.learning_rate = GetParam() == TrainingOptimizer::Adam ? 0.01 : 0.05;
  constexpr std::int64_t kSteps = 300;
  constexpr double kThreshold = 0.35;
  // Uninterrupted.
  TinyModel model(7);
  Segment s = make_segment(model, config);
  TrainingJob job(model, config, s.bytes, s.header());
  std::atomic<std::uint32_t> never{kStopNone};
  std::vector<double> losses;
  job.run(kSteps, never, [&](std::int64_t, double loss) {
    losses.push_back(loss);
    return true;
  });
  ASSERT_EQ(losses.size(), static_cast<std::size_t>(kSteps));
  const double first = mean_loss(losses, 0, TrainingJob::kDataPool);
  const double last = mean_loss(losses, kSteps - TrainingJob::kDataPool, TrainingJob::kDataPool);
  EXPECT_GT(first, 1.0) << "4 classes start near ln 4";
  EXPECT_LT(last, kThreshold) << "the loss went from " << first << " to " << last;
  // Abandoned at a forward boundary of every step, then run again: the same losses.
  TinyModel preempted_model(7);
  Segment p = make_segment(preempted_model, config);
  TrainingJob preempted(preempted_model, config, p.bytes, p.header());
  std::atomic<std::uint32_t> stop{kStopNone};
  int gates = 0;
  preempted_model.on_gate = [&] {
    if (++gates % 5 == 3) stop.store(kStopAbort);  // about every other attempt is abandoned
  };
  std::vector<double> preempted_losses;
  int abandoned = 0;
  while (committed_steps(*p.header()) < kSteps) {
    stop.store(kStopNone);
    const auto r = preempted.run(committed_steps(*p.header()) + 1, stop, [&](std::int64_t, double loss) {
      preempted_losses.push_back(loss);
      return true;
    });
    if (r.outcome == TrainingJob::Outcome::Preempted) ++abandoned;
  }
  EXPECT_GT(abandoned, kSteps / 4);
  EXPECT_EQ(preempted_losses, losses);
  EXPECT_TRUE(same_committed_state(p, s));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainingObjective, ::testing::Values(TrainingOptimizer::Sgd, TrainingOptimizer::Adam),
                         [](const ::testing::TestParamInfo<TrainingOptimizer>& info) { return to_string(info.param); });

// The update is torch.optim's: two steps of the job against torch::optim::SGD (momentum 0.9) and
// torch::optim::Adam on a second copy of the model, fed the job's own inputs and labels.
// Note [Training checkpoint]: a job checkpointed after 5 steps and resumed into a model of other
// (seeded) weights runs on as the uninterrupted job, bit for bit, with either optimizer; the file
// names the model's tensors and torch.optim's buffers; files of another job are refused by name.
class TrainingCheckpointTest : public ::testing::TestWithParam<TrainingOptimizer> {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path file(const std::string& name) {
    std::filesystem::create_directories(dir_);
    return dir_ / name;
  }
  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("psw-checkpoint-" + std::to_string(::getpid()));
};

TEST_P(TrainingCheckpointTest, AResumedJobRunsAsTheUninterruptedOneBitForBit) {
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 16;
  config.optimizer = GetParam();
  TinyModel model(7);
  Segment original = make_segment(model, config);
  TrainingJob job(model, config, original.bytes, original.header());
  std::atomic<std::uint32_t> never{0};
  job.run(5, never);
  const std::filesystem::path path = file("job.safetensors");
  const TrainingCheckpoint saved = TrainingJob::save_checkpoint(model, config, original.bytes, *original.header(), path);
  EXPECT_EQ(saved.completed_steps, 5);
  EXPECT_EQ(saved.loss, committed_loss(*original.header()));
  EXPECT_EQ(static_cast<std::uintmax_t>(saved.bytes), std::filesystem::file_size(path));
  const SafetensorsHeader header = read_safetensors_header(path);
  EXPECT_EQ(header.metadata.at("psw_model"), "tiny");
  EXPECT_EQ(header.metadata.at("psw_completed_steps"), "5");
  EXPECT_NE(header.find("bn.running_mean"), nullptr);
  const bool adam = GetParam() == TrainingOptimizer::Adam;
  EXPECT_NE(header.find(adam ? "optimizer.exp_avg_sq.fc3.weight" : "optimizer.momentum_buffer.fc3.weight"), nullptr);
  EXPECT_EQ(header.find("optimizer.momentum_buffer.bn.running_mean"), nullptr);  // statistics do not train

  TrainingJobConfig resumed_config = config;
  resumed_config.resume_from = path;
  TinyModel other(99);  // other seeded weights: the checkpoint's must replace them
  Segment resumed = make_segment(other, resumed_config);
  EXPECT_TRUE(same_committed_state(original, resumed)) << "the resumed state";
  TrainingJob resumed_job(other, resumed_config, resumed.bytes, resumed.header());
  resumed_job.run(9, never);
  job.run(9, never);
  EXPECT_TRUE(same_committed_state(original, resumed)) << "after 4 more steps";

  // Another optimizer, another model of the same name, a file that is no checkpoint.
  TrainingJobConfig wrong = config;
  wrong.optimizer = adam ? TrainingOptimizer::Sgd : TrainingOptimizer::Adam;
  wrong.resume_from = path;
  const auto refusal = [&](exec::ZooModel& m, const TrainingJobConfig& c) {
    try {
      make_segment(m, c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(model, wrong).find(std::string("trained with ") + (adam ? "adam, not sgd" : "sgd, not adam")),
            std::string::npos);
  TinyModel no_statistics(7, /*batch_norm=*/false);
  EXPECT_NE(refusal(no_statistics, resumed_config).find("a checkpoint of another tiny"), std::string::npos)
      << refusal(no_statistics, resumed_config);
  const std::filesystem::path plain = file("plain.safetensors");
  std::ofstream(plain, std::ios::binary) << write_safetensors({{"w", TensorDtype::F32, {1}, std::string(4, '\0')}});
  TrainingJobConfig not_a_checkpoint = config;
  not_a_checkpoint.resume_from = plain;
  EXPECT_NE(refusal(model, not_a_checkpoint).find("not a training checkpoint"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainingCheckpointTest,
                         ::testing::Values(TrainingOptimizer::Sgd, TrainingOptimizer::Adam),
                         [](const ::testing::TestParamInfo<TrainingOptimizer>& info) { return to_string(info.param); });

// Note [Training objective]: the user's labelled set (training.dataset) is what the job learns:
// step s takes samples s * batch .. modulo N, the loss falls, and a file that does not fit the
// model (a sample's shape, a label outside its classes, counts that differ) is refused naming it.
TEST(TrainingDataset, TheJobLearnsTheUsersSetAndRefusesOneThatDoesNotFit) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("psw-dataset-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const torch::Tensor& inputs, const torch::Tensor& labels) {
    const auto bytes = [](const torch::Tensor& t) { return std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()); };
    const auto shape = [](const torch::Tensor& t) { return std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()); };
    std::ofstream(dir / name, std::ios::binary)
        << write_safetensors({{"inputs", inputs.scalar_type() == torch::kFloat32 ? TensorDtype::F32 : TensorDtype::F64,
                               shape(inputs), bytes(inputs)},
                              {"labels", TensorDtype::I64, shape(labels), bytes(labels)}});
    return dir / name;
  };
  auto gen = at::detail::createCPUGenerator(5);
  const torch::Tensor inputs = torch::randn({24, 16}, gen);
  const torch::Tensor labels = inputs.matmul(torch::randn({16, 4}, gen)).argmax(1);  // learnable
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 16;
  config.dataset = write("set.safetensors", inputs, labels);
  TinyModel model(7);
  TrainingJob::check_config(model, config);
  Segment s = make_segment(model, config);
  TrainingJob job(model, config, s.bytes, s.header());
  EXPECT_TRUE(torch::equal(job.input_of_step(0), inputs.narrow(0, 0, 8)));
  EXPECT_TRUE(torch::equal(job.input_of_step(4), inputs.narrow(0, 8, 8)));  // 32 modulo 24
  EXPECT_TRUE(torch::equal(job.labels_of_step(2, 4), labels.narrow(0, 16, 8)));
  std::vector<double> losses;
  std::atomic<std::uint32_t> never{0};
  job.run(150, never, [&](std::int64_t, double loss) {
    losses.push_back(loss);
    return true;
  });
  ASSERT_EQ(losses.size(), 150u);
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last = (losses[147] + losses[148] + losses[149]) / 3;
  EXPECT_LT(last, first / 2) << "first " << first << ", last " << last;

  const auto refusal = [&](const std::filesystem::path& file) {
    TrainingJobConfig c = config;
    c.dataset = file;
    try {
      TrainingJob::check_config(model, c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(write("narrow.safetensors", inputs.narrow(1, 0, 15).contiguous(), labels))
                .find("'inputs' is F32 [24, 15]; tiny's job takes F32 [N, 16] with N >= 1"),
            std::string::npos);
  EXPECT_NE(refusal(write("double.safetensors", inputs.to(torch::kFloat64), labels)).find("'inputs' is F64"),
            std::string::npos);
  torch::Tensor beyond = labels.clone();
  beyond[3] = 4;
  EXPECT_NE(refusal(write("beyond.safetensors", inputs, beyond)).find("output has 4 classes, so they must lie in [0, 4)"),
            std::string::npos);
  EXPECT_NE(refusal(write("short.safetensors", inputs, labels.narrow(0, 0, 20).contiguous())).find("24 inputs and 20 labels"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// Also for a model whose update runs in pieces (Note [Update in pieces]): every parameter
// updated once, by the same arithmetic.
TEST(TrainingJob, TheUpdateIsTorchOptimsSgdAndAdam) {
  for (const auto& [optimizer, hidden] : {std::pair{TrainingOptimizer::Sgd, std::int64_t{32}},
                                          std::pair{TrainingOptimizer::Adam, std::int64_t{32}},
                                          std::pair{TrainingOptimizer::Sgd, std::int64_t{2048}},
                                          std::pair{TrainingOptimizer::Adam, std::int64_t{2048}}}) {
    SCOPED_TRACE(to_string(optimizer) + " hidden " + std::to_string(hidden));
    TrainingJobConfig config;
    config.input_size = 16;
    config.optimizer = optimizer;
    config.learning_rate = 0.1;
    TinyModel model(7, true, hidden);
    Segment s = make_segment(model, config);
    TrainingJob job(model, config, s.bytes, s.header());
    EXPECT_EQ(job.update_pieces(), hidden == 32 ? 1u : 3u);
    std::atomic<std::uint32_t> never{kStopNone};
    job.run(2, never);

    TinyModel reference(7, true, hidden);
    std::vector<torch::Tensor> params;
    for (auto& l : reference.layers()) {
      for (auto& t : l.tensors) {
        if (t.requires_grad()) params.push_back(t);
      }
    }
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (optimizer == TrainingOptimizer::Sgd) {
      opt = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
    } else {
      opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.1));
    }
    for (std::int64_t step = 0; step < 2; ++step) {
      opt->zero_grad();
      const std::vector<torch::Tensor> o = reference.training_outputs(job.input_of_step(step), [](std::size_t) {});
      torch::nn::functional::cross_entropy(o[0], job.labels_of_step(step, o[0].size(1))).backward();
      opt->step();
    }
    std::vector<torch::Tensor> got;
    for (auto& l : model.layers()) {
      for (auto& t : l.tensors) got.push_back(t);
    }
    std::size_t k = 0;
    for (auto& l : reference.layers()) {
      for (auto& t : l.tensors) {
        EXPECT_TRUE(torch::allclose(got.at(k), t, 1e-5, 1e-6)) << l.name << " tensor " << k;
        ++k;
      }
    }
    EXPECT_FALSE(torch::equal(got.front(), TinyModel(7, true, hidden).layers().front().tensors.front())) << "nothing trained";
  }
}

// Note [Committed slot]: a process killed at any point of a step leaves the job at its last
// completed step, BatchNorm statistics and optimizer state included. A kill leaves the shared
// state and header exactly as they are at that instant, so the test takes a copy of both at every
// point a step passes (each forward gate, each gradient hook, the slot's copy, each operation of
// the update, the commit about to be made) and resumes a fresh job from each copy: every one must
// reach the uninterrupted run's bytes.
TEST(TrainingJob, AKillAtAnyPointOfAStepLosesNothingBitForBit) {
  for (const TrainingOptimizer optimizer : {TrainingOptimizer::Sgd, TrainingOptimizer::Adam}) {
    SCOPED_TRACE(to_string(optimizer));
    const TrainingJobConfig config = tiny_config(optimizer);
    constexpr std::int64_t kBefore = 3;  // steps completed before the step that is killed
    constexpr std::int64_t kSteps = 6;
    TinyModel model(7);
    Segment live = make_segment(model, config);
    TrainingJob job(model, config, live.bytes, live.header());
    std::atomic<std::uint32_t> never{kStopNone};
    job.run(kBefore, never);
    std::vector<Segment> killed;  // what a kill at each point leaves
    job.set_boundary_hook([&] {
      Segment at{live.bytes.clone(), std::make_shared<TrainingHeader>(*live.header())};
      killed.push_back(std::move(at));
    });
    job.run(kBefore + 1, never);
    job.set_boundary_hook({});
    job.run(kSteps, never);
    // 4 gates, 8 gradient hooks, the copy, the update's 2 (sgd) or 3 (adam) pauses, the commit.
    const std::size_t points = 4 + 8 + 1 + (optimizer == TrainingOptimizer::Adam ? 3 : 2) + 1;
    ASSERT_EQ(killed.size(), points);
    for (std::size_t k = 0; k < killed.size(); ++k) {
      EXPECT_EQ(committed_steps(*killed[k].header()), kBefore) << "point " << k;
      TinyModel fresh(99);  // another seed: everything it trains with comes from the state
      TrainingJob resumed(fresh, config, killed[k].bytes, killed[k].header());
      resumed.run(kSteps, never);
      EXPECT_TRUE(same_committed_state(killed[k], live)) << "killed at point " << k << " of " << killed.size();
    }
  }
}

// Note [TorchScript training] (exec/src/torchscript.cpp): a user's TorchScript module (the scripted
// linear-BatchNorm-ReLU-linear classifier of tests/exec/make_torchscript.py, 5 classes) trains as
// the zoo's models do: its loss falls, its BatchNorm's running statistics move (scripted, it
// follows the training mode), the inference forward afterwards is in eval mode again, and a job
// stopped at a random boundary of a step (the gates before its forward, a parameter's gradient,
// the update's operations) and run again ends bit for bit where an uninterrupted one does.
TEST(TrainingJob, AUsersTorchScriptModuleLearnsAndLosesNothingWhenStopped) {
  const std::filesystem::path dir = test_support::make_torchscript_files("training-torchscript");
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto make = [&] {
    return exec::load_torchscript(dir / "classifier.pt", exec::InputSpec{{1, 3, 16, 16}, torch::kFloat32});
  };
  TrainingJobConfig config;
  config.model = "classifier";
  config.batch = 8;
  config.input_size = 16;
  config.seed = 4;
  config.learning_rate = 0.05;
  {
    auto model = make();
    Segment s = make_segment(*model, config);
    TrainingJob job(*model, config, s.bytes, s.header());
    const torch::Tensor input = model->example_input(4, 9);
    const torch::Tensor before = model->forward(input);
    const torch::Tensor running_mean = model->layers().at(1).tensors.at(2).clone();  // BatchNorm1d's
    std::atomic<std::uint32_t> never{kStopNone};
    std::vector<double> losses;
    job.run(200, never, [&](std::int64_t, double loss) {
      losses.push_back(loss);
      return true;
    });
    ASSERT_EQ(losses.size(), 200u);
    const double first = mean_loss(losses, 0, TrainingJob::kDataPool);
    const double last = mean_loss(losses, losses.size() - TrainingJob::kDataPool, TrainingJob::kDataPool);
    EXPECT_GT(first, 1.4) << "5 classes start near ln 5 = 1.61";
    EXPECT_LT(last, 0.5) << "the loss went from " << first << " to " << last;
    ASSERT_EQ(model->layers().at(1).kind, "BatchNorm1d");
    EXPECT_FALSE(torch::equal(running_mean, model->layers().at(1).tensors.at(2))) << "BatchNorm ran in eval mode";
    // In eval mode again: the same input twice gives the same output, another than before training.
    const torch::Tensor after = model->forward(input);
    EXPECT_TRUE(torch::equal(after, model->forward(input)));
    EXPECT_FALSE(torch::equal(before, after));
  }
  std::mt19937_64 random(3);
  std::int64_t passed = 0;
  std::int64_t trip_at = -1;
  // Per step: 3 gates, 6 parameters' gradients, 2 update boundaries (an abort there is seen after
  // the commit: that step completes).
  const PreemptionCounts counts = preempt_and_compare(
      make, config, 40,
      [&](exec::ZooModel&, TrainingJob& job, std::atomic<std::uint32_t>& stop, std::int64_t target) {
        job.set_boundary_hook([&] {
          if (passed++ == trip_at) stop.store(kStopAbort);
        });
        passed = 0;
        trip_at = std::uniform_int_distribution<std::int64_t>(0, 11)(random);
        job.run(target, stop);
      });
  EXPECT_EQ(counts.stopped, 40);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace psw::runtime
