// Note [Kernel graph analysis] on synthetic graphs: which parameters a node uses (argument slots,
// pointers in structs, the extra buffer, memcpys, nodes that cannot be read), the layers formed
// from first uses, the rewriting checked against a brute-force ancestor search on random graphs,
// the copies' ranges, the profile the planner takes, and the graph file with its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/kernel_graph.hpp"
#include "psw/common/planner.hpp"
#include "input_error.hpp"

namespace psw {
namespace {

using test_support::input_error_of;

constexpr std::uint64_t kRegionBase = 0x7f0000000000;

// Builds graphs the way the reader describes a capture: parameters packed at 512-byte alignment
// in the order given, kernels whose argument buffers hold the pointers they are launched with.
class GraphBuilder {
 public:
  std::size_t parameter(const std::string& name, Bytes bytes) {
    graph_.parameters.push_back({name, next_address_, bytes});
    next_address_ += (static_cast<std::uint64_t>(bytes) + 511) / 512 * 512;
    return graph_.parameters.size() - 1;
  }
  std::uint64_t address(std::size_t parameter) const { return graph_.parameters[parameter].address; }

  // A kernel whose arguments are `words` (8 bytes each), one slot per word.
  std::size_t kernel(const std::string& name, const std::vector<std::uint64_t>& words,
                     std::vector<std::size_t> deps = {}) {
    GraphNode node;
    node.kind = GraphNodeKind::Kernel;
    node.name = name;
    node.dependencies = std::move(deps);
    node.arguments = std::vector<std::uint8_t>(words.size() * 8);
    for (std::size_t i = 0; i < words.size(); ++i) {
      std::memcpy(node.arguments->data() + 8 * i, &words[i], 8);
      node.slots.push_back({8 * i, 8});
    }
    return add(std::move(node));
  }
  // A kernel that uses the parameters `ps` (a pointer to each), after the previous node.
  std::size_t uses(const std::string& name, const std::vector<std::size_t>& ps) {
    std::vector<std::uint64_t> words{0x1000, 3};  // an activation pointer and an integer
    for (auto p : ps) words.push_back(address(p));
    return kernel(name, words, last_dep());
  }
  std::size_t add(GraphNode node) {
    graph_.nodes.push_back(std::move(node));
    return graph_.nodes.size() - 1;
  }
  std::vector<std::size_t> last_dep() const {
    if (graph_.nodes.empty()) return {};
    return {graph_.nodes.size() - 1};
  }
  KernelGraph& graph() { return graph_; }

