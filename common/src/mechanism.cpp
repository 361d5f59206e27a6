#include "psw/common/mechanism.hpp"

#include "psw/common/error.hpp"

namespace psw {

namespace {

using P = ProcessModel;
using A = Allocation;
constexpr auto kPinned = HostMemory::Pinned;
constexpr auto kPageable = HostMemory::Pageable;
constexpr std::optional<Strategy> kPlanner = std::nullopt;

// Note [Mechanism table]. Stop-and-start and two processes load with the framework's plain
// `.to(device)` from ordinary (pageable) memory, as a fresh process does.
const MechanismTraits kTraits[] = {
    {Mechanism::Ready, "ready", kPlanner, kPinned, P::Resident, A::Preallocated, false, false, false},
    {Mechanism::PipeSwitch, "pipeswitch", kPlanner, kPinned, P::StandbyWorkers, A::Preallocated, true, false, false},
    {Mechanism::StopAndStart, "stop-and-start", Strategy::Single, kPageable, P::FreshProcess, A::PerTensorMalloc,
     false, false, false},
    {Mechanism::Mps, "mps", kPlanner, kPinned, P::SharedContext, A::Preallocated, false, false, false},
    {Mechanism::TimeSliced, "time-sliced", kPlanner, kPinned, P::SharedContext, A::Preallocated, false, false, false},
    {Mechanism::OneProcess, "one-process", Strategy::Single, kPinned, P::OneProcess, A::PerTensorMalloc, false,
     false, false},
    {Mechanism::PerLayerPipeline, "per-layer-pipeline", Strategy::PerLayer, kPinned, P::StandbyWorkers,
     A::Preallocated, true, false, false},
    {Mechanism::GroupedTransmission, "grouped-transmission", Strategy::Single, kPinned, P::StandbyWorkers,
     A::Preallocated, true, false, false},
    {Mechanism::NoOptimization, "no-optimization", Strategy::PerLayer, kPinned, P::StandbyWorkers, A::Preallocated,
     false, false, false},
    {Mechanism::NoMemoryManagement, "no-memory-management", kPlanner, kPinned, P::StandbyWorkers,
     A::PerTensorMalloc, true, false, false},
    {Mechanism::NoIpcOptimization, "no-ipc-optimization", kPlanner, kPinned, P::StandbyWorkers, A::Preallocated,
     true, true, false},
    {Mechanism::NoPinnedMemory, "no-pinned-memory", kPlanner, kPageable, P::StandbyWorkers, A::Preallocated, true,
     false, false},
    {Mechanism::UnifiedMemory, "unified-memory", kPlanner, kPinned, P::StandbyWorkers, A::Managed, false, false, false},
    {Mechanism::TwoProcesses, "two-processes", Strategy::Single, kPageable, P::FreshProcess, A::PerTensorMalloc,
     false, false, false},
    {Mechanism::PipeSwitchParallel, "pipeswitch-parallel", kPlanner, kPinned, P::StandbyWorkers, A::Preallocated,
     true, false, true},
};

}  // namespace

const MechanismTraits& traits(Mechanism mechanism) {
  for (const auto& t : kTraits) {
    if (t.mechanism == mechanism) return t;
  }
  throw Error("a mechanism missing from the mechanism table");
}

Strategy grouping_strategy(Mechanism mechanism, Strategy planner) {
  return traits(mechanism).grouping.value_or(planner);
}

bool switches_eagerly_in_server(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  return t.ipc_handle_per_group || t.allocation == Allocation::PerTensorMalloc || t.host_memory == HostMemory::Pageable;
}

bool has_eager_host_times(Mechanism mechanism) {
  return (traits(mechanism).pipeswitch_family || mechanism == Mechanism::OneProcess) &&
         switches_eagerly_in_server(mechanism);
}

Mechanism parse_mechanism(const std::string& text) {
  std::string choices;
  for (const auto& n : kTraits) {
    if (text == n.name) return n.mechanism;
    choices += (choices.empty() ? "" : ", ") + std::string(n.name);
  }
  throw InputError("unknown mechanism '" + text + "': expected one of " + choices);
}

std::string to_string(Mechanism mechanism) {
  for (const auto& n : kTraits) {
    if (n.mechanism == mechanism) return n.name;
  }
  return "?";
}

const std::vector<Mechanism>& all_mechanisms() {
  static const std::vector<Mechanism> all = [] {
    std::vector<Mechanism> v;
    for (const auto& n : kTraits) v.push_back(n.mechanism);
    return v;
  }();
  return all;
}

}  // namespace psw
