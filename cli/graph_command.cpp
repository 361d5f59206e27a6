// psw graph: a captured forward's kernel graph (Note [Kernel graph file]) analysed where it is read
// (Note [Kernel graph analysis]): its layers, the parameters no kernel uses, the nodes that wait
// for every group; its measured profile for `psw plan`; and, with a plan, the rewritten graph.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/common/kernel_graph.hpp"

namespace psw::cli {

namespace {

struct GraphOptions {
  std::string graph_path;
  std::string name;
  int batch = 1;
  std::string dtype = "fp32";
  std::string device;
  std::string profile_out;
  std::string plan_path;
  std::int64_t bridge = 0;  // bytes (Note [Kernel graph analysis], 3)
  std::string format = "table";
};

std::string node_name(const KernelGraph& graph, std::size_t node) {
  const auto& n = graph.nodes[node];
  return std::to_string(node) + " " + to_string(n.kind) + (n.name.empty() ? "" : " " + n.name);
}

void run_graph(const GraphOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw InputError("unknown --format '" + o.format + "': expected table or json");
  const KernelGraph graph = read_kernel_graph(o.graph_path);
  const KernelGraphAnalysis analysis = analyze_kernel_graph(graph);
  const std::string model = o.name.empty() ? std::filesystem::path(o.graph_path).stem().string() : o.name;

  if (!o.profile_out.empty()) {
    SourceInfo source;
    source.device = o.device.empty() ? graph.device : o.device;
    if (source.device.empty())
      throw InputError(o.graph_path + ": the graph names no device and --device was not given; a measured profile "
                       "says where it was measured");
    source.note = "layers and times from the kernel graph " + o.graph_path;
    const auto times = layer_times_from_node_times(analysis, measured_node_times(graph));
    save_text(o.profile_out, to_yaml(kernel_graph_profile(analysis, model, o.batch, o.dtype, times, source)));
  }
  std::optional<SwitchPlan> plan;
  std::optional<RewrittenGraph> rewritten;
  if (!o.plan_path.empty()) {
    plan = load_switch_plan(o.plan_path);
    const auto signature = analysis.signature();
    check_plan_matches(*plan, model, layer_fingerprint(signature), signature.size(), o.plan_path);
    rewritten = rewrite_with_copies(graph, analysis, plan->groups, o.bridge);
  }

  Bytes used_bytes = 0;
  Bytes unused_bytes = 0;
  for (const auto& layer : analysis.layers) (layer.unused ? unused_bytes : used_bytes) += layer.param_bytes;
  const auto kernels = static_cast<std::size_t>(std::count_if(graph.nodes.begin(), graph.nodes.end(), [](const auto& n) {
    return n.kind == GraphNodeKind::Kernel;
  }));
  std::vector<std::size_t> everything;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i)
    if (analysis.unknown_use[i] != UnknownUse::None) everything.push_back(i);

  if (o.format == "json") {
    nlohmann::json out{{"model", model},
                       {"nodes", graph.nodes.size()},
                       {"kernels", kernels},
                       {"parameters", graph.parameters.size()},
                       {"unused_parameters", analysis.unused_parameters},
                       {"used_bytes", used_bytes},
                       {"unused_bytes", unused_bytes},
                       {"layers", nlohmann::json::array()},
                       {"nodes_using_everything", nlohmann::json::array()}};
    for (const auto& layer : analysis.layers)
      out["layers"].push_back({{"name", layer.name},
                               {"nodes", layer.nodes.size()},
                               {"parameters", layer.parameters.size()},
                               {"bytes", layer.param_bytes},
                               {"unused", layer.unused}});
    for (auto i : everything) out["nodes_using_everything"].push_back(node_name(graph, i));
    if (rewritten) {
      out["plan"] = {{"groups", plan->groups.size()}, {"added_edges", rewritten->added_edges}, {"copies", nlohmann::json::array()}};
      for (std::size_t g = 0; g < rewritten->copies.size(); ++g)
        out["plan"]["copies"].push_back({{"first_layer", plan->groups[g].first},
                                         {"last_layer", plan->groups[g].last},
                                         {"bytes", rewritten->copies[g].param_bytes},
                                         {"ranges", rewritten->copies[g].ranges.size()},
                                         {"nodes_using", rewritten->nodes_using_group[g]}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%-11s %s\n", "model", model.c_str());
  std::printf("%-11s %zu (%zu kernels)\n", "nodes", graph.nodes.size(), kernels);
  std::printf("%-11s %zu: %zu used by the kernels (%s); %zu by no node (%s), copied in a last layer\n",
              "parameters", graph.parameters.size(), graph.parameters.size() - analysis.unused_parameters,
              format_bytes(used_bytes).c_str(), analysis.unused_parameters, format_bytes(unused_bytes).c_str());
  std::printf("%-11s %zu\n", "layers", analysis.layers.size());
  std::printf("%-11s %zu node(s) wait for every group (their uses could not be read)\n", "unknown",
              everything.size());
  for (std::size_t k = 0; k < everything.size() && k < 10; ++k)
    std::printf("%-11s   %s\n", "", node_name(graph, everything[k]).c_str());
  if (everything.size() > 10) std::printf("%-11s   ... and %zu more\n", "", everything.size() - 10);
  if (rewritten) {
    std::printf("\n%zu groups, %zu edges added from the copies\n", plan->groups.size(), rewritten->added_edges);
    std::printf("%5s %6s %6s %10s %7s %12s\n", "group", "first", "last", "bytes", "ranges", "nodes using");
    for (std::size_t g = 0; g < rewritten->copies.size(); ++g)
      std::printf("%5zu %6zu %6zu %10s %7zu %12zu\n", g, plan->groups[g].first, plan->groups[g].last,
                  format_bytes(rewritten->copies[g].param_bytes).c_str(), rewritten->copies[g].ranges.size(),
                  rewritten->nodes_using_group[g]);
  }
  if (!o.profile_out.empty()) std::printf("\nprofile     %s (psw plan --model %s)\n", o.profile_out.c_str(), o.profile_out.c_str());
}

}  // namespace

Action add_graph_command(CLI::App& app) {
  auto options = std::make_shared<GraphOptions>();
  CLI::App* cmd = app.add_subcommand(
      "graph", "Analyse a captured forward's kernel graph: its layers, its profile, and the rewrite for a plan");
  cmd->add_option("--graph", options->graph_path, "Kernel graph file (psw-kernel-graph-1 JSON)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--name", options->name, "The model's name in the profile and plans (default: the file's stem)");
  cmd->add_option("--batch", options->batch, "The batch the graph was captured at")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dtype", options->dtype, "The parameters' dtype")->capture_default_str();
  cmd->add_option("--device", options->device, "The GPU the graph was timed on (default: the graph file's)");
  cmd->add_option("--profile-out", options->profile_out,
                  "Write the measured profile (layer times from the nodes' time_ns) as YAML, for psw plan");
  cmd->add_option("--bridge", options->bridge,
                  "With --plan: join a group's ranges across gaps of at most this many bytes that hold only later "
                  "groups' parameters (psw run --graph bridges the link's copy_fixed x bandwidth)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--plan", options->plan_path, "A plan for this profile (psw plan --out): show the rewritten graph")
      ->check(CLI::ExistingFile);
  cmd->add_option("--format", options->format, "table | json")->capture_default_str();
  return [options] { run_graph(*options); };
}

}  // namespace psw::cli
