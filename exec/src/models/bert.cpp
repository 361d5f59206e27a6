// BERT as HuggingFace's BertModel, in two sizes (BertConfig below):
// - bert_base: the bert-base-uncased config: vocabulary 30522, hidden 768, 12 layers of 12 heads,
//   intermediate 3072;
// - bert_tiny: Google's BERT-Tiny (google/bert_uncased_L-2_H-128_A-2, Turc et al. 2019): the same
//   vocabulary, hidden 128, 2 layers of 2 heads, intermediate 512. 4.4 M parameters: a BERT that
//   a CPU runs in milliseconds (the host backend's tests, quick experiments).
// Both: GELU (erf form), 512 positions, 2 token types, LayerNorm eps 1e-12, and the pooler (dense
// + tanh on the first token). The input is token ids N x S (int64, S <= 512; the zoo uses S = 128)
// without padding: the attention mask is all ones (nothing to add to the scores) and the token
// types are 0. Returns the pooled output N x hidden. Embeddings are looked up word, position,
// token type (the order of the layer list).

#include <cmath>
#include <vector>

#include "models/zoo_base.hpp"
#include "psw/common/error.hpp"

namespace psw::exec::detail {
namespace {

namespace nn = torch::nn;

constexpr std::int64_t kVocab = 30522;
constexpr std::int64_t kMaxPositions = 512;
constexpr std::int64_t kTypes = 2;
constexpr double kLnEps = 1e-12;
constexpr double kBertInitStd = 0.02;  // HuggingFace's initializer_range (the embeddings)
constexpr std::int64_t kSequence = 128;

struct BertConfig {
  const char* name;
  std::int64_t hidden;
  int layers;
  std::int64_t heads;
  std::int64_t intermediate;
};

constexpr BertConfig kBertBase{"bert_base", 768, 12, 12, 3072};
constexpr BertConfig kBertTiny{"bert_tiny", 128, 2, 2, 512};

class Bert final : public ZooBase {
 public:
  explicit Bert(const BertConfig& config)
      : ZooBase(config.name),
        hidden_(config.hidden),
        heads_(config.heads),
        head_dim_(config.hidden / config.heads) {
    PSW_CHECK(head_dim_ * heads_ == hidden_, config.name, ": hidden ", hidden_, " is not a multiple of ", heads_, " heads");
    word_ = embedding("embeddings.word_embeddings", kVocab, hidden_, /*padding_idx0=*/true);
    position_ = embedding("embeddings.position_embeddings", kMaxPositions, hidden_);
    token_type_ = embedding("embeddings.token_type_embeddings", kTypes, hidden_);
    emb_ln_ = layernorm("embeddings.LayerNorm", hidden_, kLnEps);
    for (int i = 0; i < config.layers; ++i) {
      const std::string p = "encoder.layer." + std::to_string(i);
      Layer l;
      l.query = linear(p + ".attention.self.query", hidden_, hidden_);
      l.key = linear(p + ".attention.self.key", hidden_, hidden_);
      l.value = linear(p + ".attention.self.value", hidden_, hidden_);
      l.attn_out = linear(p + ".attention.output.dense", hidden_, hidden_);
      l.attn_ln = layernorm(p + ".attention.output.LayerNorm", hidden_, kLnEps);
      l.inter = linear(p + ".intermediate.dense", hidden_, config.intermediate);
      l.out = linear(p + ".output.dense", config.intermediate, hidden_);
      l.out_ln = layernorm(p + ".output.LayerNorm", hidden_, kLnEps);
      blocks_.push_back(std::move(l));
    }
    pooler_ = linear("pooler.dense", hidden_, hidden_);
    initialise(kBertInitStd);
  }

  torch::Tensor example_input(int batch, std::uint64_t seed) const override {
    if (batch < 1) {
      throw InputError(::psw::detail::concat("batch must be at least 1, not ", batch));
    }
    torch::Tensor ids = torch::empty({batch, kSequence}, torch::kInt64);
    std::int64_t* data = ids.data_ptr<std::int64_t>();
    std::uint64_t state = seed;
    for (std::int64_t i = 0; i < ids.numel(); ++i) {
      // splitmix64; ids in [1, vocab): no padding token
      std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      z ^= z >> 31;
      data[i] = 1 + static_cast<std::int64_t>(z % static_cast<std::uint64_t>(kVocab - 1));
    }
    return ids;
  }

  std::vector<torch::Tensor> outputs(const torch::Tensor& input, Cursor& c) override {
    if (input.dim() != 2 || input.scalar_type() != torch::kInt64 || input.size(1) < 1 ||
        input.size(1) > kMaxPositions) {
      throw InputError(::psw::detail::concat(
          name(), ": the input must be token ids N x S (int64, 1 <= S <= ", kMaxPositions,
          "), not ", input.sizes(), " ", input.dtype()));
    }
    const std::int64_t n = input.size(0);
    const std::int64_t s = input.size(1);
    const torch::Tensor positions = torch::arange(s, input.options()).unsqueeze(0);
    const torch::Tensor types = torch::zeros_like(input);

    torch::Tensor h = step(c, word_, input);
    h = h + step(c, position_, positions);
    h = h + step(c, token_type_, types);
    h = step(c, emb_ln_, h);  // then dropout: identity in eval

    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    for (Layer& l : blocks_) {
      auto heads = [&](const torch::Tensor& t) {  // N x S x H -> N x heads x S x head_dim
        return t.view({n, s, heads_, head_dim_}).permute({0, 2, 1, 3});
      };
      const torch::Tensor q = heads(step(c, l.query, h));
      const torch::Tensor k = heads(step(c, l.key, h));
      const torch::Tensor v = heads(step(c, l.value, h));
      const torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
      const torch::Tensor probs = torch::softmax(scores, -1);  // then dropout: identity
      const torch::Tensor context =
          torch::matmul(probs, v).permute({0, 2, 1, 3}).contiguous().view({n, s, hidden_});
      const torch::Tensor attention = step(c, l.attn_ln, step(c, l.attn_out, context) + h);
      const torch::Tensor inter = torch::gelu(step(c, l.inter, attention));  // erf form
      h = step(c, l.out_ln, step(c, l.out, inter) + attention);
    }
    torch::Tensor pooled = torch::tanh(step(c, pooler_, h.select(1, 0)));
    c.finish();
    return {pooled};
  }

 private:
  struct Layer {
    nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attn_out{nullptr};
    nn::LayerNorm attn_ln{nullptr};
    nn::Linear inter{nullptr}, out{nullptr};
    nn::LayerNorm out_ln{nullptr};
  };
  std::int64_t hidden_;
  std::int64_t heads_;
  std::int64_t head_dim_;
  nn::Embedding word_{nullptr}, position_{nullptr}, token_type_{nullptr};
  nn::LayerNorm emb_ln_{nullptr};
  std::vector<Layer> blocks_;
  nn::Linear pooler_{nullptr};
};

}  // namespace

std::unique_ptr<ZooModel> build_bert_base() { return std::make_unique<Bert>(kBertBase); }
std::unique_ptr<ZooModel> build_bert_tiny() { return std::make_unique<Bert>(kBertTiny); }

}  // namespace psw::exec::detail
