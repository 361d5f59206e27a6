// The model zoo: the registry (make_model) and the models' common base (models/zoo_base.hpp).

#include "psw/exec/model_zoo.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <mutex>
#include <utility>

#include "models/zoo_base.hpp"
#include "psw/common/decoder_config.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/decoder.hpp"

namespace psw::exec {

Bytes ZooLayer::bytes() const {
  Bytes total = 0;
  for (const torch::Tensor& t : tensors) total += static_cast<Bytes>(t.nbytes());
  return total;
}

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<ZooModel> (*build)();
};

constexpr Entry kModels[] = {
    {"resnet152", &detail::build_resnet152},
    {"inception_v3", &detail::build_inception_v3},
    {"bert_base", &detail::build_bert_base},
    {"bert_tiny", &detail::build_bert_tiny},
};

}  // namespace

std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names;
  for (const Entry& e : kModels) names.emplace_back(e.name);
  return names;
}

namespace {

struct DtypeEntry {
  const char* name;
  torch::ScalarType type;
};

constexpr DtypeEntry kDtypes[] = {
    {"fp32", torch::kFloat32},
    {"bf16", torch::kBFloat16},
    {"fp16", torch::kFloat16},
};

std::string dtype_choices() {
  std::string out;
  for (const DtypeEntry& d : kDtypes) out += std::string(out.empty() ? "" : ", ") + d.name;
  return out;
}

}  // namespace

std::vector<std::string> zoo_dtype_names() {
  std::vector<std::string> names;
  for (const DtypeEntry& d : kDtypes) names.emplace_back(d.name);
  return names;
}

torch::ScalarType parse_zoo_dtype(const std::string& name) {
  for (const DtypeEntry& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  throw InputError("unknown dtype '" + name + "' (the zoo's dtypes: " + dtype_choices() + ")");
}

std::string zoo_dtype_name(torch::ScalarType dtype) {
  for (const DtypeEntry& d : kDtypes) {
    if (dtype == d.type) return d.name;
  }
  throw Error(::psw::detail::concat("dtype ", dtype, " is not one of the zoo's (", dtype_choices(), ")"));
}

std::unique_ptr<ZooModel> make_model(const std::string& name, std::uint64_t seed, torch::ScalarType dtype) {
  // A decoder is sized by its config file, built in its dtype and seeds its own weights (no
  // global generator).
  if (names_decoder_config(name)) return make_decoder(load_decoder_config(name), seed, dtype);
  for (const Entry& e : kModels) {
    if (name != e.name) continue;
    if (std::none_of(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeEntry& d) { return d.type == dtype; })) {
      throw InputError(::psw::detail::concat("make_model: dtype ", dtype, " is not one of the zoo's (",
                                             dtype_choices(), ")"));
    }
    std::unique_ptr<ZooModel> model;
    {
      // The global generator is seeded and then consumed by the construction: one at a time.
      static std::mutex mutex;
      std::lock_guard<std::mutex> lock(mutex);
      torch::manual_seed(seed);
      model = e.build();
    }
    // Built in fp32 whatever the dtype, so that every dtype holds the same seeded values
    // (rounded): the tests compare a bf16 model's output against the fp32 one's.
    if (dtype != torch::kFloat32) {
      auto* base = dynamic_cast<detail::ZooBase*>(model.get());
      PSW_CHECK(base != nullptr, name, ": the zoo converts models built on ZooBase only");
      base->convert(dtype);
    }
    return model;
  }
  std::string known;
  for (const Entry& e : kModels) known += std::string(known.empty() ? "" : ", ") + e.name;
  throw InputError("unknown model '" + name + "' in the model zoo (known: " + known +
                   "; or a decoder's config file, configs/zoo/*.yaml)");
}

// ------------------------------------------------------------------------------------------
// ZooBase
// ------------------------------------------------------------------------------------------

torch::Tensor ZooModel::training_loss(const torch::Tensor& input, const LayerGate& gate) {
  const std::vector<torch::Tensor> outs = training_outputs(input, gate);
  torch::Tensor loss = outs.at(0).pow(2).mean();
  for (std::size_t i = 1; i < outs.size(); ++i) loss = loss + 0.4 * outs[i].pow(2).mean();
  return loss;
}

