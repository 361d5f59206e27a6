#pragma once
// ModelProfile: one model at one batch size and dtype, as the ordered list of its layers.
//
// A layer is the unit of transfer and of gating: a module that owns parameters or
// buffers. Parameterless operations (ReLU, pooling, residual adds, attention score
// matmuls) are folded into a neighbouring layer's costs by whoever writes the profile.
//
// Costs come in one of two forms, said by `source.kind`:
//  - analytic: FLOPs and memory traffic per layer; times come from a HardwareProfile's
//    compute model (see cost_model.hpp);
//  - measured: forward and backward times per layer, measured on `source.device`.

#include <optional>
#include <string>
#include <vector>

#include "psw/common/units.hpp"

namespace psw {

enum class ProfileSource { Analytic, Measured };

std::string to_string(ProfileSource source);

// Where a profile's numbers come from. For measured profiles, the device and versions
// they were measured with; for analytic ones, a note on the model used.
struct SourceInfo {
  ProfileSource kind = ProfileSource::Analytic;
  std::string note;
  std::string device;    // measured: the GPU
  std::string date;      // measured: ISO date
  std::string versions;  // measured: driver, CUDA, LibTorch
};

struct LayerProfile {
  std::string name;
  std::string kind;        // conv, bn, linear, embedding, layernorm, ...
  Bytes param_bytes = 0;   // parameters plus buffers
  Bytes activation_bytes = 0;  // output activation, what training keeps for backward
  bool training_only = false;  // runs only in training (Inception-v3's auxiliary head)
  // Bytes of its parameters one forward reads when the layer stays in pinned host memory and
  // the GPU reads it in place (an embedding fetches one row per token); 0: the layer is never
  // read in place (DESIGN.md §3 placement, Note [Placement] in placement.hpp).
  Bytes host_read_bytes = 0;

  // Analytic costs (source: analytic).
  std::int64_t forward_flops = 0;
  Bytes forward_memory_bytes = 0;
  std::int64_t backward_flops = 0;
  Bytes backward_memory_bytes = 0;

  // Measured costs (source: measured).
  std::optional<Duration> forward_time;
  std::optional<Duration> backward_time;
};

struct ModelProfile {
  std::string name;
  int batch = 0;
  std::string dtype;
  SourceInfo source;
  std::vector<LayerProfile> layers;

  Bytes total_param_bytes() const;
  std::size_t num_layers() const { return layers.size(); }
};

// What the switched-in task does with the model.
enum class Task { Inference, Training };

std::string to_string(Task task);
Task parse_task(const std::string& text);  // throws InputError

}  // namespace psw
