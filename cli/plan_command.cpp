// psw plan: choose the grouping of one model on one hardware profile and show it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "psw/common/chrome_trace.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/timeline.hpp"

namespace psw::cli {

namespace {

struct PlanOptions {
  std::string model_path;
  std::string hardware_path;
  std::string strategy = "optimal";
  std::string groups_path;
  std::string format = "table";
  std::string timeline_path;
  std::string task = "inference";
  std::string memory = "pinned";
  std::string placement = "copy";
  std::string out_path;
};

HostMemory parse_memory(const std::string& text) {
  if (text == "pinned") return HostMemory::Pinned;
  if (text == "pageable") return HostMemory::Pageable;
  throw InputError("unknown --memory '" + text + "': expected pinned or pageable");
}

void print_table(const ModelProfile& model, const HardwareProfile& hardware, Task task,
                 Strategy strategy, const PlanResult& plan, const Timeline& timeline,
                 Duration bound, Duration planner_time, const std::vector<bool>& host_mapped) {
  auto row = [](const char* key, const std::string& value) {
    std::printf("%-10s %s\n", key, value.c_str());
  };
  row("model", model.name + " (" + std::to_string(model.num_layers()) + " layers, " +
                   format_bytes(model.total_param_bytes()) + ", " + to_string(model.source.kind) + ")");
  row("hardware", hardware.name + " (" + hardware.gpu_name + ")");
  row("task", to_string(task));
  row("strategy", to_string(strategy) + " -> " + std::to_string(plan.groups.size()) + " groups");
  if (std::find(host_mapped.begin(), host_mapped.end(), true) != host_mapped.end()) {
    row("in place", describe_placement(model, host_mapped) + " (read from pinned host memory, not copied)");
  }
  row("total", format_duration(timeline.total));
  row("ready", format_duration(timeline.ready) + " (every parameter already on the GPU)");
  row("startup", format_duration(timeline.startup));
  row("overhead", format_duration(timeline.overhead));
  char ratio[64];
  std::snprintf(ratio, sizeof ratio, " (total / bound = %.3f)",
                static_cast<double>(timeline.total.ns()) / static_cast<double>(bound.ns()));
  row("bound", format_duration(bound) + ratio);
  row("planner", format_duration(planner_time) + " (" + std::to_string(plan.stats.nodes) +
                     " nodes expanded, " + std::to_string(plan.stats.pruned) + " pruned)");
  std::printf("\n%5s %6s %6s %10s %12s %12s %12s %12s\n", "group", "first", "last", "bytes",
              "copy start", "copy end", "run start", "run end");
  for (std::size_t g = 0; g < timeline.groups.size(); ++g) {
    const auto& t = timeline.groups[g];
    std::printf("%5zu %6zu %6zu %10s %12s %12s %12s %12s\n", g, t.group.first, t.group.last,
                format_bytes(t.bytes).c_str(), format_duration(t.transfer_start).c_str(),
                format_duration(t.transfer_end).c_str(), format_duration(t.compute_start).c_str(),
                format_duration(t.compute_end).c_str());
  }
}

void run_plan(const PlanOptions& o) {
  const ModelProfile model = load_model_profile(o.model_path);
  const HardwareProfile hardware = load_hardware_profile(o.hardware_path);
  const Strategy strategy = parse_strategy(o.strategy);
  const Task task = parse_task(o.task);
  const HostMemory memory = parse_memory(o.memory);
  if (o.format != "table" && o.format != "json") {
    throw InputError("unknown --format '" + o.format + "': expected table or json");
  }
  if (strategy == Strategy::Fixed && o.groups_path.empty()) {
    throw InputError("--strategy fixed needs --groups FILE");
  }
  if (strategy != Strategy::Fixed && !o.groups_path.empty()) {
    throw InputError("--groups is only used with --strategy fixed");
  }
  Grouping fixed;
  if (strategy == Strategy::Fixed) fixed = load_fixed_groups(o.groups_path, model);

  const Placement placement = parse_placement(o.placement);
  if (placement == Placement::Auto && strategy == Strategy::Fixed) {
    throw InputError("--placement auto plans the groups it places: use it with a planner, not --strategy fixed");
  }
  // Named by file: two profiles may share a `name:` (the shipped h200-pcie5 twice).
  if (task == Task::Training && !has_training_times(model)) {
    throw InputError(o.model_path + ": --task training: the profile of '" + model.name +
                     "' has no measured backward times (an inference profile): it cannot be planned for training");
  }
  if (placement == Placement::Auto && !hardware.mapped) {
    throw InputError(o.hardware_path +
                     ": --placement auto: the hardware profile has no link.mapped (the cost of reading pinned host "
                     "memory in place; psw profile --link measures it)");
  }
  const std::vector<bool> host_mapped = choose_placement(placement, model, hardware, task, strategy, memory);
  const SwitchCosts costs = make_switch_costs(model, hardware, task, memory, host_mapped);
  const std::vector<std::string> mapped_names = host_mapped_names(model, host_mapped);
  const auto started = std::chrono::steady_clock::now();
  const PlanResult plan = make_plan(strategy, costs, &fixed);
  const auto planner_time = nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::steady_clock::now() - started)
                                            .count());
  Timeline timeline = evaluate_timeline(costs, plan.groups);
  // Ready means every parameter on the GPU: without the in-place reads of a placement.
  timeline.ready = make_switch_costs(model, hardware, task, memory).ready_time();
  timeline.overhead = timeline.total - timeline.ready;
  const Duration bound = pipeline_bound(costs);

