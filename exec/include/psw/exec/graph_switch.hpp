#pragma once
// The measurement behind `psw run --model FILE.pt --graph`: a user's TorchScript model switched
// through its captured graph (Note [Graph-pipelined switch] in captured_forward.hpp), beside the
// same capture replayed resident and beside a PyTorch user's cold start (the whole pinned copy,
// then the resident graph), in one run. The loop and its statistics live here and return a typed
// report; the command only prints it.

#include <cstddef>
#include <string>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/kernel_graph.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/plan.hpp"
#include "psw/exec/captured_forward.hpp"
#include "psw/exec/switch_benchmark.hpp"
#include "psw/exec/torchscript.hpp"

namespace psw::exec {

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
};

struct GraphSwitchReport {
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

}  // namespace psw::exec
