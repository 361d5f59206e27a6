#pragma once
// What the daemon and every worker build from the serve config, identically: per served
// model the zoo model, its SwitchPlan (planned from the config's profiles, or a plan file
// checked against the live model) and the packed layout the plan implies.

#include <memory>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/pipeline.hpp"

namespace psw::runtime {

struct ServedModel {
  std::unique_ptr<exec::ZooModel> model;
  SwitchPlan plan;
  exec::PackedLayout layout;
};

inline exec::TransferMode transfer_mode_of(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  if (t.allocation == Allocation::PerTensorMalloc) return exec::TransferMode::AllocatePerTensor;
  if (t.host_memory == HostMemory::Pageable) return exec::TransferMode::Pageable;
  return exec::TransferMode::Pipelined;
}

// The mechanisms the server runs today; InputError naming the others.
inline void check_served_mechanism(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  const bool served = mechanism == Mechanism::Ready || t.process == ProcessModel::FreshProcess ||
                      t.process == ProcessModel::SharedContext || t.process == ProcessModel::OneProcess ||
                      (t.pipeswitch_family && !t.ipc_handle_per_group && t.process == ProcessModel::StandbyWorkers);
  if (!served) {
    throw InputError("mechanism '" + to_string(mechanism) +
                     "' is not served yet: psw serve runs ready, pipeswitch, per-layer-pipeline, grouped-transmission, "
                     "no-memory-management, no-pinned-memory, stop-and-start, two-processes, mps and one-process");
  }
}

inline std::vector<ServedModel> build_served_models(const ServeConfig& config) {
  const HardwareProfile hardware = load_hardware_profile(config.hardware);
  std::vector<ServedModel> served;
  for (const auto& m : config.models) {
    ServedModel s;
    s.model = exec::make_model(m.name, 0);
    const std::filesystem::path profile_path = config.profiles / (m.name + ".yaml");
    const ModelProfile profile = load_model_profile(profile_path);
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
    served.push_back(std::move(s));
  }
  return served;
}

}  // namespace psw::runtime