namespace detail {

ZooBase::ZooBase(std::string name)
    : name_(std::move(name)), root_(std::make_shared<torch::nn::Module>(name_)) {}

void ZooBase::to(torch::Device device) {
  // Module::to rebinds each parameter and buffer with set_data, so the layers' tensors, which
  // share their TensorImpl, follow.
  root_->to(device);
}

void ZooBase::convert(torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  // Not Module::to(dtype): LibTorch's converts every buffer, integer ones included, where
  // PyTorch's converts floating-point tensors only (num_batches_tracked stays int64, as in a
  // state_dict saved from a bf16 torchvision model). set_data keeps each TensorImpl, so the
  // layers' tensors, which share it, follow.
  for (torch::Tensor& t : root_->parameters(/*recurse=*/true)) {
    if (t.is_floating_point()) t.set_data(t.to(dtype));
  }
  for (torch::Tensor& t : root_->buffers(/*recurse=*/true)) {
    if (t.is_floating_point()) t.set_data(t.to(dtype));
  }
  dtype_ = dtype;
}

std::shared_ptr<torch::nn::Module> ZooBase::container(const std::string& path) {
  if (path.empty()) return root_;
  if (auto it = containers_.find(path); it != containers_.end()) return it->second;
  const auto dot = path.rfind('.');
  auto parent = container(dot == std::string::npos ? std::string() : path.substr(0, dot));
  auto child = parent->register_module(
      dot == std::string::npos ? path : path.substr(dot + 1), std::make_shared<torch::nn::Module>());
  containers_.emplace(path, child);
  return child;
}

void ZooBase::attach(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
                     std::string kind, bool training_only) {
  const auto dot = path.rfind('.');
  auto parent = container(dot == std::string::npos ? std::string() : path.substr(0, dot));
  parent->register_module(dot == std::string::npos ? path : path.substr(dot + 1), module);
  ZooLayer layer{path, std::move(kind), {}, {}};
  for (const auto& p : module->named_parameters(/*recurse=*/false)) {
    layer.tensors.push_back(p.value());
    layer.tensor_names.push_back(p.key());
  }
  for (const auto& b : module->named_buffers(/*recurse=*/false)) {
    layer.tensors.push_back(b.value());
    layer.tensor_names.push_back(b.key());
  }
  layers_.push_back(std::move(layer));
  modules_.push_back(module.get());
  training_only_.push_back(training_only);
}

torch::nn::Conv2d ZooBase::conv(const std::string& path, std::int64_t in, std::int64_t out,
                                Pair kernel, Pair stride, Pair padding, bool training_only) {
  torch::nn::Conv2d m(torch::nn::Conv2dOptions(in, out, torch::ExpandingArray<2>(kernel))
                          .stride(torch::ExpandingArray<2>(stride))
                          .padding(torch::ExpandingArray<2>(padding))
                          .bias(false));
  attach(path, m.ptr(), "conv", training_only);
  return m;
}

torch::nn::BatchNorm2d ZooBase::bn(const std::string& path, std::int64_t channels, double eps,
                                   bool training_only) {
  torch::nn::BatchNorm2d m(torch::nn::BatchNorm2dOptions(channels).eps(eps));
  attach(path, m.ptr(), "bn", training_only);
  return m;
}

torch::nn::Linear ZooBase::linear(const std::string& path, std::int64_t in, std::int64_t out,
                                  bool training_only) {
  torch::nn::Linear m(torch::nn::LinearOptions(in, out));
  attach(path, m.ptr(), "linear", training_only);
  return m;
}

torch::nn::Embedding ZooBase::embedding(const std::string& path, std::int64_t rows,
                                        std::int64_t dim, bool padding_idx0) {
  auto options = torch::nn::EmbeddingOptions(rows, dim);
  if (padding_idx0) options.padding_idx(0);
  torch::nn::Embedding m(options);
  attach(path, m.ptr(), "embedding", false);
  return m;
}

torch::nn::LayerNorm ZooBase::layernorm(const std::string& path, std::int64_t dim, double eps) {
  torch::nn::LayerNorm m(torch::nn::LayerNormOptions({dim}).eps(eps));
  attach(path, m.ptr(), "layernorm", false);
  return m;
}

void ZooBase::initialise(double embedding_std) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::vector<torch::Tensor>& t = layers_[i].tensors;
    const std::string& kind = layers_[i].kind;
    if (kind == "conv") {
      t[0].mul_(std::sqrt(6.0));  // variance 1 / (3 fan_in) -> 2 / fan_in
    } else if (kind == "bn") {
      t[0].uniform_(0.8, 1.2);   // weight
      t[1].uniform_(-0.1, 0.1);  // bias
      t[2].uniform_(-0.1, 0.1);  // running_mean
      t[3].uniform_(0.5, 1.5);   // running_var
    } else if (kind == "embedding") {
      t[0].mul_(embedding_std);  // the default is normal(0, 1)
      const auto* emb = dynamic_cast<const torch::nn::EmbeddingImpl*>(modules_[i]);
      PSW_CHECK(emb != nullptr, "layer ", layers_[i].name, " is not an embedding");
      if (emb->options.padding_idx().has_value()) t[0][*emb->options.padding_idx()].zero_();
    } else if (kind == "layernorm") {
      t[0].uniform_(0.9, 1.1);
      t[1].uniform_(-0.05, 0.05);
    }
  }
  root_->eval();
}

