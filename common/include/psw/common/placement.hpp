#pragma once
// Placement: where each layer's parameters are read from during a switch (DESIGN.md §3).
//
// Note [Placement]: a layer is either copied into the device pool with its group, or left in
// pinned host memory and read in place by the GPU's kernels (zero-copy over PCIe). Reading in
// place pays off for a large layer of which a forward touches little: an embedding table
// (BERT-base's word embeddings are 94 MB, a batch of 8 x 128 tokens reads 3 MB of it). The
// copy then skips the layer's bytes, and its compute grows by the hardware's mapped-read cost
// of its host_read_bytes (make_switch_costs). Only layers whose profile gives host_read_bytes
// are candidates, and only for inference: a training step writes gradients to its weights.
//
//   copy  every layer copied (the paper's PipeSwitch)
//   auto  greedy: candidates by bytes saved, largest first; a candidate is kept when the
//         plan's total with it read in place is lower than without. With few candidates
//         (BERT-base has 3) this costs a few planner runs. Not exact over all subsets.
//
// The contention between in-place reads and the copy stream on the same PCIe link is not
// modelled.

#include <string>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"

namespace psw {

enum class Placement { Copy, Auto };

std::string to_string(Placement placement);
Placement parse_placement(const std::string& text);  // throws InputError naming the choices

// Per layer, true where the layer is read in place (Note [Placement]). Copy: all false. Auto:
// InputError when the hardware has no mapped link; all false for training, pageable memory or
// a model without candidates.
std::vector<bool> choose_placement(Placement placement, const ModelProfile& model, const HardwareProfile& hardware,
                                   Task task, Strategy strategy, HostMemory memory = HostMemory::Pinned);

// The names of the layers `host_mapped` reads in place, in order.
std::vector<std::string> host_mapped_names(const ModelProfile& model, const std::vector<bool>& host_mapped);
// Those names as one line ("a, b"), or "none".
std::string describe_placement(const ModelProfile& model, const std::vector<bool>& host_mapped);

// A plan with its placement, for one model on one hardware profile: what the executor runs.
// Note [Layer fingerprint] (plan.hpp) of a profile's layers.
std::uint64_t layer_fingerprint(const ModelProfile& model);

// assemble_switch_plan (plan.hpp) from a profile's layers.
SwitchPlan assemble_switch_plan(const ModelProfile& model, Strategy strategy, Grouping groups,
                                std::vector<bool> host_mapped);
// Plans with `strategy` (not Fixed) and `placement`, then assemble_switch_plan.
SwitchPlan make_switch_plan(const ModelProfile& model, const HardwareProfile& hardware, Task task,
                            Strategy strategy, Placement placement, HostMemory memory = HostMemory::Pinned);

}  // namespace psw
