#include "psw/common/kernel_graph.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "psw/common/input_file.hpp"
#include "psw/common/json_fields.hpp"
#include "psw/common/output.hpp"

namespace psw {

// Named, not anonymous: the unity build compiles this file with the rest of the core.
namespace kernel_graph_impl {

constexpr const char* kGraphFormat = "psw-kernel-graph-1";
constexpr std::size_t kWord = 8;  // a device pointer

std::string node_label(const KernelGraph& graph, std::size_t node) {
  const auto& name = graph.nodes[node].name;
  return "node " + std::to_string(node) + (name.empty() ? "" : " (" + name + ")");
}

// Parameters by address, for the pointer lookup; checked not to overlap.
class ParameterIndex {
 public:
  explicit ParameterIndex(const std::vector<GraphParameter>& parameters) : parameters_(parameters) {
    by_address_.resize(parameters.size());
    std::iota(by_address_.begin(), by_address_.end(), std::size_t{0});
    std::sort(by_address_.begin(), by_address_.end(),
              [&](std::size_t a, std::size_t b) { return parameters[a].address < parameters[b].address; });
    rank_.resize(parameters.size());
    for (std::size_t r = 0; r < by_address_.size(); ++r) {
      rank_[by_address_[r]] = r;
      if (r == 0) continue;
      const auto& prev = parameters[by_address_[r - 1]];
      const auto& cur = parameters[by_address_[r]];
      if (end_of(prev) > cur.address)
        throw InputError("parameters '" + prev.name + "' and '" + cur.name + "' overlap");
    }
  }

  static std::uint64_t end_of(const GraphParameter& p) { return p.address + static_cast<std::uint64_t>(p.bytes); }
  std::size_t at_rank(std::size_t rank) const { return by_address_[rank]; }

  // The parameter `pointer` points into, or one past the end of; nullopt for none.
  std::optional<std::size_t> find(std::uint64_t pointer) const {
    auto it = std::upper_bound(by_address_.begin(), by_address_.end(), pointer,
                               [&](std::uint64_t p, std::size_t i) { return p < parameters_[i].address; });
    if (it == by_address_.begin()) return std::nullopt;
    const std::size_t candidate = *std::prev(it);
    if (pointer <= end_of(parameters_[candidate])) return candidate;
    return std::nullopt;
  }

  // Every parameter overlapping [address, address + bytes).
  void overlapping(std::uint64_t address, Bytes bytes, std::vector<std::size_t>& out) const {
    if (bytes <= 0) return;
    const std::uint64_t end = address + static_cast<std::uint64_t>(bytes);
    auto it = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                               [&](std::uint64_t p, std::size_t i) { return p < parameters_[i].address; });
    if (it != by_address_.begin()) --it;
    for (; it != by_address_.end() && parameters_[*it].address < end; ++it)
      if (end_of(parameters_[*it]) > address) out.push_back(*it);
  }

  std::size_t rank(std::size_t parameter) const { return rank_[parameter]; }

 private:
  const std::vector<GraphParameter>& parameters_;
  std::vector<std::size_t> by_address_;
  std::vector<std::size_t> rank_;
};

void validate_parameters(const std::vector<GraphParameter>& parameters) {
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const auto& p = parameters[i];
    if (p.name.empty()) throw InputError("parameter " + std::to_string(i) + " has no name");
    if (!names.insert(p.name).second) throw InputError("parameter '" + p.name + "' is listed twice");
    if (p.bytes <= 0) throw InputError("parameter '" + p.name + "' has " + std::to_string(p.bytes) + " bytes");
    if (p.address > UINT64_MAX - static_cast<std::uint64_t>(p.bytes))
      throw InputError("parameter '" + p.name + "' ends beyond the address space");
  }
}

