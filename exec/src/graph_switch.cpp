#include "psw/exec/graph_switch.hpp"

#include <functional>
#include <sstream>
#include <unordered_set>

#include "psw/common/error.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/common/timeline.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/profiler.hpp"

namespace psw::exec {

namespace graph_switch_impl {

// The model's tensors where the engine bound them, as the analysis takes them: named by module
// path and tensor name, each address once (a tied weight is one tensor in two modules), none of
// zero bytes (they are read by no one).
std::vector<GraphParameter> bound_parameters(ZooModel& model) {
  std::vector<GraphParameter> parameters;
  std::unordered_set<std::uint64_t> seen;
  for (const ZooLayer& layer : model.layers()) {
    for (std::size_t t = 0; t < layer.tensors.size(); ++t) {
      const torch::Tensor& tensor = layer.tensors[t];
      const auto bytes = static_cast<Bytes>(tensor.nbytes());
      const auto address = reinterpret_cast<std::uint64_t>(tensor.data_ptr());
      if (bytes == 0 || !seen.insert(address).second) continue;
      const std::string name = t < layer.tensor_names.size() ? layer.tensor_names[t] : std::to_string(t);
      parameters.push_back(GraphParameter{layer.name + "." + name, address, bytes});
    }
  }
  return parameters;
}

// A given profile of a capture, checked against the capture's own layers (`skeleton`: names,
// bytes, batch and dtype); InputError naming the first difference.
const ModelProfile& checked_capture_profile(const ModelProfile& given, const std::string& origin,
                                            const ModelProfile& skeleton) {
  const std::string where = origin.empty() ? std::string("the profile") : origin;
  auto refuse = [&](const std::string& why) {
    throw InputError(where + ": not a profile of this captured graph (" + why +
                     "; psw profile --model FILE.pt --graph writes one)");
  };
  if (given.layers.size() != skeleton.layers.size()) {
    refuse(detail::concat(given.layers.size(), " layers, the capture has ", skeleton.layers.size()));
  }
  if (given.batch != skeleton.batch || given.dtype != skeleton.dtype) {
    refuse(detail::concat("batch ", given.batch, " ", given.dtype, ", the capture's is ", skeleton.batch, " ",
                          skeleton.dtype));
  }
  for (std::size_t l = 0; l < given.layers.size(); ++l) {
    const LayerProfile& a = given.layers[l];
    const LayerProfile& b = skeleton.layers[l];
    if (a.name != b.name || a.param_bytes != b.param_bytes) {
      refuse(detail::concat("layer ", l, " is '", a.name, "' of ", a.param_bytes, " bytes, the capture's '", b.name,
                            "' of ", b.param_bytes));
    }
  }
  return given;
}

// The output's bytes, for a bit-for-bit comparison (NaN equals NaN, -0 differs from 0).
torch::Tensor raw_bytes(const torch::Tensor& t) { return t.contiguous().view({-1}).view(torch::kUInt8); }

}  // namespace graph_switch_impl

CapturedSwitch::CapturedSwitch(Backend& backend, ZooModel& model, const torch::Tensor& example,
                               const torch::Tensor& host, const torch::Tensor& device, const CapturedSwitchSpec& spec) {
  using namespace graph_switch_impl;
  if (!backend.supports_graphs()) {
    throw UncapturableError("the " + backend.name() + " backend cannot capture graphs: " + model.name() +
                            " is pipelined through its captured graph on cuda only");
  }
  PSW_CHECK(host.numel() == device.numel(), "a store of ", host.numel(), " bytes for a region of ", device.numel());
  input_ = example.clone();
  backend.synchronize();
  captured_ = backend.capture_forward([&] { return model.forward(input_, [](std::size_t) {}); },
                                      bound_parameters(model));
  analysis_ = analyze_kernel_graph(captured_->description());

  const auto batch = static_cast<int>(example.size(0));
  const std::string dtype = zoo_dtype_name(model.dtype());
  if (spec.profile) {
    profile_ = checked_capture_profile(*spec.profile, spec.profile_origin,
                                       kernel_graph_profile(analysis_, model.name(), batch, dtype,
                                                            std::vector<Duration>(analysis_.layers.size()), {}));
  } else {
    // Item 2 of the note: the layers' times, the timestamps' cost removed (Note [Mark overhead]).
    const CapturedForward::LayerTiming timing = captured_->time_layers(analysis_, spec.profile_repeat);
    const Duration plain = captured_->time_resident(spec.profile_repeat);
    std::vector<int> records(analysis_.layers.size(), 0);
    for (std::size_t l = 0; l < analysis_.layers.size(); ++l) records[l] = analysis_.layers[l].nodes.empty() ? 0 : 1;
    const std::vector<Duration> layer_times = remove_mark_overhead(timing.per_layer, records, plain);
    SourceInfo source = spec.source;
    source.kind = ProfileSource::Measured;
    source.device = backend.device_description();
    source.note = detail::concat("per layer of the captured graph (", graph().nodes.size(), " nodes, ",
                                 spec.profile_repeat, " replays; timestamps' cost removed: ", timing.instrumented.ms(),
                                 " ms instrumented, ", plain.ms(), " ms plain)");
    profile_ = kernel_graph_profile(analysis_, model.name(), batch, dtype, layer_times, source);
  }

  const SwitchCosts costs = make_switch_costs(profile_, spec.hardware, Task::Inference);
  groups_ = make_plan(spec.strategy, costs).groups;
  predicted_ = evaluate_timeline(costs, groups_).total;
  bound_ = pipeline_bound(costs);
  param_bytes_ = costs.total_bytes();
  const RewrittenGraph rewrite = rewrite_with_copies(graph(), analysis_, groups_, bridge_bytes(spec.hardware.pinned));
  for (const GroupCopy& copy : rewrite.copies) copy_ranges_ += copy.ranges.size();
  added_edges_ = rewrite.added_edges;
  captured_->build_switch(rewrite, host, device);
}

void CapturedSwitch::take_input(const torch::Tensor& input) {
  if (input.sizes() != input_.sizes() || input.scalar_type() != input_.scalar_type()) {
    std::ostringstream why;
    why << "the input is " << input.scalar_type() << " " << input.sizes() << "; the captured graph takes "
        << input_.scalar_type() << " " << input_.sizes();
    throw InputError(why.str());
  }
  input_.copy_(input, /*non_blocking=*/true);
}

torch::Tensor CapturedSwitch::switch_in_and_run(const torch::Tensor& input) {
  take_input(input);
  captured_->replay_switch();
  return captured_->output();
}

torch::Tensor CapturedSwitch::run_resident(const torch::Tensor& input) {
  take_input(input);
  captured_->replay_resident();
  return captured_->output();
}

namespace graph_switch_impl {

// What both measurements start from: the model on the backend, bound to a private region in one
// group, warmed, and its CapturedSwitch.
struct CapturedSetup {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ZooModel> model;
  std::unique_ptr<PrivatePipeline> pipeline;
  torch::Tensor input;   // the example, on the device
  torch::Tensor host;    // the store and the region as the same number of bytes
  torch::Tensor device;
  std::unique_ptr<CapturedSwitch> captured;  // null until captured
};

// Everything but the capture; the model warmed on the input.
CapturedSetup prepared_setup(const GraphSwitchSpec& spec) {
  if (!names_model_file(spec.model)) {
    throw InputError("--graph pipelines a user's model (TorchScript .pt, AOTInductor .pt2) through its captured graph; " +
                     spec.model + " is not one (the zoo's models switch through their own gates: psw run without a file)");
  }
  if (spec.repeat < 1 || spec.warmup < 0 || spec.profile_repeat < 1) {
    throw InputError(detail::concat("--repeat must be at least 1 and --warmup not negative (", spec.repeat, ", ",
                                    spec.warmup, ")"));
  }
  CapturedSetup s;
  s.backend = make_backend(spec.backend);
  Backend& backend = *s.backend;
  if (!backend.supports_graphs() && !spec.allow_uncaptured) {  // before the model is loaded and run
    throw UncapturableError("--graph: the " + backend.name() + " backend cannot capture graphs; a user's model is " +
                            "pipelined through its captured graph on --backend cuda (without --graph, or with " +
                            "--allow-uncaptured, it runs copy-then-forward)");
  }
  s.model = open_model(spec.model, 0, parse_zoo_dtype(spec.dtype), spec.inputs, backend.device());
  s.model->to(backend.device());
  const int batch = static_cast<int>(spec.inputs.front().shape.front());
  s.input = s.model->example_input(batch, 1).to(backend.device());
  const torch::Tensor& input = s.input;

  // Note [Parameter binding]: one group for now; the switch's grouping is the graph's own.
  s.pipeline = make_private_pipeline(backend, *s.model, single_group(s.model->layers().size()));
  // Parameters in place, and the TorchScript executor's profiling runs done (it may compile
  // fused kernels on its first runs, which a capture cannot hold).
  for (int i = 0; i < 3; ++i) s.pipeline->engine->switch_in_and_run(input);
  backend.synchronize();

  // The store and the region as the same number of bytes (the region may be rounded up).
  const std::int64_t packed = std::min(s.pipeline->store.bytes().numel(), s.pipeline->region->bytes().numel());
  s.host = s.pipeline->store.bytes().narrow(0, 0, packed);
  s.device = s.pipeline->region->bytes().narrow(0, 0, packed);
  return s;
}

void capture(CapturedSetup& s, const GraphSwitchSpec& spec) {
  CapturedSwitchSpec captured_spec{spec.hardware, spec.strategy, spec.profile_repeat, spec.source, spec.profile,
                                   spec.profile_origin};
  s.captured = std::make_unique<CapturedSwitch>(*s.backend, *s.model, s.input, s.host, s.device, captured_spec);
}

CapturedSetup captured_setup(const GraphSwitchSpec& spec) {
  CapturedSetup s = prepared_setup(spec);
  capture(s, spec);
  return s;
}

// Note [Uncaptured switch]: what --allow-uncaptured measures where the forward cannot be
// captured: the engine's eager switch of the one group (the whole copy, then the module's
// forward), after the region was poisoned, beside the resident forward and the copy alone.
GraphSwitchReport uncaptured_benchmark(CapturedSetup& s, const GraphSwitchSpec& spec, const std::string& reason) {
  Backend& backend = *s.backend;
  PipelineEngine& engine = *s.pipeline->engine;
  GraphSwitchReport report;
  report.captured = false;
  report.uncaptured_reason = reason;
  report.device = backend.device_description();
  report.param_bytes = static_cast<Bytes>(s.host.numel());
  const torch::Tensor reference = raw_bytes(engine.run_resident(s.input)).clone();
  std::vector<Duration> switch_wall, resident_wall, copy_wall;
  for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
    const bool measured = i >= spec.warmup;
    backend.fill(s.device, 0xFF);
    torch::Tensor output;
    const Duration w = wall_time(backend, [&] { output = engine.switch_in_and_run(s.input); });
    if (measured) {
      switch_wall.push_back(w);
      ++report.outputs_checked;
      if (torch::equal(raw_bytes(output), reference)) ++report.outputs_equal;
    }
    const Duration r = wall_time(backend, [&] { engine.run_resident(s.input); });
    const Duration k = wall_time(backend, [&] {
      backend.begin_switch(1);
      backend.copy_group(0, s.device, s.host);
    });
    if (measured) {
      resident_wall.push_back(r);
      copy_wall.push_back(k);
    }
  }
  report.latency = latency_stats(switch_wall);
  report.copy_then_replay = report.latency;
  report.resident = latency_stats(resident_wall);
  report.copy_only = latency_stats(copy_wall);
  return report;
}

}  // namespace graph_switch_impl

