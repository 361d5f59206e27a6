// psw run: switch a cold model into the device and run it, many times, and measure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "psw/common/chrome_trace.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/pipeline.hpp"

namespace psw::cli {

namespace {

struct RunOptions {
  std::string model;
  std::string mode = "pipeswitch";
  std::string plan_path;
  int repeat = 100;
  int warmup = 5;
  int batch = 8;
  std::string format = "table";
  std::string timeline_path;
  std::string backend = "cuda";
  std::string profile_path;   // model profile for planning and prediction (default: configs/models/h200/NAME.yaml)
  std::string hardware_path = "configs/hardware/h200-pcie5.yaml";
  bool graph = false;
  std::string placement = "copy";
};

struct Stats {
  double median_ms = 0;
  double p99_ms = 0;
  double min_ms = 0;
};

Duration milliseconds_to_duration(double ms) { return nanoseconds(static_cast<std::int64_t>(std::llround(ms * 1e6))); }

Stats stats_of(std::vector<Duration> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)].ms();
  };
  return {at(0.5), at(0.99), v.front().ms()};
}

void run(const RunOptions& o) {
  const std::vector<std::string> modes = {"ready", "pipeswitch", "single", "per-layer", "no-pin", "no-umm"};
  if (std::find(modes.begin(), modes.end(), o.mode) == modes.end()) {
    throw InputError("unknown --mode '" + o.mode + "': expected ready, pipeswitch, single, per-layer, no-pin or no-umm");
  }
  if (o.format != "table" && o.format != "json") throw InputError("unknown --format '" + o.format + "': expected table or json");
  // The default hardware is the H200, so the default profile is the one measured there.
  const std::string profile_path = o.profile_path.empty() ? "configs/models/h200/" + o.model + ".yaml" : o.profile_path;
  const ModelProfile profile = load_model_profile(profile_path);
  const HardwareProfile hardware = load_hardware_profile(o.hardware_path);
  auto backend = exec::make_backend(o.backend);
  auto model = exec::make_model(o.model, 0);
  if (profile.name != model->name()) {
    throw InputError(profile_path + ": the profile is of model '" + profile.name + "', not '" + o.model + "'");
  }
  model->to(backend->device());
  const HostMemory memory = o.mode == "no-pin" ? HostMemory::Pageable : HostMemory::Pinned;
  const Placement placement = parse_placement(o.placement);
  if (placement == Placement::Auto && (!o.plan_path.empty() || o.mode == "no-pin" || o.mode == "no-umm")) {
    throw InputError("--placement auto plans the groups it places, from pinned memory: not with --plan, "
                     "--mode no-pin or --mode no-umm");
  }
  Grouping groups;
  std::string strategy;
  std::vector<bool> host_mapped(profile.layers.size(), false);
  if (!o.plan_path.empty()) {
    groups = load_fixed_groups(o.plan_path, profile);
    strategy = "fixed";
  } else {
    const Strategy planner = o.mode == "single"      ? Strategy::Single
                             : o.mode == "per-layer" ? Strategy::PerLayer
                                                     : Strategy::Optimal;
    // Note [Placement]: layers read in place from pinned host memory cross PCIe as no
    // group's bytes; the executor binds them to the pinned buffer instead of the pool.
    const SwitchPlan plan = make_switch_plan(profile, hardware, Task::Inference, planner, placement, memory);
    groups = plan.groups;
    host_mapped = plan.host_mapped;
    strategy = to_string(planner);
  }
  const SwitchCosts costs = make_switch_costs(profile, hardware, Task::Inference, memory, host_mapped);
  const std::vector<std::string> mapped_names = host_mapped_names(profile, host_mapped);
  const exec::TransferMode transfer = o.mode == "no-pin"   ? exec::TransferMode::Pageable
                                      : o.mode == "no-umm" ? exec::TransferMode::AllocatePerTensor
                                                           : exec::TransferMode::Pipelined;
  exec::PipelineEngine engine(*backend, *model, groups, transfer, 512, host_mapped);
  const torch::Tensor input = model->example_input(o.batch, 1).to(backend->device());

  // The ready model, measured in the same run: parameters resident, plain forward.
  std::vector<Duration> ready_wall;
  std::vector<Duration> switch_wall;
  std::vector<Duration> switch_startup;
  std::vector<Duration> device_total;
  auto wall = [&](auto&& fn) {
    backend->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    backend->synchronize();
    return nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  };
  engine.switch_in_and_run(input);  // parameters resident for the ready runs
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    const Duration w = wall([&] { engine.run_resident(input); });
    if (i >= o.warmup) ready_wall.push_back(w);
  }
  // With --graph: the switch and the resident run replay captured graphs (Note [Switch
  // graphs]); the eager resident run above stays the PyTorch-eager reference.
  std::vector<Duration> ready_graph_wall;
  if (o.graph) {
    engine.capture_graphs(input);
    for (int i = 0; i < o.warmup + o.repeat; ++i) {
      const Duration w = wall([&] { engine.run_resident_graph(input); });
      if (i >= o.warmup) ready_graph_wall.push_back(w);
    }
  }
  if (o.mode != "ready") {
    for (int i = 0; i < o.warmup + o.repeat; ++i) {
      engine.poison_device_parameters(static_cast<std::uint8_t>(i));  // stale parameters: a cold switch
      const Duration w = wall([&] {
        if (o.graph) {
          engine.switch_in_and_run_graph(input);
        } else {
          engine.switch_in_and_run(input);
        }
      });
      const exec::SwitchTiming t = engine.last_timing();
      if (i >= o.warmup) {
        switch_wall.push_back(w);
        switch_startup.push_back(t.startup);
        device_total.push_back(t.total);
      }
    }
  }
  const Stats ready = stats_of(ready_wall);
  const Stats ready_graph = stats_of(ready_graph_wall);
  const Stats latency = o.mode == "ready" ? ready : stats_of(switch_wall);
  const Stats startup = stats_of(switch_startup);
  const Stats device = stats_of(device_total);
  const Timeline predicted = evaluate_timeline(costs, groups);
  const Duration bound = pipeline_bound(costs);
  // Note [Measured trace] (pipeline.hpp): one more cold switch, traced, beside the prediction.
  std::optional<Timeline> measured;
  if (!o.timeline_path.empty()) {
    std::vector<std::pair<std::string, Timeline>> timelines;
    if (o.mode != "ready" && o.mode != "no-umm") {
      engine.poison_device_parameters();
      if (o.graph) {
        engine.switch_in_and_run_graph(input, /*traced=*/true);
      } else {
        engine.set_tracing(true);
        engine.switch_in_and_run(input);
        engine.set_tracing(false);
      }
      measured = engine.measured_timeline();
      measured->ready = milliseconds_to_duration(o.graph ? ready_graph.median_ms : ready.median_ms);
      measured->overhead = measured->total - measured->ready;
      timelines.emplace_back(o.model + " measured on " + backend->device_description() + " (" + o.mode +
                                 (o.graph ? ", graph" : "") + ", one switch)",
                             *measured);
    }
    timelines.emplace_back(o.model + " predicted (" + strategy + " plan, " + hardware.name + ")", predicted);
    save_text(o.timeline_path, timelines_to_chrome_trace(timelines));
  }
  const double overhead_ms = latency.median_ms - ready.median_ms;
  if (o.format == "json") {
    nlohmann::json out = {
        {"model", o.model}, {"mode", o.mode}, {"backend", backend->name()}, {"strategy", strategy},
        {"groups", groups.size()}, {"repeat", o.repeat}, {"batch", o.batch},
        {"latency_ms", {{"median", latency.median_ms}, {"p99", latency.p99_ms}, {"min", latency.min_ms}}},
        {"ready_ms", {{"median", ready.median_ms}, {"p99", ready.p99_ms}}},
        {"graph", o.graph},
        {"placement", o.placement},
        {"host_mapped_layers", mapped_names},
        {"ready_graph_ms", {{"median", ready_graph.median_ms}, {"p99", ready_graph.p99_ms}}},
        {"startup_ms", {{"median", startup.median_ms}, {"p99", startup.p99_ms}}},
        {"device_total_ms", {{"median", device.median_ms}, {"p99", device.p99_ms}}},
        {"overhead_ms", overhead_ms},
        {"predicted_ms", predicted.total.ms()}, {"bound_ms", bound.ms()},
        {"profile", profile_path}, {"hardware", hardware.name},
        {"param_bytes", costs.total_bytes()},
        {"transfer_ms", costs.link().copy_time(costs.total_bytes()).ms()},
        {"profile_compute_ms", costs.total_compute().ms()},
        {"predicted_startup_ms", predicted.startup.ms()}};
    if (measured) out["traced_switch_ms"] = {{"total", measured->total.ms()}, {"startup", measured->startup.ms()}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%-18s %s, mode %s%s, backend %s, %s plan with %zu groups, batch %d, %d repetitions\n", "run",
              o.model.c_str(), o.mode.c_str(), o.graph ? " (graph)" : "", backend->name().c_str(), strategy.c_str(),
              groups.size(), o.batch, o.repeat);
  if (!mapped_names.empty()) {
    std::printf("%-18s %s (read from pinned host memory, not copied)\n", "in place",
                describe_placement(profile, host_mapped).c_str());
  }
  std::printf("%-18s median %.3f ms  p99 %.3f ms  min %.3f ms\n", "latency", latency.median_ms, latency.p99_ms,
              latency.min_ms);
  std::printf("%-18s median %.3f ms  p99 %.3f ms (eager)\n", "ready (resident)", ready.median_ms, ready.p99_ms);
  if (o.graph) {
    std::printf("%-18s median %.3f ms  p99 %.3f ms (graph)\n", "ready (resident)", ready_graph.median_ms,
                ready_graph.p99_ms);
  }
  std::printf("%-18s median %.3f ms (latency - ready)\n", "overhead", overhead_ms);
  std::printf("%-18s median %.3f ms  p99 %.3f ms (device: switch begins -> first layer)\n", "startup",
              startup.median_ms, startup.p99_ms);
  std::printf("%-18s %.3f ms predicted by the timeline from %s on %s; pipeline bound %.3f ms\n", "prediction",
              predicted.total.ms(), profile_path.c_str(), hardware.name.c_str(), bound.ms());
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Switch a cold model into the device and run it; measure latency and overheads");
  cmd->add_option("--model", options->model, "resnet152 | inception_v3 | bert_base")->required();
  cmd->add_option("--mode", options->mode, "ready | pipeswitch | single | per-layer | no-pin | no-umm")->capture_default_str();
  cmd->add_option("--plan", options->plan_path, "Groups YAML instead of the planner's");
  cmd->add_option("--repeat", options->repeat, "Measured repetitions")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--warmup", options->warmup, "Unmeasured repetitions first")->check(CLI::Range(0, 1000000))->capture_default_str();
  cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--format", options->format, "table | json")->capture_default_str();
  cmd->add_option("--timeline", options->timeline_path,
                  "Write one traced switch, measured, beside the predicted timeline as a Chrome trace");
  cmd->add_option("--backend", options->backend, "cuda | host")->capture_default_str();
  cmd->add_option("--profile", options->profile_path,
                  "Model profile for planning and prediction (default: configs/models/h200/MODEL.yaml, measured)");
  cmd->add_option("--hardware", options->hardware_path, "Hardware profile for planning and prediction")->capture_default_str();
  cmd->add_flag("--graph", options->graph, "Replay the switch as one captured graph (cuda backend)");
  cmd->add_option("--placement", options->placement,
                  "copy (every layer) | auto (the planner reads layers such as embeddings in place where cheaper)")
      ->capture_default_str();
  return [options] { run(*options); };
}

}  // namespace psw::cli
