// Planner search time: `optimal` and `pipeswitch` on the shipped models, on synthetic models
// of 50 to 10,000 layers, and on a kernel-level model (half its layers read no parameters,
// as when a model is captured from CUDA graphs kernel by kernel). `pipeswitch` runs only up to
// 1,000 layers: it took 82 s on the 5,000-layer transformer. scripts/bench-planner.sh runs this
// and writes results/planner.md. Targets: optimal under 5 ms per shipped model, under 100 ms
// at 1,000 layers and under 1 s at 10,000 layers, on one core.
#include <benchmark/benchmark.h>

#include <string>

#include "psw/common/config.hpp"
#include "psw/common/planner.hpp"
#include "psw/common/synthetic.hpp"

namespace {

using namespace psw;

const HardwareProfile& h200() {
  static const HardwareProfile hw =
      load_hardware_profile(std::string(PSW_SOURCE_DIR) + "/configs/hardware/h200-pcie5.yaml");
  return hw;
}

SwitchCosts shipped(const std::string& name) {
  const ModelProfile model =
      load_model_profile(std::string(PSW_SOURCE_DIR) + "/configs/models/" + name + ".yaml");
  return make_switch_costs(model, h200(), Task::Inference);
}

SwitchCosts synthetic(SyntheticKind kind, std::int64_t layers) {
  return make_switch_costs(make_synthetic_layers(kind, static_cast<std::size_t>(layers)), h200(),
                           Task::Inference);
}

// `layers` kernels: the synthetic transformer's layers, each followed by a parameterless
// elementwise kernel (bias, activation or residual add: one read and one write of its
// output activation), so half the layers carry no bytes.
SwitchCosts kernel_level(std::int64_t layers) {
  const ModelProfile transformer =
      make_synthetic_layers(SyntheticKind::Transformer, static_cast<std::size_t>((layers + 1) / 2));
  ModelProfile kernels = transformer;
  kernels.name = "synthetic_kernels_" + std::to_string(layers);
  kernels.layers.clear();
  for (const LayerProfile& layer : transformer.layers) {
    kernels.layers.push_back(layer);
    LayerProfile elementwise;
    elementwise.name = layer.name + ".elementwise";
    elementwise.kind = "elementwise";
    elementwise.activation_bytes = layer.activation_bytes;
    elementwise.forward_flops = layer.activation_bytes / 4;
    elementwise.forward_memory_bytes = 2 * layer.activation_bytes;
    elementwise.backward_flops = elementwise.forward_flops;
    elementwise.backward_memory_bytes = elementwise.forward_memory_bytes;
    kernels.layers.push_back(elementwise);
  }
  kernels.layers.resize(static_cast<std::size_t>(layers));
  return make_switch_costs(kernels, h200(), Task::Inference);
}

template <PlanResult (*Planner)(const SwitchCosts&)>
void run(benchmark::State& state, const SwitchCosts& costs) {
  PlanResult result;
  for (auto _ : state) {
    result = Planner(costs);
    benchmark::DoNotOptimize(result);
  }
  state.counters["groups"] = static_cast<double>(result.groups.size());
  state.counters["nodes"] = static_cast<double>(result.stats.nodes);
  state.counters["total_ms"] = result.total.ms();
}

void BM_OptimalShipped(benchmark::State& state, const char* model) {
  run<plan_optimal>(state, shipped(model));
}
void BM_PipeSwitchShipped(benchmark::State& state, const char* model) {
  run<plan_pipeswitch>(state, shipped(model));
}
void BM_OptimalTransformer(benchmark::State& state) {
  run<plan_optimal>(state, synthetic(SyntheticKind::Transformer, state.range(0)));
}
void BM_PipeSwitchTransformer(benchmark::State& state) {
  run<plan_pipeswitch>(state, synthetic(SyntheticKind::Transformer, state.range(0)));
}
void BM_OptimalCnn(benchmark::State& state) {
  run<plan_optimal>(state, synthetic(SyntheticKind::Cnn, state.range(0)));
}
void BM_PipeSwitchCnn(benchmark::State& state) {
  run<plan_pipeswitch>(state, synthetic(SyntheticKind::Cnn, state.range(0)));
}
void BM_OptimalKernelLevel(benchmark::State& state) {
  run<plan_optimal>(state, kernel_level(state.range(0)));
}
void BM_PipeSwitchKernelLevel(benchmark::State& state) {
  run<plan_pipeswitch>(state, kernel_level(state.range(0)));
}

}  // namespace

BENCHMARK_CAPTURE(BM_OptimalShipped, resnet152, "resnet152")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_OptimalShipped, inception_v3, "inception_v3")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_OptimalShipped, bert_base, "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PipeSwitchShipped, resnet152, "resnet152")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PipeSwitchShipped, inception_v3, "inception_v3")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PipeSwitchShipped, bert_base, "bert_base")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OptimalTransformer)->Arg(50)->Arg(200)->Arg(1000)->Arg(5000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipeSwitchTransformer)->Arg(50)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OptimalCnn)->Arg(50)->Arg(200)->Arg(1000)->Arg(5000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipeSwitchCnn)->Arg(50)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OptimalKernelLevel)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipeSwitchKernelLevel)->Arg(1000)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
