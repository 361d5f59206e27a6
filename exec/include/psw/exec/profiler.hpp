#pragma once
// The profiler: per-layer forward (and backward) times of a zoo model on a backend, and the
// host-to-device link, as measured profiles (DESIGN.md §5, `psw profile`).
//
// Note [Mark overhead]: a layer's time is the interval between timestamps recorded on the
// compute stream at its boundaries. Each record costs the stream a little (a few µs per record
// inside a CUDA graph on the H200: ResNet-152's 311 records added 0.9 ms to a 4.0 ms forward),
// so summed per-layer times overstate the forward. The profiler therefore also times the same
// work with no per-layer records (only its two ends) and removes the difference: an equal cost
// per record is subtracted from every layer (no layer below zero), and the result is scaled to
// sum to the uninstrumented time exactly. Both raw and uninstrumented totals are reported.

#include <vector>

#include "psw/common/link_fit.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec {

// The layers of the live model as a profile to fill with measured times: names, kinds and
// bytes of its layers (no FLOPs), the batch of `input`, the dtype of its parameters; a token
// embedding's host_read_bytes is one row per input token (what a forward reads when the table
// stays in pinned host memory; none for a tied decoder, whose head reads the whole table).
// For models without a shipped analytic profile (the decoders).
ModelProfile profile_skeleton(ZooModel& model, const torch::Tensor& input);

// Per-layer times of one phase (forward or backward) of a profiled model.
struct PhaseTimes {
  std::vector<Duration> per_layer;  // after Note [Mark overhead]; sums to `total`
  Duration total;                   // median of the phase timed without per-layer records
  Duration instrumented;            // median of the phase timed with them (sum of raw times)
};

struct TrainingTimes {
  PhaseTimes forward;   // the training forward (train mode, every layer, the loss)
  PhaseTimes backward;  // loss.backward(), attributed to layers as described below
};

// Note [Mark overhead]: the raw per-layer times, how many timestamp records each layer's
// interval contains, and the phase timed without them: the calibrated per-layer times.
// Throws InputError when the lengths differ or a value is negative.
std::vector<Duration> remove_mark_overhead(const std::vector<Duration>& raw, const std::vector<int>& records,
                                           Duration uninstrumented);

// Median per-layer inference forward time over `repeats` runs with the model resident (its
// tensors on the backend's device). A layer's time runs from its gate to the next running
// layer's gate, so parameterless operations fold into the layer before them, as in the
// analytic profiles. Layers that do not run (training_only in inference) get zero. On a
// backend with graphs, the timed forward is a replayed graph, so host dispatch is not counted.
PhaseTimes profile_forward(Backend& backend, ZooModel& model, const torch::Tensor& input, int repeats);

// Note [Prefill curve] (model_profile.hpp): a decoder's whole resident forward at each prompt
// length of `tokens` (seeded prompts of `batch` sequences, the model on the backend's device),
// as profile_forward's uninstrumented total, in increasing length (duplicates once).
// InputError for a model that is not a decoder and for a length outside its positions.
std::vector<PrefillPoint> profile_prefill_curve(Backend& backend, ZooModel& model, int batch,
                                                std::vector<std::int64_t> tokens, int repeats);

// Note [Decode in the simulator] (model_profile.hpp): one resident greedy decode step of a decoder
// at batch `batch`, after a seeded prompt of `prompt_tokens`: the median of `tokens` steps (one
// untimed step first), each between two device synchronisations. InputError for a model that
// is not a decoder, tokens < 1, or a prompt and steps beyond its positions.
Duration profile_decode_step(Backend& backend, ZooModel& model, int batch, std::int64_t prompt_tokens, int tokens);

// One training iteration's forward (training_loss) and backward (loss.backward()), per layer,
// median over `repeats` (replayed graphs where the backend has them). Backward: a hook on
// every parameter records when its gradient is ready; layers are ordered by that time and
// each gets the interval since the previous layer's gradients were ready (the first since the
// backward began, the last also the rest of the backward), so the parameterless operations
// between two layers fold into the later-finishing one, and the times sum to the backward.
// With `use_graphs` false (or a backend without graphs) the iteration runs eagerly, and the
// times include whatever host dispatch leaves the device idle.
TrainingTimes profile_training(Backend& backend, ZooModel& model, const torch::Tensor& input, int repeats,
                               bool use_graphs = true);

// Copies of 4 KiB, 16 KiB, ..., up to `max_bytes` (x4 steps), `repeats` each, median. Copies
// below 16 MiB are timed in runs of back-to-back copies (up to 64; 16 MiB per run), as a
// switch queues its groups: what one more group costs the copy stream, not the latency of
// a lone copy (which includes launch and completion that a queue overlaps).
std::vector<CopySample> profile_link(Backend& backend, bool pinned, Bytes max_bytes, int repeats);
// In-place reads of pinned host memory by a kernel, same sizes (the mapped link of placement).
std::vector<CopySample> profile_mapped_reads(Backend& backend, Bytes max_bytes, int repeats);

}  // namespace psw::exec
