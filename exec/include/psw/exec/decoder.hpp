#pragma once
// The zoo's decoder-only transformers (Llama architecture, sized by configs/zoo/*.yaml) as a
// ZooModel that also prefills a prompt and decodes token by token with a KV cache.
//
// Note [Decoder in the pipeline]: as a ZooModel, a decoder's forward() is the prefill of a
// prompt (token ids N x T, int64) without a cache, returning the logits of the prompt's last
// position (N x vocabulary): the first generated token is their argmax. So a cold switch of a
// decoder through the pipeline engine ends at the first token, and its latency is the time to
// first token (TTFT); every layer is gated as in the other models (the token embedding, per
// decoder layer its two RMSNorms, q/k/v/o projections and gate/up/down projections, the final
// norm and, untied, the head). Decoding after the prefill uses the Decoder interface below:
// the parameters are resident by then, so it is the resident model's decode.
//
// The KV cache is allocated once per (batch, capacity) and reused: prefill resets and fills
// it, decode appends. Attention is written out (matmul, causal mask, softmax in fp32 as
// Hugging Face's eager LlamaAttention does), so that LibTorch 1.13 runs it too.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "psw/common/decoder_config.hpp"
#include "psw/common/units.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec {

class Backend;  // backend.hpp

// Keys and values of every layer for `batch` sequences of up to `capacity` positions, in one
// tensor of layers x 2 x batch x kv_heads x capacity x head_dim on the model's device.
class KvCache {
 public:
  explicit KvCache(torch::Tensor storage);

  std::int64_t length() const { return length_; }  // positions filled
  std::int64_t capacity() const { return storage_.size(4); }
  std::int64_t batch() const { return storage_.size(2); }
  const torch::Tensor& storage() const { return storage_; }

  void reset() { length_ = 0; }
  // Writes the keys and values (N x kv_heads x T x head_dim) of positions [length, length + T)
  // of `layer`; advance(T) after every layer has written.
  void write(std::int64_t layer, const torch::Tensor& keys, const torch::Tensor& values);
  // The same for one position held on the device (Note [Decode graph]), the length untouched.
  void write_at(std::int64_t layer, const torch::Tensor& position, const torch::Tensor& keys,
                const torch::Tensor& values);
  void advance(std::int64_t positions);
  // Positions [0, upto) of `layer`.
  torch::Tensor keys(std::int64_t layer, std::int64_t upto) const;
  torch::Tensor values(std::int64_t layer, std::int64_t upto) const;

 private:
  torch::Tensor storage_;
  std::int64_t length_ = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual const DecoderConfig& config() const = 0;
  // A zeroed cache on the model's device in the model's dtype. InputError for a batch below 1
  // or a capacity outside [1, max_positions].
  virtual KvCache make_cache(int batch, std::int64_t capacity) const = 0;
  // A seeded prompt of token ids N x length in [0, vocabulary), on the CPU.
  virtual torch::Tensor example_tokens(int batch, std::int64_t length, std::uint64_t seed) const = 0;
  // Resets `cache`, runs the prompt (N x T int64 on the model's device), fills positions
  // [0, T) of the cache; returns the last position's logits (N x vocabulary). Gated as forward().
  torch::Tensor prefill(const torch::Tensor& tokens, KvCache& cache, const LayerGate& gate) {
    return prefill_padded(tokens, cache, gate, tokens.size(1));
  }
  torch::Tensor prefill(const torch::Tensor& tokens, KvCache& cache) {
    return prefill(tokens, cache, [](std::size_t) {});
  }
  // Note [Prompt buckets]: the same for a prompt of `length` tokens padded on the right to
  // T = tokens.size(1) (1 <= length <= T): the logits of position length - 1, and the cache
  // filled to `length` (the padding's keys and values lie beyond it, where decode overwrites
  // them). Equal to prefilling the unpadded prompt, the attention being causal.
  virtual torch::Tensor prefill_padded(const torch::Tensor& tokens, KvCache& cache, const LayerGate& gate,
                                       std::int64_t length) = 0;
  // Appends `tokens` (N x T, usually T = 1) after the cache's positions; the last position's
  // logits. InputError when the cache is full or of another batch.
  virtual torch::Tensor decode(const torch::Tensor& tokens, KvCache& cache) = 0;
  // Note [Decode graph]: one token per sequence (N x 1) at the position `position` holds (one
  // int64 on the tokens' device), over the whole of `cache`: its keys and values written at that
  // position, the positions after it masked. The cache's length is neither read nor advanced (the
  // caller keeps it, and the position below the capacity). The logits (N x vocabulary).
  virtual torch::Tensor decode_at(const torch::Tensor& tokens, const torch::Tensor& position, KvCache& cache) = 0;
  // Note [Prefill graphs]: prefill_padded with the logits read at the position `last` holds (one
  // int64 on the tokens' device) instead of a host index: the cache is reset and filled with
  // every one of the T positions (the caller keeps the real length, and sets it).
  virtual torch::Tensor prefill_at(const torch::Tensor& tokens, const torch::Tensor& last, KvCache& cache) = 0;
};

