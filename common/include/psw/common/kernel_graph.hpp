#pragma once
// Note [Kernel graph analysis]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// How a user's model is pipelined with no model code (DESIGN.md §5, Any model). Its forward is
// captured as a CUDA graph with every parameter at a fixed address of the device parameter region;
// the reader in exec/cuda/ describes that graph as a KernelGraph (below: plain C++, no CUDA type,
// in the core with the planners it feeds), and everything after is this file's, tested on
// synthetic graphs without a GPU and fuzzed through its file (tests/fuzz/fuzz_kernel_graph.cpp).
//
//  1. Uses. A kernel uses a parameter when one of its arguments points into the parameter's range.
//     Each argument slot (the layout `cuFuncGetParamInfo` gives) is scanned at every 8-byte-aligned
//     word, so a pointer inside a struct argument is seen too; a kernel launched through the
//     `extra` buffer (cuBLASLt's GEMMs) has its buffer and no layout, and every aligned word of it
//     is scanned. A pointer one past a parameter's end counts as using it. A memcpy or memset uses
//     the parameters its source or destination range overlaps. A kernel whose arguments could not
//     be read, and a node the reader could not see into (a child graph, a conditional), uses every
//     parameter: correct, with less overlap, and reported. A word that merely equals an address
//     adds a use that is not there: an earlier wait, never a wrong result.
//  2. Layers. In the graph's order (a topological order, the reader's where it is one), a node
//     that uses a parameter no earlier node used starts a layer; the layer is that node and the
//     nodes after it up to the next such node, and owns the parameters first used at its start.
//     Nodes before the first use belong to the first layer. Parameters no node uses (BatchNorm's
//     `num_batches_tracked`, an auxiliary head in eval) form a last layer that runs no kernel
//     (training_only): the switch still copies them, so the device copy is the whole model.
//  3. Rewriting. For a grouping of those layers (a planner's), one copy node per group, chained
//     on the copy path in group order, and an edge from a group's copy to every node that uses one
//     of its parameters. Because the copies are chained, waiting for group g's copy waits for all
//     the earlier ones, so a node gains at most one edge: from the copy of the last group it uses,
//     and only when no node it already depends on waits for that copy or a later one.
//     A group's copy is one range per run of its parameters that lie next to each other in the
//     region (with only padding between them): one range when the region was packed in the
//     order of first use (KernelGraphAnalysis::packing_order), as the engine packs a plan.
//     Two runs are one range when the gap between them is at most `bridge` bytes and holds no
//     parameter of an earlier group (a BatchNorm's unused num_batches_tracked between one layer's
//     tensors and the next's): no node reads those before this copy is done, since their users
//     wait for this group's copy or a later one; and a copy fewer saves its fixed cost, worth
//     copy_fixed x bandwidth bytes. A gap holding a parameter of an earlier group is never
//     bridged: a node may be reading it while the copy writes. A parameter that an earlier
//     group's range already holds is not copied again (the chain has it there before its users
//     wait), so the unused counters bridged into the groups before are not copied one by one at
//     the end. A group's param_bytes still counts all of its parameters.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/units.hpp"

namespace psw {

// A parameter (or buffer) of the model, where the captured graph has it.
struct GraphParameter {
  std::string name;  // the module path and tensor name ("layer1.0.conv1.weight")
  std::uint64_t address = 0;
  Bytes bytes = 0;
};

enum class GraphNodeKind {
  Kernel,
  Memcpy,  // range: the source; second_range: the destination
  Memset,  // range: the destination
  Empty,   // no work of its own (an empty node, an event record or wait, a host callback)
  Opaque,  // work the reader could not see into (a child graph, a conditional): uses everything
};

std::string to_string(GraphNodeKind kind);
GraphNodeKind parse_graph_node_kind(const std::string& text);  // InputError naming the choices

// One argument of a kernel: where it lies in the argument buffer.
struct ArgumentSlot {
  std::size_t offset = 0;
  std::size_t size = 0;
};

struct GraphNode {
  GraphNodeKind kind = GraphNodeKind::Empty;
  std::string name;  // the kernel's function name, or what the node is
  std::vector<std::size_t> dependencies;  // indices of the nodes it waits for
  // Kernel: the argument buffer as launched; nullopt when it could not be read (the kernel then
  // uses every parameter). `slots` empty: no layout known, every aligned word is scanned.
  std::optional<std::vector<std::uint8_t>> arguments;
  std::vector<ArgumentSlot> slots;
  // Memcpy and memset: the device ranges they touch (second_range only for a memcpy).
  std::uint64_t address = 0;
  Bytes bytes = 0;
  std::uint64_t second_address = 0;
  Bytes second_bytes = 0;
  // The node's GPU time in the captured graph, where the reader measured it (item 3 of the
  // chain: the profile's layer times are their sums).
  std::optional<Duration> time;
};

struct KernelGraph {
  std::string device;  // the GPU it was captured (and its nodes timed) on; may be empty
  std::vector<GraphParameter> parameters;
  std::vector<GraphNode> nodes;
};

// Why a node uses every parameter.
enum class UnknownUse { None, NoArguments, Opaque };

struct GraphLayer {
  std::string name;       // the module path of its first parameter
  std::vector<std::size_t> nodes;       // in the graph's order; empty for the unused layer
  std::vector<std::size_t> parameters;  // first used at its start (indices into KernelGraph::parameters)
  Bytes param_bytes = 0;
  bool unused = false;  // the parameters no node uses (Note [Kernel graph analysis], 2)
};

struct KernelGraphAnalysis {
  std::vector<std::size_t> order;  // the nodes in the graph's order
  // Per node: the parameters it uses (sorted), or why it uses every one.
  std::vector<std::vector<std::size_t>> uses;
  std::vector<UnknownUse> unknown_use;
  std::vector<GraphLayer> layers;
  // Per node: its layer. Per parameter: its layer.
  std::vector<std::size_t> node_layer;
  std::vector<std::size_t> parameter_layer;
  // Parameters in the order the region should be packed in: by first use, the unused last.
  std::vector<std::size_t> packing_order;
  std::size_t unused_parameters = 0;
  std::size_t nodes_using_everything = 0;

