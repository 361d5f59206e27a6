#pragma once
// The inputs of a user's model file (a TorchScript module or an AOTInductor package): the specs
// the user gave, an example of them, and the one input a request carries turned into the
// forward's tensors (Note [Several inputs] in psw/exec/torchscript.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "psw/exec/model_zoo.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::exec {

class ModelInputs {
 public:
  // InputError naming `file` for no input, an input without a shape, or inputs of different
  // batches.
  ModelInputs(const std::string& file, std::vector<InputSpec> specs);

  const std::vector<InputSpec>& specs() const { return specs_; }
  // Seeded values of every input at `batch`: floats in [-1, 1), integers in [0, 512); packed
  // when there are several.
  torch::Tensor example(int batch, std::uint64_t seed) const;
  // The forward's tensors from the one input: that input checked against its spec, or the
  // packed row unpacked (narrow, copy, view per input). InputError naming `model` otherwise.
  std::vector<torch::Tensor> unpack(const torch::Tensor& input, const std::string& model) const;

 private:
  std::vector<InputSpec> specs_;
  std::vector<std::int64_t> sample_bytes_;  // per input: its bytes per sample
};

// The dtype of a user's model: that of its first floating-point tensor (fp32 where none is).
torch::ScalarType floating_dtype(const std::vector<ZooLayer>& layers);

}  // namespace psw::exec