// The model as a Decoder, or nullptr for the zoo's other models.
Decoder* as_decoder(ZooModel& model);

// Note [Decode graph]: the capacity of the kept cache a sequence of `positions` decodes in, the
// smallest power of two that holds it (at least 64) up to the context: a decode step attends over
// its whole cache, so a class at most twice the sequence, and few classes (graphs, caches) a model.
std::int64_t decode_capacity(std::int64_t positions, std::int64_t context);
// The bytes of a KvCache of `config` for `batch` sequences of `capacity` positions, each value
// `element_bytes` (the model's dtype).
Bytes kv_cache_bytes(const DecoderConfig& config, std::int64_t batch, std::int64_t capacity, Bytes element_bytes);
// Note [Decode graph]: the most a worker's kept caches of one decoder take: one cache of batch 1
// per capacity class, 64 up to the context (under twice the context's cache).
Bytes kept_decode_cache_bytes(const DecoderConfig& config, Bytes element_bytes);
// Note [Prefill graphs]: the most the caches of a decoder's prefill graphs take: one cache of
// batch 1 per prompt bucket, of the bucket's length (the graphs' activations not included).
Bytes prefill_graph_cache_bytes(const DecoderConfig& config, const std::vector<std::int64_t>& buckets,
                                Bytes element_bytes);

// The rotary inverse frequencies of `config`'s heads (head_dim / 2, fp32, on `device`): the plain
// rope_theta^(-2i/d), rescaled where the config has rope_scaling (Note [Rope scaling]).
torch::Tensor rope_inverse_frequencies(const DecoderConfig& config, const torch::Device& device);

// Greedy decoding after a prefill: the token after the prompt is argmax(first_logits); then
// `steps` - 1 decode steps. The generated ids, N x steps (int64, on the model's device).
torch::Tensor greedy_decode(Decoder& decoder, const torch::Tensor& first_logits, KvCache& cache, int steps);
// The same, telling `on_token(index, ids)` each generated token (ids N x 1 on the model's
// device) as soon as it is known, the first one included: a streaming caller reads it there.
using TokenCallback = std::function<void(int index, const torch::Tensor& ids)>;
torch::Tensor greedy_decode(Decoder& decoder, const torch::Tensor& first_logits, KvCache& cache, int steps,
                            const TokenCallback& on_token);

// Note [Decode graph]
// ~~~~~~~~~~~~~~~~~~~
// Decoding is a step per token, each a few hundred small kernels: launched one by one from the
// host, a step of llama-1b took 8.7 ms on an H100, most of it launching. A graph launches them
// with one call, but replays fixed shapes and addresses, and an eager step's shapes grow with
// the cache. So a graph's step is decode_at: the token read from a fixed tensor, its position
// from a device tensor, its keys and values written there (index_copy_), attention over the
// whole cache with the positions after it masked (no keys beyond the position count: exp(-inf)
// weighs them 0), its argmax written back as the next step's token and the position advanced,
// all on the device. The first decode step runs eagerly (it warms up what a capture cannot
// allocate, cuBLAS's workspace among it), the second is captured in the caller's graph slot,
// and every step after it is a replay; the slot is released before the tensors it reads go.
// Tokens are read on the host one by one as before (a streaming caller sends each).
//
// A DecodeGraph keeps its graph for later sequences in the same cache: their steps all replay
// it (the token and the position are set before the first; keys and values a longer earlier
// sequence left beyond the position are masked as any). A served call that captured its own
// graph paid its eager step and capture each time: 14-21 ms a call of llama-1b on an H100.
class DecodeGraph {
 public:
  // Decodes in `cache`, captured in `backend`'s graph slot `slot`; all three outlive this.
  DecodeGraph(Backend& backend, std::size_t slot, Decoder& decoder, KvCache& cache);
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // greedy_decode's tokens after the prefill that filled the cache: the steps replayed where the
  // backend has graphs (until the capture, the first eager and the second captured), else
  // greedy_decode itself. InputError where the cache cannot hold the steps.
  torch::Tensor decode(const torch::Tensor& first_logits, int steps, const TokenCallback& on_token);
  bool captured() const { return captured_; }

 private:
  Backend& backend_;
  std::size_t slot_;
  Decoder& decoder_;
  KvCache& cache_;
  torch::Tensor token_;     // the graph's inputs, at fixed addresses: the token (N x 1)
  torch::Tensor position_;  // and its position (1)
  torch::Tensor produced_;  // its output: each replay writes the step's token here
  bool captured_ = false;
};

// greedy_decode's tokens, the steps after the second replayed from one graph in `backend`'s slot
// `slot` where the backend has graphs (else greedy_decode itself); the slot released after. A
// DecodeGraph for one sequence. InputError where the cache cannot hold the steps.
torch::Tensor greedy_decode_replayed(Backend& backend, std::size_t slot, Decoder& decoder,
                                     const torch::Tensor& first_logits, KvCache& cache, int steps,
                                     const TokenCallback& on_token);