CapturedProfile profile_captured_graph(const GraphSwitchSpec& spec) {
  using namespace graph_switch_impl;
  const CapturedSetup s = captured_setup(spec);
  return CapturedProfile{s.backend->device_description(), s.captured->profile(), s.captured->graph().nodes.size()};
}

GraphSwitchReport run_graph_switch_benchmark(const GraphSwitchSpec& spec) {
  using namespace graph_switch_impl;
  CapturedSetup s = prepared_setup(spec);
  try {
    capture(s, spec);
  } catch (const UncapturableError& e) {
    if (!spec.allow_uncaptured) throw;
    return uncaptured_benchmark(s, spec, e.what());
  }
  Backend* backend = s.backend.get();
  CapturedSwitch& captured = *s.captured;
  const torch::Tensor& host = s.host;
  const torch::Tensor& device = s.device;
  GraphSwitchReport report;
  report.device = backend->device_description();
  report.graph = captured.graph();
  report.read = captured.read_stats();
  report.layers = captured.analysis().layers.size();
  report.nodes_using_everything = captured.analysis().nodes_using_everything;
  report.parameters_used = report.graph.parameters.size() - captured.analysis().unused_parameters;
  report.profile = captured.profile();
  report.groups = captured.groups();
  report.predicted = captured.predicted();
  report.bound = captured.bound();
  report.param_bytes = captured.param_bytes();
  report.copy_ranges = captured.copy_ranges();
  report.added_edges = captured.added_edges();

  auto wall = [&](const std::function<void()>& fn) { return wall_time(*backend, fn); };
  captured.replay_resident();
  backend->synchronize();
  const torch::Tensor reference = raw_bytes(captured.output()).clone();
  std::vector<Duration> switch_wall, switch_device, resident_wall, copy_then_wall, copy_wall;
  for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
    const bool measured = i >= spec.warmup;
    // A cold switch: the region poisoned first, so a kernel that ran before its copy shows.
    backend->fill(device, 0xFF);
    const Duration w = wall([&] {
      backend->mark(0);
      captured.replay_switch();
      backend->mark(1);
    });
    if (measured) {
      switch_wall.push_back(w);
      switch_device.push_back(backend->elapsed(0, 1));
      ++report.outputs_checked;
      if (torch::equal(raw_bytes(captured.output()), reference)) ++report.outputs_equal;
    }
    const Duration r = wall([&] { captured.replay_resident(); });
    if (measured) resident_wall.push_back(r);
    backend->fill(device, 0xFF);
    const Duration c = wall([&] {
      backend->begin_switch(1);
      backend->copy_group(0, device, host);
      backend->wait_group(0);
      captured.replay_resident();
    });
    if (measured) copy_then_wall.push_back(c);
    const Duration k = wall([&] {
      backend->begin_switch(1);
      backend->copy_group(0, device, host);
    });
    if (measured) copy_wall.push_back(k);
  }
  report.latency = latency_stats(switch_wall);
  report.device_total = latency_stats(switch_device);
  report.resident = latency_stats(resident_wall);
  report.copy_then_replay = latency_stats(copy_then_wall);
  report.copy_only = latency_stats(copy_wall);
  return report;
}

}  // namespace psw::exec
