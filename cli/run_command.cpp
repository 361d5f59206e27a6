// psw run: switch a cold model into the device and run it, many times, and measure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "measured_source.hpp"
#include "model_input_options.hpp"
#include "psw/common/chrome_trace.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/kernel_graph.hpp"
#include "psw/common/output.hpp"
#include "psw/common/profile_paths.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"
#include "psw/common/units.hpp"
#include "psw/common/decoder_config.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/graph_switch.hpp"
#include "psw/exec/switch_benchmark.hpp"
#include "psw/runtime/ipc/cpu_latency.hpp"

namespace psw::cli {

namespace {

struct RunOptions {
  std::string model;
  std::string mode = "pipeswitch";
  std::string plan_path;
  std::string groups_path;
  int repeat = 100;
  int warmup = 5;
  int batch = 8;
  std::string format = "table";
  std::string timeline_path;
  std::string backend = "cuda";
  std::string dtype = "fp32";
  std::string profile_path;   // model profile for planning and prediction (default: default_profile_path)
  std::string hardware_path = "configs/hardware/h200-pcie5.yaml";
  bool graph = false;
  bool allow_uncaptured = false;  // Note [Uncaptured switch]
  std::string placement = "copy";
  std::string weights_path;  // empty: the zoo's random, seeded weights
  std::int64_t prompt_tokens = 0;  // decoders: 0 is the example's 128
  int decode_tokens = 0;
  ModelInputOptions input;  // a TorchScript model's
  std::string graph_out;    // a TorchScript model with --graph: its capture as read (psw graph's file)
  std::string profile_out;  // ... and its per-layer profile measured from the capture
  std::optional<std::int32_t> cpu_wakeup_latency_us;  // Note [CPU wake-up latency]
};

// "a, b, c and 12 more": a report's names, short enough for one line of the table.
std::string some_names(const std::vector<std::string>& names, std::size_t shown = 3) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i) out += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

// The profile psw run plans from without --profile. fp32: the one measured on the H200 (the
// default hardware); bf16 / fp16: the analytic one of that dtype (scripts/gen_model_profiles.py),
// until profiles measured in those dtypes are adopted.
std::string default_profile_path(const std::string& model, const std::string& dtype) {
  return profile_path_in(dtype == "fp32" ? "configs/models/h200" : "configs/models", model, dtype).string();
}

// Note [Uncaptured switch]: --allow-uncaptured's run, which says that it was not captured and why.
void print_uncaptured(const RunOptions& o, const exec::GraphSwitchReport& r) {
  if (!o.graph_out.empty() || !o.profile_out.empty()) {
    std::fprintf(stderr, "psw: --graph-out and --profile-out not written: the forward was not captured\n");
  }
  const auto stats = [](const exec::LatencyStats& l) {
    return nlohmann::json{{"median", l.median_ms}, {"p99", l.p99_ms}, {"min", l.min_ms}};
  };
  if (o.format == "json") {
    std::cout << nlohmann::json{{"model", o.model},
                                {"device", r.device},
                                {"captured", false},
                                {"uncaptured_reason", r.uncaptured_reason},
                                {"param_bytes", r.param_bytes},
                                {"latency_ms", stats(r.latency)},
                                {"resident_ms", stats(r.resident)},
                                {"copy_only_ms", stats(r.copy_only)},
                                {"outputs_checked", r.outputs_checked},
                                {"outputs_equal", r.outputs_equal}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%s on %s, NOT captured (--allow-uncaptured): %s\n", o.model.c_str(), r.device.c_str(),
                r.uncaptured_reason.c_str());
    std::printf("%-18s median %.3f ms  p99 %.3f ms  (every parameter copied, then the eager forward; %.1f MB)\n",
                "copy, then forward", r.latency.median_ms, r.latency.p99_ms, static_cast<double>(r.param_bytes) / 1e6);
    std::printf("%-18s median %.3f ms\n", "resident forward", r.resident.median_ms);
    std::printf("%-18s median %.3f ms\n", "the copy alone", r.copy_only.median_ms);
    std::printf("%-18s %zu of %zu switches after poisoning equal the resident forward bit for bit\n", "outputs",
                r.outputs_equal, r.outputs_checked);
  }
  if (r.outputs_equal != r.outputs_checked) {
    throw Error(detail::concat(r.outputs_checked - r.outputs_equal, " of ", r.outputs_checked,
                               " switches differ from the resident forward"));
  }
}

// Note [Graph-pipelined switch]: a TorchScript model with --graph.
void run_graph_switch(const RunOptions& o) {
  exec::GraphSwitchSpec spec = graph_switch_spec(o.model, o.input, o.batch, o.dtype, o.backend);
  spec.hardware = load_hardware_profile(o.hardware_path);
  spec.repeat = o.repeat;
  spec.warmup = o.warmup;
  if (!o.profile_path.empty()) {  // the capture's profile, written by psw profile --graph
    spec.profile = load_model_profile(o.profile_path);
    spec.profile_origin = o.profile_path;
  }
  spec.allow_uncaptured = o.allow_uncaptured;
  const exec::GraphSwitchReport r = exec::run_graph_switch_benchmark(spec);
  if (!r.captured) return print_uncaptured(o, r);
  if (!o.graph_out.empty()) write_kernel_graph(r.graph, o.graph_out);
  if (!o.profile_out.empty()) {
    save_text(o.profile_out, "# Written by `psw run --graph` from the captured graph on " + r.device +
                                 "; do not edit by hand.\n" + to_yaml(r.profile));
  }
  const std::size_t groups = r.groups.size();
  if (o.format == "json") {
    nlohmann::json j = {
        {"model", o.model},
        {"device", r.device},
        {"hardware", spec.hardware.name},
        {"graph", {{"nodes", r.graph.nodes.size()}, {"kernels", r.read.kernels},
                   {"kernels_from_extra", r.read.kernels_from_extra}, {"kernels_unread", r.read.kernels_unread},
                   {"memcpys", r.read.memcpys}, {"opaque", r.read.opaque},
                   {"nodes_using_everything", r.nodes_using_everything}, {"parameters", r.graph.parameters.size()},
                   {"parameters_used", r.parameters_used}, {"layers", r.layers}}},
        {"plan", {{"groups", groups}, {"copy_ranges", r.copy_ranges}, {"added_edges", r.added_edges}}},
        {"param_bytes", r.param_bytes},
        {"latency_ms", {{"median", r.latency.median_ms}, {"p99", r.latency.p99_ms}, {"min", r.latency.min_ms}}},
        {"device_ms", {{"median", r.device_total.median_ms}, {"p99", r.device_total.p99_ms}}},
        {"resident_ms", {{"median", r.resident.median_ms}, {"p99", r.resident.p99_ms}}},
        {"copy_then_replay_ms", {{"median", r.copy_then_replay.median_ms}, {"p99", r.copy_then_replay.p99_ms}}},
        {"copy_only_ms", {{"median", r.copy_only.median_ms}, {"p99", r.copy_only.p99_ms}}},
        {"predicted_ms", r.predicted.ms()},
        {"bound_ms", r.bound.ms()},
        {"over_bound", r.over_bound()},
        {"speedup_over_copy_then_replay", r.speedup()},
        {"outputs_checked", r.outputs_checked},
        {"outputs_equal", r.outputs_equal},
    };
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%s on %s (%s), pipelined through its captured graph\n", o.model.c_str(), r.device.c_str(),
                spec.hardware.name.c_str());
    std::printf("%-18s %zu nodes, %zu kernels (%zu from the extra buffer, %zu unread), %zu memcpy, %zu opaque\n", "graph",
                r.graph.nodes.size(), r.read.kernels, r.read.kernels_from_extra, r.read.kernels_unread, r.read.memcpys,
                r.read.opaque);
    std::printf("%-18s %zu of %zu parameters read; %zu layers; %zu nodes wait for every group\n", "analysis",
                r.parameters_used, r.graph.parameters.size(), r.layers, r.nodes_using_everything);
    std::printf("%-18s %zu groups, %zu copy ranges, %zu added edges, %.1f MB\n", "plan", groups, r.copy_ranges,
                r.added_edges, static_cast<double>(r.param_bytes) / 1e6);
    std::printf("%-18s median %.3f ms  p99 %.3f ms  (device %.3f ms)\n", "cold switch", r.latency.median_ms,
                r.latency.p99_ms, r.device_total.median_ms);
    std::printf("%-18s median %.3f ms\n", "resident replay", r.resident.median_ms);
    std::printf("%-18s median %.3f ms  (the copy alone %.3f ms)\n", "copy, then replay", r.copy_then_replay.median_ms,
                r.copy_only.median_ms);
    std::printf("%-18s predicted %.3f ms, bound %.3f ms: %.3f x the bound, %.2f x faster than copy-then-replay\n",
                "against", r.predicted.ms(), r.bound.ms(), r.over_bound(), r.speedup());
    std::printf("%-18s %zu of %zu cold switches after poisoning equal the resident replay bit for bit\n", "outputs",
                r.outputs_equal, r.outputs_checked);
  }
  if (r.outputs_equal != r.outputs_checked) {
    throw Error(detail::concat(r.outputs_checked - r.outputs_equal, " of ", r.outputs_checked,
                               " cold switches differ from the resident replay"));
  }
}

