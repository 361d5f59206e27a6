#pragma once
// A real training job that loses nothing when preempted or killed (DESIGN.md §5).
//
// Note [Training objective]: the job learns a fixed labelled set: kDataPool batches of seeded
// inputs (the model's example inputs at the config's batch and input size), each sample with a
// seeded label in [0, classes), where classes is the width of the model's output; or the user's
// set (training.dataset: a safetensors file of `inputs`, N samples, and `labels`, N class
// indices), of which step s takes samples s * batch .. s * batch + batch - 1, modulo N. The loss is
// the cross-entropy of the output against the labels (plus 0.4 x that of Inception-v3's
// auxiliary logits, torchvision's recipe); for BERT-base, whose zoo model ends at the pooler,
// the 768 pooled features serve as the logits. The optimizer is SGD with momentum (dampening 0,
// as torch.optim.SGD) or Adam (betas 0.9 and 0.999, eps 1e-8, torch.optim.Adam's update), both
// in multi-tensor kernels. The set is small, so the loss goes down as the model learns it (the
// tests require it to). (An earlier surrogate objective, the mean square of the outputs,
// diverged with SGD at lr 0.01: 0.45 at step 13, 3-19 by step 157; it still serves the profiler,
// whose backward costs the same.)
//
// Note [Training state]: the job's weights, BatchNorm statistics, optimizer state and step
// counter live in the memory daemon's memory, not in the worker: a worker that is preempted,
// replaced or killed leaves them where the next worker finds them. The state is one device
// region of two slots (Note [Committed slot]), each | weights (packed, BatchNorm statistics
// included) | optimizer state (momentum, or Adam's two moments, in the weights' layout) |; the
// header (completed steps, losses) is a small shared host segment the controller reads.
//
// Note [Committed slot]: the state after k completed steps is in slot k % 2, and the header's
// completed_steps is the commit. Step k + 1 copies slot k % 2 into slot (k + 1) % 2, binds the
// model and the optimizer to that copy, and runs there (the forward's BatchNorm statistics, the
// backward, the update); then the device is synchronised, the step's loss written, and
// completed_steps set to k + 1 in one store. Until that store nothing has touched slot k % 2, so a
// process killed at any point of a step (forward, backward, any operation of the update, the
// commit's own wait) leaves the job at step k with its statistics and optimizer state whole; after
// it, at step k + 1. A worker that dies leaves nothing to undo, which a restore in the dying
// process (the design before this one) could not promise. The copy costs one device-to-device
// copy of the slot per step (0.5 GB for ResNet-152 with momentum: a fraction of a millisecond at
// the H200's bandwidth, an estimate); the job ran at 21 steps/s on the H200 with it
// (results/gpu/2026-12-05-h200-serve-slots.md).
//
// Note [Preemption without loss]: the data of step s depends only on the seed and s, so a step
// can be stopped at any layer boundary of its forward (the zoo's gates) or its backward (a hook
// on each parameter's gradient), in one of two ways:
//  - paused in place (kStopPause): the step waits at the boundary with its activations in
//    device memory, and goes on from there when resumed; nothing is recomputed, so nothing
//    can differ. The runtime pauses whenever another worker can serve the request.
//  - abandoned (kStopAbort, or a pause with nowhere to wait): the step's gradients are dropped
//    and the job resumes later from its last completed step, whose slot the step never wrote
//    (Note [Committed slot]).
// The update may pause in place between its operations and their pieces (Note [Update in
// pieces]; so that a request does not wait for the whole update), and an abort arriving during
// it takes effect once the step is committed (the update is a few ms; discarding it would lose
// the step). So a job stopped or killed any number of times at any points reaches, step for step,
// the same bytes as an uninterrupted run (bit for bit on the CPU; on a GPU as far as its kernels
// are deterministic).
//
// Note [Update in pieces]: a stop read inside the update waits for the device to finish what
// the host queued before it (the drain, Note [Preemption phases]), and the host's own wait there
// (the lookahead's bound) counts whole operations. Each of the update's multi-tensor operations
// reads and writes every parameter (ResNet-152's 240 MB: a fraction of a millisecond each on an
// H100), so with a pause point only between whole operations a stop read in the update took about
// 1 ms, against 0.1 ms in the forward and the backward, and made the preemption's p99
// (results/gpu/2026-12-07-h100-serving.md). So each operation of the update now runs on pieces of
// consecutive parameters of at most `training.update_piece_mib` (16 MiB unless the config says;
// one piece for a model smaller than that; 0: whole operations as before), with a
// pause point and the lookahead's bound between pieces as between operations; the step's copy of
// its slot runs in pieces of that size too, the stop read between them (the slot copy is the
// step's other long stretch of device work without a boundary: half a GB for ResNet-152 with
// momentum). Every element sees the same operations in the same order, so the bytes are the same.
// Side by side on one H100 (results/gpu/2026-12-07-h100-pieces.md) the stops read in
// ResNet-152's update took p50 0.81 ms with whole operations, 0.18 ms with 16 MiB pieces and
// 0.26 ms with 64; the job's rate alone showed no cost of the extra launches (26.4, 30.9 and 31.2
// steps/s in that order: it moved more between servers than any cost of the pieces).

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include <torch/torch.h>