  // Each layer's name and bytes (Note [Layer fingerprint] in plan.hpp), for plans.
  LayerSignature signature() const;
};

// Throws InputError naming the node or parameter for a graph that cannot be analysed: duplicate
// or empty parameter names, a parameter of no bytes, overlapping parameters, a dependency on a
// node that does not exist or on itself, a cycle, a kernel argument slot outside its buffer.
KernelGraphAnalysis analyze_kernel_graph(const KernelGraph& graph);

// A copy of one group of layers: the device ranges it fills, in address order.
struct AddressRange {
  std::uint64_t address = 0;
  Bytes bytes = 0;
};

struct GroupCopy {
  std::vector<AddressRange> ranges;  // [first parameter's address, last one's end) per run
  Bytes param_bytes = 0;             // the parameters' bytes, without the padding between them
};

struct RewrittenGraph {
  std::vector<GroupCopy> copies;  // one per group, chained in this order on the copy path
  // Per node: the group whose copy it gains an edge from (nullopt: no new edge).
  std::vector<std::optional<std::size_t>> waits_for_copy;
  std::size_t added_edges = 0;
  // Per group: the nodes that use its parameters, counted once each (for the report).
  std::vector<std::size_t> nodes_using_group;
};

// Note [Kernel graph analysis], 3. InputError unless `groups` cover the analysis's layers, and
// for a negative `bridge`.
RewrittenGraph rewrite_with_copies(const KernelGraph& graph, const KernelGraphAnalysis& analysis,
                                   const Grouping& groups, Bytes bridge = 0);
// The gap worth bridging on `link`: the bytes it moves in one copy's fixed cost.
Bytes bridge_bytes(const LinkCost& link);

// The layers as a measured ModelProfile (the planner, the simulator and `psw run` take it as any
// other): `layer_forward` per layer, from the captured graph's timing; the unused layer is
// training_only with zero time. InputError when the times do not match the layers.
ModelProfile kernel_graph_profile(const KernelGraphAnalysis& analysis, const std::string& model, int batch, const std::string& dtype,
                                  const std::vector<Duration>& layer_forward, SourceInfo source);

// Per-node times (a kernel's measured time; 0 for nodes that do no work) summed per layer.
std::vector<Duration> layer_times_from_node_times(const KernelGraphAnalysis& analysis,
                                                  const std::vector<Duration>& node_times);
// The nodes' measured times; InputError naming the first node that does work and has none (an
// empty node without one counts as 0).
std::vector<Duration> measured_node_times(const KernelGraph& graph);

// Note [Kernel graph file]: the description as JSON, written by the reader on the GPU and read
// back anywhere, so that a graph captured on one machine is analysed and planned on another.
//   {"format": "psw-kernel-graph-1", "device": "NVIDIA H200" (optional),
//    "parameters": [{"name": ..., "address": N, "bytes": N}, ...],
//    "nodes": [{"kind": "kernel", "name": ..., "dependencies": [...],
//               "arguments": "hex bytes" (absent: could not be read), "slots": [[offset, size], ...],
//               "time_ns": N (optional: measured)},
//              {"kind": "memcpy", "name": ..., "dependencies": [...], "address": N, "bytes": N,
//               "second_address": N, "second_bytes": N}, ...]}
// `where` names the source in errors: one InputError naming the key and the node or parameter.
KernelGraph kernel_graph_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json kernel_graph_to_json(const KernelGraph& graph);
KernelGraph read_kernel_graph(const std::filesystem::path& file);
void write_kernel_graph(const KernelGraph& graph, const std::filesystem::path& file);

}  // namespace psw
