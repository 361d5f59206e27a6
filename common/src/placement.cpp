#include "psw/common/placement.hpp"

#include <algorithm>
#include <numeric>

#include "psw/common/error.hpp"

namespace psw {

std::string to_string(Placement placement) { return placement == Placement::Copy ? "copy" : "auto"; }

Placement parse_placement(const std::string& text) {
  if (text == "copy") return Placement::Copy;
  if (text == "auto") return Placement::Auto;
  throw InputError("unknown placement '" + text + "': expected copy or auto");
}

std::vector<bool> choose_placement(Placement placement, const ModelProfile& model, const HardwareProfile& hardware,
                                   Task task, Strategy strategy, HostMemory memory) {
  const std::size_t n = model.layers.size();
  std::vector<bool> mapped(n, false);
  if (placement == Placement::Copy) return mapped;
  if (!hardware.mapped) {
    throw InputError("placement auto needs the cost of reading pinned host memory in place, and hardware profile '" +
                     hardware.name + "' has no link.mapped (psw profile --link measures it)");
  }
  if (task == Task::Training || memory == HostMemory::Pageable) return mapped;
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < n; ++i) {
    if (model.layers[i].host_read_bytes > 0) candidates.push_back(i);
  }
  // Largest savings first: bytes no longer copied, minus the bytes read in place.
  std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
    const auto saved = [&](std::size_t i) { return model.layers[i].param_bytes - model.layers[i].host_read_bytes; };
    return saved(a) > saved(b);
  });
  Duration best = make_plan(strategy, make_switch_costs(model, hardware, task, memory, mapped)).total;
  for (std::size_t i : candidates) {
    mapped[i] = true;
    const Duration total = make_plan(strategy, make_switch_costs(model, hardware, task, memory, mapped)).total;
    if (total < best) {
      best = total;
    } else {
      mapped[i] = false;
    }
  }
  return mapped;
}

std::vector<std::string> host_mapped_names(const ModelProfile& model, const std::vector<bool>& host_mapped) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < host_mapped.size() && i < model.layers.size(); ++i) {
    if (host_mapped[i]) names.push_back(model.layers[i].name);
  }
  return names;
}

std::string describe_placement(const ModelProfile& model, const std::vector<bool>& host_mapped) {
  std::string line;
  for (const auto& name : host_mapped_names(model, host_mapped)) line += (line.empty() ? "" : ", ") + name;
  return line.empty() ? "none" : line;
}

namespace {

LayerSignature layer_signature(const ModelProfile& model) {
  LayerSignature signature;
  signature.reserve(model.layers.size());
  for (const auto& layer : model.layers) signature.emplace_back(layer.name, layer.param_bytes);
  return signature;
}

}  // namespace

std::uint64_t layer_fingerprint(const ModelProfile& model) { return layer_fingerprint(layer_signature(model)); }

SwitchPlan assemble_switch_plan(const ModelProfile& model, Strategy strategy, Grouping groups,
                                std::vector<bool> host_mapped) {
  return assemble_switch_plan(model.name, layer_signature(model), strategy, std::move(groups), std::move(host_mapped));
}

SwitchPlan make_switch_plan(const ModelProfile& model, const HardwareProfile& hardware, Task task, Strategy strategy,
                            Placement placement, HostMemory memory) {
  std::vector<bool> host_mapped = choose_placement(placement, model, hardware, task, strategy, memory);
  Grouping groups = make_plan(strategy, make_switch_costs(model, hardware, task, memory, host_mapped)).groups;
  return assemble_switch_plan(model, strategy, std::move(groups), std::move(host_mapped));
}

}  // namespace psw
