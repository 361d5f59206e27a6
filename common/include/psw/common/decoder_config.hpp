#pragma once
// The size of a decoder-only transformer of the Llama architecture (the zoo's LLM family,
// exec/src/models/llama.cpp), read from YAML (configs/zoo/*.yaml), strictly (config.hpp's
// rules):
//
//   name: llama-8b              # the model's name in profiles and plans
//   architecture: llama         # the only family today
//   layers: 32                  # decoder layers
//   hidden: 4096                # model width
//   heads: 32                   # query heads; hidden must be a multiple
//   kv_heads: 8                 # key/value heads (grouped-query attention); divides heads
//   intermediate: 14336         # SwiGLU MLP width
//   vocabulary: 128256
//   tie_embeddings: false       # true: the head reuses the token embedding (no lm_head)
//   rope_theta: 500000          # rotary position embedding base
//   rope_scaling:               # optional: Llama 3.1's long-context frequencies (Note [Rope scaling])
//     type: llama3              # Hugging Face's rope_type; the only one today
//     factor: 8
//     low_freq_factor: 1
//     high_freq_factor: 4
//     original_max_positions: 8192   # HF's original_max_position_embeddings
//   rms_norm_eps: 1.0e-5
//   max_positions: 8192         # the longest sequence (prompt + decoded) a KV cache holds
//
// Parameter names follow Hugging Face's LlamaForCausalLM (model.embed_tokens.weight,
// model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight), so a
// safetensors file exported from it loads by name (exec/weights.hpp).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace psw {

// Note [Rope scaling]
// ~~~~~~~~~~~~~~~~~~~
// Llama 3.1 and 3.2 checkpoints were trained with rotary frequencies rescaled for long contexts
// (Hugging Face's rope_type "llama3"); a model built without it computes other attention
// scores from the same weights. Each rotary frequency f has a wavelength 2 pi / f, compared with
// the pretraining context L = original_max_positions:
//   wavelength < L / high_freq_factor   (high frequencies): f, unchanged;
//   wavelength > L / low_freq_factor    (low frequencies):  f / factor;
//   in between: ((1 - s) / factor + s) * f with s = (L / wavelength - low_freq_factor) /
//               (high_freq_factor - low_freq_factor), which joins the two bands.
// The decoder computes it with Hugging Face's operations, in fp32
// (exec::rope_inverse_frequencies); the attention is not rescaled (llama3's attention factor is 1).
struct RopeScaling {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_positions = 8192;
};

struct DecoderConfig {
  std::string name;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t intermediate = 0;
  std::int64_t vocabulary = 0;
  bool tie_embeddings = false;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;  // Note [Rope scaling]; none: the plain frequencies
  double rms_norm_eps = 1e-5;
  std::int64_t max_positions = 2048;

  std::int64_t head_dim() const { return hidden / heads; }
  // Parameters (weights; a decoder has no buffers): what a switch moves, times the dtype's size.
  std::int64_t parameter_count() const;
};

// InputError naming the file, line and key for a missing, unknown or out-of-range key, and
// for sizes that do not fit together (hidden not a multiple of heads, heads not a multiple
// of kv_heads, an odd head dimension, which rotary embeddings need even), and for a rope
// scaling of another type or whose high_freq_factor is not above its low_freq_factor.
DecoderConfig parse_decoder_config(const std::string& text, const std::string& origin);
DecoderConfig load_decoder_config(const std::filesystem::path& path);

}  // namespace psw