 private:
  KernelGraph graph_;
  std::uint64_t next_address_ = kRegionBase;
};

TEST(KernelGraph, SeesPointersInSlotsInsideStructsInTheExtraBufferAndInCopies) {
  GraphBuilder b;
  const auto w0 = b.parameter("a.weight", 4096);
  const auto w1 = b.parameter("b.weight", 1000);
  const auto w2 = b.parameter("c.weight", 64);
  const auto w3 = b.parameter("d.weight", 64);
  const auto w4 = b.parameter("e.weight", 64);

  // A struct argument of 24 bytes: an int, padding, then the pointer at offset 8 of the struct.
  GraphNode in_struct;
  in_struct.kind = GraphNodeKind::Kernel;
  in_struct.name = "struct_arg";
  in_struct.arguments = std::vector<std::uint8_t>(32, 0);
  const std::uint64_t inside = b.address(w1) + 100;  // into the middle of the parameter
  std::memcpy(in_struct.arguments->data() + 16, &inside, 8);
  in_struct.slots = {{0, 8}, {8, 24}};
  const auto n0 = b.add(std::move(in_struct));

  // cuBLASLt's launch: the extra buffer, no layout; the pointer one past w2's end counts as w2.
  GraphNode extra;
  extra.kind = GraphNodeKind::Kernel;
  extra.name = "gemm_extra";
  extra.arguments = std::vector<std::uint8_t>(24, 0);
  const std::uint64_t one_past = b.address(w2) + 64;
  std::memcpy(extra.arguments->data() + 8, &one_past, 8);
  const auto n1 = b.add(std::move(extra));

  // A pointer in a slot that the layout does not list is not an argument.
  GraphNode unlisted;
  unlisted.kind = GraphNodeKind::Kernel;
  unlisted.name = "unlisted";
  unlisted.arguments = std::vector<std::uint8_t>(16, 0);
  const std::uint64_t w0_address = b.address(w0);
  std::memcpy(unlisted.arguments->data() + 8, &w0_address, 8);
  unlisted.slots = {{0, 4}};
  const auto n2 = b.add(std::move(unlisted));

  GraphNode copy;  // reads w3 (its source overlaps it), writes elsewhere
  copy.kind = GraphNodeKind::Memcpy;
  copy.address = b.address(w3) + 8;
  copy.bytes = 16;
  copy.second_address = 0x2000;
  copy.second_bytes = 16;
  const auto n3 = b.add(std::move(copy));

  GraphNode set;  // writes over w4's range
  set.kind = GraphNodeKind::Memset;
  set.address = b.address(w4) - 4;
  set.bytes = 8;
  const auto n4 = b.add(std::move(set));

  GraphNode unread;  // arguments the reader could not get
  unread.kind = GraphNodeKind::Kernel;
  unread.name = "no_params";
  const auto n5 = b.add(std::move(unread));
  GraphNode opaque;
  opaque.kind = GraphNodeKind::Opaque;
  const auto n6 = b.add(std::move(opaque));
  GraphNode nothing;
  nothing.kind = GraphNodeKind::Empty;
  const auto n7 = b.add(std::move(nothing));

  const auto a = analyze_kernel_graph(b.graph());
  EXPECT_EQ(a.uses[n0], (std::vector<std::size_t>{w1}));
  EXPECT_EQ(a.uses[n1], (std::vector<std::size_t>{w2}));
  EXPECT_TRUE(a.uses[n2].empty());
  EXPECT_EQ(a.uses[n3], (std::vector<std::size_t>{w3}));
  EXPECT_EQ(a.uses[n4], (std::vector<std::size_t>{w4}));
  EXPECT_EQ(a.unknown_use[n5], UnknownUse::NoArguments);
  EXPECT_EQ(a.unknown_use[n6], UnknownUse::Opaque);
  EXPECT_EQ(a.unknown_use[n7], UnknownUse::None);
  EXPECT_EQ(a.nodes_using_everything, 2u);
  // w0 is used by no node: the last layer, which runs nothing.
  ASSERT_EQ(a.layers.size(), 5u);
  EXPECT_TRUE(a.layers.back().unused);
  EXPECT_EQ(a.layers.back().parameters, (std::vector<std::size_t>{w0}));
  EXPECT_EQ(a.unused_parameters, 1u);
}

// A small CNN as a capture shows it: conv, batch norm (its num_batches_tracked never read),
// ReLU, with a residual add; the layers start where a parameter is first used.
TEST(KernelGraph, LayersAreTheKernelsBetweenFirstUses) {
  GraphBuilder b;
  const auto c1 = b.parameter("conv1.weight", 9408 * 4);
  const auto g1 = b.parameter("bn1.weight", 256);
  const auto b1 = b.parameter("bn1.bias", 256);
  const auto m1 = b.parameter("bn1.running_mean", 256);
  const auto v1 = b.parameter("bn1.running_var", 256);
  const auto t1 = b.parameter("bn1.num_batches_tracked", 8);
  const auto c2 = b.parameter("conv2.weight", 36864 * 4);
  const auto fc = b.parameter("fc.weight", 512000 * 4);
  const auto fb = b.parameter("fc.bias", 4000);

  const auto k_pre = b.kernel("nchw_to_nhwc", {0x1000, 0x2000});
  const auto k_conv1 = b.uses("conv1", {c1});
  const auto k_bn1 = b.uses("bn1", {g1, b1, m1, v1});
  const auto k_relu = b.uses("relu", {});
  const auto k_conv2 = b.uses("conv2", {c2});
  const auto k_bn2 = b.uses("bn_again", {g1, b1, m1, v1});  // the same BN reused: no new layer
  const auto k_add = b.uses("add", {});
  const auto k_fc = b.uses("gemm", {fc});
  const auto k_bias = b.uses("bias_add", {fb});  // the bias used by a later kernel: a layer of its own

  const auto a = analyze_kernel_graph(b.graph());
  ASSERT_EQ(a.layers.size(), 6u);
  EXPECT_EQ(a.layers[0].name, "conv1");
  EXPECT_EQ(a.layers[0].nodes, (std::vector<std::size_t>{k_pre, k_conv1}));
  EXPECT_EQ(a.layers[0].param_bytes, 9408 * 4);
  EXPECT_EQ(a.layers[1].name, "bn1");
  EXPECT_EQ(a.layers[1].nodes, (std::vector<std::size_t>{k_bn1, k_relu}));
  EXPECT_EQ(a.layers[1].param_bytes, 4 * 256);
  EXPECT_EQ(a.layers[2].name, "conv2");
  EXPECT_EQ(a.layers[2].nodes, (std::vector<std::size_t>{k_conv2, k_bn2, k_add}));
  EXPECT_EQ(a.layers[3].name, "fc");
  EXPECT_EQ(a.layers[3].nodes, (std::vector<std::size_t>{k_fc}));
  EXPECT_EQ(a.layers[4].name, "fc#1");
  EXPECT_EQ(a.layers[4].nodes, (std::vector<std::size_t>{k_bias}));
  EXPECT_TRUE(a.layers[5].unused);
  EXPECT_EQ(a.layers[5].name, "(unused)");
  EXPECT_EQ(a.layers[5].parameters, (std::vector<std::size_t>{t1}));
  EXPECT_EQ(a.packing_order, (std::vector<std::size_t>{c1, g1, b1, m1, v1, c2, fc, fb, t1}));
  for (std::size_t n = 0; n < b.graph().nodes.size(); ++n)
    EXPECT_NE(std::find(a.layers[a.node_layer[n]].nodes.begin(), a.layers[a.node_layer[n]].nodes.end(), n),
              a.layers[a.node_layer[n]].nodes.end());
  Bytes total = 0;
  for (const auto& l : a.layers) total += l.param_bytes;
  Bytes listed = 0;
  for (const auto& p : b.graph().parameters) listed += p.bytes;
  EXPECT_EQ(total, listed);
}

TEST(KernelGraph, TheOrderIsTopologicalWhateverTheReadersListing) {
  GraphBuilder b;
  const auto p0 = b.parameter("x.weight", 64);
  const auto p1 = b.parameter("y.weight", 64);
  // Listed out of order: node 0 (uses y) depends on node 1 (uses x).
  b.kernel("second", {b.address(p1)}, {1});
  b.kernel("first", {b.address(p0)}, {});
  const auto a = analyze_kernel_graph(b.graph());
  EXPECT_EQ(a.order, (std::vector<std::size_t>{1, 0}));
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_EQ(a.layers[0].name, "x");
  EXPECT_EQ(a.layers[1].name, "y");
}

TEST(KernelGraph, RefusesGraphsItCannotAnalyse) {
  const auto analyse = [](KernelGraph g) { return input_error_of([&] { analyze_kernel_graph(g); }); };
  {
    GraphBuilder b;
    const auto p = b.parameter("x.weight", 64);
    b.kernel("a", {b.address(p)}, {1});
    b.kernel("b", {}, {0});
    EXPECT_NE(analyse(b.graph()).find("node 0 (a) is on a cycle"), std::string::npos) << analyse(b.graph());
  }
  {
    GraphBuilder b;
    b.parameter("x.weight", 64);
    b.kernel("a", {}, {7});
    EXPECT_NE(analyse(b.graph()).find("node 0 (a) depends on node 7, which does not exist"), std::string::npos);
  }
  {
    GraphBuilder b;
    b.parameter("x.weight", 64);
    b.kernel("self", {}, {0});
    EXPECT_NE(analyse(b.graph()).find("depends on itself"), std::string::npos);
  }
  {
    GraphBuilder b;
    b.parameter("x.weight", 64);
    b.parameter("x.weight", 64);
    EXPECT_NE(analyse(b.graph()).find("'x.weight' is listed twice"), std::string::npos);
  }
  {
    KernelGraph g;
    g.parameters = {{"a", 1000, 100}, {"b", 1050, 100}};
    EXPECT_NE(analyse(g).find("'a' and 'b' overlap"), std::string::npos);
  }
  {
    KernelGraph g;
    g.parameters = {{"a", 1000, 0}};
    EXPECT_NE(analyse(g).find("'a' has 0 bytes"), std::string::npos);
  }
  {
    GraphBuilder b;
    b.parameter("x.weight", 64);
    const auto k = b.kernel("k", {1, 2});
    b.graph().nodes[k].slots.push_back({12, 8});
    EXPECT_NE(analyse(b.graph()).find("node 0 (k): argument slot at 12 of 8 bytes lies outside its 16-byte"),
              std::string::npos);
  }
  EXPECT_NE(analyse(KernelGraph{}).find("no parameters"), std::string::npos);
}

// Whether copy g is an ancestor of `node` in the rewritten graph: some ancestor-or-self waits
// for a copy of a group >= g (the copies are chained).
bool waits_for(const KernelGraph& g, const RewrittenGraph& r, std::size_t node, std::size_t group) {
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<std::size_t> stack{node};
  while (!stack.empty()) {
    const auto n = stack.back();
    stack.pop_back();
    if (seen[n]) continue;
    seen[n] = true;
    if (r.waits_for_copy[n] && *r.waits_for_copy[n] >= group) return true;
    for (auto d : g.nodes[n].dependencies) stack.push_back(d);
  }
  return false;
}

// Random DAGs with random uses (some nodes unreadable, some opaque) under random groupings: every
// node waits for the copy of every group it uses, and every edge added is needed.
TEST(KernelGraph, TheRewriteMakesEveryUseWaitForItsCopyWithNoEdgeTooMany) {
  std::mt19937_64 rng(20261205);
  for (int trial = 0; trial < 200; ++trial) {
    GraphBuilder b;
    const int params = 1 + static_cast<int>(rng() % 12);
    for (int p = 0; p < params; ++p) b.parameter(detail::concat("m", p, ".w"), 64 + static_cast<Bytes>(rng() % 5000));
    const int nodes = 1 + static_cast<int>(rng() % 40);
    for (int n = 0; n < nodes; ++n) {
      std::vector<std::size_t> deps;
      for (int d = 0; d < n; ++d)
        if (rng() % 4 == 0) deps.push_back(static_cast<std::size_t>(d));
      const auto kind = rng() % 20;
      if (kind == 0) {
        GraphNode node;
        node.kind = GraphNodeKind::Opaque;
        node.dependencies = deps;
        b.add(std::move(node));
        continue;
      }
      if (kind == 1) {
        GraphNode node;
        node.kind = GraphNodeKind::Kernel;
        node.dependencies = deps;
        b.add(std::move(node));
        continue;
      }
      std::vector<std::uint64_t> words{0x1000};
      for (int p = 0; p < params; ++p)
        if (rng() % 5 == 0) words.push_back(b.address(static_cast<std::size_t>(p)) + rng() % 64);
      b.kernel(detail::concat("k", n), words, deps);
    }
    const auto& graph = b.graph();
    const auto a = analyze_kernel_graph(graph);
    // A random grouping of the layers.
    std::vector<std::size_t> ends;
    for (std::size_t l = 1; l < a.layers.size(); ++l)
      if (rng() % 2 == 0) ends.push_back(l);
    ends.push_back(a.layers.size());
    const auto groups = grouping_from_ends(ends);
    const auto r = rewrite_with_copies(graph, a, groups);
    std::vector<std::size_t> group_of_layer(a.layers.size());
    for (std::size_t g = 0; g < groups.size(); ++g)
      for (auto l = groups[g].first; l <= groups[g].last; ++l) group_of_layer[l] = g;

    std::size_t edges = 0;
    for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
      std::vector<std::size_t> needed;
      if (a.unknown_use[n] != UnknownUse::None) {
        needed.push_back(groups.size() - 1);
      } else {
        for (auto p : a.uses[n]) needed.push_back(group_of_layer[a.parameter_layer[p]]);
      }
      for (auto g : needed) EXPECT_TRUE(waits_for(graph, r, n, g)) << "trial " << trial << " node " << n;
      if (r.waits_for_copy[n]) {
        ++edges;
        // Needed: no dependency already waits for this copy or a later one.
        for (auto d : graph.nodes[n].dependencies)
          EXPECT_FALSE(waits_for(graph, r, d, *r.waits_for_copy[n])) << "trial " << trial << " node " << n;
        EXPECT_FALSE(needed.empty());
      }
    }
    EXPECT_EQ(edges, r.added_edges);
    EXPECT_LE(r.added_edges, graph.nodes.size());
    // Bridged copies: every parameter is inside a range of its own group or an earlier one (the
    // chain has it there before its users wait), and a range touches no parameter of an earlier
    // group (one a node may be reading while it is written).
    const auto bridged = rewrite_with_copies(graph, a, groups, static_cast<Bytes>(rng() % 12000));
    ASSERT_EQ(bridged.waits_for_copy, r.waits_for_copy);
    std::size_t ranges = 0;
    std::size_t bridged_ranges = 0;
    for (std::size_t p = 0; p < graph.parameters.size(); ++p) {
      const auto& param = graph.parameters[p];
      const std::uint64_t end = param.address + static_cast<std::uint64_t>(param.bytes);
      const std::size_t owner = group_of_layer[a.parameter_layer[p]];
      bool held = false;
      for (std::size_t g = 0; g < groups.size(); ++g) {
        for (const auto& range : bridged.copies[g].ranges) {
          const std::uint64_t range_end = range.address + static_cast<std::uint64_t>(range.bytes);
          const bool touched = param.address < range_end && range.address < end;
          if (touched) {
            EXPECT_GE(owner, g) << "trial " << trial << " group " << g << " parameter " << p;
          }
          held |= g <= owner && range.address <= param.address && end <= range_end;
        }
      }
      EXPECT_TRUE(held) << "trial " << trial << " parameter " << p;
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(bridged.copies[g].param_bytes, r.copies[g].param_bytes);
      ranges += r.copies[g].ranges.size();
      bridged_ranges += bridged.copies[g].ranges.size();
    }
    EXPECT_LE(bridged_ranges, ranges) << "trial " << trial;
  }
}

TEST(KernelGraph, AGroupsCopyIsOneRangeWhenTheRegionIsPackedInFirstUseOrder) {
  // Layer k uses parameter l<k>.w; the region holds them in `packing` order.
  const auto build = [](const std::vector<int>& packing) {
    GraphBuilder b;
    std::vector<std::size_t> p(6);
    for (int k : packing) p[static_cast<std::size_t>(k)] = b.parameter(detail::concat("l", k, ".w"), 100 * (k + 1));
    for (int i = 0; i < 6; ++i) b.uses(detail::concat("k", i), {p[static_cast<std::size_t>(i)]});
    return b;
  };
  const Grouping groups{{0, 1}, {2, 4}, {5, 5}};
  {
    auto b = build({0, 1, 2, 3, 4, 5});
    const auto a = analyze_kernel_graph(b.graph());
    const auto r = rewrite_with_copies(b.graph(), a, groups);
    ASSERT_EQ(r.copies.size(), 3u);
    for (const auto& c : r.copies) EXPECT_EQ(c.ranges.size(), 1u);
    EXPECT_EQ(r.copies[0].ranges[0].address, kRegionBase);
    EXPECT_EQ(r.copies[0].ranges[0].bytes, 512 + 200);  // the first one's padding, the second one
    EXPECT_EQ(r.copies[0].param_bytes, 300);
    EXPECT_EQ(r.copies[1].param_bytes, 300 + 400 + 500);
    // A chain: each kernel gains the edge from its own group's copy, unless an earlier kernel of
    // the group already waits for it.
    EXPECT_EQ(r.added_edges, 3u);
    EXPECT_EQ(r.nodes_using_group, (std::vector<std::size_t>{2, 3, 1}));
  }
  {
    // Reversed in the region: the parameters of each group are still neighbours.
    auto b = build({5, 4, 3, 2, 1, 0});
    const auto a = analyze_kernel_graph(b.graph());
    const auto r = rewrite_with_copies(b.graph(), a, groups);
    for (const auto& c : r.copies) EXPECT_EQ(c.ranges.size(), 1u);
    EXPECT_EQ(a.packing_order, (std::vector<std::size_t>{5, 4, 3, 2, 1, 0}));
  }
  {
    // Packed l0, l2, l1, ...: group 0's parameters (l0, l1) are apart, two ranges.
    auto b = build({0, 2, 1, 3, 4, 5});
    const auto a = analyze_kernel_graph(b.graph());
    const auto r = rewrite_with_copies(b.graph(), a, groups);
    ASSERT_EQ(r.copies[0].ranges.size(), 2u);
    EXPECT_EQ(r.copies[0].ranges[0].address, kRegionBase);
    EXPECT_EQ(r.copies[0].ranges[0].bytes, 100);
    EXPECT_EQ(r.copies[0].ranges[1].address, kRegionBase + 2 * 512);
    EXPECT_EQ(r.copies[0].param_bytes, 300);
    EXPECT_EQ(r.copies[1].ranges.size(), 2u);
    // Bridged: group 0's gap holds only l2, of a later group, so one range spans it; l2 is then
    // not copied again, and group 1 copies l3 and l4, neighbours, as one range.
    const auto bridged = rewrite_with_copies(b.graph(), a, groups, 4096);
    ASSERT_EQ(bridged.copies[0].ranges.size(), 1u);
    EXPECT_EQ(bridged.copies[0].ranges[0].bytes, 2 * 512 + 200);
    EXPECT_EQ(bridged.copies[0].param_bytes, 300);
    ASSERT_EQ(bridged.copies[1].ranges.size(), 1u);
    EXPECT_EQ(bridged.copies[1].ranges[0].address, kRegionBase + 3 * 512);
    EXPECT_EQ(bridged.copies[1].param_bytes, 300 + 400 + 500);
    // A gap (924 bytes) longer than the bridge stays.
    EXPECT_EQ(rewrite_with_copies(b.graph(), a, groups, 512).copies[0].ranges.size(), 2u);
    EXPECT_NE(input_error_of([&] { rewrite_with_copies(b.graph(), a, groups, -1); }).find("negative bridge"),
              std::string::npos);
  }
  {
    // Packed l2, l0, l3, l1, l4, l5: group 0 (l0, l1) bridges over l3, of group 1. Group 1 then
    // copies l2 and l4, whose gap holds l0 and l1, of group 0, which a kernel may be reading:
    // never bridged, however long the bridge.
    auto b = build({2, 0, 3, 1, 4, 5});
    const auto a = analyze_kernel_graph(b.graph());
    const auto bridged = rewrite_with_copies(b.graph(), a, groups, 1 << 20);
    ASSERT_EQ(bridged.copies[0].ranges.size(), 1u);
    ASSERT_EQ(bridged.copies[1].ranges.size(), 2u);
    EXPECT_EQ(bridged.copies[1].ranges[0].address, kRegionBase);
    EXPECT_EQ(bridged.copies[1].ranges[1].address, kRegionBase + 4 * 512);
  }
  {
    auto b = build({0, 1, 2, 3, 4, 5});
    const auto a = analyze_kernel_graph(b.graph());
    EXPECT_NE(input_error_of([&] { rewrite_with_copies(b.graph(), a, Grouping{{0, 3}}); }).find("grouping"),
              std::string::npos);
  }
}

// A ResNet-shaped capture (conv, BN, ReLU per block; every BN's num_batches_tracked unused) and
// a kernel that waits for everything: profiled, planned by the optimal planner, rewritten.
TEST(KernelGraph, ItsProfileIsPlannedAndTheRewriteFollowsThePlan) {
  GraphBuilder b;
  std::vector<Duration> node_times;
  for (int block = 0; block < 50; ++block) {
    const std::string m = detail::concat("block", block);
    const auto w = b.parameter(m + ".conv.weight", 4 * 64 * 64 * 9);
    std::vector<std::size_t> bn;
    for (const char* t : {"weight", "bias", "running_mean", "running_var"}) bn.push_back(b.parameter(m + ".bn." + t, 256));
    b.parameter(m + ".bn.num_batches_tracked", 8);
    b.uses("conv", {w});
    node_times.push_back(microseconds(40));
    b.uses("bn", bn);
    node_times.push_back(microseconds(5));
    b.uses("relu", {});
    node_times.push_back(microseconds(3));
  }
  GraphNode unreadable;
  unreadable.kind = GraphNodeKind::Kernel;
  unreadable.name = "softmax";
  unreadable.dependencies = b.last_dep();
  b.add(std::move(unreadable));
  node_times.push_back(microseconds(2));

  const auto a = analyze_kernel_graph(b.graph());
  EXPECT_EQ(a.layers.size(), 101u);  // conv and BN per block, and the unused
  EXPECT_EQ(a.unused_parameters, 50u);
  const auto times = layer_times_from_node_times(a, node_times);
  EXPECT_EQ(times[0], microseconds(40));
  EXPECT_EQ(times[1], microseconds(8));  // bn and relu
  EXPECT_EQ(times[99], microseconds(10));  // the last bn, relu and the unreadable kernel
  EXPECT_EQ(times[100], Duration::zero());

  SourceInfo source;
  source.device = "synthetic";
  const auto profile = kernel_graph_profile(a, "resnet_shaped", 8, "fp32", times, source);
  EXPECT_EQ(profile.num_layers(), a.layers.size());
  EXPECT_TRUE(profile.layers.back().training_only);
  EXPECT_EQ(profile.source.kind, ProfileSource::Measured);
  const auto hardware = load_hardware_profile(std::string(PSW_SOURCE_DIR) + "/configs/hardware/h200-pcie5.yaml");
  const auto costs = make_switch_costs(profile, hardware, Task::Inference);
  const auto plan = plan_optimal(costs);
  const auto r = rewrite_with_copies(b.graph(), a, plan.groups);
  EXPECT_EQ(r.copies.size(), plan.groups.size());
  // The unreadable kernel waits for the last copy; the conv of each group's first layer waits for
  // its own group's copy.
  EXPECT_TRUE(waits_for(b.graph(), r, b.graph().nodes.size() - 1, plan.groups.size() - 1));
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const auto first_layer = plan.groups[g].first;
    if (a.layers[first_layer].unused) continue;
    const auto& wait = r.waits_for_copy[a.layers[first_layer].nodes.front()];
    ASSERT_TRUE(wait.has_value());
    EXPECT_EQ(*wait, g);
  }
  const auto plan_of = assemble_switch_plan("resnet_shaped", a.signature(), Strategy::Optimal, plan.groups, {});
  EXPECT_EQ(plan_of.num_layers, profile.num_layers());

