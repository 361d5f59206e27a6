#pragma once
// The model zoo (DESIGN.md §5): the paper's models written by hand in LibTorch C++ with random,
// seeded weights (no downloads). Each model lists its layers in execution order, exactly the
// layers of configs/models/<name>.yaml (scripts/gen_model_profiles.py), and runs its forward
// through a gate called before each layer, so that the pipeline engine can wait there for the
// layer's group and a test can prove the order.
//
// Architectures (parameter shapes and module names identical to the originals):
//  - resnet152:    torchvision resnet152() (Bottleneck [3, 8, 36, 3]), input N x 3 x 224 x 224;
//  - inception_v3: torchvision inception_v3(aux_logits=True, transform_input=False), input
//                  N x 3 x 299 x 299; the AuxLogits layers sit after Mixed_6e and run only in
//                  training, so inference does not gate them;
//  - bert_base:    HuggingFace BertModel (bert-base-uncased config) with pooler, token ids
//                  N x 128 (int64), no padding (attention mask all ones), token types 0;
//  - bert_tiny:    the same with Google's BERT-Tiny config (google/bert_uncased_L-2_H-128_A-2:
//                  hidden 128, 2 layers of 2 heads; 4.4 M parameters), for the CPU.
// Data types: fp32, bf16 or fp16 (make_model's dtype). A model is always built in fp32, so the
// seeded values are the same in every dtype, and then converted: a bf16 model holds the fp32
// model's values rounded to bf16, and its forward runs in bf16 throughout.
// forward() runs with eval semantics (BatchNorm on running statistics, dropout the identity) and
// without autograd; training_loss() runs the training forward (BatchNorm on batch statistics,
// Inception's auxiliary head) with autograd, for the profiler's backward times.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "psw/common/units.hpp"

namespace psw::exec {

// One layer as the executor moves it: the module that owns parameters or buffers, with its
// tensors (parameters then buffers, in registration order). The tensors share their
// TensorImpl with the module's, so `t.set_data(view)` rebinds the module's own tensor.
struct ZooLayer {
  std::string name;  // as in configs/models/<model>.yaml, e.g. "layer1.0.conv1"
  std::string kind;  // conv, bn, linear, embedding, layernorm
  std::vector<torch::Tensor> tensors;
  // Parallel to tensors: each one's name in its module ("weight", "running_mean", ...), so
  // that name + "." + tensor_names[i] is its key in the original's state_dict.
  std::vector<std::string> tensor_names = {};
  Bytes bytes() const;  // sum of nbytes over tensors
};

// Called with the layer index just before that layer computes (the pipeline engine waits
// there until the layer's group has arrived).
using LayerGate = std::function<void(std::size_t layer)>;

class ZooModel {
 public:
  virtual ~ZooModel() = default;
  virtual const std::string& name() const = 0;
  // Layers in execution order, exactly the layers of configs/models/<name>.yaml (same names,
  // same order, and each layer's bytes() equal to its param_bytes there).
  virtual std::vector<ZooLayer>& layers() = 0;
  // A deterministic example input for `batch` (images N x 3 x 224 x 224 for ResNet,
  // 299 x 299 for Inception-v3, in the model's dtype: the fp32 images rounded; token ids
  // N x 128 (int64) for BERT), seeded. On the CPU, independent of the global random generator.
  virtual torch::Tensor example_input(int batch, std::uint64_t seed) const = 0;
  // Inference forward (eval mode, no grad): calls gate(i) before layer i computes, for every
  // layer that runs, in execution order (Inception's training_only AuxLogits layers do not
  // run in inference, so their gates are not called). The output: logits (N x 1000) for the
  // CNNs; for BERT the pooled output (N x 768). The input must be on the model's device. Like
  // the originals, the CNNs run on any image size from their minimum up (ResNet 32 x 32,
  // Inception 75 x 75) and BERT on any sequence length from 1 to 512; InputError for an input
  // of the wrong rank, dtype (images in the model's dtype(), token ids int64) or a smaller size.
  virtual torch::Tensor forward(const torch::Tensor& input, const LayerGate& gate) = 0;
  torch::Tensor forward(const torch::Tensor& input) {
    return forward(input, [](std::size_t) {});
  }
  // One training forward with autograd on: train mode (BatchNorm on batch statistics, running
  // statistics updated), every layer gated in execution order, training_only layers included.
  // Returns the outputs, N x classes each: the model's output first (logits for the CNNs, the
  // pooled output for BERT, the last position's logits for a decoder), then any auxiliary head's
  // (Inception-v3's AuxLogits). The model is back in eval mode on return. The training job
  // (exec/runtime/worker/training.hpp) computes its objective from them.
  virtual std::vector<torch::Tensor> training_outputs(const torch::Tensor& input, const LayerGate& gate) = 0;
  // A scalar surrogate loss over training_outputs that depends on every layer's parameters: the
  // mean square of the outputs (Inception-v3 adds 0.4 x that of its auxiliary logits,
  // torchvision's weight). loss.backward() then fills every parameter's grad: what the profiler
  // times (the backward's cost does not depend on the objective).
  torch::Tensor training_loss(const torch::Tensor& input, const LayerGate& gate);
  // Moves every parameter and buffer to `device` (the model is built on the CPU). The layers'
  // tensors keep sharing their TensorImpl with the modules.
  virtual void to(torch::Device device) = 0;
  // The dtype of the model's floating-point parameters and buffers (make_model's dtype).
  // Integer buffers (BatchNorm's num_batches_tracked) stay int64 in every dtype.
  virtual torch::ScalarType dtype() const = 0;
};

// "resnet152", "inception_v3", "bert_base", "bert_tiny"; weights random, deterministic from `seed`
// (torch::manual_seed before construction, and BatchNorm running stats set to non-trivial
// seeded values so that outputs are not degenerate); InputError (psw/common/error.hpp) for an
// unknown name, listing the known ones. Seeds the global LibTorch generator; calls from
// several threads are serialised. `dtype` (kFloat32, kBFloat16 or kFloat16; InputError
// otherwise): the model is built in fp32 with the same values whatever the dtype, then every
// floating-point parameter and buffer is converted in place (set_data: the layers' tensors
// keep sharing their TensorImpl with the modules). Or the path of a decoder's config file
// (configs/zoo/*.yaml, any name ending in .yaml): make_decoder (decoder.hpp), built directly in
// `dtype` and seeded by its own hash.
std::unique_ptr<ZooModel> make_model(const std::string& name, std::uint64_t seed = 0,
                                     torch::ScalarType dtype = torch::kFloat32);
std::vector<std::string> zoo_model_names();

// The zoo's dtypes by the names ModelProfile::dtype and --dtype use: "fp32", "bf16", "fp16".
// InputError naming the value and the choices for anything else.
torch::ScalarType parse_zoo_dtype(const std::string& name);
// The inverse: "fp32", "bf16" or "fp16"; psw::Error for another ScalarType.
std::string zoo_dtype_name(torch::ScalarType dtype);
std::vector<std::string> zoo_dtype_names();  // fp32, bf16, fp16

}  // namespace psw::exec
