#pragma once
// HardwareProfile: the costs of one GPU host that a switch pays.
//
// Every cost the planner, the simulator or the executor's prediction charges comes from
// here or from a ModelProfile, never from a literal in code. Shipped profiles live in
// configs/hardware/ and say where each number comes from.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
// Without MPS, two processes' contexts on one GPU take turns. An inference that arrives while
// the training job runs first waits for a switch to its context (`context_switch`), then runs
// with `inference_share_percent` of the GPU until it ends:
//   latency(W) = context_switch + W * 100 / inference_share_percent
// for an inference of W alone on the GPU (the time-sliced mechanism; Figures 5-9's "resident
// model that shares the GPU" of the cross-validation). Meanwhile the training job advances at
// the rest, (100 - inference_share_percent)% of its rate. Equal turns would be 50%.
//
// Why a share and not slices: the first model here was the textbook one (wait half a slice,
// then alternate slices of ~2 ms), which predicts at least 2W for any W longer than a slice.
// The H200 measured 1.25-1.31 W for three models whose W differs twofold, in two runs
// (results/gpu/raw-figures-2026-12-01-a and -c): a ratio, and far from equal turns. Our reading,
// not measured: the training job's stream leaves the GPU idle between its kernels (it checks for
// a stop at every layer, and its step has host work), and the inference's kernels fill those
// gaps, so the inference gets most of the GPU. The share is fitted by psw calibrate on one run
// and validated on the other (results/validation/calibrated/). The training's rate while an
// inference runs is the model's consequence, not measured: the runs' training throughput over
// 7.5 s windows varied too much (18.4 and 27.2 steps/s for the same case) to fit it.
struct TimeSlicingModel {
  Duration context_switch;
  int inference_share_percent = 50;
};

// Note [MPS contention]
// ~~~~~~~~~~~~~~~~~~~~~~
// What an inference loses to a training job beside it under MPS depends on both. One H200
// (results/gpu/raw-figures-2026-12-02-c and -mps-batch-*) ran ResNet-152, Inception-v3 and
// BERT-base beside ResNet-152 training at batch 2 to 32: the engine over the ready engine went
// from 1.25 / 1.25 / 1.10 at batch 2 to 2.09 / 1.95 / 1.51 at batch 32, steeply past 16, and
// BERT-base lost about half what the convolutional models lost. So `contention` holds measured
// points, each the slowdown of one inference model beside one training model at one training
// batch (psw calibrate --cost mps.contention fits them from a run, one per requested model).
// Between two points of a pair the slowdown is linear in the training batch; below the first
// and above the last it is the nearest point's (no extrapolation); a pair without points takes
// `inference_slowdown_percent`, the one number of before. Linear in the batch, not in its
// logarithm: fitted at batch 2, 8 and 32, it predicts batch 4 and 16 within 15% (the logarithm
// is off by 23% at 16).
struct MpsContentionPoint {
  std::string inference_model;
  std::string training_model;
  int training_batch = 0;
  int inference_slowdown_percent = 100;
};

struct MpsModel {
  int inference_slowdown_percent = 100;  // 100 = no slowdown; where `contention` has no point
  int training_slowdown_percent = 100;
  std::vector<MpsContentionPoint> contention;  // Note [MPS contention]
};

// Note [MPS contention]: the inference slowdown, in percent, of `inference_model` beside
// `training_model` training at `training_batch`.
double mps_inference_slowdown_percent(const MpsModel& mps, const std::string& inference_model,
                                      const std::string& training_model, int training_batch);

// CUDA unified memory (cudaMallocManaged): pages migrate on first touch.
struct UnifiedMemoryModel {
  Bytes page_bytes = 0;
  Duration page_fault;      // fixed cost per migrated page
  Bandwidth migration_bandwidth;
};

