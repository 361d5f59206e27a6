#pragma once
// Internal: the base of the zoo's models. A model is a tree of torch::nn modules named as in
// torchvision / HuggingFace (so named_parameters() gives their state_dict keys), plus the flat
// list of its layers in execution order. Layers are added in construction order, which every
// model keeps equal to its execution order; the forward walks the layers with a Cursor that
// checks each module against that list before calling the gate.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "psw/common/error.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec::detail {

// A source of psw::exec that says detail::concat means psw/common/error.hpp's; in a unity build
// it may follow this header, where the name finds this namespace first.
using psw::detail::concat;

using Pair = std::array<std::int64_t, 2>;

class ZooBase : public ZooModel {
 public:
  explicit ZooBase(std::string name);

  using ZooModel::forward;
  const std::string& name() const override { return name_; }
  // Eval mode, no autograd: the model's outputs()[0].
  torch::Tensor forward(const torch::Tensor& input, const LayerGate& gate) final;
  std::vector<torch::Tensor> training_outputs(const torch::Tensor& input, const LayerGate& gate) final;
  std::vector<ZooLayer>& layers() override { return layers_; }
  void to(torch::Device device) override;
  torch::ScalarType dtype() const override { return dtype_; }
  // Converts every floating-point parameter and buffer to `dtype` with set_data (integer
  // buffers stay as they are); make_model calls it once, after construction in fp32.
  void convert(torch::ScalarType dtype);

  // Walks the running layers in order during one forward.
  class Cursor {
   public:
    Cursor(const ZooBase& model, const LayerGate& gate) : model_(model), gate_(gate) {}
    // `module` must be the next layer that runs (training_only layers are skipped): calls the
    // gate with its index. Throws psw::Error when the forward strays from the layer list.
    void enter(const torch::nn::Module& module);
    // Every running layer must have been entered.
    void finish();
    // Whether training_only layers run in this forward (the model is in training mode).
    bool training() const { return model_.training_; }

   private:
    void skip_training_only();
    const ZooBase& model_;
    const LayerGate& gate_;
    std::size_t next_ = 0;
  };

  // One gated module call.
  template <typename Holder>
  static torch::Tensor step(Cursor& cursor, Holder& holder, const torch::Tensor& x) {
    cursor.enter(*holder);
    return holder->forward(x);
  }

 protected:
  // The model's forward through `cursor`: its outputs, the main one first (the logits, or
  // BERT's pooled output); in training (cursor.training()) Inception-v3 also returns its
  // auxiliary logits. Validates the input (InputError). Autograd and the module mode are set
  // by the caller.
  virtual std::vector<torch::Tensor> outputs(const torch::Tensor& input, Cursor& cursor) = 0;

  // Layer constructors: each registers the module at the dotted `path` (creating the parent
  // containers) and appends it to the layer list. Convolutions have no bias (as in both CNNs).
  torch::nn::Conv2d conv(const std::string& path, std::int64_t in, std::int64_t out, Pair kernel,
                         Pair stride = {1, 1}, Pair padding = {0, 0}, bool training_only = false);
  torch::nn::BatchNorm2d bn(const std::string& path, std::int64_t channels, double eps,
                            bool training_only = false);
  torch::nn::Linear linear(const std::string& path, std::int64_t in, std::int64_t out,
                           bool training_only = false);
  // padding_idx 0 (HuggingFace's word embeddings): row 0 is zero after initialise().
  torch::nn::Embedding embedding(const std::string& path, std::int64_t rows, std::int64_t dim,
                                 bool padding_idx0 = false);
  torch::nn::LayerNorm layernorm(const std::string& path, std::int64_t dim, double eps);
  // Any module as a layer (the decoder's own RMSNorm, projections and embedding).
  template <typename Holder>
  Holder add_layer(const std::string& path, Holder holder, std::string kind) {
    attach(path, holder.ptr(), std::move(kind), false);
    return holder;
  }

  // Seeded initialisation, to be called at the end of construction. LibTorch's default init
  // (from the global generator) is kept where it suits and rescaled where it does not, so that
  // construction draws every parameter once: convolutions He variance 2 / fan_in (the default
  // kaiming_uniform(a = sqrt 5) has 1 / (3 fan_in)), linear layers as default (std
  // 1 / sqrt(3 fan_in): 0.021 for 768 inputs, close to BERT's 0.02), embeddings normal(0,
  // embedding_std), BatchNorm affine and running statistics and LayerNorm affine drawn around
  // the identity. Puts the model in eval mode.
  void initialise(double embedding_std);
  // Scales a BatchNorm's affine weight (ResNet's last BatchNorm of each residual branch, so
  // that the residual stream does not double at every block).
  static void scale_bn_weight(torch::nn::BatchNorm2d& bn, double factor);

  // InputError unless `input` is N x 3 x H x W floating point with H, W >= min_size (the CNNs,
  // like torchvision's, run on any image size from their minimum up).
  void check_image(const torch::Tensor& input, std::int64_t min_size) const;
  // A seeded N x 3 x size x size image batch, uniform in [-1, 1), drawn in fp32 (the same
  // values in every dtype) and then converted to the model's dtype.
  torch::Tensor random_images(int batch, std::int64_t size, std::uint64_t seed) const;

 private:
  void attach(const std::string& path, const std::shared_ptr<torch::nn::Module>& module,
              std::string kind, bool training_only);
  std::shared_ptr<torch::nn::Module> container(const std::string& path);

  std::string name_;
  std::shared_ptr<torch::nn::Module> root_;
  std::map<std::string, std::shared_ptr<torch::nn::Module>> containers_;
  std::vector<ZooLayer> layers_;
  std::vector<const torch::nn::Module*> modules_;  // parallel to layers_
  std::vector<bool> training_only_;                // parallel to layers_
  bool training_ = false;                          // inside training_outputs()
  torch::ScalarType dtype_ = torch::kFloat32;
};

// The three models (resnet.cpp, inception.cpp, bert.cpp); construct after seeding.
std::unique_ptr<ZooModel> build_resnet152();
std::unique_ptr<ZooModel> build_inception_v3();
std::unique_ptr<ZooModel> build_bert_base();
std::unique_ptr<ZooModel> build_bert_tiny();
// The decoder family (llama.cpp) is built by make_decoder (decoder.hpp), from its config.

}  // namespace psw::exec::detail
