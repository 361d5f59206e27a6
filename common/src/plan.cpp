#include "psw/common/plan.hpp"

#include <cstdio>

#include "psw/common/error.hpp"

namespace psw {

std::string to_string(Strategy strategy) {
  switch (strategy) {
    case Strategy::Single: return "single";
    case Strategy::PerLayer: return "per-layer";
    case Strategy::PipeSwitch: return "pipeswitch";
    case Strategy::Optimal: return "optimal";
    case Strategy::Fixed: return "fixed";
  }
  return "?";
}

Strategy parse_strategy(const std::string& text) {
  for (Strategy s : {Strategy::Single, Strategy::PerLayer, Strategy::PipeSwitch, Strategy::Optimal,
                     Strategy::Fixed}) {
    if (text == to_string(s)) return s;
  }
  throw InputError("unknown strategy '" + text +
                   "': expected one of single, per-layer, pipeswitch, optimal, fixed");
}

std::uint64_t layer_fingerprint(const LayerSignature& layers) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
  auto mix = [&hash](const void* data, std::size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      hash ^= bytes[i];
      hash *= 0x100000001b3ULL;  // FNV prime
    }
  };
  for (const auto& [name, bytes] : layers) {
    mix(name.data(), name.size());
    const unsigned char separator = 0;  // "ab"+"c" and "a"+"bc" must differ
    mix(&separator, 1);
    const auto b = static_cast<std::uint64_t>(bytes);
    mix(&b, sizeof b);
  }
  return hash;
}

std::string fingerprint_hex(std::uint64_t fingerprint) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

SwitchPlan assemble_switch_plan(const std::string& model_name, const LayerSignature& layers, Strategy strategy,
                                Grouping groups, std::vector<bool> host_mapped) {
  SwitchPlan plan;
  plan.model = model_name;
  plan.strategy = strategy;
  plan.fingerprint = layer_fingerprint(layers);
  plan.num_layers = layers.size();
  plan.groups = std::move(groups);
  plan.host_mapped = std::move(host_mapped);
  if (plan.host_mapped.empty()) plan.host_mapped.assign(plan.num_layers, false);
  check_plan_matches(plan, model_name, plan.fingerprint, plan.num_layers, "plan for " + model_name);
  return plan;
}

void check_plan_matches(const SwitchPlan& plan, const std::string& model_name, std::uint64_t fingerprint,
                        std::size_t num_layers, const std::string& where) {
  if (plan.model != model_name) {
    throw InputError(where + ": the plan is for model '" + plan.model + "', not '" + model_name + "'");
  }
  if (plan.num_layers != num_layers) {
    throw InputError(detail::concat(where, ": the plan is for ", plan.num_layers, " layers but ", model_name,
                                    " has ", num_layers));
  }
  if (plan.fingerprint != fingerprint) {
    throw InputError(where + ": the plan's layer fingerprint " + fingerprint_hex(plan.fingerprint) +
                     " does not match " + model_name + "'s " + fingerprint_hex(fingerprint) +
                     " (its layers have other names, sizes or order: make the plan again from this model)");
  }
  validate_grouping(plan.groups, num_layers, where);
  if (!plan.host_mapped.empty() && plan.host_mapped.size() != num_layers) {
    throw InputError(detail::concat(where, ": placement flags for ", plan.host_mapped.size(), " layers but ",
                                    model_name, " has ", num_layers));
  }
}

void validate_grouping(const Grouping& groups, std::size_t num_layers, const std::string& where) {
  if (groups.empty()) throw InputError(where + ": the grouping has no groups");
  std::size_t next = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    if (group.first != next) {
      throw InputError(detail::concat(where, ": group ", g, " starts at layer ", group.first,
                                      " but layer ", next, " is next (groups must be "
                                      "consecutive and cover every layer once)"));
    }
    if (group.last < group.first) {
      throw InputError(detail::concat(where, ": group ", g, " ends at layer ", group.last,
                                      " before it starts at ", group.first));
    }
    if (group.last >= num_layers) {
      throw InputError(detail::concat(where, ": group ", g, " ends at layer ", group.last,
                                      " but the model has only ", num_layers, " layers (0..",
                                      num_layers - 1, ")"));
    }
    next = group.last + 1;
  }
  if (next != num_layers) {
    throw InputError(detail::concat(where, ": the groups cover layers 0..", next - 1,
                                    " but the model has ", num_layers, " layers"));
  }
}

Grouping single_group(std::size_t num_layers) {
  PSW_CHECK(num_layers > 0, "no layers");
  return {LayerGroup{0, num_layers - 1}};
}

Grouping per_layer_groups(std::size_t num_layers) {
  Grouping groups;
  groups.reserve(num_layers);
  for (std::size_t i = 0; i < num_layers; ++i) groups.push_back({i, i});
  return groups;
}

Grouping grouping_from_ends(const std::vector<std::size_t>& ends) {
  Grouping groups;
  groups.reserve(ends.size());
  std::size_t first = 0;
  for (std::size_t end : ends) {
    PSW_CHECK(end > first, "group end ", end, " not after ", first);
    groups.push_back({first, end - 1});
    first = end;
  }
  return groups;
}

MemoryLayout make_memory_layout(const std::vector<Bytes>& layer_bytes, const Grouping& groups,
                                Bytes alignment) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
    throw InputError(detail::concat("layout alignment must be a positive power of two, got ",
                                    alignment));
  }
  validate_grouping(groups, layer_bytes.size(), "memory layout");
  MemoryLayout layout;
  layout.alignment = alignment;
  layout.layer_offset.resize(layer_bytes.size());
  Bytes offset = 0;
  auto align_up = [alignment](Bytes v) { return (v + alignment - 1) / alignment * alignment; };
  for (const auto& group : groups) {
    const Bytes group_start = offset;
    layout.group_offset.push_back(group_start);
    for (std::size_t i = group.first; i <= group.last; ++i) {
      layout.layer_offset[i] = offset;
      offset = align_up(offset + layer_bytes[i]);
    }
    layout.group_span.push_back(offset - group_start);
  }
  layout.total_bytes = offset;
  return layout;
}

}  // namespace psw
