#pragma once
// SwitchPlan: the grouping of consecutive layers, the placement of each layer and the memory
// layout one switch uses.
// One type consumed by the planners, the simulator and the executor.

#include <cstddef>
#include <string>
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

struct SwitchPlan {
  std::string model;
  std::string strategy;
  Grouping groups;
  // Per layer: read in place from pinned host memory instead of copied (Note [Placement] in
  // placement.hpp); empty or all false: every layer copied.
  std::vector<bool> host_mapped;
  // Filled by the executor, which knows its tensors' alignment (exec/pipeline.hpp).
  MemoryLayout layout;
};

}  // namespace psw
