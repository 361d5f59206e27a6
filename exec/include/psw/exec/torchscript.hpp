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
// no hooks in C++): every layer's gate is called before it begins, so a switch through the engine
// is copy-then-run with the plan's groups. That is what `host`, the server and `psw run` without
// --graph do: correct, without the overlap. Pipelining a TorchScript model goes through its
// captured CUDA graph, whose kernels show which parameters each one reads: Note [Graph-pipelined
// switch] (captured_forward.hpp), `psw run --model FILE.pt --graph` on `cuda`.
//
// The input is one tensor of the shape and dtype the user states (`--input-shape 8,3,224,224
// --input-dtype fp32`: its first dimension is the batch, the rest must match every input); the
// output the module's, or the first tensor of a tuple it returns.
//
// Note [Several inputs]
// ~~~~~~~~~~~~~~~~~~~~~
// A module whose forward takes several tensors (a BERT's input_ids and attention_mask) is given
// one InputSpec per argument, in order, all with the same batch. The engine, the worker and the
// server's messages carry one input tensor per request, so such a model takes its inputs packed
// into one: uint8 [batch, sum of each input's bytes per sample], row b holding every input's
// sample b in argument order (pack_inputs). The model's forward unpacks it (a narrow, a copy and a
// view per input: a few kernels, captured with the rest) and calls the module with the tensors.
// A model of one input takes it as it is.
//
// Note [AOTInductor packages]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A user's model compiled ahead of time (torch.export, then torch._inductor.
// aoti_compile_and_package: a .pt2 with the compiled forward as a shared library and its
// weights), where the LibTorch at hand has AOTInductor (2.6 and later: the GPU hosts'; not
// Debian's 1.13, which refuses a .pt2 with one clear error). It is a ZooModel as a TorchScript
// module is:
//  - its layers are the modules of the constants it exposes, by their original names
//    ("layer1.0.conv1" holds layer1.0.conv1.weight), grouped by module and ordered by module path
//    (constants_by_module), each tensor our own copy. A package need not expose every
//    parameter: PyTorch 2.11 exposed only the weights of a conv (with bias), BatchNorm, linear
//    net and kept the biases and BatchNorm's tensors to itself (resident in its own memory; they
//    are not switched);
//  - its forward calls every gate first (there is no gate inside compiled code), then makes the
//    package read the exposed constants where the layer tensors are now (the engine binds them
//    into the device region): its "user-managed" constants, set again only when a tensor moved.
//    The package's own copy stays on the device beside them: what it keeps to itself lives there
//    too, and swapping in a new set (which would free the copy) left those unset. A served
//    package's copy is counted in every worker at the bytes of the constants it exposes (Note
//    [Device memory limit]; what it folded at compile time is not listed, so a lower bound);
//  - it is loaded single-threaded, so that its run takes no lock and waits for nothing, and a
//    CUDA graph can capture it: it is pipelined through its captured graph (Note
//    [Graph-pipelined switch]) like a TorchScript module, `psw run --model FILE.pt2 --graph`;
//  - it runs on the device it was compiled for only, at the input shapes it was compiled at
//    (AOTI_RUNTIME_CHECK_INPUTS is set so that the package refuses others), and has no backward:
//    it serves and switches, it does not train.

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
  // The forward's name for it (a served model's inputs are named so that their order is the
  // forward's); empty: not checked.
  std::string name = {};
};

// "8,3,224,224" as a shape; InputError naming `text` for anything but positive integers.
std::vector<std::int64_t> parse_input_shape(const std::string& text);
// "fp32", "bf16", "fp16", "int64" (a model's input may be token ids); InputError otherwise.
torch::ScalarType parse_input_dtype(const std::string& name);

// Whether a --model argument names a TorchScript file (it ends in .pt or .pth).
bool names_torchscript(const std::string& model);
// Whether it names an AOTInductor package (it ends in .pt2): Note [AOTInductor packages].
bool names_aoti_package(const std::string& model);
// Whether it names a user's model file of either kind, which takes --input-shape.
bool names_model_file(const std::string& model);

// Loads `file` as a ZooModel taking `inputs` (Note [Several inputs] for more than one). InputError
// naming the file for one that is missing or not TorchScript, a module without parameters, no
// input, a shape with no batch dimension, inputs of different batches, as many inputs as the
// module's forward does not take, a named input that is not the forward's argument in its place,
// and (at the first forward) an input the module refuses.
std::unique_ptr<ZooModel> load_torchscript(const std::filesystem::path& file, const std::vector<InputSpec>& inputs);
std::unique_ptr<ZooModel> load_torchscript(const std::filesystem::path& file, const InputSpec& input);

// Note [AOTInductor packages]: loads `file` (torch._inductor.aoti_compile_and_package output) as
// a ZooModel taking `inputs`. InputError naming the file where the LibTorch at hand has no
// AOTInductor (LibTorch 1.13), for a missing file or one that is not a package, a package for
// another device than `device` (where it runs: its layers' tensors are on the CPU when it
// returns, as every model's), and the checks of load_torchscript's inputs.
std::unique_ptr<ZooModel> load_aoti_package(const std::filesystem::path& file, const std::vector<InputSpec>& inputs,
                                            torch::Device device);
// Whether this build can load AOTInductor packages.
bool aoti_packages_supported();

// Note [AOTInductor packages]: a package's constants grouped into layers by module. `names` are
// the constants' original names ("layer1.0.bn1.weight"), in any order (a package lists them from
// a hash map); one entry per module ("(root)" for a name without a dot), with the indices of its
// constants in `names` and each one's name in the module ("weight"), in `names`' order. The
// modules are ordered by path, a numeric component as a number (features.2 before features.10,
// numbered children before named ones), the root's last: the region is packed in this order, and
// a package's listing order scattered the groups of a plan over dozens of copies.
struct ModuleConstants {
  std::string module;
  std::vector<std::size_t> constants;
  std::vector<std::string> tensor_names;
};
std::vector<ModuleConstants> constants_by_module(const std::vector<std::string>& names);

// Note [Several inputs]: the tensors (each [batch, ...], one batch) as the one input a model of
// several takes. InputError for none, or for tensors of different batches.
torch::Tensor pack_inputs(const std::vector<torch::Tensor>& inputs);

// The names of the module's forward arguments (without `self`), as its schema gives them.
std::vector<std::string> torchscript_input_names(const std::filesystem::path& file);

// A --model argument as the commands take it: a TorchScript file or an AOTInductor package with
// its `inputs` (InputError without one, or when `dtype` is not its parameters'), else make_model
// (InputError when an input is given: the zoo's models and decoders know theirs). A package is
// loaded onto `device` (where it must run); every other model is built on the CPU.
std::unique_ptr<ZooModel> open_model(const std::string& argument, std::uint64_t seed, torch::ScalarType dtype,
                                     const std::vector<InputSpec>& inputs, torch::Device device = torch::kCPU);

}  // namespace psw::exec
