#pragma once
// HardwareProfile: the costs of one GPU host that a switch pays.
//
// Every cost the planner, the simulator or the executor's prediction charges comes from
// here or from a ModelProfile, never from a literal in code. Shipped profiles live in
// configs/hardware/ and say where each number comes from.

#include <optional>
#include <string>

#include "psw/common/model_profile.hpp"
#include "psw/common/units.hpp"

namespace psw {

// One host-to-device copy of `bytes` costs copy_fixed + ceil(bytes / bandwidth).
struct LinkCost {
  Duration copy_fixed;
  Bandwidth bandwidth;

  Duration copy_time(Bytes bytes) const { return copy_fixed + bandwidth.transfer_time(bytes); }
};

// Analytic compute model, used for profiles whose source is analytic: a layer takes
// max(flops / rate, memory_bytes / memory_bandwidth) + kernel_overhead, where the rate
// is conv_flops_per_second for convolutions and flops_per_second for everything else.
// Two rates because frameworks run convolutions on tensor cores (cuDNN allows TF32 by
// default in PyTorch) but fp32 matmuls on the CUDA cores.
struct ComputeModel {
  std::int64_t flops_per_second = 1;
  std::int64_t conv_flops_per_second = 1;
  Bandwidth memory_bandwidth;
  Duration kernel_overhead;
};

// NVIDIA MPS: both tasks resident and running concurrently; each is slowed down.
// Note [Time slicing]
// ~~~~~~~~~~~~~~~~~~~
// Without MPS, two processes' contexts on one GPU take turns: the driver gives the context that
// holds the GPU a time slice, then switches to the other when both have work. An inference that
// arrives while the training job holds the GPU waits for the rest of its slice (half a slice on
// average), then both alternate in slices of `slice` with a context switch of `context_switch`
// each way:
//   latency(W) = slice / 2 + context_switch + W + (ceil(W / slice) - 1) * (slice + 2 context_switch)
// for an inference of W alone on the GPU (the time-sliced mechanism; Figures 5-9's "resident
// model that shares the GPU" of issue 9). While an inference runs, the training job holds the
// GPU for the other half of the turns: it advances at half its rate. Both numbers are
// estimates until measured on the H200 (issue 9's calibration).
struct TimeSlicingModel {
  Duration slice;
  Duration context_switch;
};

struct MpsModel {
  int inference_slowdown_percent = 100;  // 100 = no slowdown
  int training_slowdown_percent = 100;
};

// CUDA unified memory (cudaMallocManaged): pages migrate on first touch.
struct UnifiedMemoryModel {
  Bytes page_bytes = 0;
  Duration page_fault;      // fixed cost per migrated page
  Bandwidth migration_bandwidth;
};

struct HardwareProfile {
  std::string name;
  std::string gpu_name;
  Bytes gpu_memory_bytes = 0;
  SourceInfo source;

  LinkCost pinned;    // host-to-device from page-locked memory
  LinkCost pageable;  // host-to-device from pageable memory (staged by the driver)
  // Kernels reading pinned host memory in place (zero-copy over PCIe): the cost of one layer's
  // reads, fixed + bytes / bandwidth. Absent: layers cannot be placed in host memory.
  std::optional<LinkCost> mapped;
  Duration group_sync;  // per group: the compute stream learns that its group arrived

  ComputeModel compute;

  Duration cuda_context_create;
  Duration process_start;     // fork+exec of a worker process
  Duration framework_start;   // import/initialise the DL framework in a new process
  Duration worker_cleanup;    // a worker drops its task's state and becomes standby again
  Duration cuda_malloc;       // one cudaMalloc on the critical path
  Duration cuda_free;
  Duration ipc_handle_open;   // cudaIpcOpenMemHandle, once per handle

  MpsModel mps;
  UnifiedMemoryModel unified_memory;
  // Note [Time slicing]; optional: only the time-sliced mechanism needs it.
  std::optional<TimeSlicingModel> time_slicing;
};

}  // namespace psw
