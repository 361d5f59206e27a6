// libFuzzer target: kernel graph files (Note [Kernel graph file]): read, analysed, rewritten for
// the single-group and per-layer groupings, profiled where the nodes carry times, and written back.
#include "fuzz_common.hpp"
#include "psw/common/kernel_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  const nlohmann::json j = nlohmann::json::parse(fuzz::text_of(data, size), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // not JSON: read_json_object's error, tested elsewhere
  fuzz::expect_only_input_errors([&] {
    const KernelGraph graph = kernel_graph_from_json(j, "fuzz-graph.json");
    if (kernel_graph_to_json(graph) != kernel_graph_to_json(kernel_graph_from_json(kernel_graph_to_json(graph), "again"))) {
      std::fprintf(stderr, "fuzz: a kernel graph does not round-trip through its JSON\n");
      std::abort();
    }
    const KernelGraphAnalysis analysis = analyze_kernel_graph(graph);
    for (const Grouping& groups : {single_group(analysis.layers.size()), per_layer_groups(analysis.layers.size())}) {
      const RewrittenGraph rewritten = rewrite_with_copies(graph, analysis, groups);
      if (rewritten.copies.size() != groups.size() || rewritten.added_edges > graph.nodes.size()) {
        std::fprintf(stderr, "fuzz: a rewrite with %zu copies and %zu added edges for %zu groups and %zu nodes\n",
                     rewritten.copies.size(), rewritten.added_edges, groups.size(), graph.nodes.size());
        std::abort();
      }
    }
    const auto times = layer_times_from_node_times(analysis, measured_node_times(graph));
    (void)kernel_graph_profile(analysis, "fuzz", 1, "fp32", times, SourceInfo{});
  });
  return 0;
}
