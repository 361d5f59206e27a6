#include "psw/exec/switch_benchmark.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "psw/common/error.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/weights.hpp"

namespace psw::exec {

namespace {

Duration milliseconds_to_duration(double ms) { return nanoseconds(static_cast<std::int64_t>(std::llround(ms * 1e6))); }

// How the engine moves parameters for a mechanism (Note [Mechanism table]); empty for the
// mechanisms one process cannot play.
std::optional<TransferMode> transfer_mode(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  if (mechanism == Mechanism::Ready) return TransferMode::Pipelined;
  // No optimisation: the per-layer copies of one process, the forward after the last.
  if (mechanism == Mechanism::NoOptimization) return TransferMode::Unpipelined;
  if (!t.pipeswitch_family || t.ipc_handle_per_group || t.peer_paths) return std::nullopt;
  if (t.allocation == Allocation::PerTensorMalloc) return TransferMode::AllocatePerTensor;
  if (t.host_memory == HostMemory::Pageable) return TransferMode::Pageable;
  return TransferMode::Pipelined;
}

// InputError when `plan` fits the model in another of the zoo's dtypes than its own: a clearer
// message than check_plan_matches' fingerprint mismatch. bf16 and fp16 have the same sizes, so
// their plans are interchangeable and the message names both.
void check_plan_dtype(const SwitchPlan& plan, ZooModel& model, const std::string& origin) {
  if (plan.model != model.name()) return;  // check_plan_matches says so
  if (plan.fingerprint == layer_fingerprint(model, model.dtype())) return;
  std::string fits;
  for (const std::string& name : zoo_dtype_names()) {
    if (plan.fingerprint == layer_fingerprint(model, parse_zoo_dtype(name))) fits += (fits.empty() ? "" : " or ") + name;
  }
  if (fits.empty()) return;  // other layers altogether: check_plan_matches says so
  const std::string own = zoo_dtype_name(model.dtype());
  throw InputError(origin + ": the plan was made for " + model.name() + " in " + fits + ", not in " + own +
                   " (--dtype): make it from the " + own + " profile");
}

// Note [Time to first token]: copy-then-prefill with the same groups, then the resident
// model's decode steps. `wall` times one call between two device synchronisations.
template <typename Wall>
DecoderReport measure_decoder(const SwitchBenchmarkSpec& spec, Backend& backend, ZooModel& model, Decoder& decoder,
                              const SwitchPlan& plan, const torch::Tensor& input, Wall&& wall) {
  DecoderReport d;
  d.prompt_tokens = input.size(1);
  d.decode_tokens = spec.decode_tokens;
  SwitchPlan copied = plan;
  copied.host_mapped.clear();  // every layer is copied before the prefill
  auto baseline = make_private_pipeline(backend, model, copied, TransferMode::Unpipelined);
  PipelineEngine& engine = *baseline->engine;
  if (spec.graph) engine.capture_graphs(input, /*traced=*/false);
  std::vector<Duration> samples;
  for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(i));
    const Duration w = wall([&] {
      if (spec.graph) {
        engine.switch_in_and_run_graph(input);
      } else {
        engine.switch_in_and_run(input);
      }
    });
    if (i >= spec.warmup) samples.push_back(w);
  }
  d.copy_then_prefill = latency_stats(samples);
  // The parameters are resident now: prefill into a cache sized for the decode, then one
  // token per step, the steps before the timed ones the warm-up (time_greedy_decode). Under
  // --graph the steps replay one graph, as the server's do (Note [Decode graph]).
  engine.switch_in_and_run(input);
  if (spec.decode_tokens > 0) {
    torch::NoGradGuard no_grad;
    KvCache cache = decoder.make_cache(static_cast<int>(input.size(0)), input.size(1) + spec.decode_tokens + 2);
    const TimedDecode timed =
        time_greedy_decode(backend, decoder, decoder.prefill(input, cache), cache, spec.decode_tokens, spec.graph);
    d.per_token = latency_stats(timed.steps);
    d.per_token_replayed = timed.replayed;
    d.tokens = timed.tokens;
  }
  return d;
}

}  // namespace

std::vector<Mechanism> benchmark_mechanisms() {
  std::vector<Mechanism> out;
  for (Mechanism m : all_mechanisms()) {
    if (transfer_mode(m)) out.push_back(m);
  }
  return out;
}

LatencyStats latency_stats(std::vector<Duration> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)].ms();
  };
  return {at(0.5), at(0.99), v.front().ms()};
}

