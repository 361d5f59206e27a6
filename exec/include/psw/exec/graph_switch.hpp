#pragma once
// The measurement behind `psw run --model FILE.pt --graph`: a user's TorchScript model switched
// through its captured graph (Note [Graph-pipelined switch] in captured_forward.hpp), beside the
// same capture replayed resident and beside a PyTorch user's cold start (the whole pinned copy,
// then the resident graph), in one run. The loop and its statistics live here and return a typed
// report; the command only prints it.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/kernel_graph.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/plan.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/captured_forward.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/switch_benchmark.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::exec {

// Note [Captured switch]
// ~~~~~~~~~~~~~~~~~~~~~~
// Items 1-3 of Note [Graph-pipelined switch] for a model whose tensors an engine has already
// bound to its parameter region: the forward captured with `example` as its input, read back
// and analysed, its layers timed from the capture, planned for the link, and the switch graph
// built. `psw run --graph` measures it (run_graph_switch_benchmark) and the server's workers
// answer a user's TorchScript model's requests with it (Note [TorchScript served through its
// graph] in exec/runtime/worker). Planning measures: `profile_repeat` timed replays of the
// capture, about that many forwards of device time.
struct CapturedSwitchSpec {
  HardwareProfile hardware;       // the link, for the plan, the prediction and the bound
  Strategy strategy = Strategy::Optimal;
  int profile_repeat = 20;        // replays timed per layer for the measured profile
  SourceInfo source;              // date and versions for the measured profile (the device is filled here)
  // A profile of this capture (`psw profile --graph`, or `psw run --graph --profile-out`) to plan
  // from instead of timing the layers; `profile_origin` names it in errors. InputError unless its
  // layers are the analysis's (names and bytes).
  std::optional<ModelProfile> profile;
  std::string profile_origin;
};

class CapturedSwitch {
 public:
  // `host` holds the parameters at the offsets `device` has them, and `model`'s tensors are
  // bound to `device` (both uint8, 1-D, the same size; `host` pinned); all three must outlive
  // this. `example` (on the device) is copied: requests' inputs are copied into the copy.
  // InputError for a backend that cannot capture graphs and a forward that cannot be captured.
  CapturedSwitch(Backend& backend, ZooModel& model, const torch::Tensor& example, const torch::Tensor& host,
                 const torch::Tensor& device, const CapturedSwitchSpec& spec);

  // A cold switch (the region assumed stale) and a resident run, on `input` (the example's
  // shape and dtype: InputError otherwise) or on the input already in place. The output's
  // memory is the capture's: overwritten by the next replay.
  torch::Tensor switch_in_and_run(const torch::Tensor& input);
  torch::Tensor run_resident(const torch::Tensor& input);
  void replay_switch() { captured_->replay_switch(); }
  void replay_resident() { captured_->replay_resident(); }
  torch::Tensor output() const { return captured_->output(); }

  const KernelGraph& graph() const { return captured_->description(); }
  CapturedForward::ReadStats read_stats() const { return captured_->read_stats(); }
  const KernelGraphAnalysis& analysis() const { return analysis_; }
  const ModelProfile& profile() const { return profile_; }  // per layer, measured from the capture
  const Grouping& groups() const { return groups_; }        // the plan's, over the analysis's layers
  std::size_t copy_ranges() const { return copy_ranges_; }   // copy nodes in the switch graph
  std::size_t added_edges() const { return added_edges_; }
  Bytes param_bytes() const { return param_bytes_; }
  Duration predicted() const { return predicted_; }  // the plan's timeline from the profile and the link
  Duration bound() const { return bound_; }          // the pipeline bound of the same costs

 private:
  void take_input(const torch::Tensor& input);

  torch::Tensor input_;  // the capture's input
  std::unique_ptr<CapturedForward> captured_;
  KernelGraphAnalysis analysis_;
  ModelProfile profile_;
  Grouping groups_;
  std::size_t copy_ranges_ = 0;
  std::size_t added_edges_ = 0;
  Bytes param_bytes_ = 0;
  Duration predicted_;
  Duration bound_;
};

struct GraphSwitchSpec {
  std::string model;             // a TorchScript file
  std::vector<InputSpec> inputs;
  std::string dtype = "fp32";    // its parameters' (checked, as open_model does)
  HardwareProfile hardware;      // the link, for the plan, the prediction and the bound
  Strategy strategy = Strategy::Optimal;
  std::string backend = "cuda";
  int repeat = 100;
  int warmup = 5;
  int profile_repeat = 20;       // replays timed per layer for the measured profile
  SourceInfo source;             // date and versions for the measured profile (the device is filled here)
  std::optional<ModelProfile> profile;  // planned from instead of measured (CapturedSwitchSpec)
  std::string profile_origin;
  // Note [Uncaptured switch]: where the forward cannot be captured (UncapturableError), measure
  // copy-then-forward instead of failing.
  bool allow_uncaptured = false;
};

// Note [Uncaptured switch]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A forward that cannot be captured (UncapturableError: it synchronises with the host, copies to
// it, branches on a device value; or the backend captures nothing) cannot be pipelined without
// model code. With allow_uncaptured the run measures what the model can do instead, and says
// so: `captured` false, the reason, and the copy-then-forward switch (every parameter copied,
// then the module's eager forward) in `latency` and `copy_then_replay`, beside the eager
// resident forward (`resident`) and the copy alone; the graph, the plan, the profile and the
// bound are empty. The outputs are still checked against the resident forward after the region
// was poisoned.
struct GraphSwitchReport {
  bool captured = true;
  std::string uncaptured_reason;      // Note [Uncaptured switch]
  std::string device;
  KernelGraph graph;                  // the capture as read (psw graph takes it as a file)
  CapturedForward::ReadStats read;
  std::size_t parameters_used = 0;    // parameters some node reads
  std::size_t layers = 0;             // the analysis's, with the unused layer
  std::size_t nodes_using_everything = 0;
  ModelProfile profile;               // per layer, measured from the capture
  Grouping groups;                    // the plan's, over the analysis's layers
  std::size_t copy_ranges = 0;        // copy nodes in the switch graph
  std::size_t added_edges = 0;
  Bytes param_bytes = 0;
  LatencyStats latency;               // the graph-pipelined cold switch (wall, launch to done)
  LatencyStats device_total;          // the same on the device's clock
  LatencyStats resident;              // the capture replayed with the parameters resident
  LatencyStats copy_then_replay;      // every parameter in one pinned copy, then the resident capture
  LatencyStats copy_only;             // that copy alone
  Duration predicted;                 // the plan's timeline from the measured profile and the link
  Duration bound;                     // the pipeline bound of the same costs
  std::size_t outputs_checked = 0;    // cold switches after the region was poisoned
  std::size_t outputs_equal = 0;      // ... whose output equals the resident replay's, bit for bit
  double over_bound() const { return latency.median_ms / bound.ms(); }
  double speedup() const { return copy_then_replay.median_ms / latency.median_ms; }
};

// InputError for a model that is not a TorchScript file, a backend that cannot capture graphs
// (host), a forward that cannot be captured, and what open_model refuses.
GraphSwitchReport run_graph_switch_benchmark(const GraphSwitchSpec& spec);

// `psw profile --model FILE.pt --graph`: the profile of the model's captured graph, one layer per
// analysis layer, timed from the capture (spec.profile_repeat replays; repeat, warmup, hardware
// and strategy are not used). The same errors.
struct CapturedProfile {
  std::string device;
  ModelProfile profile;
  std::size_t nodes = 0;
};
CapturedProfile profile_captured_graph(const GraphSwitchSpec& spec);

}  // namespace psw::exec