#include "psw/common/serve_config.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/torchscript.hpp"
#include "psw/runtime/ipc/ipc.hpp"
#include "psw/runtime/ipc/request_phases.hpp"

namespace psw::runtime {


// Note [Training checkpoint]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The job's committed state (Note [Committed slot]) as a safetensors file: every tensor of the
// model by the zoo's names (LAYER.TENSOR, as exec/weights.hpp's weight_names gives them;
// BatchNorm statistics included), the optimizer's buffers as "optimizer.momentum_buffer.NAME" (SGD) or
// "optimizer.exp_avg.NAME" and "optimizer.exp_avg_sq.NAME" (Adam), torch.optim's names, and
// in the metadata the format, the model, the optimizer, the job's fingerprint, the completed
// steps and the last step's loss. Resuming from it (training.resume_from) puts the state back in
// the slot of its step count with that count committed: the data of a step depends only on the
// seed and the step, so a job checkpointed at step k and resumed runs, step for step, as the
// uninterrupted job (bit for bit on the CPU). A file of another model or optimizer, or one whose
// tensors do not match the job's, is refused naming what differs.
//
// The state is read while the job may run: the committed slot is not written until the next
// commit and the step after it, so the read is retried until the commit count did not move
// during it.
struct TrainingCheckpoint {
  std::int64_t completed_steps = 0;
  double loss = 0;
  Bytes bytes = 0;  // of the file
};
constexpr const char* kTrainingCheckpointFormat = "psw-training-checkpoint-1";

// A TorchScript model's inputs (Note [Several inputs]) at `batch`: the config's samples with the
// batch first; named when there are several (their order is the forward's).
std::vector<exec::InputSpec> torchscript_input_specs(const std::vector<TorchScriptInput>& inputs, int batch);

// The job's model: the zoo's, seeded with `seed`, or the user's TorchScript module (Note
// [TorchScript training]: config.torchscript_file, its own weights).
std::unique_ptr<exec::ZooModel> make_training_model(const TrainingJobConfig& config, std::uint64_t seed);

class TrainingJob {
 public:
  // Note [Training checkpoint]: writes the committed state of `state` (as initialize and the job
  // lay it out for `model` and `config`) to `path`, through a temporary file renamed into place.
  // InputError when the file cannot be written.
  static TrainingCheckpoint save_checkpoint(exec::ZooModel& model, const TrainingJobConfig& config,
                                            const torch::Tensor& state, const TrainingHeader& header,
                                            const std::filesystem::path& path);
  // Bytes of the state for `model` trained as `config` says: two slots (Note [Committed slot]).
  static Bytes state_bytes(exec::ZooModel& model, const TrainingJobConfig& config);
  // The daemon's part: writes `model`'s current (seeded) weights and a zero optimizer state into
  // slot 0 of `state` (uint8, state_bytes, any device) and zero completed steps into `header`;
  // or, with config.resume_from, the checkpoint's state and step count (Note [Training
  // checkpoint]; InputError for a file that does not fit the job).
  static void initialize(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
                         TrainingHeader* header);
  // The slot of `state` that holds the job's state after the header's completed steps: what a
  // resumed job starts from, and what tests compare (the other slot holds a step in flight or an
  // older one).
  static torch::Tensor committed_state(const torch::Tensor& state, const TrainingHeader& header);

  // Binds `model`'s tensors to the state in `state` (uint8, on the model's device: host memory
  // shared with the daemon, or device memory imported from it); `header` is the shared header
  // (the step count survives this object). InputError for a state of another model or optimizer.
  TrainingJob(exec::ZooModel& model, const TrainingJobConfig& config, const torch::Tensor& state,
              TrainingHeader* header);

  // Note [Rehearsal]: one step (forward, backward, update) run on `scratch` (uint8, at least
  // slot_bytes(), on the job's device: a copy of the committed slot is made there), before the
  // job's first step, so that the first step pays none of a process's first-use costs. The
  // state is not touched; the model is bound to the committed slot again after it.
  void rehearse(const torch::Tensor& scratch);
  // The bytes of one slot: the weights and the optimizer's buffers.
  Bytes slot_bytes() const { return slots_[0].bytes.numel(); }

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
  // the host runs ahead of the device there: Note [Bounded lookahead] in exec/backend.hpp), and
  // at the step's other points a process may die at: the slot copied, each operation of the
  // update, the commit about to be made (tests take what a killed process would leave there).
  void set_boundary_hook(std::function<void()> hook) { boundary_hook_ = std::move(hook); }
  // Waits until the device has done the work queued so far (Note [Committed slot]: the commit
  // follows it). Needed where the device runs asynchronously (cuda); the host's work is done
  // when its call returns.
  void set_device_fence(std::function<void()> fence) { device_fence_ = std::move(fence); }