Duration wall_time(Backend& backend, const std::function<void()>& fn) {
  backend.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  backend.synchronize();
  return nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

SwitchBenchmarkReport run_switch_benchmark(const SwitchBenchmarkSpec& spec) {
  const std::optional<TransferMode> mode = transfer_mode(spec.mechanism);
  if (traits(spec.mechanism).peer_paths) {
    throw InputError("mechanism '" + to_string(spec.mechanism) +
                     "' is simulated only: the executor's switch through peer GPUs is not built yet");
  }
  if (!mode) {
    std::string names;
    for (Mechanism m : benchmark_mechanisms()) names += (names.empty() ? "" : ", ") + to_string(m);
    throw InputError("psw run measures one process: mechanism '" + to_string(spec.mechanism) +
                     "' needs the server (psw serve); psw run takes " + names);
  }
  const MechanismTraits& mechanism = traits(spec.mechanism);
  const HostMemory memory = mechanism.host_memory;
  if (spec.placement == Placement::Auto && (spec.plan || *mode != TransferMode::Pipelined)) {
    throw InputError("--placement auto plans the groups it places, from pinned memory: not with --plan, "
                     "no-pinned-memory, no-memory-management or no-optimization");
  }
  const torch::ScalarType dtype = parse_zoo_dtype(spec.dtype);
  // Before the model is built: the profile's bytes and times are of one dtype, and planning
  // from another's would group and predict the wrong sizes.
  if (spec.profile.dtype != spec.dtype) {
    throw InputError(spec.profile_origin + ": the profile is for dtype '" + spec.profile.dtype + "', not '" +
                     spec.dtype + "' (--dtype): give the profile of " + spec.model + " in " + spec.dtype);
  }
  auto backend = make_backend(spec.backend);
  auto model = open_model(spec.model, 0, dtype, spec.inputs, backend->device());
  if (spec.profile.name != model->name()) {
    throw InputError(spec.profile_origin + ": the profile is of model '" + spec.profile.name + "', not '" +
                     spec.model + "'");
  }
  Decoder* decoder = as_decoder(*model);
  if (decoder == nullptr && (spec.prompt_tokens != 0 || spec.decode_tokens != 0)) {
    throw InputError("--prompt-tokens and --decode are for decoders (configs/zoo/*.yaml); " + model->name() +
                     " is not one");
  }
  if (spec.decode_tokens < 0) throw InputError(detail::concat("--decode must not be negative, not ", spec.decode_tokens));
  SwitchBenchmarkReport report;
  // The user's weights go into the model on the host, before anything packs it into the
  // parameter store (make_private_pipeline below).
  if (!spec.weights.empty()) report.weights = load_weights(*model, spec.weights);
  model->to(backend->device());
  report.backend = backend->name();
  report.device = backend->device_description();
  if (spec.plan) {
    report.plan = *spec.plan;
    check_plan_dtype(report.plan, *model, spec.plan_origin);
    check_plan_matches(report.plan, model->name(), layer_fingerprint(*model), model->layers().size(),
                       spec.plan_origin);
  } else {
    // Note [Placement]: layers read in place from pinned host memory cross PCIe as no group's
    // bytes; the executor binds them to the pinned buffer instead of the region.
    const Strategy strategy = grouping_strategy(spec.mechanism, Strategy::Optimal);
    report.plan = make_switch_plan(spec.profile, spec.hardware, Task::Inference, strategy, spec.placement, memory);
  }
  const SwitchPlan& plan = report.plan;
  const torch::Tensor input =
      (decoder != nullptr && spec.prompt_tokens > 0 ? decoder->example_tokens(spec.batch, spec.prompt_tokens, 1)
                                                     : model->example_input(spec.batch, 1))
          .to(backend->device());
  // The prompt, the timed steps and the two before them (time_greedy_decode), refused before
  // anything is switched rather than after the whole benchmark.
  if (decoder != nullptr && spec.decode_tokens > 0 &&
      input.size(1) + spec.decode_tokens + 2 > decoder->config().max_positions) {
    throw InputError(detail::concat(model->name(), ": a prompt of ", input.size(1), " tokens and --decode ",
                                    spec.decode_tokens, " need ", input.size(1) + spec.decode_tokens + 2,
                                    " positions (two steps before the timed ones), more than its ",
                                    decoder->config().max_positions));
  }
  // Note [Prefill curve]: a decoder's profiled times are for the profile's prompt; another
  // prompt's are scaled by its curve, and without one the prediction would be another prompt's.
  const std::int64_t prompt = decoder != nullptr ? input.size(1) : 0;
  if (prompt > 0 && spec.profile.prompt_tokens > 0 && prompt != spec.profile.prompt_tokens &&
      spec.profile.prefill_curve.empty()) {
    throw InputError(detail::concat(spec.profile_origin, ": the profile's times are for a prompt of ",
                                    spec.profile.prompt_tokens, " tokens, not ", prompt,
                                    ": profile at that prompt, or with a prefill curve (psw profile --prefill-tokens)"));
  }
  const SwitchCosts costs = make_switch_costs(spec.profile, spec.hardware, Task::Inference, memory, plan.host_mapped)
                                .with_compute_scaled(prefill_scale(spec.profile, prompt));
  report.host_mapped_layers = host_mapped_names(spec.profile, plan.host_mapped);
  auto pipeline = make_private_pipeline(*backend, *model, plan, *mode);
  PipelineEngine& engine = *pipeline->engine;

  std::vector<Duration> ready_wall;
  std::vector<Duration> switch_wall;
  std::vector<Duration> switch_startup;
  std::vector<Duration> device_total;
  std::vector<Duration> host_prepare;
  std::vector<Duration> host_forward;
  auto wall = [&](auto&& fn) { return wall_time(*backend, fn); };
  // The ready model, measured in the same run: parameters resident, plain forward.
  engine.switch_in_and_run(input);
  for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
    const Duration w = wall([&] { engine.run_resident(input); });
    if (i >= spec.warmup) ready_wall.push_back(w);
  }
  // With graphs: the switch and the resident run replay captured graphs (Note [Switch
  // graphs]); the eager resident run above stays the PyTorch-eager reference.
  std::vector<Duration> ready_graph_wall;
  if (spec.graph) {
    engine.capture_graphs(input);
    for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
      const Duration w = wall([&] { engine.run_resident_graph(input); });
      if (i >= spec.warmup) ready_graph_wall.push_back(w);
    }
  }
  const bool switches = spec.mechanism != Mechanism::Ready;
  if (switches) {
    for (int i = 0; i < spec.warmup + spec.repeat; ++i) {
      engine.poison_device_parameters(static_cast<std::uint8_t>(i));  // stale parameters: a cold switch
      const Duration w = wall([&] {
        if (spec.graph) {
          engine.switch_in_and_run_graph(input);
        } else {
          engine.switch_in_and_run(input);
        }
      });
      const SwitchTiming t = engine.last_timing();
      if (i >= spec.warmup) {
        switch_wall.push_back(w);
        switch_startup.push_back(t.startup);
        device_total.push_back(t.total);
        if (!spec.graph) {
          const EagerHostTimes host = engine.last_eager_host_times();
          host_prepare.push_back(host.prepare);
          host_forward.push_back(host.forward);
        }
      }
    }
  }
  report.ready = latency_stats(ready_wall);
  report.ready_graph = latency_stats(ready_graph_wall);
  report.latency = switches ? latency_stats(switch_wall) : report.ready;
  report.startup = latency_stats(switch_startup);
  report.device_total = latency_stats(device_total);
  report.host_prepare = latency_stats(host_prepare);
  report.host_forward = latency_stats(host_forward);
  report.predicted = evaluate_timeline(costs, plan.groups);
  report.bound = pipeline_bound(costs);
  report.param_bytes = costs.total_bytes();
  report.transfer = costs.link().copy_time(costs.total_bytes());
  report.profile_compute = costs.total_compute();
  // Note [Measured trace] (pipeline.hpp): one more cold switch, traced.
  if (spec.traced_switch && switches && *mode != TransferMode::AllocatePerTensor) {
    engine.poison_device_parameters();
    if (spec.graph) {
      engine.switch_in_and_run_graph(input, /*traced=*/true);
    } else {
      engine.set_tracing(true);
      engine.switch_in_and_run(input);
      engine.set_tracing(false);
    }
    Timeline measured = engine.measured_timeline();
    measured.ready = milliseconds_to_duration(spec.graph ? report.ready_graph.median_ms : report.ready.median_ms);
    measured.overhead = measured.total - measured.ready;
    report.measured = measured;
  }
  if (decoder != nullptr) {
    // The switch engine goes first: the baseline's store and region replace its own.
    pipeline.reset();
    report.decoder = measure_decoder(spec, *backend, *model, *decoder, plan, input, wall);
  }
  return report;
}

}  // namespace psw::exec
