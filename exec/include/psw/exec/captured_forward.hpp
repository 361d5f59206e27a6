#pragma once
// Note [Graph-pipelined switch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// How a model with no gates (a user's TorchScript file: Note [TorchScript models]) is switched
// with its transfer pipelined, through its captured CUDA graph (DESIGN.md §5, Any model):
//
//  1. The model's tensors are bound to the device parameter region (Note [Parameter binding]) and
//     its forward is captured once as a graph, kept uninstantiated. The backend reads the graph
//     back as a KernelGraph (the parameters' addresses and every node's arguments: Note [Kernel
//     graph analysis]), so the analysis in the core finds each parameter's first use.
//  2. The capture is replayed as it is, resident, with a timestamp after each of the analysis's
//     layers (time_layers), giving the layers' times for a measured profile and a plan.
//  3. For the plan's grouping, rewrite_with_copies gives one copy per group and the edges from
//     each copy to its users; build_switch adds them to a clone of the capture: host-to-device
//     copy nodes from the pinned store (the same offsets as the region), chained in group order,
//     and an edge from a group's last copy to every node that gains one. Replaying that graph is
//     a cold switch: copies and kernels start together and every kernel waits only for the
//     groups it reads.
//  4. The resident capture stays beside it for the baseline and for the bit-equality check (a
//     switch after the region was poisoned gives the resident replay's output).
//
// This header has no CUDA type: the cuda backend implements it (exec/cuda/), the host backend
// refuses it (Backend::capture_forward), and everything after the reading is the core's.

#include <vector>

#include <torch/torch.h>

#include "psw/common/error.hpp"
#include "psw/common/kernel_graph.hpp"
#include "psw/common/units.hpp"

namespace psw::exec {

// A forward that cannot be captured as a graph (it synchronises with the host, copies to it,
// branches on a device value), or a backend that captures none: where a user allowed it
// (`--allow-uncaptured`, a served entry's `allow_uncaptured`), the model runs copy-then-forward
// instead and says so; otherwise it is the input error it derives from.
class UncapturableError : public InputError {
 public:
  using InputError::InputError;
};

class CapturedForward {
 public:
  virtual ~CapturedForward() = default;

  // The capture as the analysis reads it: the parameters given at capture (as they were
  // given), the nodes in the order the graph lists them.
  virtual const KernelGraph& description() const = 0;
  // What the reading could not see into, for the report.
  struct ReadStats {
    std::size_t kernels = 0;
    std::size_t kernels_from_extra = 0;  // arguments in the `extra` launch buffer (cuBLASLt)
    std::size_t kernels_unread = 0;      // no argument layout: use every parameter
    std::size_t memcpys = 0;
    std::size_t opaque = 0;              // child graphs, conditionals: use every parameter
  };
  virtual ReadStats read_stats() const = 0;

  // The capture replayed with the parameters resident, on the backend's compute stream.
  virtual void replay_resident() = 0;
  // The capture with a timestamp after each layer of `analysis`, replayed `repeats` times (and
  // once without, to warm it): per layer the median time from the previous layer's timestamp
  // (the first: from the graph's start), and per replay the whole. Waits for the device.
  struct LayerTiming {
    std::vector<Duration> per_layer;
    Duration instrumented;  // median start-to-last-timestamp
  };
  virtual LayerTiming time_layers(const KernelGraphAnalysis& analysis, int repeats) = 0;
  // The median of `repeats` resident replays, start to end (after one unmeasured).
  virtual Duration time_resident(int repeats) = 0;

  // Note [Graph-pipelined switch], 3: `host` holds the parameters at the offsets `device` has
  // them (the region the capture read; both uint8, 1-D, the same size; `host` pinned).
  // Replaces an earlier switch graph.
  virtual void build_switch(const RewrittenGraph& rewrite, const torch::Tensor& host, const torch::Tensor& device) = 0;
  virtual void replay_switch() = 0;

  // The captured output (its memory is the capture's: overwritten by every replay).
  virtual torch::Tensor output() const = 0;
};

}  // namespace psw::exec