  // InputError unless `config` can train `model`: its input size within the model's; a dataset
  // whose inputs are samples of the model's input at that size (dtype and shape) and whose labels
  // are N class indices within the model's output (found by a forward of one sample).
  static void check_config(exec::ZooModel& model, const TrainingJobConfig& config);

  // The input of step `step`: one of kDataPool seeded inputs made once on the job's device (it
  // depends only on the config's seed and step % kDataPool), so a step spends no host time on
  // its data and a preemption is never held up by it. Its labels: labels_of_step.
  static constexpr std::int64_t kDataPool = 8;
  torch::Tensor input_of_step(std::int64_t step) const;
  // Seeded labels in [0, classes) of step `step`'s batch (Note [Training objective]).
  torch::Tensor labels_of_step(std::int64_t step, std::int64_t classes) const;
  const TrainingHeader& header() const { return *header_; }
  // The last time the job read a non-zero stop flag (Note [Preemption phases]): where in the step
  // and when (monotonic_ns, the host's steady clock); `ns` 0 before any.
  struct StopSeen {
    TrainingBoundary where = TrainingBoundary::StepStart;
    std::int64_t ns = 0;
  };
  const StopSeen& stop_seen() const { return stop_seen_; }
  // Note [Update in pieces]: the most bytes of parameters an update operation works on between
  // two pause points, and of the slot copied between two stop reads (config.update_piece_mib;
  // 0: no limit); how many pieces the parameters make.
  Bytes piece_bytes() const { return piece_bytes_; }
  std::size_t update_pieces() const { return update_pieces_.size(); }

 private:
  struct Preempted : std::runtime_error {
    Preempted() : std::runtime_error("training preempted at a layer boundary") {}
  };
  // The state of one slot, as views of the region.
  struct Slot {
    torch::Tensor bytes;                             // the whole slot
    std::vector<torch::Tensor> tensors;              // per model tensor (layers' order)
    std::vector<std::vector<torch::Tensor>> moments; // per optimizer buffer, per trained parameter
  };
  // The slot's views over `bytes` (slot_bytes() of them): the model's tensors and the moments.
  Slot view_slot(const torch::Tensor& bytes) const;
  void bind(int slot);
  // The forward and backward of step `step` on the bound slot (gradients in the parameters),
  // with a layer boundary at each layer of the forward; the loss.
  double forward_backward(std::int64_t step);
  void update(std::int64_t step);
  void commit(std::int64_t steps, double loss);
  exec::ZooModel& model_;
  TrainingJobConfig config_;
  TrainingHeader* header_;
  torch::Device device_;
  std::vector<torch::Tensor> model_tensors_;  // every tensor of the model, bound to a slot
  std::vector<torch::Tensor> parameters_;     // those that train (gradients)
  // Note [Update in pieces]: ranges [first, second) of parameters_, in order, covering it.
  std::vector<std::pair<std::size_t, std::size_t>> update_pieces_;
  Bytes piece_bytes_;
  std::vector<Bytes> tensor_offsets_;  // per model tensor, its offset in a slot's weights
  Bytes weights_bytes_ = 0;
  // The two slots of Note [Committed slot], and the rehearsal's scratch (Note [Rehearsal]).
  static constexpr int kScratchSlot = 2;
  Slot slots_[3];
  int bound_slot_ = -1;
  std::vector<torch::Tensor> data_;           // the data pool (the seeded set)
  torch::Tensor dataset_inputs_;              // the user's set (training.dataset), on the device
  torch::Tensor dataset_labels_;
  mutable std::vector<torch::Tensor> labels_;  // per pool entry, made at the first step
  mutable std::int64_t label_classes_ = 0;     // the output width they were made for
  // At a layer boundary: the hook, then stop or pause as the flag says (throws Preempted).
  void boundary(TrainingBoundary where);
  // The stop flag as read at `where`, noted in stop_seen_ when it is set.
  std::uint32_t read_stop(TrainingBoundary where);
  void crash_point() const {
    if (boundary_hook_) boundary_hook_();
  }
  const std::atomic<std::uint32_t>* stop_ = nullptr;
  std::function<bool()> pause_;
  std::function<void()> boundary_hook_;
  std::function<void()> device_fence_;
  StopSeen stop_seen_;
};

}  // namespace psw::runtime
