// Note [Preemption without loss] on the GPU (label gpu): with cuDNN's deterministic algorithms,
// a ResNet-152 job paused in place and abandoned at random moments reaches the bytes of an
// uninterrupted run; and so does a second uninterrupted run (else the comparison would mean
// nothing).
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <random>
#include <thread>

#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/runtime/worker/training.hpp"

namespace psw::runtime {
namespace {

struct Job {
  std::unique_ptr<exec::ZooModel> model;
  torch::Tensor state;
  TrainingHeader header{};
  std::unique_ptr<TrainingJob> job;
};

Job make_job(exec::Backend& backend, const TrainingJobConfig& config) {
  Job j;
  auto initial = exec::make_model("resnet152", config.seed);
  j.state = backend.allocate_device(TrainingJob::state_bytes(*initial, config));
  TrainingJob::initialize(*initial, config, j.state, &j.header);
  j.model = exec::make_model("resnet152", 0);
  j.model->to(backend.device());
  j.job = std::make_unique<TrainingJob>(*j.model, config, j.state, &j.header);
  j.job->set_boundary_hook([&backend] { backend.throttle(16); });
  j.job->set_device_fence([&backend] { backend.synchronize(); });
  return j;
}

TEST(CudaTraining, PausedAndAbandonedStepsLoseNothingBitForBit) {
  at::globalContext().setBenchmarkCuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
  auto backend = exec::make_backend("cuda");
  TrainingJobConfig config;
  config.batch = 8;
  config.input_size = 64;
  config.seed = 1;
  constexpr std::int64_t kSteps = 12;
  std::atomic<std::uint32_t> never{kStopNone};
  Job first = make_job(*backend, config);
  first.job->run(kSteps, never);
  backend->synchronize();
  Job second = make_job(*backend, config);
  second.job->run(kSteps, never);
  backend->synchronize();
  const bool deterministic = torch::equal(TrainingJob::committed_state(first.state, first.header),
                                          TrainingJob::committed_state(second.state, second.header));
  EXPECT_TRUE(deterministic) << "two uninterrupted runs differ: some kernel is not deterministic";

  Job stopped = make_job(*backend, config);
  std::atomic<std::uint32_t> stop{kStopNone};
  std::mt19937_64 random(3);
  int pauses = 0;
  int abandoned = 0;
  auto pause = [&] {
    ++pauses;
    backend->synchronize();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop.store(kStopNone);
    return true;
  };
  // One step at a time, each with a stop at a random moment in it (or just after it).
  for (int attempt = 0; committed_steps(stopped.header) < kSteps; ++attempt) {
    const bool abandon = attempt % 2 == 1 && abandoned < 10;
    const auto delay = std::chrono::microseconds(std::uniform_int_distribution<int>(100, 15'000)(random));
    std::thread stopper([&stop, delay, abandon] {
      std::this_thread::sleep_for(delay);
      stop.store(abandon ? kStopAbort : kStopPause);
    });
    const TrainingJob::Result r = stopped.job->run(committed_steps(stopped.header) + 1, stop, {}, pause);
    stopper.join();
    if (r.outcome == TrainingJob::Outcome::Preempted) ++abandoned;
    stop.store(kStopNone);
  }
  backend->synchronize();
  EXPECT_GT(pauses, 0);
  EXPECT_GT(abandoned, 0);
  EXPECT_EQ(committed_steps(stopped.header), kSteps);
  EXPECT_EQ(committed_loss(stopped.header), committed_loss(first.header));
  EXPECT_TRUE(torch::equal(TrainingJob::committed_state(stopped.state, stopped.header),
                           TrainingJob::committed_state(first.state, first.header)))
      << pauses << " pauses and " << abandoned << " abandoned steps changed the weights or momentum"
      << (deterministic ? "" : " (but two uninterrupted runs differ too)");
}

}  // namespace
}  // namespace psw::runtime