void validate_node(const KernelGraph& graph, std::size_t i) {
  const auto& node = graph.nodes[i];
  for (std::size_t dep : node.dependencies) {
    if (dep >= graph.nodes.size())
      throw InputError(node_label(graph, i) + " depends on node " + std::to_string(dep) + ", which does not exist (" +
                       std::to_string(graph.nodes.size()) + " nodes)");
    if (dep == i) throw InputError(node_label(graph, i) + " depends on itself");
  }
  if (node.kind == GraphNodeKind::Kernel && node.arguments) {
    for (const auto& slot : node.slots)
      if (slot.offset > node.arguments->size() || slot.size > node.arguments->size() - slot.offset)
        throw InputError(node_label(graph, i) + ": argument slot at " + std::to_string(slot.offset) + " of " +
                         std::to_string(slot.size) + " bytes lies outside its " +
                         std::to_string(node.arguments->size()) + "-byte argument buffer");
  }
  if ((node.kind == GraphNodeKind::Memcpy || node.kind == GraphNodeKind::Memset) &&
      (node.bytes < 0 || node.second_bytes < 0))
    throw InputError(node_label(graph, i) + " has a negative byte count");
}

// Kahn's algorithm, lowest index first, so a reader's order that is already topological stays.
std::vector<std::size_t> topological_order(const KernelGraph& graph) {
  const std::size_t n = graph.nodes.size();
  std::vector<std::size_t> waiting(n, 0);
  std::vector<std::vector<std::size_t>> dependents(n);
  for (std::size_t i = 0; i < n; ++i) {
    // A dependency listed twice is one edge.
    std::vector<std::size_t> deps = graph.nodes[i].dependencies;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    waiting[i] = deps.size();
    for (std::size_t d : deps) dependents[d].push_back(i);
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<std::size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (std::size_t d : dependents[i])
      if (--waiting[d] == 0) ready.push(d);
  }
  if (order.size() != n) {
    for (std::size_t i = 0; i < n; ++i)
      if (waiting[i] != 0) throw InputError(node_label(graph, i) + " is on a cycle of dependencies");
  }
  return order;
}

std::uint64_t load_word(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  std::uint64_t word = 0;
  std::memcpy(&word, bytes.data() + offset, kWord);  // device pointers are little-endian on every host CUDA runs on
  return word;
}

// Note [Kernel graph analysis], 1: the parameters one node uses, or why it uses all of them.
UnknownUse node_uses(const GraphNode& node, const ParameterIndex& index, std::vector<std::size_t>& out) {
  switch (node.kind) {
    case GraphNodeKind::Empty:
      return UnknownUse::None;
    case GraphNodeKind::Opaque:
      return UnknownUse::Opaque;
    case GraphNodeKind::Memcpy:
      index.overlapping(node.address, node.bytes, out);
      index.overlapping(node.second_address, node.second_bytes, out);
      return UnknownUse::None;
    case GraphNodeKind::Memset:
      index.overlapping(node.address, node.bytes, out);
      return UnknownUse::None;
    case GraphNodeKind::Kernel:
      break;
  }
  if (!node.arguments) return UnknownUse::NoArguments;
  const auto& bytes = *node.arguments;
  const auto scan = [&](std::size_t begin, std::size_t end) {
    // Aligned words within [begin, end): a pointer in a struct argument is aligned to 8.
    for (std::size_t at = (begin + kWord - 1) / kWord * kWord; at + kWord <= end; at += kWord)
      if (const auto p = index.find(load_word(bytes, at))) out.push_back(*p);
  };
  if (node.slots.empty()) {
    scan(0, bytes.size());
  } else {
    for (const auto& slot : node.slots) scan(slot.offset, slot.offset + slot.size);
  }
  return UnknownUse::None;
}

std::string module_path(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? parameter : parameter.substr(0, dot);
}

}  // namespace kernel_graph_impl

std::string to_string(GraphNodeKind kind) {
  switch (kind) {
    case GraphNodeKind::Kernel: return "kernel";
    case GraphNodeKind::Memcpy: return "memcpy";
    case GraphNodeKind::Memset: return "memset";
    case GraphNodeKind::Empty: return "empty";
    case GraphNodeKind::Opaque: return "opaque";
  }
  return "?";
}

GraphNodeKind parse_graph_node_kind(const std::string& text) {
  for (auto kind : {GraphNodeKind::Kernel, GraphNodeKind::Memcpy, GraphNodeKind::Memset, GraphNodeKind::Empty,
                    GraphNodeKind::Opaque})
    if (text == to_string(kind)) return kind;
  throw InputError("unknown node kind '" + text + "' (kernel, memcpy, memset, empty or opaque)");
}

