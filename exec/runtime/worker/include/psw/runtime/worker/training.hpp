#pragma once
// A real training job that loses nothing when preempted (DESIGN.md §5).
//
// Note [Training state]: the job's weights, BatchNorm statistics, momentum buffers and step
// counter live in the memory daemon's memory, not in the worker: a worker that is preempted,
// replaced or killed leaves them where the next worker finds them. The state is one device
// region, | weights (packed) | momentum (same layout) |, and the header (completed steps,
// last loss) is a small shared host segment the controller reads for progress.
//
// Note [Preemption without loss]: a step is SGD with momentum on seeded synthetic data (the
// data of step s depends only on the seed and s). The step can be stopped at any layer
// boundary of its forward (the zoo's gates) or its backward (a hook on each parameter's
// gradient), in one of two ways:
//  - paused in place (kStopPause): the step waits at the boundary with its activations in
//    device memory, and goes on from there when resumed; nothing is recomputed, so nothing
//    can differ. The runtime pauses whenever another worker can serve the request.
//  - abandoned (kStopAbort, or a pause with nowhere to wait): the step leaves no trace: the
//    BatchNorm statistics it updated are put back from a copy taken at its start, its
//    gradients are dropped, and the job resumes later from its last completed step.
// Either way the weights and momentum are only written after a complete backward, in an
// update that is never abandoned: it may pause in place between its three multi-tensor
// operations (so that a request does not wait for the whole update), and an abort arriving
// during it takes effect once it is complete. So a job stopped any number of times at any points
// reaches, step for step, the same bytes as an uninterrupted run (bit for bit on the CPU; on
// a GPU as far as its kernels are deterministic).

#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>

#include <torch/torch.h>

#include "psw/common/serve_config.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/runtime/ipc/ipc.hpp"

namespace psw::runtime {


class TrainingJob {
 public:
  // Bytes of the state for `model` (weights, momentum).
  static Bytes state_bytes(exec::ZooModel& model);
  // The daemon's part: writes `model`'s current (seeded) weights and zero momentum into
  // `state` (uint8, state_bytes, any device) and a zero step count into `header`.
  static void initialize(exec::ZooModel& model, const torch::Tensor& state, TrainingHeader* header);

  // Binds `model`'s tensors to the weights in `state` (uint8, on the model's device: host
  // memory shared with the daemon, or device memory imported from it); `header` is the shared
  // header (the step count survives this object).
  TrainingJob(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
              TrainingHeader* header);

  enum class Outcome { ReachedTarget, Preempted };
  struct Result {
    Outcome outcome;
    std::int64_t completed_steps;
    double last_loss;
  };
  // Runs steps until `target_steps` are complete (0: no target) or `stop` is non-zero at a
  // layer boundary or between steps (Note [Preemption without loss]). `on_step` (optional)
  // after each completed step; it returns false to stop there (reported as Preempted).
  // At a boundary where `stop` is kStopPause, `pause` (when given) waits there and returns true
  // to go on, false to abandon the step; without it a pause abandons the step.
  Result run(std::int64_t target_steps, const std::atomic<std::uint32_t>& stop,
             const std::function<bool(std::int64_t step, double loss)>& on_step = {},
             const std::function<bool()>& pause = {});
  // Called at every layer boundary before the stop flag is read (the worker bounds how far
  // the host runs ahead of the device there: Note [Bounded lookahead] in exec/backend.hpp).
  void set_boundary_hook(std::function<void()> hook) { boundary_hook_ = std::move(hook); }

  // InputError unless `config` can train `model` (its input size within the model's).
  static void check_config(exec::ZooModel& model, const TrainingJobConfig& config);

  // The input of step `step`: one of kDataPool seeded inputs made once on the job's device (it
  // depends only on the config's seed and step % kDataPool), so a step spends no host time on
  // its data and a preemption is never held up by it.
  static constexpr std::int64_t kDataPool = 8;
  torch::Tensor input_of_step(std::int64_t step) const;
  const TrainingHeader& header() const { return *header_; }

 private:
  struct Preempted : std::runtime_error {
    Preempted() : std::runtime_error("training preempted at a layer boundary") {}
  };
  exec::ZooModel& model_;
  TrainingJobConfig config_;
  TrainingHeader* header_;
  torch::Device device_;
  std::vector<torch::Tensor> parameters_;  // that train (gradients)
  std::vector<torch::Tensor> momentum_;    // one per parameter, in the segment
  std::vector<torch::Tensor> buffers_;     // BatchNorm statistics: put back after a stopped step
  std::vector<torch::Tensor> float_buffers_;  // the floating ones (one multi-tensor copy)
  std::vector<torch::Tensor> other_buffers_;
  std::vector<torch::Tensor> data_;        // the data pool
  // At a layer boundary: the hook, then stop or pause as the flag says (throws Preempted).
  void boundary();
  const std::atomic<std::uint32_t>* stop_ = nullptr;
  std::function<bool()> pause_;
  std::function<void()> boundary_hook_;
};

}  // namespace psw::runtime