  if (!o.out_path.empty()) {
    save_text(o.out_path, to_yaml(assemble_switch_plan(model, strategy, plan.groups, host_mapped)));
  }
  if (!o.timeline_path.empty()) {
    save_text(o.timeline_path,
              timeline_to_chrome_trace(timeline, model.name + " on " + hardware.name + " (" +
                                                     to_string(strategy) + ")"));
  }
  if (o.format == "json") {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : plan.groups) groups.push_back({g.first, g.last});
    const nlohmann::json out = {
        {"model", model.name},
        {"hardware", hardware.name},
        {"task", to_string(task)},
        {"memory", o.memory},
        {"strategy", to_string(strategy)},
        {"num_layers", model.num_layers()},
        {"param_bytes", model.total_param_bytes()},
        {"groups", groups},
        {"fingerprint", fingerprint_hex(layer_fingerprint(model))},
        {"placement", to_string(placement)},
        {"host_mapped_layers", mapped_names},
        {"total_ns", timeline.total.ns()},
        {"startup_ns", timeline.startup.ns()},
        {"overhead_ns", timeline.overhead.ns()},
        {"ready_ns", timeline.ready.ns()},
        {"bound_ns", bound.ns()},
        {"planner_ns", planner_time.ns()},
        {"search", {{"nodes", plan.stats.nodes}, {"pruned", plan.stats.pruned}}}};
    std::cout << out.dump(2) << "\n";
  } else {
    print_table(model, hardware, task, strategy, plan, timeline, bound, planner_time, host_mapped);
  }
}

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Choose the grouping of one model's switch and show its timeline");
  cmd->add_option("--model", options->model_path, "Model profile YAML (configs/models/)")->required();
  cmd->add_option("--hardware", options->hardware_path, "Hardware profile YAML (configs/hardware/)")->required();
  cmd->add_option("--strategy", options->strategy,
                  "single | per-layer | pipeswitch | optimal | fixed")->capture_default_str();
  cmd->add_option("--groups", options->groups_path, "Groups YAML for --strategy fixed: `groups: [[first, last], ...]` by layer index or `modules: [[name, ...], ...]` by module (configs/plans/)");
  cmd->add_option("--format", options->format, "table | json")->capture_default_str();
  cmd->add_option("--timeline", options->timeline_path,
                  "Write a Chrome trace (chrome://tracing, Perfetto) of the plan's timeline");
  cmd->add_option("--task", options->task, "inference | training")->capture_default_str();
  cmd->add_option("--memory", options->memory, "Host memory of the parameters: pinned | pageable")
      ->capture_default_str();
  cmd->add_option("--placement", options->placement,
                  "copy (every layer) | auto (read layers such as embeddings in place where cheaper)")
      ->capture_default_str();
  cmd->add_option("--out", options->out_path,
                  "Write the plan (groups, placement, the model's layer fingerprint) as YAML, for psw run --plan "
                  "and serve configs");
  return [options] {
    with_range_context(options->model_path + " on " + options->hardware_path, [&] { run_plan(*options); });
  };
}

}  // namespace psw::cli