LayerSignature KernelGraphAnalysis::signature() const {
  LayerSignature out;
  out.reserve(layers.size());
  for (const auto& layer : layers) out.emplace_back(layer.name, layer.param_bytes);
  return out;
}

KernelGraphAnalysis analyze_kernel_graph(const KernelGraph& graph) {
  using namespace kernel_graph_impl;
  validate_parameters(graph.parameters);
  const ParameterIndex index(graph.parameters);
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) validate_node(graph, i);
  if (graph.parameters.empty()) throw InputError("the graph lists no parameters: nothing to switch");

  KernelGraphAnalysis a;
  a.order = topological_order(graph);
  const std::size_t n = graph.nodes.size();
  a.uses.resize(n);
  a.unknown_use.assign(n, UnknownUse::None);
  a.node_layer.assign(n, 0);
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  a.parameter_layer.assign(graph.parameters.size(), kNone);

  std::vector<std::size_t> pending_nodes;  // before the first use: they join the first layer
  for (std::size_t node : a.order) {
    auto& uses = a.uses[node];
    a.unknown_use[node] = node_uses(graph.nodes[node], index, uses);
    std::sort(uses.begin(), uses.end());
    uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
    if (a.unknown_use[node] != UnknownUse::None) ++a.nodes_using_everything;

    // A node that uses everything starts no layer: it waits for every group, and the parameters
    // it might use keep the layers their real first uses give them.
    std::vector<std::size_t> first_used;
    for (std::size_t p : uses)
      if (a.parameter_layer[p] == kNone) first_used.push_back(p);
    if (!first_used.empty()) {
      GraphLayer layer;
      const std::size_t id = a.layers.size();
      for (std::size_t p : first_used) {
        a.parameter_layer[p] = id;
        layer.param_bytes += graph.parameters[p].bytes;
        a.packing_order.push_back(p);
      }
      layer.parameters = std::move(first_used);
      if (id == 0) layer.nodes = std::move(pending_nodes);
      a.layers.push_back(std::move(layer));
    }
    if (a.layers.empty()) {
      pending_nodes.push_back(node);
    } else {
      a.layers.back().nodes.push_back(node);
      a.node_layer[node] = a.layers.size() - 1;
    }
  }

  GraphLayer unused;
  unused.unused = true;
  for (std::size_t p = 0; p < graph.parameters.size(); ++p) {
    if (a.parameter_layer[p] != kNone) continue;
    a.parameter_layer[p] = a.layers.size();
    unused.parameters.push_back(p);
    unused.param_bytes += graph.parameters[p].bytes;
    a.packing_order.push_back(p);
  }
  a.unused_parameters = unused.parameters.size();
  if (a.layers.empty()) {
    // No node uses a parameter (every use unknown): one layer, which waits for the whole copy.
    unused.unused = false;
    unused.nodes = std::move(pending_nodes);
  }
  if (!unused.parameters.empty()) a.layers.push_back(std::move(unused));

  // Names: the module path of the layer's first parameter; a module whose parameters start two
  // layers (its weight used by one kernel, its bias by a later one) numbers the later ones.
  std::map<std::string, int> seen;
  for (auto& layer : a.layers) {
    std::string base = layer.unused ? "(unused)" : module_path(graph.parameters[layer.parameters.front()].name);
    const int count = seen[base]++;
    layer.name = count == 0 ? base : base + "#" + std::to_string(count);
  }
  return a;
}

