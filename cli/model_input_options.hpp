#pragma once
// `--input-shape` and `--input-dtype` of the commands that build a model (psw run, psw profile):
// a TorchScript model's input (Note [TorchScript models] in exec/torchscript.hpp). Parsed here,
// once, for both.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/exec/graph_switch.hpp"
#include "psw/exec/torchscript.hpp"
#include "measured_source.hpp"

namespace psw::cli {

struct ModelInputOptions {
  std::vector<std::string> shapes;  // "8,3,224,224", one per input (Note [Several inputs]); empty: none given
  std::vector<std::string> dtypes;  // none: fp32 for every input; one: for every input; else one per input
  bool batch_given = false;  // --batch was on the command line
};

inline void add_model_input_options(CLI::App* cmd, ModelInputOptions& o) {
  cmd->add_option("--input-shape", o.shapes,
                  "A user's model's (TorchScript .pt, AOTInductor .pt2) input shape, the batch first (e.g. 8,3,224,224); the batch is --batch's. "
                  "Repeat for a module of several inputs, in its forward's order");
  cmd->add_option("--input-dtype", o.dtypes,
                  "A user's model's input dtype: fp32 (default) | bf16 | fp16 | int64; one for every input, or "
                  "one per --input-shape");
}

// The input specs (none without --input-shape); the batch they set, refusing a --batch that
// differs from the shapes' first dimension.
inline std::vector<exec::InputSpec> model_input(const ModelInputOptions& o, int& batch) {
  if (o.shapes.empty()) {
    if (!o.dtypes.empty()) throw InputError("--input-dtype needs --input-shape");
    return {};
  }
  if (o.dtypes.size() > 1 && o.dtypes.size() != o.shapes.size()) {
    throw InputError(std::to_string(o.dtypes.size()) + " --input-dtype for " + std::to_string(o.shapes.size()) +
                     " --input-shape: give one for every input, or one per input");
  }
  std::vector<exec::InputSpec> specs;
  for (std::size_t i = 0; i < o.shapes.size(); ++i) {
    const std::string& dtype = o.dtypes.empty() ? "fp32" : o.dtypes[o.dtypes.size() == 1 ? 0 : i];
    specs.push_back({exec::parse_input_shape(o.shapes[i]), exec::parse_input_dtype(dtype)});
    if (specs.back().shape[0] != specs.front().shape[0]) {
      throw InputError("--input-shape " + o.shapes[i] + " and " + o.shapes[0] +
                       ": every input has the same batch, its first dimension");
    }
  }
  if (o.batch_given && specs.front().shape[0] != batch) {
    throw InputError("--batch " + std::to_string(batch) + " and --input-shape " + o.shapes.front() +
                     " (whose first dimension is the batch) disagree");
  }
  if (specs.front().shape[0] > 4096) throw InputError("--input-shape " + o.shapes.front() + ": a batch of at most 4096");
  batch = static_cast<int>(specs.front().shape[0]);
  return specs;
}

// A TorchScript model's spec for its captured graph (psw run --graph, psw profile --graph): its
// inputs (the batch checked against --batch), dtype, backend and the measured profile's source.
inline exec::GraphSwitchSpec graph_switch_spec(const std::string& model, const ModelInputOptions& input, int batch,
                                               const std::string& dtype, const std::string& backend) {
  exec::GraphSwitchSpec spec;
  spec.model = model;
  spec.inputs = model_input(input, batch);
  if (spec.inputs.empty()) throw InputError(model + ": a user's model needs its input's shape (--input-shape)");
  spec.dtype = dtype;
  spec.backend = backend;
  spec.source.date = today_utc();
  spec.source.versions = libtorch_version();
  return spec;
}

}  // namespace psw::cli
