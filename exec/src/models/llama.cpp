// The Llama decoder family (decoder.hpp, Note [Decoder in the pipeline]), sized by a
// DecoderConfig: token embedding; per layer RMSNorm, grouped-query attention with rotary
// position embeddings, RMSNorm, SwiGLU MLP, each with a residual; final RMSNorm; the head
// (tied to the embedding or its own). The arithmetic follows Hugging Face's LlamaForCausalLM
// (llama3 rope scaling, Note [Rope scaling]; attention: Note [Fused attention]): RMSNorm in fp32 and
// cast back before the weight; cos/sin computed in fp32 and cast to the model's dtype.

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "models/zoo_base.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/decoder.hpp"

namespace psw::exec {

KvCache::KvCache(torch::Tensor storage) : storage_(std::move(storage)) {
  PSW_CHECK(storage_.dim() == 6 && storage_.size(1) == 2, "a KV cache is layers x 2 x N x kv_heads x capacity x head_dim, not ",
            storage_.sizes());
}

void KvCache::write(std::int64_t layer, const torch::Tensor& keys, const torch::Tensor& values) {
  const std::int64_t t = keys.size(2);
  PSW_CHECK(length_ + t <= capacity(), "KV cache overflow");
  storage_[layer][0].narrow(2, length_, t).copy_(keys);
  storage_[layer][1].narrow(2, length_, t).copy_(values);
}

void KvCache::advance(std::int64_t positions) {
  PSW_CHECK(positions >= 0 && length_ + positions <= capacity(), "KV cache overflow");
  length_ += positions;
}

void KvCache::write_at(std::int64_t layer, const torch::Tensor& position, const torch::Tensor& keys,
                       const torch::Tensor& values) {
  storage_[layer][0].index_copy_(2, position, keys);
  storage_[layer][1].index_copy_(2, position, values);
}

torch::Tensor KvCache::keys(std::int64_t layer, std::int64_t upto) const { return storage_[layer][0].narrow(2, 0, upto); }
torch::Tensor KvCache::values(std::int64_t layer, std::int64_t upto) const { return storage_[layer][1].narrow(2, 0, upto); }

Decoder* as_decoder(ZooModel& model) { return dynamic_cast<Decoder*>(&model); }

std::int64_t decode_capacity(std::int64_t positions, std::int64_t context) {
  std::int64_t capacity = 64;
  while (capacity < positions) capacity *= 2;
  return std::min(capacity, context);
}

Bytes kv_cache_bytes(const DecoderConfig& config, std::int64_t batch, std::int64_t capacity, Bytes element_bytes) {
  // KvCache: layers x 2 x batch x kv_heads x capacity x head_dim.
  return config.layers * 2 * batch * config.kv_heads * capacity * config.head_dim() * element_bytes;
}

Bytes kept_decode_cache_bytes(const DecoderConfig& config, Bytes element_bytes) {
  Bytes total = 0;
  std::int64_t capacity = 0;
  while (capacity < config.max_positions) {
    capacity = decode_capacity(capacity + 1, config.max_positions);
    total += kv_cache_bytes(config, 1, capacity, element_bytes);
  }
  return total;
}

Bytes prefill_graph_cache_bytes(const DecoderConfig& config, const std::vector<std::int64_t>& buckets,
                                Bytes element_bytes) {
  Bytes total = 0;
  for (const std::int64_t bucket : buckets) total += kv_cache_bytes(config, 1, bucket, element_bytes);
  return total;
}

// Note [Fused attention]
// ~~~~~~~~~~~~~~~~~~~~~~
// Where LibTorch has scaled_dot_product_attention (2.0 on: the GPU host's), attention is that
// call, as transformers' default `sdpa` attention runs it: on CUDA one flash or memory-efficient
// kernel in which a prompt's T x T scores never exist in memory. With the scores materialised
// (transformers' eager attention: matmul, mask, softmax in fp32, matmul), llama-1b's prefill of
// 4,095 tokens took 181 ms on an H100 against transformers' 26 ms, and a prefill graph at its
// context of 8,191 tokens (8.6 GB of scores a layer) did not fit an 80 GB card (results/gpu/README.md,
// "Served workloads"). A prompt from position 0 is causal: its keys and values are repeated over
// their query heads' group (transformers' repeat_kv), so any 2.x runs it. Every other call (one
// decoded token, which sees every key; a chunk after a filled cache, which gets the explicit
// mask, as is_causal would align it from the first key) folds the group into the query rows
// instead: query heads [j * G, (j + 1) * G) share key/value head j, so their T rows each become
// G x T rows of one attention over head j's keys, the mask's rows repeated per member. Each row
// attends as before, without the keys and values copied G times. The mask is made once per
// forward, additive in the model's dtype (what the call would make of a boolean one at every
// layer). Measured side by side on an H100 (results/gpu/README.md), llama-1b's decode step went
// from 2.40 to 2.28 ms at a 100-token prompt but only from 2.79 to 2.74 at 2,000: what it saved
// is kernels (two copies and the mask's conversion a layer), not bytes, which would have saved
// more at the longer cache. What bounds the long one is not measured; likely the few thread
// blocks that attend it (the fused kernels spread a call over heads and query blocks: 8 heads of
// one block here), which a split over the keys (flash-decoding) would remedy; not done.
// LibTorch 1.13 (CI's) computes the eager form, which is the same arithmetic but for rounding.
#if TORCH_VERSION_MAJOR >= 2
#define PSW_FUSED_ATTENTION 1
#endif

// Note [Rope scaling] in decoder_config.hpp, with Hugging Face's operations
// (_compute_default_rope_parameters, then _compute_llama3_parameters), in fp32.
torch::Tensor rope_inverse_frequencies(const DecoderConfig& config, const torch::Device& device) {
  const std::int64_t d = config.head_dim();
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const torch::Tensor plain =
      torch::reciprocal(torch::pow(config.rope_theta, torch::arange(0, d, 2, i64).to(torch::kFloat32) / d));
  if (!config.rope_scaling) return plain;
  const RopeScaling& s = *config.rope_scaling;
  const auto context = static_cast<double>(s.original_max_positions);
  const double low_freq_wavelength = context / s.low_freq_factor;
  const double high_freq_wavelength = context / s.high_freq_factor;
  // Scalar / tensor as Python's `2 * math.pi / inv_freq` computes it (one rounding).
  const torch::Tensor wavelength = torch::full_like(plain, 2 * std::numbers::pi) / plain;
  const torch::Tensor scaled = torch::where(wavelength > low_freq_wavelength, plain / s.factor, plain);
  const torch::Tensor smooth =
      (torch::full_like(wavelength, context) / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const torch::Tensor smoothed = (smooth.neg() + 1) * scaled / s.factor + smooth * scaled;
  const torch::Tensor medium = (wavelength >= high_freq_wavelength).logical_and(wavelength <= low_freq_wavelength);
  return torch::where(medium, smoothed, scaled);
}

torch::Tensor greedy_decode(Decoder& decoder, const torch::Tensor& first_logits, KvCache& cache, int steps) {
  return greedy_decode(decoder, first_logits, cache, steps, [](int, const torch::Tensor&) {});
}

torch::Tensor greedy_decode(Decoder& decoder, const torch::Tensor& first_logits, KvCache& cache, int steps,
                            const TokenCallback& on_token) {
  if (steps < 1) throw InputError(::psw::detail::concat("decode steps must be at least 1, not ", steps));
  std::vector<torch::Tensor> tokens;
  torch::Tensor next = first_logits.argmax(-1, /*keepdim=*/true);  // N x 1
  tokens.push_back(next);
  if (on_token) on_token(0, next);
  for (int i = 1; i < steps; ++i) {
    next = decoder.decode(next, cache).argmax(-1, /*keepdim=*/true);
    tokens.push_back(next);
    if (on_token) on_token(i, next);
  }
  return torch::cat(tokens, 1);
}

DecodeGraph::DecodeGraph(Backend& backend, std::size_t slot, Decoder& decoder, KvCache& cache)
    : backend_(backend), slot_(slot), decoder_(decoder), cache_(cache) {}

DecodeGraph::~DecodeGraph() {
  if (captured_) backend_.release(slot_);
}

torch::Tensor DecodeGraph::decode(const torch::Tensor& first_logits, int steps, const TokenCallback& on_token) {
  if (!backend_.supports_graphs() || (!captured_ && steps < 3)) {
    return greedy_decode(decoder_, first_logits, cache_, steps, on_token);
  }
  if (cache_.length() < 1 || cache_.length() + steps - 1 > cache_.capacity()) {
    throw InputError(::psw::detail::concat("a KV cache of ", cache_.capacity(), " positions, ", cache_.length(),
                                           " filled, cannot decode ", steps - 1, " more tokens"));
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tokens;
  torch::Tensor next = first_logits.argmax(-1, /*keepdim=*/true);  // N x 1
  tokens.push_back(next);
  if (on_token) on_token(0, next);
  int first_replayed = 1;
  if (captured_) {
    PSW_CHECK(next.sizes() == token_.sizes(), "a decode graph captured for tokens ", token_.sizes(), " given ",
              next.sizes());
    token_.copy_(next);
    position_.fill_(cache_.length());
  } else {
    token_ = next.clone();
    position_ = torch::full({1}, cache_.length(), torch::TensorOptions().dtype(torch::kInt64).device(next.device()));
    next = decoder_.decode_at(token_, position_, cache_).argmax(-1, /*keepdim=*/true);  // eager: the warm-up
    cache_.advance(1);
    tokens.push_back(next);
    if (on_token) on_token(1, next);
    token_.copy_(next);
    position_.add_(1);
    backend_.capture(slot_, [&] {
      produced_ = decoder_.decode_at(token_, position_, cache_).argmax(-1, /*keepdim=*/true);
      token_.copy_(produced_);
      position_.add_(1);
    });
    captured_ = true;
    first_replayed = 2;
  }
  try {
    for (int i = first_replayed; i < steps; ++i) {
      backend_.replay(slot_);
      cache_.advance(1);
      next = produced_.clone();  // the next replay overwrites `produced_`
      tokens.push_back(next);
      if (on_token) on_token(i, next);
    }
  } catch (...) {
    // A graph that failed mid-sequence is not replayed again: the next sequence captures anew.
    backend_.release(slot_);
    captured_ = false;
    throw;
  }
  return torch::cat(tokens, 1);
}

torch::Tensor greedy_decode_replayed(Backend& backend, std::size_t slot, Decoder& decoder,
                                     const torch::Tensor& first_logits, KvCache& cache, int steps,
                                     const TokenCallback& on_token) {
  DecodeGraph graph(backend, slot, decoder, cache);
  return graph.decode(first_logits, steps, on_token);
}

TimedDecode time_greedy_decode(Backend& backend, Decoder& decoder, const torch::Tensor& first_logits, KvCache& cache,
                               int timed, bool graphs) {
  PSW_CHECK(timed >= 1, "time_greedy_decode needs a step to time, not ", timed);
  TimedDecode out;
  out.replayed = graphs && backend.supports_graphs();
  const int untimed = out.replayed ? 2 : 1;  // the eager first step warms up either way
  std::vector<std::int64_t> known_ns;
  const auto on_token = [&](int, const torch::Tensor& next) {
    (void)next.to(torch::kCPU);  // waits for the device, as a served call's host does (any batch)
    known_ns.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  };
  const int steps = timed + 1 + untimed;
  const torch::Tensor ids = out.replayed
                                ? greedy_decode_replayed(backend, backend.new_graph_slot(), decoder, first_logits,
                                                         cache, steps, on_token)
                                : greedy_decode(decoder, first_logits, cache, steps, on_token);
  for (std::size_t i = 1 + static_cast<std::size_t>(untimed); i < known_ns.size(); ++i) {
    out.steps.push_back(nanoseconds(known_ns[i] - known_ns[i - 1]));
  }
  const torch::Tensor first = ids[0].slice(0, 0, timed + 1).to(torch::kCPU);
  for (std::int64_t i = 0; i < first.size(0); ++i) out.tokens.push_back(first[i].item<std::int64_t>());
  return out;
}

PrefillGraphs::PrefillGraphs(Backend& backend, Decoder& decoder) : backend_(backend), decoder_(decoder) {
  PSW_CHECK(backend.supports_graphs(), "prefill graphs on the ", backend.name(), " backend, which has no graphs");
}

PrefillGraphs::~PrefillGraphs() {
  for (auto& [bucket, b] : buckets_) backend_.release(b.slot);
}

Bytes PrefillGraphs::cache_bytes() const {
  Bytes total = 0;
  for (const auto& [bucket, b] : buckets_) total += static_cast<Bytes>(b.cache->storage().nbytes());
  return total;
}

torch::Tensor PrefillGraphs::prefill(const torch::Tensor& padded, std::int64_t length, KvCache& cache) {
  const std::int64_t bucket = padded.dim() == 2 ? padded.size(1) : 0;
  if (padded.dim() != 2 || padded.size(0) != 1 || length < 1 || length > bucket || cache.batch() != 1 ||
      cache.capacity() < length) {
    throw InputError(::psw::detail::concat("a prefill graph takes one padded prompt (1 x bucket) of 1 to bucket real ",
                                           "tokens and a cache of one sequence that holds them, not ", padded.sizes(),
                                           " with ", length, " real tokens and a cache of ", cache.batch(), " x ",
                                           cache.capacity()));
  }
  torch::NoGradGuard no_grad;
  auto found = buckets_.find(bucket);
  if (found == buckets_.end()) {
    Bucket b;
    b.slot = backend_.new_graph_slot();
    b.tokens = padded.clone();
    b.last = torch::full({1}, length - 1, torch::TensorOptions().dtype(torch::kInt64).device(padded.device()));
    b.cache = std::make_unique<KvCache>(decoder_.make_cache(1, bucket));
    // Run once before the capture: what a capture cannot allocate (cuBLAS's workspace) is then there.
    decoder_.prefill_at(b.tokens, b.last, *b.cache);
    found = buckets_.emplace(bucket, std::move(b)).first;
    Bucket& kept = found->second;
    backend_.capture(kept.slot, [&kept, this] { kept.logits = decoder_.prefill_at(kept.tokens, kept.last, *kept.cache); });
  }
  Bucket& b = found->second;
  b.tokens.copy_(padded);
  b.last.fill_(length - 1);
  backend_.replay(b.slot);
  cache.reset();
  cache.storage().narrow(4, 0, length).copy_(b.cache->storage().narrow(4, 0, length));
  cache.advance(length);
  return b.logits.clone();  // the next replay overwrites the graph's logits
}

torch::Tensor pad_prompt(const torch::Tensor& ids, std::int64_t bucket) {
  if (ids.dim() != 2 || ids.size(0) != 1 || ids.scalar_type() != torch::kInt64 || ids.size(1) < 1 ||
      ids.size(1) > bucket) {
    throw InputError(::psw::detail::concat("a prompt to pad must be 1 x L token ids (int64, 1 <= L <= ", bucket,
                                           "), not ", ids.sizes(), " ", ids.dtype()));
  }
  if (ids.size(1) == bucket) return ids;
  return torch::cat({ids, torch::zeros({1, bucket - ids.size(1)}, ids.options())}, 1);
}

bool names_decoder_config(const std::string& model) {
  return model.size() > 5 && model.compare(model.size() - 5, 5, ".yaml") == 0;
}

std::string zoo_model_argument(const std::string& model, const std::filesystem::path& zoo_dir) {
  if (names_decoder_config(model)) return model;
  for (const std::string& name : zoo_model_names()) {
    if (name == model) return model;
  }
  const std::filesystem::path shipped = zoo_dir / (model + ".yaml");
  std::error_code ec;
  return std::filesystem::is_regular_file(shipped, ec) ? shipped.string() : model;
}

namespace detail {
namespace {

// splitmix64 of one counter: the seeded "random" values of the weights, element by element,
// so that any thread fills any part and the values do not depend on the thread count.
double unit_hash(std::uint64_t stream, std::uint64_t index) {
  std::uint64_t z = stream * 0xD1B54A32D192ED03ULL + index * 0x9E3779B97F4A7C15ULL + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
}

// Fills `t` (any dtype, contiguous, on the CPU) uniformly in [low, high), through fp32 chunks.
void fill_uniform(torch::Tensor& t, double low, double high, std::uint64_t stream) {
  torch::NoGradGuard no_grad;
  torch::Tensor flat = t.view({-1});
  const std::int64_t n = flat.numel();
  constexpr std::int64_t kChunk = 1 << 20;
  at::parallel_for(0, (n + kChunk - 1) / kChunk, 1, [&](std::int64_t begin, std::int64_t end) {
    torch::Tensor buffer = torch::empty({kChunk}, torch::kFloat32);
    float* data = buffer.data_ptr<float>();
    for (std::int64_t chunk = begin; chunk < end; ++chunk) {
      const std::int64_t start = chunk * kChunk;
      const std::int64_t len = std::min(kChunk, n - start);
      for (std::int64_t i = 0; i < len; ++i) {
        data[i] = static_cast<float>(low + (high - low) * unit_hash(stream, static_cast<std::uint64_t>(start + i)));
      }
      flat.narrow(0, start, len).copy_(buffer.narrow(0, 0, len));
    }
  });
}

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(std::int64_t dim, double eps, torch::ScalarType dtype) : eps_(eps) {
    weight = register_parameter("weight", torch::ones({dim}, torch::dtype(dtype)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor x32 = x.to(torch::kFloat32);
    const torch::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    return weight * normed.to(x.scalar_type());
  }
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// A linear layer without bias (every projection of Llama).
class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(std::int64_t in, std::int64_t out, torch::ScalarType dtype) {
    weight = register_parameter("weight", torch::empty({out, in}, torch::dtype(dtype)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(Projection);

class TokenEmbeddingImpl : public torch::nn::Module {
 public:
  TokenEmbeddingImpl(std::int64_t vocabulary, std::int64_t dim, torch::ScalarType dtype) {
    weight = register_parameter("weight", torch::empty({vocabulary, dim}, torch::dtype(dtype)));
  }
  torch::Tensor forward(const torch::Tensor& ids) { return torch::embedding(weight, ids); }
  torch::Tensor weight;
};
TORCH_MODULE(TokenEmbedding);

constexpr std::int64_t kExamplePrompt = 128;  // example_input's prompt length (as BERT's 128)
constexpr double kLlamaInitStd = 0.02;             // Hugging Face's initializer_range

class Llama final : public ZooBase, public Decoder {
 public:
  Llama(DecoderConfig config, std::uint64_t seed, torch::ScalarType dtype)
      : ZooBase(config.name), config_(std::move(config)) {
    const DecoderConfig& c = config_;
    const std::int64_t kv = c.kv_heads * c.head_dim();
    embed_ = add_layer("model.embed_tokens", TokenEmbedding(c.vocabulary, c.hidden, dtype), "embedding");
    for (std::int64_t l = 0; l < c.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l);
      Block b;
      b.input_norm = add_layer(p + ".input_layernorm", RmsNorm(c.hidden, c.rms_norm_eps, dtype), "rmsnorm");
      b.q = add_layer(p + ".self_attn.q_proj", Projection(c.hidden, c.hidden, dtype), "linear");
      b.k = add_layer(p + ".self_attn.k_proj", Projection(c.hidden, kv, dtype), "linear");
      b.v = add_layer(p + ".self_attn.v_proj", Projection(c.hidden, kv, dtype), "linear");
      b.o = add_layer(p + ".self_attn.o_proj", Projection(c.hidden, c.hidden, dtype), "linear");
      b.post_norm = add_layer(p + ".post_attention_layernorm", RmsNorm(c.hidden, c.rms_norm_eps, dtype), "rmsnorm");
      b.gate = add_layer(p + ".mlp.gate_proj", Projection(c.hidden, c.intermediate, dtype), "linear");
      b.up = add_layer(p + ".mlp.up_proj", Projection(c.hidden, c.intermediate, dtype), "linear");
      b.down = add_layer(p + ".mlp.down_proj", Projection(c.intermediate, c.hidden, dtype), "linear");
      blocks_.push_back(std::move(b));
    }
    norm_ = add_layer("model.norm", RmsNorm(c.hidden, c.rms_norm_eps, dtype), "rmsnorm");
    if (!c.tie_embeddings) head_ = add_layer("lm_head", Projection(c.hidden, c.vocabulary, dtype), "linear");
    // Every tensor from its own stream of the hash, in layer order.
    const double half = kLlamaInitStd * std::sqrt(3.0);
    std::uint64_t stream = seed * 0x100000000ULL;
    for (ZooLayer& layer : layers()) {
      for (torch::Tensor& t : layer.tensors) {
        if (layer.kind == "rmsnorm") {
          fill_uniform(t, 0.9, 1.1, ++stream);
        } else {
          fill_uniform(t, -half, half, ++stream);
        }
      }
    }
    // Built in `dtype` already: this only records it as the model's dtype().
    convert(dtype);
  }

  // ZooModel
  torch::Tensor example_input(int batch, std::uint64_t seed) const override {
    return example_tokens(batch, std::min(kExamplePrompt, config_.max_positions), seed);
  }

  // Decoder
  const DecoderConfig& config() const override { return config_; }

  KvCache make_cache(int batch, std::int64_t capacity) const override {
    if (batch < 1 || capacity < 1 || capacity > config_.max_positions) {
      throw InputError(::psw::detail::concat(name(), ": a KV cache needs a batch of at least 1 and a capacity in [1, ",
                                             config_.max_positions, "] (max_positions), not batch ", batch,
                                             " and capacity ", capacity));
    }
    return KvCache(torch::zeros({config_.layers, 2, batch, config_.kv_heads, capacity, config_.head_dim()},
                                embed_->weight.options()));
  }

  torch::Tensor example_tokens(int batch, std::int64_t length, std::uint64_t seed) const override {
    if (batch < 1 || length < 1 || length > config_.max_positions) {
      throw InputError(::psw::detail::concat(name(), ": a prompt needs a batch of at least 1 and a length in [1, ",
                                             config_.max_positions, "], not batch ", batch, " and length ", length));
    }
    torch::Tensor ids = torch::empty({batch, length}, torch::kInt64);
    std::int64_t* data = ids.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < ids.numel(); ++i) {
      data[i] = static_cast<std::int64_t>(unit_hash(~seed, static_cast<std::uint64_t>(i)) *
                                          static_cast<double>(config_.vocabulary));
    }
    return ids;
  }

  torch::Tensor prefill_padded(const torch::Tensor& tokens, KvCache& cache, const LayerGate& gate,
                               std::int64_t length) override {
    torch::NoGradGuard no_grad;
    cache.reset();
    Cursor cursor(*this, gate);
    return run(tokens, cursor, &cache, length);
  }

  torch::Tensor decode(const torch::Tensor& tokens, KvCache& cache) override {
    torch::NoGradGuard no_grad;
    const LayerGate none = [](std::size_t) {};
    Cursor cursor(*this, none);
    return run(tokens, cursor, &cache);
  }

  torch::Tensor prefill_at(const torch::Tensor& tokens, const torch::Tensor& last, KvCache& cache) override {
    if (last.numel() != 1 || last.scalar_type() != torch::kInt64 || last.device() != tokens.device()) {
      throw InputError(::psw::detail::concat(name(), ": a prefill's last position is one int64 on the tokens' device, not ",
                                             last.sizes(), " ", last.dtype(), " on ", last.device()));
    }
    torch::NoGradGuard no_grad;
    cache.reset();
    const LayerGate none = [](std::size_t) {};
    Cursor cursor(*this, none);
    const torch::Tensor flat = last.reshape({1});
    return run(tokens, cursor, &cache, 0, nullptr, &flat);
  }

  torch::Tensor decode_at(const torch::Tensor& tokens, const torch::Tensor& position, KvCache& cache) override {
    if (tokens.dim() != 2 || tokens.size(1) != 1 || position.numel() != 1 || position.scalar_type() != torch::kInt64 ||
        position.device() != tokens.device()) {
      throw InputError(::psw::detail::concat(name(), ": a decode step at a device position takes N x 1 token ids and one ",
                                             "int64 position on their device, not ", tokens.sizes(), " and ",
                                             position.sizes(), " ", position.dtype(), " on ", position.device()));
    }
    torch::NoGradGuard no_grad;
    const LayerGate none = [](std::size_t) {};
    Cursor cursor(*this, none);
    const torch::Tensor flat = position.reshape({1});
    return run(tokens, cursor, &cache, 0, &flat);
  }

 protected:
  std::vector<torch::Tensor> outputs(const torch::Tensor& input, Cursor& cursor) override {
    return {run(input, cursor, nullptr)};
  }

 private:
  struct Block {
    RmsNorm input_norm{nullptr}, post_norm{nullptr};
    Projection q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
    Projection gate{nullptr}, up{nullptr}, down{nullptr};
  };

  static torch::Tensor rotate_half(const torch::Tensor& x) {
    const std::int64_t half = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  }

  // The prompt or the next tokens at positions [past, past + T): the logits of position
  // past + length - 1 (length 0: the last, T), the cache advanced by `length` (Note [Prompt buckets]).
  // With `device_position` (Note [Decode graph]): one token at the position that tensor holds,
  // over the whole cache, whose length is left alone. With `last_position` (Note [Prefill
  // graphs]): the logits of the position that tensor holds.
  torch::Tensor run(const torch::Tensor& tokens, Cursor& c, KvCache* cache, std::int64_t length = 0,
                    const torch::Tensor* device_position = nullptr, const torch::Tensor* last_position = nullptr) {
    const DecoderConfig& cfg = config_;
    const std::int64_t past = cache != nullptr && device_position == nullptr ? cache->length() : 0;
    if (tokens.dim() != 2 || tokens.scalar_type() != torch::kInt64 || tokens.size(0) < 1 || tokens.size(1) < 1 ||
        past + tokens.size(1) > cfg.max_positions) {
      throw InputError(::psw::detail::concat(name(), ": the input must be token ids N x T (int64, 1 <= T <= ",
                                             cfg.max_positions - past, "), not ", tokens.sizes(), " ", tokens.dtype()));
    }
    const std::int64_t n = tokens.size(0);
    const std::int64_t t = tokens.size(1);
    if (length == 0) length = t;
    if (length < 1 || length > t) {
      throw InputError(::psw::detail::concat(name(), ": ", length, " real tokens of a padded prompt of ", t));
    }
    if (cache != nullptr && (cache->batch() != n || past + t > cache->capacity())) {
      throw InputError(::psw::detail::concat(name(), ": the KV cache holds ", cache->batch(), " sequences of up to ",
                                             cache->capacity(), " positions, ", past, " filled; ", n, " x ", t,
                                             " more tokens do not fit"));
    }
    const std::int64_t heads = cfg.heads;
    const std::int64_t kv_heads = cfg.kv_heads;
    const std::int64_t group = heads / kv_heads;
    const std::int64_t d = cfg.head_dim();
    // Keys each query may attend to, at most: at a device position, the whole cache (masked).
    const std::int64_t seen = device_position != nullptr ? cache->capacity() : past + t;

    // Rotary embeddings for positions [past, past + T), in fp32, then in the model's dtype.
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(tokens.device());
    const torch::Tensor inv_freq = rope_inverse_frequencies(cfg, tokens.device());
    const torch::Tensor positions =
        (device_position != nullptr ? *device_position : torch::arange(past, seen, i64)).to(torch::kFloat32);
    const torch::Tensor freqs = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // T x d/2
    const torch::Tensor angles = torch::cat({freqs, freqs}, -1);                   // T x d
    const torch::Tensor cos = angles.cos().to(dtype());
    const torch::Tensor sin = angles.sin().to(dtype());
    // Causal: the query at position past + i sees the keys at positions <= past + i.
    const torch::Tensor masked =
        device_position != nullptr
            ? (torch::arange(seen, i64) > *device_position).unsqueeze(0)                           // 1 x capacity
            : torch::arange(seen, i64).unsqueeze(0) > torch::arange(past, seen, i64).unsqueeze(1);  // T x seen
#ifdef PSW_FUSED_ATTENTION
    // Note [Fused attention]: for the folded calls, (G x T) x seen, 0 where a row attends and
    // -inf where it may not; none for one token that sees every key.
    const bool causal_prompt = t == seen;
    torch::Tensor folded_mask;
    if (!causal_prompt && !(t == 1 && device_position == nullptr)) {
      folded_mask = torch::zeros({t, seen}, torch::TensorOptions().dtype(dtype()).device(tokens.device()))
                        .masked_fill(masked, -std::numeric_limits<double>::infinity())
                        .unsqueeze(0)
                        .expand({group, t, seen})
                        .reshape({group * t, seen});
    }
#else
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
#endif

    torch::Tensor h = step(c, embed_, tokens);
    for (std::size_t l = 0; l < blocks_.size(); ++l) {
      Block& b = blocks_[l];
      const torch::Tensor x = step(c, b.input_norm, h);
      torch::Tensor q = step(c, b.q, x).view({n, t, heads, d}).transpose(1, 2);    // N x H x T x d
      torch::Tensor k = step(c, b.k, x).view({n, t, kv_heads, d}).transpose(1, 2);  // N x KV x T x d
      torch::Tensor v = step(c, b.v, x).view({n, t, kv_heads, d}).transpose(1, 2);
      q = q * cos + rotate_half(q) * sin;
      k = k * cos + rotate_half(k) * sin;
      if (cache != nullptr) {
        if (device_position != nullptr) {
          cache->write_at(static_cast<std::int64_t>(l), *device_position, k, v);
        } else {
          cache->write(static_cast<std::int64_t>(l), k, v);
        }
        k = cache->keys(static_cast<std::int64_t>(l), seen);
        v = cache->values(static_cast<std::int64_t>(l), seen);
      }
#ifdef PSW_FUSED_ATTENTION
      // Note [Fused attention]: query heads [j * group, (j + 1) * group) share key/value head j;
      // repeated over the group for a causal prompt, folded into the query rows otherwise.
      torch::Tensor attended;
      if (causal_prompt) {
        const auto repeat_kv = [&](const torch::Tensor& kv) {
          return group == 1 ? kv : kv.unsqueeze(2).expand({n, kv_heads, group, seen, d}).reshape({n, heads, seen, d});
        };
        attended = at::scaled_dot_product_attention(q, repeat_kv(k), repeat_kv(v), {}, 0.0, /*is_causal=*/true);
      } else {
        const torch::Tensor folded = q.reshape({n, kv_heads, group * t, d});
        attended = (folded_mask.defined() ? at::scaled_dot_product_attention(folded, k, v, folded_mask)
                                          : at::scaled_dot_product_attention(folded, k, v))
                       .reshape({n, heads, t, d});
      }
      const torch::Tensor context = attended.transpose(1, 2).reshape({n, t, cfg.hidden});
#else
      // Grouped-query attention: query heads [j * group, (j + 1) * group) share key/value head
      // j (Hugging Face's repeat_kv), without materialising the repeated keys.
      const torch::Tensor qg = q.reshape({n, kv_heads, group, t, d});
      torch::Tensor scores = torch::matmul(qg, k.unsqueeze(2).transpose(-1, -2)) * scale;  // N x KV x G x T x seen
      scores = scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
      const torch::Tensor probs = torch::softmax(scores, -1, torch::kFloat32).to(dtype());
      const torch::Tensor context =
          torch::matmul(probs, v.unsqueeze(2)).reshape({n, heads, t, d}).transpose(1, 2).reshape({n, t, cfg.hidden});
#endif
      h = h + step(c, b.o, context);
      const torch::Tensor y = step(c, b.post_norm, h);
      // Two statements: the gate runs before up (the layer order), which an expression's
      // operands would not guarantee.
      const torch::Tensor gate = torch::silu(step(c, b.gate, y));
      const torch::Tensor gated = gate * step(c, b.up, y);
      h = h + step(c, b.down, gated);
    }
    if (cache != nullptr && device_position == nullptr) cache->advance(length);
    const torch::Tensor normed = step(c, norm_, h);
    const torch::Tensor last = last_position != nullptr ? normed.index_select(1, *last_position).squeeze(1)
                                                        : normed.select(1, length - 1);  // N x hidden
    torch::Tensor logits = head_.is_empty() ? torch::linear(last, embed_->weight) : step(c, head_, last);
    c.finish();
    return logits;
  }

  DecoderConfig config_;
  TokenEmbedding embed_{nullptr};
  std::vector<Block> blocks_;
  RmsNorm norm_{nullptr};
  Projection head_{nullptr};
};

}  // namespace
}  // namespace detail

std::unique_ptr<ZooModel> make_decoder(const DecoderConfig& config, std::uint64_t seed, torch::ScalarType dtype) {
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16 && dtype != torch::kFloat16) {
    throw InputError(::psw::detail::concat(config.name, ": a decoder is built in fp32, bf16 or fp16, not ", dtype));
  }
  return std::make_unique<detail::Llama>(config, seed, dtype);
}

}  // namespace psw::exec
