#pragma once
// ModelProfile: one model at one batch size and dtype, as the ordered list of its layers.
//
// A layer is the unit of transfer and of gating: a module that owns parameters or
// buffers. Parameterless operations (ReLU, pooling, residual adds, attention score
// matmuls) are folded into a neighbouring layer's costs by whoever writes the profile.
//
// Costs come in one of two forms, said by `source.kind`:
//  - analytic: FLOPs and memory traffic per layer; times come from a HardwareProfile's
//    compute model (see cost_model.hpp);
//  - measured: forward and backward times per layer, measured on `source.device`.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "psw/common/units.hpp"

namespace psw {

enum class ProfileSource { Analytic, Measured };

std::string to_string(ProfileSource source);

// Where a profile's numbers come from. For measured profiles, the device and versions
// they were measured with; for analytic ones, a note on the model used.
struct SourceInfo {
  ProfileSource kind = ProfileSource::Analytic;
  std::string note;
  std::string device;    // measured: the GPU
  std::string date;      // measured: ISO date
  std::string versions;  // measured: driver, CUDA, LibTorch
};

struct LayerProfile {
  std::string name;
  std::string kind;        // conv, bn, linear, embedding, layernorm, ...
  Bytes param_bytes = 0;   // parameters plus buffers
  Bytes activation_bytes = 0;  // output activation, what training keeps for backward
  bool training_only = false;  // runs only in training (Inception-v3's auxiliary head)
  // Bytes of its parameters one forward reads when the layer stays in pinned host memory and
  // the GPU reads it in place (an embedding fetches one row per token); 0: the layer is never
  // read in place (DESIGN.md §3 placement, Note [Placement] in placement.hpp).
  Bytes host_read_bytes = 0;

  // Analytic costs (source: analytic).
  std::int64_t forward_flops = 0;
  Bytes forward_memory_bytes = 0;
  std::int64_t backward_flops = 0;
  Bytes backward_memory_bytes = 0;

  // Measured costs (source: measured).
  std::optional<Duration> forward_time;
  std::optional<Duration> backward_time;
};

// Note [Prefill curve]
// ~~~~~~~~~~~~~~~~~~~~
// A decoder's forward is the prefill of a prompt (Note [Decoder in the pipeline] in
// exec/decoder.hpp), whose cost grows with the prompt's length while its bytes do not. Its
// profile's per-layer times are for one prompt length (`prompt_tokens`); the prefill curve is
// the whole resident forward measured at several lengths, that one among them (`psw profile
// --prefill-tokens`). A prompt of T tokens then costs every layer its profiled time times
// prefill_scale(T) = curve(T) / curve(prompt_tokens), the curve linear between its points,
// flat below the first (a short prompt's prefill reads all the weights anyway) and extended
// with the last segment's slope above the last. A switch's transfers do not change with T.
// Note [Decode in the simulator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A generate request answers with its first token after the prefill, then holds its worker for
// one decode step per further token: each step reads every weight once for a handful of
// activations, so its time is the model's, nearly whatever the prompt (at the contexts the
// traces hold, a few thousand positions, the KV cache's reads are a small part of the weights').
// A decoder's profile may carry `decode_step` (`psw profile --decode-tokens N`: the median of N
// resident greedy steps after a prompt of prompt_tokens, at batch 1); a workload whose requests
// decode (the Azure LLM 2023 trace's GeneratedTokens, `decode: true`) costs a request its prefill
// plus decode_tokens x decode_step, and its latency is the last token's, its time to first token
// recorded beside it. A switch's transfers do not change.
struct PrefillPoint {
  std::int64_t tokens = 0;
  Duration forward;  // the whole resident forward at a prompt of `tokens`
};

struct ModelProfile {
  std::string name;
  int batch = 0;
  std::string dtype;
  SourceInfo source;
  std::vector<LayerProfile> layers;
  // Decoders: the prompt length the layers' forward times are for (0 for other models), and
  // Note [Prefill curve] (empty: every prompt costs what `prompt_tokens` does).
  std::int64_t prompt_tokens = 0;
  std::vector<PrefillPoint> prefill_curve;
  // Decoders: one resident decode step (Note [Decode in the simulator]); nullopt: not measured.
  std::optional<Duration> decode_step;

  Bytes total_param_bytes() const;
  std::size_t num_layers() const { return layers.size(); }
};

// Note [Prefill curve]: the factor on the profile's forward times for a prompt of `tokens`; 1
// for tokens 0 (the profile's own prompt) and for a profile without a curve.
double prefill_scale(const ModelProfile& model, std::int64_t tokens);
double prefill_scale(std::int64_t prompt_tokens, const std::vector<PrefillPoint>& curve, std::int64_t tokens);

// What the switched-in task does with the model.
enum class Task { Inference, Training };

std::string to_string(Task task);
Task parse_task(const std::string& text);  // throws InputError

}  // namespace psw