// `timed` resident decode steps after `first_logits`, each timed from the token before it read
// on the host to it read there. With `graphs` where `backend` has them, decoded as a served call
// decodes (greedy_decode_replayed in a new slot of `backend`: the eager first step and the capture
// come before the timed steps, untimed); else eagerly, the first step untimed. For psw run's and
// psw profile's per-token times. `cache` must hold timed + 2 more positions.
struct TimedDecode {
  std::vector<std::int64_t> tokens;  // the first sequence's first timed + 1 tokens
  std::vector<Duration> steps;       // timed of them
  bool replayed = false;             // the steps replayed one graph (Note [Decode graph])
};
TimedDecode time_greedy_decode(Backend& backend, Decoder& decoder, const torch::Tensor& first_logits, KvCache& cache,
                               int timed, bool graphs);

// Note [Prefill graphs]
// ~~~~~~~~~~~~~~~~~~~~~
// A resident decoder's prefill, like its decode step, is launch-bound when eager (llama-1b: a
// warm 100-token prompt's first token 8.8 ms served, against 2.8 ms for `psw run --graph`'s
// replayed prefill). A bucket's prefill has one shape (Note [Prompt buckets]), so it is captured
// once per bucket, at the bucket's first resident prompt: the prompt copied into the bucket's
// token tensor, the last real position into a device tensor (prefill_at), keys and values into
// the bucket's own cache; after a replay the real positions' keys and values are copied into the
// call's cache (one device copy of a few megabytes), whose length is set to the prompt's. The
// graphs, their caches and activations stay for the decoder's life: the memory of the buckets
// used (llama-1b's 8,191-token bucket: 0.27 GB of cache). The memory daemon counts every bucket's
// cache for every worker whose graphs are captured (prefill_graph_cache_bytes; Note [Device
// memory limit]); the graphs' activations are not counted.
class PrefillGraphs {
 public:
  // For `decoder` (batch 1) on `backend`, which must support graphs; both outlive this.
  PrefillGraphs(Backend& backend, Decoder& decoder);
  ~PrefillGraphs();
  PrefillGraphs(const PrefillGraphs&) = delete;
  PrefillGraphs& operator=(const PrefillGraphs&) = delete;

  // decoder.prefill_padded(padded, cache, no gate, length) by a replay of the bucket's graph
  // (padded: 1 x bucket token ids on the device; captured at its first prompt): the logits of
  // position length - 1, `cache` holding positions [0, length). InputError for another batch or a
  // cache that cannot hold the prompt.
  torch::Tensor prefill(const torch::Tensor& padded, std::int64_t length, KvCache& cache);
  std::size_t buckets() const { return buckets_.size(); }  // captured so far
  Bytes cache_bytes() const;  // the captured buckets' own caches

 private:
  struct Bucket {
    std::size_t slot = 0;
    torch::Tensor tokens;  // 1 x bucket, the graph's input
    torch::Tensor last;    // the last real position, the graph's other input
    torch::Tensor logits;  // the graph's output
    std::unique_ptr<KvCache> cache;
  };
  Backend& backend_;
  Decoder& decoder_;
  std::map<std::int64_t, Bucket> buckets_;
};

// Note [Prompt buckets]
// ~~~~~~~~~~~~~~~~~~~~~
// A decoder serves prompts of any length up to its context, yet a captured graph has fixed shapes.
// So prompts are grouped into length buckets: a prompt of L tokens is padded on the right (with id
// 0) to the smallest bucket B >= L and prefilled at B; the logits are read at position L - 1 and
// the KV cache is filled to L. Causal attention makes this exact: no position below L attends to
// the padding, and the padding's keys and values sit beyond the cache's length, where the first
// decode step writes over them. A graph per bucket then serves every prompt: a resident prompt
// replays its bucket's (Note [Prefill graphs]); a cold one is the pipelined switch, eager, its
// parameters arriving as for any request. The buckets of a served decoder are its config's
// `prompt_buckets`, by default the powers of two from 16 up to the context, and the context itself.
//
// (psw::prompt_bucket, serve_config.hpp, picks a prompt's bucket.)
// `ids` (1 x L, int64) padded on the right with id 0 to 1 x bucket (bucket >= L).
torch::Tensor pad_prompt(const torch::Tensor& ids, std::int64_t bucket);

// A Llama decoder of `config`, weights seeded from `seed` (a counter-based hash, so the 8 B
// model is filled in parallel in seconds: linear and embedding weights uniform with standard
// deviation 0.02, Hugging Face's initializer_range; RMSNorm weights uniform in [0.9, 1.1]),
// built directly in `dtype` (fp32, bf16 or fp16) on the CPU.
std::unique_ptr<ZooModel> make_decoder(const DecoderConfig& config, std::uint64_t seed, torch::ScalarType dtype);

// Whether a --model argument names a decoder config file (it ends in .yaml) rather than a
// built-in zoo model.
bool names_decoder_config(const std::string& model);
// A --model argument as make_model takes it: a decoder's name shipped in `zoo_dir` (llama-8b ->
// zoo_dir/llama-8b.yaml, when that file exists and the name is not a built-in model's), else
// the argument unchanged (a built-in name, a config file, or an unknown name make_model names).
std::string zoo_model_argument(const std::string& model, const std::filesystem::path& zoo_dir);

}  // namespace psw::exec