void run(const RunOptions& o) {
  if (exec::names_model_file(o.model) && o.graph) {
    if (!o.plan_path.empty() || !o.groups_path.empty() || !o.timeline_path.empty() || !o.weights_path.empty() ||
        o.placement != "copy" || o.mode != "pipeswitch") {
      throw InputError("--graph with a user's model plans from its captured graph (and --profile, a profile of "
                       "that graph from psw profile --graph): --plan, --groups, --timeline, --weights, --placement "
                       "and --mode do not apply");
    }
    if (o.format != "table" && o.format != "json") throw InputError("unknown --format '" + o.format + "': expected table or json");
    run_graph_switch(o);
    return;
  }
  if (!o.graph_out.empty() || !o.profile_out.empty() || o.allow_uncaptured) {
    throw InputError("--graph-out, --profile-out and --allow-uncaptured are for a user's model (.pt, .pt2) run with --graph");
  }
  if (o.format != "table" && o.format != "json") throw InputError("unknown --format '" + o.format + "': expected table or json");
  exec::SwitchBenchmarkSpec spec;
  spec.model = o.model;
  spec.dtype = o.dtype;
  try {
    exec::parse_zoo_dtype(o.dtype);  // before a default profile path is made from it
  } catch (const InputError& e) {
    throw InputError(std::string("--dtype: ") + e.what());
  }
  spec.weights = o.weights_path;
  spec.mechanism = parse_mechanism(o.mode);
  // The default hardware is the H200, so the default fp32 profile is the one measured there.
  // A decoder's profile is named after its config's `name`, not the file.
  // A user's model file's is its file's stem (Note [TorchScript models]).
  const std::string name = exec::names_decoder_config(o.model) ? load_decoder_config(o.model).name
                           : exec::names_model_file(o.model) ? std::filesystem::path(o.model).stem().string()
                                                               : o.model;
  spec.profile_origin = o.profile_path.empty() ? default_profile_path(name, o.dtype) : o.profile_path;
  if (o.profile_path.empty() && !std::filesystem::exists(spec.profile_origin)) {
    // No shipped profile (a decoder in bf16, a user's model): say where one comes from, and
    // which measured one the project has, rather than only that a file is missing.
    const std::filesystem::path measured = profile_path_in("configs/models/h200", name, o.dtype);
    throw InputError(::psw::detail::concat(
        "no profile of ", name, " in ", o.dtype, " at ", spec.profile_origin, " (the default); give --profile FILE: ",
        std::filesystem::exists(measured) ? measured.string() + " was measured on an H200, or " : "",
        "`psw profile --model ", o.model, " --dtype ", o.dtype, " --out DIR` measures one into ",
        profile_path_in("DIR", name, o.dtype).string()));
  }
  spec.profile = load_model_profile(spec.profile_origin);
  spec.hardware = load_hardware_profile(o.hardware_path);
  if (!o.plan_path.empty()) {
    spec.plan = load_switch_plan(o.plan_path);
    spec.plan_origin = o.plan_path;
  } else if (!o.groups_path.empty()) {
    spec.plan = assemble_switch_plan(spec.profile, Strategy::Fixed, load_fixed_groups(o.groups_path, spec.profile), {});
    spec.plan_origin = o.groups_path;
  }
  spec.placement = parse_placement(o.placement);
  if (spec.placement == Placement::Auto && !spec.hardware.mapped) {  // named by file, as psw plan
    throw InputError(o.hardware_path +
                     ": --placement auto: the hardware profile has no link.mapped (the cost of reading pinned host "
                     "memory in place; psw profile --link measures it)");
  }
  spec.backend = o.backend;
  spec.repeat = o.repeat;
  spec.warmup = o.warmup;
  int batch = o.batch;
  spec.inputs = model_input(o.input, batch);
  spec.batch = batch;
  spec.graph = o.graph;
  spec.traced_switch = !o.timeline_path.empty();
  spec.prompt_tokens = o.prompt_tokens;
  spec.decode_tokens = o.decode_tokens;
  const exec::SwitchBenchmarkReport r = exec::run_switch_benchmark(spec);
  const SwitchPlan& plan = r.plan;
  const std::string strategy = to_string(plan.strategy);
  if (!o.timeline_path.empty()) {
    std::vector<std::pair<std::string, Timeline>> timelines;
    if (r.measured) {
      timelines.emplace_back(o.model + " measured on " + r.device + " (" + o.mode + (o.graph ? ", graph" : "") +
                                 ", one switch)",
                             *r.measured);
    }
    timelines.emplace_back(o.model + " predicted (" + strategy + " plan, " + spec.hardware.name + ")", r.predicted);
    save_text(o.timeline_path, timelines_to_chrome_trace(timelines));
  }
  if (o.format == "json") {
    nlohmann::json out = {
        {"model", o.model}, {"dtype", o.dtype}, {"mode", o.mode}, {"backend", r.backend}, {"strategy", strategy},
        {"groups", plan.groups.size()}, {"repeat", o.repeat}, {"batch", spec.batch},
        {"fingerprint", fingerprint_hex(plan.fingerprint)},
        {"latency_ms", {{"median", r.latency.median_ms}, {"p99", r.latency.p99_ms}, {"min", r.latency.min_ms}}},
        {"ready_ms", {{"median", r.ready.median_ms}, {"p99", r.ready.p99_ms}}},
        {"graph", o.graph},
        {"placement", o.placement},
        {"host_mapped_layers", r.host_mapped_layers},
        {"ready_graph_ms", {{"median", r.ready_graph.median_ms}, {"p99", r.ready_graph.p99_ms}}},
        {"startup_ms", {{"median", r.startup.median_ms}, {"p99", r.startup.p99_ms}}},
        {"device_total_ms", {{"median", r.device_total.median_ms}, {"p99", r.device_total.p99_ms}}},
        {"overhead_ms", r.overhead_ms()},
        {"predicted_ms", r.predicted.total.ms()}, {"bound_ms", r.bound.ms()},
        // Relative to the current folder (the project root, where the scripts run psw): the JSON
        // names no path of the machine it was made on.
        {"profile", path_relative_to(spec.profile_origin, std::filesystem::current_path())},
        {"hardware", spec.hardware.name},
        {"param_bytes", r.param_bytes},
        {"transfer_ms", r.transfer.ms()},
        {"profile_compute_ms", r.profile_compute.ms()},
        {"predicted_startup_ms", r.predicted.startup.ms()},
        {"prediction_error", r.prediction_error()}};
    if (!o.graph && spec.mechanism != Mechanism::Ready) {  // Note [Host time of an eager switch]
      out["host_prepare_ms"] = {{"median", r.host_prepare.median_ms}, {"p99", r.host_prepare.p99_ms}};
      out["host_forward_ms"] = {{"median", r.host_forward.median_ms}, {"p99", r.host_forward.p99_ms}};
    }
    if (r.measured) {
      // The traced switch (--timeline) beside its prediction: where each one's time went.
      const auto breakdown = [](const Timeline& t) {
        const TimelineBreakdown b = break_down(t);
        return nlohmann::json{{"groups", b.groups},
                              {"total_ms", b.total.ms()},
                              {"startup_ms", t.startup.ms()},
                              {"first_compute_ms", b.first_compute_start.ms()},
                              {"last_copy_end_ms", b.last_transfer_end.ms()},
                              {"compute_busy_ms", b.compute_busy.ms()},
                              {"compute_waits_ms", b.compute_waits.ms()}};
      };
      out["traced_switch"] = {{"measured", breakdown(*r.measured)}, {"predicted", breakdown(r.predicted)}};
    }
    if (r.decoder) {
      const exec::DecoderReport& d = *r.decoder;
      out["decoder"] = {
          {"prompt_tokens", d.prompt_tokens},
          {"time_to_first_token_ms", r.latency.median_ms},
          {"resident_prefill_ms", r.resident_ms()},
          {"copy_then_prefill_ms", {{"median", d.copy_then_prefill.median_ms}, {"p99", d.copy_then_prefill.p99_ms}}},
          {"first_token_bound_ms", r.first_token_bound_ms()},
          {"first_token_over_bound", r.first_token_over_bound()},
          {"first_token_saving_ms", r.first_token_saving_ms()},
          {"decode_tokens", d.decode_tokens},
          {"per_token_ms", {{"median", d.per_token.median_ms}, {"p99", d.per_token.p99_ms}}},
          {"per_token_replayed", d.per_token_replayed},
          {"tokens", d.tokens}};
    }
    if (r.weights) {
      out["weights"] = {{"file", r.weights->file}, {"tensors", r.weights->loaded}, {"bytes", r.weights->bytes},
                        {"ignored", r.weights->ignored}, {"defaulted", r.weights->defaulted}};
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%-18s %s (%s), mode %s%s, backend %s, %s plan with %zu groups, batch %d, %d repetitions\n", "run",
              o.model.c_str(), o.dtype.c_str(), o.mode.c_str(), o.graph ? " (graph)" : "", r.backend.c_str(), strategy.c_str(),
              plan.groups.size(), spec.batch, o.repeat);
  if (r.weights) {
    std::printf("%-18s %s: %zu tensors, %s read\n", "weights", r.weights->file.c_str(), r.weights->loaded,
                format_bytes(r.weights->bytes).c_str());
    // Note [Weight names] (exec/src/weights.cpp): nothing is dropped or defaulted unsaid.
    if (!r.weights->ignored.empty()) {
      std::printf("%-18s %zu tensors the model does not have: %s\n", "  ignored", r.weights->ignored.size(),
                  some_names(r.weights->ignored).c_str());
    }
    if (!r.weights->defaulted.empty()) {
      std::printf("%-18s %zu tensors absent from the file, set to 0: %s\n", "  defaulted",
                  r.weights->defaulted.size(), some_names(r.weights->defaulted).c_str());
    }
  } else if (!spec.inputs.empty()) {
    std::printf("%-18s the TorchScript file's\n", "weights");
  } else {
    std::printf("%-18s random, seeded (the zoo's; --weights FILE for your own)\n", "weights");
  }
  if (!r.host_mapped_layers.empty()) {
    std::printf("%-18s %s (read from pinned host memory, not copied)\n", "in place",
                describe_placement(spec.profile, plan.host_mapped).c_str());
  }
  std::printf("%-18s median %.3f ms  p99 %.3f ms  min %.3f ms\n", "latency", r.latency.median_ms, r.latency.p99_ms,
              r.latency.min_ms);
  std::printf("%-18s median %.3f ms  p99 %.3f ms (eager)\n", "ready (resident)", r.ready.median_ms, r.ready.p99_ms);
  if (o.graph) {
    std::printf("%-18s median %.3f ms  p99 %.3f ms (graph)\n", "ready (resident)", r.ready_graph.median_ms,
                r.ready_graph.p99_ms);
  }
  std::printf("%-18s median %.3f ms (latency - ready)\n", "overhead", r.overhead_ms());
  std::printf("%-18s median %.3f ms  p99 %.3f ms (device: switch begins -> first layer)\n", "startup",
              r.startup.median_ms, r.startup.p99_ms);
  if (!o.graph && spec.mechanism != Mechanism::Ready) {  // Note [Host time of an eager switch]
    std::printf("%-18s prepare median %.3f ms, forward's calls median %.3f ms (host, eager switch)\n", "host",
                r.host_prepare.median_ms, r.host_forward.median_ms);
  }
  std::printf("%-18s %.3f ms predicted by the timeline from %s on %s; pipeline bound %.3f ms\n", "prediction",
              r.predicted.total.ms(), spec.profile_origin.c_str(), spec.hardware.name.c_str(), r.bound.ms());
  if (r.decoder) {
    // Note [Time to first token] (exec/switch_benchmark.hpp).
    const exec::DecoderReport& d = *r.decoder;
    std::printf("%-18s %.3f ms for a %lld-token prompt, cold (the latency above)\n", "first token",
                r.latency.median_ms, static_cast<long long>(d.prompt_tokens));
    std::printf("%-18s %.3f ms = transfer %.3f ms + resident prefill %.3f ms; TTFT / bound %.3f\n", "  bound",
                r.first_token_bound_ms(), r.transfer.ms(), r.resident_ms(), r.first_token_over_bound());
    std::printf("%-18s median %.3f ms  p99 %.3f ms (every group copied, then the prefill%s)\n", "  copy, prefill",
                d.copy_then_prefill.median_ms, d.copy_then_prefill.p99_ms, o.graph ? ", graph" : "");
    if (d.decode_tokens > 0) {
      std::printf("%-18s median %.3f ms  p99 %.3f ms per token (%d tokens, resident, %s)\n", "decode",
                  d.per_token.median_ms, d.per_token.p99_ms, d.decode_tokens,
                  d.per_token_replayed ? "one graph replayed per step" : "eager");
    }
  }
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Switch a cold model into the device and run it; measure latency and overheads");
  cmd->add_option("--model", options->model,
                  "resnet152 | inception_v3 | bert_base | a decoder: llama-1b, llama-8b, llama-tiny (configs/zoo/), or its config "
                  "file | a user's model: a TorchScript file (.pt) or an AOTInductor package (.pt2, cuda) with --input-shape")
      ->required();
  std::string modes;
  for (Mechanism m : exec::benchmark_mechanisms()) modes += (modes.empty() ? "" : " | ") + to_string(m);
  cmd->add_option("--mode", options->mode, "The mechanism (the simulator's names): " + modes)->capture_default_str();
  auto* plan = cmd->add_option("--plan", options->plan_path, "A plan file (psw plan --out) instead of planning here");
  cmd->add_option("--groups", options->groups_path, "A groups file (configs/plans/) instead of planning here")
      ->excludes(plan);
  cmd->add_option("--repeat", options->repeat, "Measured repetitions")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--warmup", options->warmup, "Unmeasured repetitions first")->check(CLI::Range(0, 1000000))->capture_default_str();
  auto* batch = cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::Range(1, 4096))->capture_default_str();
  add_model_input_options(cmd, options->input);
  cmd->add_option("--format", options->format, "table | json")->capture_default_str();
  cmd->add_option("--timeline", options->timeline_path,
                  "Write one traced switch, measured, beside the predicted timeline as a Chrome trace");
  cmd->add_option("--backend", options->backend, "cuda | host")->capture_default_str();
  cmd->add_option("--dtype", options->dtype,
                  "The model's dtype: fp32 | bf16 | fp16 (the zoo's seeded fp32 weights converted; --weights and "
                  "--profile must be in this dtype)")
      ->capture_default_str();
  cmd->add_option("--profile", options->profile_path,
                  "Model profile for planning and prediction, in --dtype (default: configs/models/h200/MODEL.yaml, "
                  "measured, for fp32; configs/models/DTYPE/MODEL.yaml, analytic, for bf16 and fp16)");
  cmd->add_option("--hardware", options->hardware_path, "Hardware profile for planning and prediction")->capture_default_str();
  cmd->add_flag("--graph", options->graph,
                "Replay the switch as one captured graph (cuda backend); a user's model (.pt, .pt2) is then pipelined "
                "through its captured forward, planned from it");
  cmd->add_flag("--allow-uncaptured", options->allow_uncaptured,
                "A user's model with --graph whose forward cannot be captured (a host synchronisation inside, or "
                "a backend without graphs): measure its copy-then-forward switch instead of failing, and say so");
  cmd->add_option("--graph-out", options->graph_out,
                  "A user's model with --graph: write its capture as read (psw graph --graph takes it)");
  cmd->add_option("--profile-out", options->profile_out,
                  "A user's model with --graph: write its per-layer profile measured from the capture");
  cmd->add_option("--weights", options->weights_path,
                  "The model's parameters and buffers from a safetensors file, by torchvision's (resnet152, "
                  "inception_v3) or Hugging Face BertModel's (bert_base) state_dict names; default: random, seeded")
      ->check([](const std::string& path) -> std::string {
        // Here, before the model is built; the rest (the format, names, shapes, dtypes) is
        // load_weights', with the file and tensor named.
        std::error_code ec;
        const auto status = std::filesystem::status(path, ec);
        if (!std::filesystem::exists(status)) return path + ": no such file";
        if (!std::filesystem::is_regular_file(status)) return path + ": not a regular file";
        return {};
      });
  cmd->add_option("--prompt-tokens", options->prompt_tokens,
                  "Decoders: the prompt's length; the cold switch's latency is then the time to first token "
                  "(default: 128)")
      ->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--decode", options->decode_tokens,
                  "Decoders: tokens to decode after the first, for the per-token latency")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--placement", options->placement,
                  "copy (every layer) | auto (the planner reads layers such as embeddings in place where cheaper)")
      ->capture_default_str();
  cmd->add_option("--cpu-wakeup-latency-us", options->cpu_wakeup_latency_us,
                  "Hold the host's CPU wake-up latency this low while measuring, as a server with the serve "
                  "config's cpu_wakeup_latency_us does (/dev/cpu_dma_latency: root)")
      ->check(CLI::Range(0, 1'000'000));
  return [options, batch] {
    std::optional<runtime::CpuWakeupLatency> wakeup_latency;
    if (options->cpu_wakeup_latency_us) wakeup_latency.emplace(*options->cpu_wakeup_latency_us);
    // A shipped decoder by its name (llama-8b), from the project root as the other defaults.
    auto resolved = *options;
    resolved.model = exec::zoo_model_argument(options->model, "configs/zoo");
    resolved.input.batch_given = batch->count() > 0;
    run(resolved);
  };
}

}  // namespace psw::cli
