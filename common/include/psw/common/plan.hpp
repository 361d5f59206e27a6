#pragma once
// SwitchPlan: the grouping of consecutive layers, the placement of each layer and the memory
// layout one switch uses.
// One type consumed by the planners, the simulator and the executor.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "psw/common/units.hpp"

namespace psw {

// Layers first..last, inclusive, 0-based.
struct LayerGroup {
  std::size_t first = 0;
  std::size_t last = 0;
  std::size_t size() const { return last - first + 1; }
  bool operator==(const LayerGroup&) const = default;
};

using Grouping = std::vector<LayerGroup>;

// Throws InputError unless `groups` are non-empty, consecutive, and cover layers
// 0..num_layers-1 exactly once. `where` names the source of the groups in the message.
void validate_grouping(const Grouping& groups, std::size_t num_layers, const std::string& where);

Grouping single_group(std::size_t num_layers);
Grouping per_layer_groups(std::size_t num_layers);
// Builds a grouping from the exclusive end index of each group (the last must be n).
Grouping grouping_from_ends(const std::vector<std::size_t>& ends);

// Where parameters land in the device parameter region and in the pinned host buffer:
// groups contiguous in order, every layer starting at a multiple of `alignment`, so a
// group is one contiguous copy and a layer's tensors can be bound to fixed offsets.
struct MemoryLayout {
  Bytes alignment = 512;
  std::vector<Bytes> layer_offset;  // per layer
  std::vector<Bytes> group_offset;  // per group: offset of its first layer
  std::vector<Bytes> group_span;    // per group: bytes from its offset to the next group
  Bytes total_bytes = 0;
};

MemoryLayout make_memory_layout(const std::vector<Bytes>& layer_bytes, const Grouping& groups,
                                Bytes alignment);

// How a plan's grouping was chosen (planner.hpp says what each does).
enum class Strategy { Single, PerLayer, PipeSwitch, Optimal, Fixed };

std::string to_string(Strategy strategy);
Strategy parse_strategy(const std::string& text);  // throws InputError naming the choices

// Note [Layer fingerprint]: a plan is only meaningful for the layers it was made for. The
// fingerprint is a 64-bit FNV-1a hash of every layer's name and parameter bytes, in execution
// order, so a plan made for another model, or for a model with the same number of layers in
// another order or of other sizes, is refused (check_plan_matches) instead of binding
// parameters to the wrong offsets. The profile (common/) and the zoo model (exec/) hash the
// same (name, bytes) list, so a plan made from a profile is checked against the live model.
using LayerSignature = std::vector<std::pair<std::string, Bytes>>;
std::uint64_t layer_fingerprint(const LayerSignature& layers);
std::string fingerprint_hex(std::uint64_t fingerprint);  // "0x" and 16 hex digits

struct SwitchPlan {
  std::string model;
  Strategy strategy = Strategy::Optimal;
  std::uint64_t fingerprint = 0;  // of the model's layers (Note [Layer fingerprint])
  std::size_t num_layers = 0;
  Grouping groups;
  // Per layer: read in place from pinned host memory instead of copied (Note [Placement] in
  // placement.hpp); empty or all false: every layer copied.
  std::vector<bool> host_mapped;
  // Filled by the executor, which knows its tensors' alignment (exec/pipeline.hpp).
  MemoryLayout layout;
};

// The one place a SwitchPlan is built: the model's name, the fingerprint of its layers, the
// strategy, the groups and the placement (empty: every layer copied), checked against the layers.
SwitchPlan assemble_switch_plan(const std::string& model_name, const LayerSignature& layers, Strategy strategy,
                                Grouping groups, std::vector<bool> host_mapped);

// Throws InputError unless `plan` was made for a model of `model_name` whose layers hash to
// `fingerprint` (`num_layers` of them); `where` names the plan's source in the message.
void check_plan_matches(const SwitchPlan& plan, const std::string& model_name, std::uint64_t fingerprint,
                        std::size_t num_layers, const std::string& where);

}  // namespace psw
