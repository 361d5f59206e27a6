#pragma once
// Note [TorchScript models]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A user's own model, with no model code in the project: a TorchScript file (`torch.jit.trace` or
// `torch.jit.script` output, which LibTorch 1.13 and 2.x load) as a ZooModel. Its layers are the
// submodules that own parameters or buffers, each with those tensors, in the module tree's
// order (definition order: for a traced Sequential, its execution order), named by their path
// ("features.0", "classifier.1"; "(root)" for the module's own). The pipeline engine binds and
// copies them as any model's.
//
// The forward is the module's own, which the engine cannot gate layer by layer (TorchScript has
// no hooks in C++): every layer's gate is called before it begins, so a switch is copy-then-run
// with the plan's groups. Pipelining a TorchScript model needs its captured CUDA graph, whose
// kernels show which parameters each one reads (DESIGN.md §5, Any model): the analysis and the
// rewrite are built (Note [Kernel graph analysis]), the capture's reader and replay are not. So on
// `host` (and eagerly on `cuda`) a TorchScript model is switched, served and profiled correctly,
// without the overlap.
//
// The input is one tensor of the shape and dtype the user states (`--input-shape 8,3,224,224
// --input-dtype fp32`: its first dimension is the batch, the rest must match every input); the
// output the module's, or the first tensor of a tuple it returns.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "psw/exec/model_zoo.hpp"

namespace psw::exec {

struct InputSpec {
  std::vector<std::int64_t> shape;  // the batch first
  torch::ScalarType dtype = torch::kFloat32;
};

// "8,3,224,224" as a shape; InputError naming `text` for anything but positive integers.
std::vector<std::int64_t> parse_input_shape(const std::string& text);
// "fp32", "bf16", "fp16", "int64" (a model's input may be token ids); InputError otherwise.
torch::ScalarType parse_input_dtype(const std::string& name);

// Whether a --model argument names a TorchScript file (it ends in .pt or .pth).
bool names_torchscript(const std::string& model);

// Loads `file` as a ZooModel taking `input`. InputError naming the file for one that is missing or
// not TorchScript, a module without parameters, a shape with no batch dimension, and (at the
// first forward) an input the module refuses.
std::unique_ptr<ZooModel> load_torchscript(const std::filesystem::path& file, const InputSpec& input);

// A --model argument as the commands take it: a TorchScript file with its `input` (InputError
// without one, or when `dtype` is not its parameters'), else make_model (InputError when an input
// is given: the zoo's models and decoders know theirs).
std::unique_ptr<ZooModel> open_model(const std::string& argument, std::uint64_t seed, torch::ScalarType dtype,
                                     const std::optional<InputSpec>& input);

}  // namespace psw::exec
