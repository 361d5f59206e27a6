#pragma once
// `--input-shape` and `--input-dtype` of the commands that build a model (psw run, psw profile):
// a TorchScript model's input (Note [TorchScript models] in exec/torchscript.hpp). Parsed here,
// once, for both.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "psw/common/error.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::cli {

struct ModelInputOptions {
  std::string shape;  // "8,3,224,224"; empty: none given
  std::string dtype = "fp32";
  bool batch_given = false;  // --batch was on the command line
};

inline void add_model_input_options(CLI::App* cmd, ModelInputOptions& o) {
  cmd->add_option("--input-shape", o.shape,
                  "A TorchScript model's (.pt) input shape, the batch first (e.g. 8,3,224,224); the batch is --batch's");
  cmd->add_option("--input-dtype", o.dtype, "A TorchScript model's input dtype: fp32 | bf16 | fp16 | int64")
      ->capture_default_str();
}

// The input spec (nullopt when no --input-shape); the batch it sets, refusing a --batch that
// differs from the shape's first dimension.
inline std::optional<exec::InputSpec> model_input(const ModelInputOptions& o, int& batch) {
  if (o.shape.empty()) {
    if (o.dtype != "fp32") throw InputError("--input-dtype needs --input-shape");
    return std::nullopt;
  }
  exec::InputSpec spec{exec::parse_input_shape(o.shape), exec::parse_input_dtype(o.dtype)};
  if (o.batch_given && spec.shape[0] != batch) {
    throw InputError("--batch " + std::to_string(batch) + " and --input-shape " + o.shape +
                     " (whose first dimension is the batch) disagree");
  }
  if (spec.shape[0] > 4096) throw InputError("--input-shape " + o.shape + ": a batch of at most 4096");
  batch = static_cast<int>(spec.shape[0]);
  return spec;
}

}  // namespace psw::cli