RewrittenGraph rewrite_with_copies(const KernelGraph& graph, const KernelGraphAnalysis& analysis,
                                   const Grouping& groups, Bytes bridge) {
  using namespace kernel_graph_impl;
  validate_grouping(groups, analysis.layers.size(), "the kernel graph's grouping");
  if (bridge < 0) throw InputError("the kernel graph's copies: a negative bridge");
  const ParameterIndex index(graph.parameters);
  std::vector<std::size_t> group_of_layer(analysis.layers.size());
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t l = groups[g].first; l <= groups[g].last; ++l) group_of_layer[l] = g;

  RewrittenGraph out;
  out.copies.resize(groups.size());
  out.nodes_using_group.assign(groups.size(), 0);
  std::vector<bool> copied(graph.parameters.size(), false);  // inside an earlier group's range
  std::vector<std::size_t> inside;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::size_t> members;
    for (std::size_t l = groups[g].first; l <= groups[g].last; ++l)
      members.insert(members.end(), analysis.layers[l].parameters.begin(), analysis.layers[l].parameters.end());
    auto& copy = out.copies[g];
    for (std::size_t m : members) copy.param_bytes += graph.parameters[m].bytes;
    // Note [Kernel graph analysis], 3: a parameter an earlier group's range already copied is
    // not copied again.
    members.erase(std::remove_if(members.begin(), members.end(), [&](std::size_t m) { return copied[m]; }),
                  members.end());
    std::sort(members.begin(), members.end(),
              [&](std::size_t a, std::size_t b) { return index.rank(a) < index.rank(b); });
    // A gap is bridged when it is short and holds no parameter of an earlier group.
    auto bridges = [&](std::size_t previous, std::size_t next) {
      const auto& before = graph.parameters[previous];
      if (static_cast<Bytes>(graph.parameters[next].address - ParameterIndex::end_of(before)) > bridge) return false;
      for (std::size_t r = index.rank(previous) + 1; r < index.rank(next); ++r) {
        if (group_of_layer[analysis.parameter_layer[index.at_rank(r)]] < g) return false;
      }
      return true;
    };
    for (std::size_t k = 0; k < members.size(); ++k) {
      const auto& p = graph.parameters[members[k]];
      const bool continues = k > 0 && (index.rank(members[k]) == index.rank(members[k - 1]) + 1 ||
                                       bridges(members[k - 1], members[k]));
      if (continues) {
        copy.ranges.back().bytes = static_cast<Bytes>(ParameterIndex::end_of(p) - copy.ranges.back().address);
      } else {
        copy.ranges.push_back({p.address, p.bytes});
      }
    }
    for (const AddressRange& range : copy.ranges) {
      inside.clear();
      index.overlapping(range.address, range.bytes, inside);
      for (std::size_t q : inside) copied[q] = true;
    }
  }

  // Per node, the last group an ancestor (or itself) already waits for; chained copies make
  // waiting for g wait for 0..g (Note [Kernel graph analysis], 3).
  const std::size_t n = graph.nodes.size();
  const std::size_t last_group = groups.size() - 1;
  std::vector<std::optional<std::size_t>> covered(n);
  out.waits_for_copy.assign(n, std::nullopt);
  for (std::size_t node : analysis.order) {
    std::optional<std::size_t> inherited;
    for (std::size_t dep : graph.nodes[node].dependencies)
      if (covered[dep] && (!inherited || *covered[dep] > *inherited)) inherited = covered[dep];
    std::optional<std::size_t> needed;
    if (analysis.unknown_use[node] != UnknownUse::None) {
      needed = last_group;
      for (auto& count : out.nodes_using_group) ++count;
    } else {
      std::vector<std::size_t> used_groups;
      for (std::size_t p : analysis.uses[node]) used_groups.push_back(group_of_layer[analysis.parameter_layer[p]]);
      std::sort(used_groups.begin(), used_groups.end());
      used_groups.erase(std::unique(used_groups.begin(), used_groups.end()), used_groups.end());
      for (std::size_t g : used_groups) ++out.nodes_using_group[g];
      if (!used_groups.empty()) needed = used_groups.back();
    }
    if (needed && (!inherited || *needed > *inherited)) {
      out.waits_for_copy[node] = needed;
      ++out.added_edges;
      covered[node] = needed;
    } else {
      covered[node] = inherited;
    }
  }
  return out;
}

Bytes bridge_bytes(const LinkCost& link) {
  return static_cast<Bytes>(static_cast<double>(link.copy_fixed.ns()) * 1e-9 *
                            static_cast<double>(link.bandwidth.bytes_per_second()));
}