void ZooBase::scale_bn_weight(torch::nn::BatchNorm2d& bn, double factor) {
  torch::NoGradGuard no_grad;
  bn->weight.mul_(factor);
}

void ZooBase::check_image(const torch::Tensor& input, std::int64_t min_size) const {
  if (input.dim() != 4 || input.size(1) != 3 || input.size(2) < min_size ||
      input.size(3) < min_size || input.scalar_type() != dtype_) {
    throw InputError(::psw::detail::concat(name_, ": the input must be images N x 3 x H x W, ",
                                           "in the model's dtype ", zoo_dtype_name(dtype_),
                                           ", H and W at least ", min_size,
                                           ", not ", input.sizes(), " ", input.dtype()));
  }
}

torch::Tensor ZooBase::random_images(int batch, std::int64_t size, std::uint64_t seed) const {
  if (batch < 1) throw InputError(::psw::detail::concat("batch must be at least 1, not ", batch));
  torch::Tensor images = torch::empty({batch, 3, size, size}, torch::kFloat32);
  float* data = images.data_ptr<float>();
  std::uint64_t state = seed;
  const auto n = images.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    // splitmix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    data[i] = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
  }
  return dtype_ == torch::kFloat32 ? images : images.to(dtype_);
}

torch::Tensor ZooBase::forward(const torch::Tensor& input, const LayerGate& gate) {
  torch::NoGradGuard no_grad;
  Cursor cursor(*this, gate);
  return outputs(input, cursor).at(0);
}

std::vector<torch::Tensor> ZooBase::training_outputs(const torch::Tensor& input, const LayerGate& gate) {
  // Train mode for this forward only, restored even when the forward throws.
  struct TrainingScope {
    ZooBase& model;
    explicit TrainingScope(ZooBase& m) : model(m) {
      model.root_->train(true);
      model.training_ = true;
    }
    ~TrainingScope() {
      model.training_ = false;
      model.root_->eval();
    }
    TrainingScope(const TrainingScope&) = delete;
    TrainingScope& operator=(const TrainingScope&) = delete;
  } scope(*this);
  torch::AutoGradMode grad(true);
  Cursor cursor(*this, gate);
  return outputs(input, cursor);
}

void ZooBase::Cursor::skip_training_only() {
  if (model_.training_) return;
  while (next_ < model_.layers_.size() && model_.training_only_[next_]) ++next_;
}

void ZooBase::Cursor::enter(const torch::nn::Module& module) {
  skip_training_only();
  PSW_CHECK(next_ < model_.layers_.size(), model_.name_, ": the forward runs more layers than ",
            "the model lists");
  PSW_CHECK(model_.modules_[next_] == &module, model_.name_,
            ": the forward runs a layer out of order where ", model_.layers_[next_].name,
            " (layer ", next_, ") is expected");
  gate_(next_);
  ++next_;
}

void ZooBase::Cursor::finish() {
  skip_training_only();
  PSW_CHECK(next_ == model_.layers_.size(), model_.name_, ": the forward ran ", next_, " of ",
            model_.layers_.size(), " layers");
}

}  // namespace detail
}  // namespace psw::exec
