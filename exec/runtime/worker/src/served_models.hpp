#pragma once
// What the daemon and every worker build from the serve config, identically: per served
// model the zoo model (in its dtype; a decoder from its config file), its SwitchPlan (planned from the config's profiles, or a plan file
// checked against the live model) and the packed layout the plan implies.

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/runtime/worker/training.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::runtime {

struct ServedModel {
  std::unique_ptr<exec::ZooModel> model;
  SwitchPlan plan;
  exec::PackedLayout layout;
};

inline exec::TransferMode transfer_mode_of(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  if (t.allocation == Allocation::Managed) return exec::TransferMode::OnDemand;
  if (t.allocation == Allocation::PerTensorMalloc) return exec::TransferMode::AllocatePerTensor;
  if (t.host_memory == HostMemory::Pageable) return exec::TransferMode::Pageable;
  // The one mechanism of standby workers and one region that does not pipeline: per-layer
  // copies, the forward after the last (sim/mechanism.cpp, NoOptimization).
  if (mechanism == Mechanism::NoOptimization) return exec::TransferMode::Unpipelined;
  return exec::TransferMode::Pipelined;
}

// Every mechanism of the table (Note [Mechanism table]) runs in the server. The switch has no
// default, so a mechanism added to the table without a meaning here is named by the compiler
// (-Wswitch) and refused at start.
inline void check_served_mechanism(Mechanism mechanism) {
  switch (mechanism) {
    case Mechanism::Ready:
    case Mechanism::PipeSwitch:
    case Mechanism::StopAndStart:
    case Mechanism::Mps:
    case Mechanism::TimeSliced:
    case Mechanism::OneProcess:
    case Mechanism::PerLayerPipeline:
    case Mechanism::GroupedTransmission:
    case Mechanism::NoOptimization:
    case Mechanism::NoMemoryManagement:
    case Mechanism::NoIpcOptimization:
    case Mechanism::NoPinnedMemory:
    case Mechanism::UnifiedMemory:
    case Mechanism::TwoProcesses:
      return;
    case Mechanism::PipeSwitchParallel:  // simulated only (Note [Parallel paths])
      break;
  }
  throw InputError("mechanism '" + to_string(mechanism) + "' is not served yet");
}

// Note [Per-group handles] (exec/pipeline.hpp) in the server. The memory daemon allocates one
// device allocation per group of a model with parameters, instead of one region per model,
// and the worker opens each group's on every switch (and resident run) and closes it after
// the task. How the handles travel (the controller relays one Region message per model,
// with one descriptor, unchanged):
//   cuda  one cudaMalloc per group, its CUDA IPC handle (64 bytes) at 64 * g of a small
//         shared segment, the model's "handle table", which the Region message carries; a
//         group without parameters has a zero handle and no allocation.
//   host  one shared segment per model with every group at an offset of whole pages, which
//         the Region message carries; opening a group is mapping its pages (mmap), closing
//         it unmapping them, so each group is mapped and unmapped on its own, as a handle of
//         its own would be.
constexpr std::size_t kGroupHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t); Message::handle

// On `host`: group g's offset in the model's group segment, and the segment's size last.
inline std::vector<Bytes> group_segment_offsets(const MemoryLayout& layout, Bytes page) {
  std::vector<Bytes> offsets;
  Bytes offset = 0;
  for (const Bytes span : layout.group_span) {
    offsets.push_back(offset);
    offset += (span + page - 1) / page * page;
  }
  offsets.push_back(std::max(offset, page));  // a segment is never empty
  return offsets;
}

// An input of the size requests carry at the configured batch (the switch graph's): the zoo's
// example input, or for a decoder a prompt of prompt_tokens ids.
inline torch::Tensor served_example_input(exec::ZooModel& model, const ServedModelConfig& m, std::uint64_t seed) {
  if (exec::Decoder* decoder = exec::as_decoder(model)) return decoder->example_tokens(m.batch, m.prompt_tokens, seed);
  return model.example_input(m.batch, seed);
}

// Note [TorchScript models]: a TorchScript model's input at the configured batch; none for the
// zoo's models, which know theirs. Note [Several inputs]: several are named as the forward names
// them (load_torchscript checks), so that their order is the forward's.
inline std::vector<exec::InputSpec> served_input(const ServedModelConfig& m) {
  return torchscript_input_specs(m.inputs, m.batch);
}

// One served model: its zoo model (or decoder, or TorchScript file), its plan (planned from the
// config's profile for `hardware`, or the entry's plan file checked against the live model) and
// the packed layout the plan implies. `device`: the backend's, where an AOTInductor package is
// loaded (Note [AOTInductor packages]); the model is on the CPU.
inline ServedModel build_served_model(const ServeConfig& config, const ServedModelConfig& m,
                                      const HardwareProfile& hardware, torch::Device device) {
  ServedModel s;
  s.model = exec::open_model(m.model_argument(), 0, exec::parse_zoo_dtype(m.dtype), served_input(m), device);
  const std::filesystem::path profile_path = config.profile_path(m);
  const ModelProfile profile = load_model_profile(profile_path);
  // A profile of another dtype has other bytes: its plan would not fit the model.
  if (profile.dtype != m.dtype) {
    throw InputError(profile_path.string() + ": the profile is for dtype '" + profile.dtype + "', but '" + m.name +
                     "' is served in " + m.dtype + " (psw profile --dtype " + m.dtype + " writes one)");
  }
  if (!m.plan_file.empty()) {
    s.plan = load_switch_plan(m.plan_file);
  } else {
    const Strategy strategy = grouping_strategy(config.mechanism, m.strategy);
    s.plan = make_switch_plan(profile, hardware, Task::Inference, strategy, config.placement,
                              traits(config.mechanism).host_memory);
  }
  check_plan_matches(s.plan, s.model->name(), exec::layer_fingerprint(*s.model), s.model->layers().size(),
                     m.plan_file.empty() ? profile_path.string() : m.plan_file.string());
  s.layout = exec::pack_layout(*s.model, s.plan.groups);
  return s;
}

inline std::vector<ServedModel> build_served_models(const ServeConfig& config, torch::Device device) {
  const HardwareProfile hardware = load_hardware_profile(config.hardware);
  std::vector<ServedModel> served;
  for (const auto& m : config.models) served.push_back(build_served_model(config, m, hardware, device));
  return served;
}

}  // namespace psw::runtime