ModelProfile kernel_graph_profile(const KernelGraphAnalysis& analysis, const std::string& model, int batch, const std::string& dtype,
                                  const std::vector<Duration>& layer_forward, SourceInfo source) {
  if (layer_forward.size() != analysis.layers.size())
    throw InputError(model + ": " + std::to_string(layer_forward.size()) + " layer times for " +
                     std::to_string(analysis.layers.size()) + " layers");
  ModelProfile profile;
  profile.name = model;
  profile.batch = batch;
  profile.dtype = dtype;
  source.kind = ProfileSource::Measured;
  profile.source = std::move(source);
  for (std::size_t l = 0; l < analysis.layers.size(); ++l) {
    const auto& layer = analysis.layers[l];
    if (layer_forward[l] < Duration::zero())
      throw InputError(model + ": layer '" + layer.name + "' has a negative time");
    LayerProfile out;
    out.name = layer.name;
    out.kind = layer.unused ? "unused" : "kernels";
    out.param_bytes = layer.param_bytes;
    out.training_only = layer.unused;
    out.forward_time = layer.unused ? Duration::zero() : layer_forward[l];
    profile.layers.push_back(std::move(out));
  }
  return profile;
}

std::vector<Duration> layer_times_from_node_times(const KernelGraphAnalysis& analysis,
                                                  const std::vector<Duration>& node_times) {
  if (node_times.size() != analysis.node_layer.size())
    throw InputError(std::to_string(node_times.size()) + " node times for a graph of " +
                     std::to_string(analysis.node_layer.size()) + " nodes");
  std::vector<Duration> out(analysis.layers.size(), Duration::zero());
  for (std::size_t l = 0; l < analysis.layers.size(); ++l)
    for (std::size_t node : analysis.layers[l].nodes) out[l] += node_times[node];
  return out;
}