  EXPECT_NE(input_error_of([&] { kernel_graph_profile(a, "m", 8, "fp32", {microseconds(1)}, source); })
                .find("1 layer times for 101 layers"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { layer_times_from_node_times(a, {}); }).find("0 node times"), std::string::npos);
}

TEST(KernelGraph, TheGraphFileRoundTripsAndItsErrorsNameTheKey) {
  GraphBuilder b;
  const auto p = b.parameter("x.weight", 64);
  b.uses("k", {p});
  GraphNode copy;
  copy.kind = GraphNodeKind::Memcpy;
  copy.address = b.address(p);
  copy.bytes = 8;
  copy.second_address = 16;
  copy.second_bytes = 8;
  copy.dependencies = {0};
  b.add(std::move(copy));
  b.graph().device = "NVIDIA H200";
  b.graph().nodes[0].time = microseconds(7);
  EXPECT_NE(input_error_of([&] { measured_node_times(b.graph()); }).find("node 1 has no measured time"),
            std::string::npos);
  b.graph().nodes[1].time = nanoseconds(300);
  EXPECT_EQ(measured_node_times(b.graph()), (std::vector<Duration>{microseconds(7), nanoseconds(300)}));
  const auto file = std::filesystem::temp_directory_path() / ("psw-kernel-graph-" + std::to_string(::getpid()) + ".json");
  write_kernel_graph(b.graph(), file);
  const auto back = read_kernel_graph(file);
  EXPECT_EQ(kernel_graph_to_json(back), kernel_graph_to_json(b.graph()));
  EXPECT_EQ(back.device, "NVIDIA H200");
  EXPECT_EQ(back.nodes[1].time, nanoseconds(300));
  EXPECT_EQ(analyze_kernel_graph(back).uses, analyze_kernel_graph(b.graph()).uses);
  std::filesystem::remove(file);

  const auto error_of = [](const std::string& text) {
    return input_error_of([&] { kernel_graph_from_json(nlohmann::json::parse(text), "g.json"); });
  };
  EXPECT_NE(error_of(R"({"format": "other", "parameters": [], "nodes": []})").find("format 'other'"), std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "nodes": []})").find("no 'parameters'"), std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "parameters": [{"name": "a", "address": -1, "bytes": 4}],
                        "nodes": []})")
                .find("g.json: parameters[0]: 'address' must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "parameters": [], "nodes": [{"kind": "launch"}]})")
                .find("g.json: nodes[0]: unknown node kind 'launch'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "parameters": [],
                        "nodes": [{"kind": "kernel", "arguments": "0g"}]})")
                .find("'g', not a hex digit"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "parameters": [],
                        "nodes": [{"kind": "kernel", "arguments": "00", "slots": [[0]]}]})")
                .find("[offset, size]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "parameters": [],
                        "nodes": [{"kind": "memcpy", "address": 0, "bytes": 4}]})")
                .find("g.json: nodes[0]: no 'second_address'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"format": "psw-kernel-graph-1", "parameters": [],
                        "nodes": [{"kind": "empty", "dependencies": [-1]}]})")
                .find("'dependencies' must hold node indices"),
            std::string::npos);
}

}  // namespace
}  // namespace psw
