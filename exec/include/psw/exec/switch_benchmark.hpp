#pragma once
// The measurement behind `psw run`: switch one cold model in many times with one mechanism
// and measure it beside the ready model, in one run (DESIGN.md §5 "Measurement"). The loop
// and its statistics live here and return a typed report; the command only prints it.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/timeline.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/torchscript.hpp"
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
  // Decoders (Note [Decoder in the pipeline]): the prompt's length (0: the example's 128)
  // and how many tokens to decode after the first, resident, for the per-token latency.
  std::int64_t prompt_tokens = 0;
  int decode_tokens = 0;
  // A TorchScript model's inputs (Note [TorchScript models], [Several inputs]); none for the zoo's.
  std::vector<InputSpec> inputs;
};

struct LatencyStats {
  double median_ms = 0;
  double p99_ms = 0;
  double min_ms = 0;
};
LatencyStats latency_stats(std::vector<Duration> samples);  // nearest-rank quantiles
// The host's wall time of `fn` from one device synchronisation to the next (what a client waits).
Duration wall_time(Backend& backend, const std::function<void()>& fn);

// Time to first token of a cold decoder (Note [Time to first token]).
struct DecoderReport {
  std::int64_t prompt_tokens = 0;
  int decode_tokens = 0;             // decoded after the first token (0: not measured)
  LatencyStats copy_then_prefill;    // every parameter copied, then the prefill (no pipeline)
  LatencyStats per_token;            // one resident decode step, its token read on the host
  bool per_token_replayed = false;   // the steps replayed a graph (--graph: Note [Decode graph])
  std::vector<std::int64_t> tokens;  // the first sequence's greedy tokens after the prompt
};

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
  // Note [Host time of an eager switch] (pipeline.hpp): of eager switches (empty with graphs).
  LatencyStats host_prepare;
  LatencyStats host_forward;
  Timeline predicted;        // the timeline of the plan from the profiles
  Duration bound;            // the pipeline bound from the profiles
  Bytes param_bytes = 0;
  Duration transfer;         // all parameters in one copy at the profile's link
  Duration profile_compute;  // the profile's forward
  std::optional<Timeline> measured;  // the traced switch, when asked and the mode has groups
  std::optional<WeightsReport> weights;  // when spec.weights named a file
  std::optional<DecoderReport> decoder;  // decoders: the cold switch's latency is the TTFT
  double overhead_ms() const { return latency.median_ms - ready.median_ms; }
  // The resident prefill: the graph's when the run replays graphs.
  double resident_ms() const { return ready_graph.median_ms > 0 ? ready_graph.median_ms : ready.median_ms; }
  // Note [Time to first token]: the bound a pipelined cold start approaches, every byte over
  // the profile's link plus the resident prefill, and the measured TTFT over it.
  double first_token_bound_ms() const { return transfer.ms() + resident_ms(); }
  double first_token_over_bound() const { return latency.median_ms / first_token_bound_ms(); }
  // How much sooner the first token comes than after copy-then-prefill (decoders only): at
  // least the resident prefill when the prefill hides under the copies.
  double first_token_saving_ms() const {
    return decoder ? decoder->copy_then_prefill.median_ms - latency.median_ms : 0.0;
  }
  // The timeline's prediction error: measured latency over predicted, minus one.
  double prediction_error() const { return latency.median_ms / predicted.total.ms() - 1.0; }
};

// Note [Time to first token]: for a decoder the measured forward is the prefill of a prompt
// ending at the first token's logits, so the cold switch's latency is the time to first token
// (TTFT) of a cold start: parameters stream group by group while the prefill computes the
// layers that have arrived. Two baselines come from the same run: the resident model (`ready`,
// and `ready_graph` with graphs), and copy-then-prefill: the same plan's groups copied without
// pipelining, the prefill after the last copy (TransferMode::Unpipelined, replayed as a graph
// with graphs). A pipelined TTFT is bounded below by neither the copy nor the prefill alone but
// approaches transfer + the last groups' compute; the report compares it with transfer +
// resident prefill (first_token_bound_ms), the yardstick of LLM switching. Per-token decode latency is
// the resident model's (the parameters have all arrived by then).
//
// Throws InputError for a mechanism psw run cannot measure in one process (the ones that
// need the server: stop-and-start, MPS, unified memory, IPC), a plan of another model, a
// placement the mechanism does not allow, a weights file load_weights refuses, or
// prompt_tokens / decode_tokens for a model that is not a decoder; for an unknown dtype, a
// profile of another dtype than spec.dtype, and a plan made for the model in another dtype
// (told apart from other mismatches by its layer fingerprint).
SwitchBenchmarkReport run_switch_benchmark(const SwitchBenchmarkSpec& spec);

// The mechanisms run_switch_benchmark measures, by name.
std::vector<Mechanism> benchmark_mechanisms();

}  // namespace psw::exec