std::vector<Duration> measured_node_times(const KernelGraph& graph) {
  using namespace kernel_graph_impl;
  std::vector<Duration> out;
  out.reserve(graph.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto& node = graph.nodes[i];
    if (node.time) {
      out.push_back(*node.time);
    } else if (node.kind == GraphNodeKind::Empty) {
      out.push_back(Duration::zero());
    } else {
      throw InputError(node_label(graph, i) + " has no measured time: layer times need every " + to_string(node.kind) +
                       " node's (time_ns in the graph file)");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Note [Kernel graph file]

namespace kernel_graph_impl {

std::uint64_t read_address(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = json_fields::member(j, key, where);
  if (!v.is_number_unsigned()) throw InputError(where + ": '" + key + "' must be a non-negative integer");
  return v.get<std::uint64_t>();
}

Bytes read_bytes(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto v = json_fields::integer(j, key, where);
  if (v < 0) throw InputError(where + ": '" + key + "' must not be negative");
  return v;
}

std::vector<std::uint8_t> from_hex(const std::string& text, const std::string& where) {
  if (text.size() % 2 != 0) throw InputError(where + ": 'arguments' must be an even number of hex digits");
  const auto digit = [&](char c) -> std::uint8_t {
    if (c >= '0' && c <= '9') return static_cast<std::uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<std::uint8_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<std::uint8_t>(c - 'A' + 10);
    throw InputError(where + ": 'arguments' has '" + std::string(1, c) + "', not a hex digit");
  };
  std::vector<std::uint8_t> out(text.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  return out;
}

std::string to_hex(const std::vector<std::uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

const nlohmann::json& array_member(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = json_fields::member(j, key, where);
  if (!v.is_array()) throw InputError(where + ": '" + key + "' must be an array");
  return v;
}

}  // namespace kernel_graph_impl

KernelGraph kernel_graph_from_json(const nlohmann::json& j, const std::string& where) {
  using namespace kernel_graph_impl;
  const auto format = json_fields::text(j, "format", where);
  if (format != kGraphFormat)
    throw InputError(where + ": format '" + format + "', this build reads '" + kGraphFormat + "'");
  KernelGraph graph;
  if (j.contains("device")) graph.device = json_fields::text(j, "device", where);
  const auto& parameters = array_member(j, "parameters", where);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const std::string at = where + ": parameters[" + std::to_string(i) + "]";
    graph.parameters.push_back({json_fields::text(parameters[i], "name", at), read_address(parameters[i], "address", at),
                                read_bytes(parameters[i], "bytes", at)});
  }
  const auto& nodes = array_member(j, "nodes", where);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& jn = nodes[i];
    const std::string at = where + ": nodes[" + std::to_string(i) + "]";
    GraphNode node;
    const auto kind = json_fields::text(jn, "kind", at);
    try {
      node.kind = parse_graph_node_kind(kind);
    } catch (const InputError& e) {
      throw InputError(at + ": " + e.what());
    }
    if (jn.contains("name")) node.name = json_fields::text(jn, "name", at);
    if (jn.contains("dependencies")) {
      for (const auto& d : array_member(jn, "dependencies", at)) {
        if (!d.is_number_unsigned()) throw InputError(at + ": 'dependencies' must hold node indices");
        node.dependencies.push_back(d.get<std::size_t>());
      }
    }
    if (node.kind == GraphNodeKind::Kernel) {
      if (jn.contains("arguments")) node.arguments = from_hex(json_fields::text(jn, "arguments", at), at);
      if (jn.contains("slots")) {
        for (const auto& s : array_member(jn, "slots", at)) {
          if (!s.is_array() || s.size() != 2 || !s[0].is_number_unsigned() || !s[1].is_number_unsigned())
            throw InputError(at + ": each of 'slots' must be [offset, size]");
          node.slots.push_back({s[0].get<std::size_t>(), s[1].get<std::size_t>()});
        }
        if (!node.arguments && !node.slots.empty()) throw InputError(at + ": 'slots' without 'arguments'");
      }
    } else if (node.kind == GraphNodeKind::Memcpy || node.kind == GraphNodeKind::Memset) {
      node.address = read_address(jn, "address", at);
      node.bytes = read_bytes(jn, "bytes", at);
      if (node.kind == GraphNodeKind::Memcpy) {
        node.second_address = read_address(jn, "second_address", at);
        node.second_bytes = read_bytes(jn, "second_bytes", at);
      }
    }
    if (jn.contains("time_ns")) {
      const auto ns = json_fields::integer(jn, "time_ns", at);
      if (ns < 0) throw InputError(at + ": 'time_ns' must not be negative");
      node.time = nanoseconds(ns);
    }
    graph.nodes.push_back(std::move(node));
  }
  return graph;
}

nlohmann::json kernel_graph_to_json(const KernelGraph& graph) {
  using namespace kernel_graph_impl;
  nlohmann::json j;
  j["format"] = kGraphFormat;
  if (!graph.device.empty()) j["device"] = graph.device;
  j["parameters"] = nlohmann::json::array();
  for (const auto& p : graph.parameters)
    j["parameters"].push_back({{"name", p.name}, {"address", p.address}, {"bytes", p.bytes}});
  j["nodes"] = nlohmann::json::array();
  for (const auto& node : graph.nodes) {
    nlohmann::json jn{{"kind", to_string(node.kind)}, {"name", node.name}, {"dependencies", node.dependencies}};
    if (node.kind == GraphNodeKind::Kernel) {
      if (node.arguments) jn["arguments"] = to_hex(*node.arguments);
      if (!node.slots.empty()) {
        jn["slots"] = nlohmann::json::array();
        for (const auto& s : node.slots) jn["slots"].push_back({s.offset, s.size});
      }
    } else if (node.kind == GraphNodeKind::Memcpy || node.kind == GraphNodeKind::Memset) {
      jn["address"] = node.address;
      jn["bytes"] = node.bytes;
      if (node.kind == GraphNodeKind::Memcpy) {
        jn["second_address"] = node.second_address;
        jn["second_bytes"] = node.second_bytes;
      }
    }
    if (node.time) jn["time_ns"] = node.time->ns();
    j["nodes"].push_back(std::move(jn));
  }
  return j;
}

KernelGraph read_kernel_graph(const std::filesystem::path& file) {
  return kernel_graph_from_json(read_json_object(file, "a kernel graph (psw-kernel-graph-1 JSON)"), file.string());
}

void write_kernel_graph(const KernelGraph& graph, const std::filesystem::path& file) {
  save_text(file, kernel_graph_to_json(graph).dump() + "\n");
}

}  // namespace psw
