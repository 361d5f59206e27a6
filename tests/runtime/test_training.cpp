// Note [Preemption without loss] (training.hpp): a training job stopped at random layer
// boundaries, forward and backward, reaches the same bytes as an uninterrupted run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "psw/common/error.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/runtime/worker/training.hpp"

namespace psw::runtime {
namespace {

// A small model of the zoo's shape (gated layers, BatchNorm statistics as buffers), so that a
// thousand preemptions take seconds; the same job runs on a real zoo model below. Without
// `batch_norm` it has no buffers at all, as BERT-base (its second layer is then a ReLU alone).
class TinyModel final : public exec::ZooModel {
 public:
  explicit TinyModel(std::uint64_t seed, bool batch_norm = true) {
    torch::manual_seed(seed);
    fc1_ = torch::nn::Linear(16, 32);
    if (batch_norm) bn_ = torch::nn::BatchNorm1d(32);
    fc2_ = torch::nn::Linear(32, 32);
    fc3_ = torch::nn::Linear(32, 4);
    auto add = [this](const std::string& name, const std::string& kind, torch::nn::Module& m) {
      exec::ZooLayer layer{name, kind, {}};
      for (auto& p : m.parameters()) layer.tensors.push_back(p);
      for (auto& b : m.buffers()) {
        if (b.is_floating_point()) layer.tensors.push_back(b);
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
  torch::Tensor training_loss(const torch::Tensor& x, const exec::LayerGate& gate) override {
    if (bn_) bn_->train();
    torch::Tensor y = run(x, gate);
    if (bn_) bn_->eval();
    return y.pow(2).mean();
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

Segment make_segment(exec::ZooModel& model) {
  Segment s{torch::empty({TrainingJob::state_bytes(model)}, torch::kUInt8)};
  TrainingJob::initialize(model, s.bytes, s.header());
  return s;
}

// Runs `make()`'s job with `preemptions` stops at random layer boundaries, then an
// uninterrupted job to the same step count, and compares the two segments byte for byte.
// `arm(wire, random)` chooses where the next attempt is stopped.
struct PreemptionCounts {
  int stopped = 0;
  std::int64_t steps = 0;
};

PreemptionCounts preempt_and_compare(const std::function<std::unique_ptr<exec::ZooModel>()>& make,
                                     const TrainingJobConfig& config, int preemptions,
                                     const std::function<void(exec::ZooModel&, TrainingJob&, std::atomic<std::uint32_t>&,
                                                              std::int64_t target)>& attempt) {
  auto model = make();
  Segment preempted = make_segment(*model);
  TrainingJob job(*model, config, preempted.bytes, preempted.header());
  std::atomic<std::uint32_t> stop{0};
  PreemptionCounts counts;
  while (counts.stopped < preemptions) {
    const std::int64_t before = preempted.header()->completed_steps;
    stop.store(0);
    attempt(*model, job, stop, before + 1);
    if (preempted.header()->completed_steps == before) {
      ++counts.stopped;
    } else {
      EXPECT_EQ(preempted.header()->completed_steps, before + 1);
    }
  }
  counts.steps = preempted.header()->completed_steps + 1;
  stop.store(0);
  EXPECT_EQ(job.run(counts.steps, stop).outcome, TrainingJob::Outcome::ReachedTarget);

  auto reference_model = make();
  Segment reference = make_segment(*reference_model);
  TrainingJob uninterrupted(*reference_model, config, reference.bytes, reference.header());
  std::atomic<std::uint32_t> never{0};
  EXPECT_EQ(uninterrupted.run(counts.steps, never).outcome, TrainingJob::Outcome::ReachedTarget);
  EXPECT_EQ(preempted.header()->completed_steps, reference.header()->completed_steps);
  EXPECT_EQ(preempted.header()->last_loss, reference.header()->last_loss);
  EXPECT_EQ(std::memcmp(preempted.bytes.data_ptr(), reference.bytes.data_ptr(),
                        static_cast<std::size_t>(reference.bytes.numel())),
            0)
      << "weights, statistics or momentum differ from the uninterrupted run";
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
  Segment paused = make_segment(model);
  TrainingJob job(model, config, paused.bytes, paused.header());
  std::atomic<std::uint32_t> stop{kStopNone};
  std::int64_t passed = 0;
  std::int64_t trip_at = -1;
  model.on_gate = [&] {
    if (passed++ == trip_at) stop.store(kStopPause);
  };
  for (auto& layer : model.layers()) {
    for (auto& t : layer.tensors) {
      if (t.requires_grad()) t.register_hook([&](torch::Tensor g) {
          if (passed++ == trip_at) stop.store(kStopPause);
          return g;
        });
    }
  }
  int pauses = 0;
  const std::int64_t per_step = 12;  // 4 gates, 8 parameter hooks
  auto pause = [&] {
    ++pauses;
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
  // A pause set at the last hook of a step is seen between steps: the job pauses there.
  EXPECT_GE(pauses, 1000);
  TinyModel reference_model(7);
  Segment reference = make_segment(reference_model);
  TrainingJob uninterrupted(reference_model, config, reference.bytes, reference.header());
  std::atomic<std::uint32_t> never{kStopNone};
  uninterrupted.run(step, never);
  EXPECT_EQ(paused.header()->completed_steps, step);
  EXPECT_EQ(std::memcmp(paused.bytes.data_ptr(), reference.bytes.data_ptr(), static_cast<std::size_t>(reference.bytes.numel())), 0);
}

TEST(TrainingJob, PreemptedResNet152LosesNothingBitForBit) {
  TrainingJobConfig config;
  config.batch = 2;
  config.input_size = 32;
  config.seed = 1;
  // On a real zoo model the stop comes from another thread at a random time within a step,
  // as the controller raises it: wherever the step is then, forward or backward.
  std::mt19937_64 random(5);
  double step_ms = 0;
  preempt_and_compare(
      [] { return exec::make_model("resnet152", 1); }, config, 12,
      [&](exec::ZooModel&, TrainingJob& job, std::atomic<std::uint32_t>& stop, std::int64_t target) {
        if (step_ms == 0) {  // time one complete step first
          const auto t0 = std::chrono::steady_clock::now();
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
        job.run(target, stop);
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
  Segment s = make_segment(model);
  const torch::Tensor before = s.bytes.clone();
  TrainingJobConfig config;
  config.input_size = 16;
  TrainingJob job(model, config, s.bytes, s.header());
  std::atomic<std::uint32_t> never{0};
  const auto r = job.run(5, never);
  EXPECT_EQ(r.completed_steps, 5);
  EXPECT_FALSE(torch::equal(before, s.bytes));
  // A stop raised before the run stops it between steps, with nothing done.
  std::atomic<std::uint32_t> stop{1};
  EXPECT_EQ(job.run(10, stop).outcome, TrainingJob::Outcome::Preempted);
  EXPECT_EQ(s.header()->completed_steps, 5);
}

// BERT-base has no buffers: its job once failed in psw serve on its first step (the saved
// statistics, a multi-tensor copy of no tensors: "Tensor list must have at least one tensor").
TEST(TrainingJob, AModelWithoutBuffersTrainsAndIsPreemptedWithoutLoss) {
  TinyModel model(7, /*batch_norm=*/false);
  Segment s = make_segment(model);
  const torch::Tensor before = s.bytes.clone();
  TrainingJobConfig config;
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
  Segment s = make_segment(model);
  s.header()->fingerprint ^= 1;
  TrainingJobConfig config;
  EXPECT_THROW(TrainingJob(model, config, s.bytes, s.header()), InputError);
}

}  // namespace
}  // namespace psw::runtime
