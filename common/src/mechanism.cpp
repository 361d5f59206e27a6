#include "psw/common/mechanism.hpp"

#include "psw/common/error.hpp"

namespace psw {

namespace {

struct Named {
  Mechanism mechanism;
  const char* name;
};

constexpr Named kNames[] = {
    {Mechanism::Ready, "ready"},
    {Mechanism::PipeSwitch, "pipeswitch"},
    {Mechanism::StopAndStart, "stop-and-start"},
    {Mechanism::Mps, "mps"},
    {Mechanism::OneProcess, "one-process"},
    {Mechanism::PerLayerPipeline, "per-layer-pipeline"},
    {Mechanism::GroupedTransmission, "grouped-transmission"},
    {Mechanism::NoOptimization, "no-optimization"},
    {Mechanism::NoMemoryManagement, "no-memory-management"},
    {Mechanism::NoIpcOptimization, "no-ipc-optimization"},
    {Mechanism::NoPinnedMemory, "no-pinned-memory"},
    {Mechanism::UnifiedMemory, "unified-memory"},
    {Mechanism::TwoProcesses, "two-processes"},
};

}  // namespace

Mechanism parse_mechanism(const std::string& text) {
  std::string choices;
  for (const auto& n : kNames) {
    if (text == n.name) return n.mechanism;
    choices += (choices.empty() ? "" : ", ") + std::string(n.name);
  }
  throw InputError("unknown mechanism '" + text + "': expected one of " + choices);
}

std::string to_string(Mechanism mechanism) {
  for (const auto& n : kNames) {
    if (n.mechanism == mechanism) return n.name;
  }
  return "?";
}

const std::vector<Mechanism>& all_mechanisms() {
  static const std::vector<Mechanism> all = [] {
    std::vector<Mechanism> v;
    for (const auto& n : kNames) v.push_back(n.mechanism);
    return v;
  }();
  return all;
}

}  // namespace psw
