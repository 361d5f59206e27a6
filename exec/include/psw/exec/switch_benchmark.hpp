#pragma once
// The measurement behind `psw run`: switch one cold model in many times with one mechanism
// and measure it beside the ready model, in one run (DESIGN.md §5 "Measurement"). The loop
// and its statistics live here and return a typed report; the command only prints it.

#include <optional>
#include <string>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/timeline.hpp"
#include "psw/exec/weights.hpp"

namespace psw::exec {

struct SwitchBenchmarkSpec {
  std::string model;                // a zoo model
  std::string dtype = "fp32";       // the model's dtype: fp32 | bf16 | fp16 (parse_zoo_dtype)
  std::string weights;              // a safetensors file (load_weights); empty: random, seeded
  Mechanism mechanism = Mechanism::PipeSwitch;
  std::optional<SwitchPlan> plan;   // a plan file's; empty: planned here from the profiles
  std::string plan_origin;          // where `plan` came from, for messages
  Placement placement = Placement::Copy;
  ModelProfile profile;             // for planning and prediction
  std::string profile_origin;
  HardwareProfile hardware;
  std::string backend = "cuda";
  int repeat = 100;
  int warmup = 5;
  int batch = 8;
  bool graph = false;
  bool traced_switch = false;       // one more traced cold switch (Note [Measured trace])
};

struct LatencyStats {
  double median_ms = 0;
  double p99_ms = 0;
  double min_ms = 0;
};
LatencyStats latency_stats(std::vector<Duration> samples);  // nearest-rank quantiles

struct SwitchBenchmarkReport {
  std::string backend;
  std::string device;
  SwitchPlan plan;
  std::vector<std::string> host_mapped_layers;
  LatencyStats latency;      // client-side wall time per cold switch (the ready run's for ready)
  LatencyStats ready;        // eager resident forward
  LatencyStats ready_graph;  // resident forward replayed as a graph (graph runs only)
  LatencyStats startup;      // device: switch begins -> first layer computes
  LatencyStats device_total; // device: switch begins -> forward done
  Timeline predicted;        // the timeline of the plan from the profiles
  Duration bound;            // the pipeline bound from the profiles
  Bytes param_bytes = 0;
  Duration transfer;         // all parameters in one copy at the profile's link
  Duration profile_compute;  // the profile's forward
  std::optional<Timeline> measured;  // the traced switch, when asked and the mode has groups
  std::optional<WeightsReport> weights;  // when spec.weights named a file
  double overhead_ms() const { return latency.median_ms - ready.median_ms; }
};

// Throws InputError for a mechanism psw run cannot measure in one process (the ones that
// need the server: stop-and-start, MPS, unified memory, IPC), a plan of another model, a
// placement the mechanism does not allow, or a weights file load_weights refuses; for an
// unknown dtype, a profile of another dtype than spec.dtype, and a plan made for the model in
// another dtype (told apart from other mismatches by its layer fingerprint).
SwitchBenchmarkReport run_switch_benchmark(const SwitchBenchmarkSpec& spec);

// The mechanisms run_switch_benchmark measures, by name.
std::vector<Mechanism> benchmark_mechanisms();

}  // namespace psw::exec