// Note [Parallel paths]
// ~~~~~~~~~~~~~~~~~~~~~
// A host with several GPUs has one PCIe link per GPU and NVLink between them. A switch onto
// one GPU (the target) may bring part of a group's bytes through a helper GPU: host to
// helper over the helper's own host link, then helper to target over the peer link
// (DeepPlan's parallel transmission). A group's bytes split over paths:
//   path 0, direct:  host -> target, one copy of b bytes on the target's pinned link,
//                    copy_fixed + ceil(b / bandwidth), copies serialised on the path;
//   path h, helper:  stage A, host -> helper h: one copy on the helper's host link,
//                    streamed in chunks of chunk_bytes; stage B, helper h -> target: one
//                    peer copy per chunk (peer copy_fixed each), a chunk starting once it
//                    is on the helper and the previous chunk's peer copy is done. Both
//                    stages are serialised per helper (each helper has its own queues).
// Stage B of the b bytes of one group on helper h ends at the two-machine flow shop's
// makespan over its k = ceil(b / chunk_bytes) chunks: the largest, over the chunk u that
// starts the last unbroken run of hops, of u's arrival on the helper plus the hops of
// chunks u..k (u = 1 also waits for the helper's previous peer copy):
//   A_start + A_fixed + tA(bytes of chunks 1..u) + (k - u + 1) * B_fixed + tB(bytes of chunks u..k)
// with tX(x) = ceil(x / bandwidth_X) and A_start when the helper's host link is free. Only
// u = 1, k - 1 and k can be largest (chunks 1..k-1 are equal). Stage A ends at
// A_start + A_fixed + tA(b), when the helper's host link is free for the next group.
// A group arrives when its last path has delivered; it then computes as on one GPU
// (timeline.hpp). With no helpers, or every byte on path 0, this is the single-GPU
// timeline exactly (tests/common/test_parallel.cpp checks it on every shipped model).
//
// The helpers' peer copies all enter the target: with `peer_ingress_bandwidth_bytes_per_s`
// set, that ingress is shared evenly, each of the switch's h helpers getting at most
// ingress / h of it (a static share: a balanced split keeps every helper busy at once). Not
// modelled: a host-side limit on the sum of the host links (measured: 108-109 GB/s on two
// H200s at once, twice one link). A helper that is training keeps running; its host
// link is shared with the training job's own input copies, modelled as the forward getting
// `helper_busy_share_percent` of the link's bandwidth (the fixed cost unchanged). The
// training job's slowdown from forwarding is not modelled (it is to be measured with the
// executor's switch through peer GPUs, not built yet).
struct MultiGpuModel {
  int gpus = 1;  // GPUs on the host, the switch's target included
  // Per helper (gpus - 1 of them, helper h at index h - 1): its host-to-device pinned link.
  std::vector<LinkCost> helper_links;
  LinkCost peer_link;        // helper to target over NVLink, per copy
  // The target's NVLink ingress, shared evenly by the helpers; absent: each helper has its
  // whole peer link.
  std::optional<Bandwidth> peer_ingress;
  Bytes chunk_bytes = 0;     // the unit of the helper path's second stage
  int helper_busy_share_percent = 100;  // of a training helper's host link, for forwarding
};

// Note [Host time of an eager switch] (exec/pipeline.hpp): the host's two parts of a switch run
// call by call, measured by the engine, summed by the server, read by psw load.
struct EagerHostTimes {
  Duration prepare;  // entry -> the forward's first call: memory made ready, copies enqueued
  Duration forward;  // the forward's calls, every layer's kernels enqueued
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
  // Note [Training abort]
  // ~~~~~~~~~~~~~~~~~~~~~
  // Under one-process the worker that trains is the one that serves: a request waits until the
  // worker has abandoned its training step (Note [Preemption without loss] in the runtime's
  // training.cpp: the exception out of the step, the batch-norm statistics restored, the
  // gradients dropped, the device drained) and said so, and only then does the worker take the
  // request, so this time is paid before the engine's clock starts and after the stop at the
  // layer boundary. On the H200 the server's time beyond the engine was 5-8 ms where the other
  // mechanisms' is 0.6 ms (2026-12-03). The optional top-level training_abort_ns (absent: 0),
  // fitted by psw calibrate on a one-process run's latency.
  Duration training_abort;

  ComputeModel compute;

  Duration cuda_context_create;
  Duration process_start;     // fork+exec of a worker process
  Duration framework_start;   // import/initialise the DL framework in a new process
  // Note [Worker kill] (the runtime's controller.cpp): killing the process a fresh one replaces
  // and reaping it (its CUDA teardown), before the fresh one starts; the startup section's
  // optional process_kill_ns (absent: 0), adopted by psw calibrate --cost startup.worker_start.
  Duration process_kill;
  // Note [First forward in a fresh process]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A task's first forward in a process that has run nothing yet (stop-and-start, two
  // processes) takes longer than its layers' times: the kernels load at their first launch
  // (CUDA's lazy module loading), cuDNN and cuBLAS make their first plans and handles, the
  // allocator its first blocks. On the H200 the server's engine for a fresh process's first
  // request was 150-450 ms where the layers take 4-6 ms (2026-12-03). Per model, what that
  // forward costs beyond the layer times (the startup section's `first_forward`, adopted by psw
  // calibrate --cost startup.worker_start); a model without an entry pays nothing more.
  std::map<std::string, Duration> first_forward;
  // Note [Eager switch in the simulator] (sim/mechanism.hpp): per model and mechanism (one the
  // server switches eagerly, of PipeSwitch's family), the host's time of a switch as the server
  // measured it (Note [Host time of an eager switch], exec/pipeline.hpp): the `eager_switch`
  // section, adopted by psw calibrate --cost eager_switch.host. Absent for a model: the
  // mechanism's analytic costs (cuda_malloc_ns, ipc_handle_open_ns, the pageable link).
  // Keyed by (model, mechanism's name).
  std::map<std::pair<std::string, std::string>, EagerHostTimes> eager_switch;
  Duration worker_cleanup;    // a worker drops its task's state and becomes standby again
  Duration cuda_malloc;       // one cudaMalloc on the critical path
  Duration cuda_free;
  Duration ipc_handle_open;   // cudaIpcOpenMemHandle, once per handle

  MpsModel mps;
  UnifiedMemoryModel unified_memory;
  // Note [Time slicing]; optional: only the time-sliced mechanism needs it.
  std::optional<TimeSlicingModel> time_slicing;
  // Note [Parallel paths]; optional: absent, the host has one GPU (only pipeswitch-parallel
  // reads it).
  std::optional<MultiGpuModel> multi_gpu;
};

}  // namespace psw
