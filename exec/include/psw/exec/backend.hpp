#pragma once
// Backend: what the pipeline engine needs from a device, without naming CUDA.
//
//   host  CPU LibTorch; a copy thread plays the copy stream, the calling thread the compute
//         stream; a group's "event" is a flag the copy thread sets. CI tests the engine's
//         layout, binding, gating and outputs on it.
//   cuda  (exec/cuda/, only in CUDA builds) a copy stream, a compute stream and one CUDA
//         event per group; waits happen on the GPU, the host never blocks per group.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "psw/common/kernel_graph.hpp"
#include "psw/common/units.hpp"

namespace psw::exec {

class CapturedForward;  // captured_forward.hpp

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual torch::Device device() const = 0;

  // One device allocation of `bytes` (uint8), made once: the device pool.
  virtual torch::Tensor allocate_device(Bytes bytes) = 0;
  // Host memory of `bytes` (uint8): page-locked when `pinned`, else ordinary pageable.
  virtual torch::Tensor allocate_host(Bytes bytes, bool pinned) = 0;

  // The same host memory as a tensor the device's kernels can read in place (zero-copy over
  // PCIe through unified addressing; `host` must be pinned on the cuda backend).
  virtual torch::Tensor map_host(const torch::Tensor& host) = 0;

  // Starts a switch of `num_groups` groups: forgets the previous switch's group events.
  virtual void begin_switch(std::size_t num_groups) = 0;
  // Enqueues the copy of host `src` into device `dst` (same byte size) on the copy stream;
  // group `group` has arrived once every copy enqueued for it in this switch is done.
  // Returns without waiting.
  virtual void copy_group(std::size_t group, const torch::Tensor& dst, const torch::Tensor& src) = 0;
  // On the compute stream: nothing after this runs before group `group` has arrived.
  virtual void wait_group(std::size_t group) = 0;
  // Blocks the host until the copies and the computation enqueued so far are done.
  virtual void synchronize() = 0;
  // Fills `dst` with a byte pattern on the device (poisons the parameter region in tests).
  virtual void fill(const torch::Tensor& dst, std::uint8_t value) = 0;
  // On the compute stream: copies dst.nbytes() bytes of host memory at `src` into `dst` (contiguous,
  // on this backend's device), before anything enqueued after it. Returns without waiting where
  // the device can (page-locked `src`), so `src` must stay until the next synchronize(). One
  // driver call: with LibTorch's `.to(device)` the worker's host time launching a request's input
  // took 0.10 ms, with this (and the destination from the caching allocator) 0.07 ms, on two H100
  // hosts (Note [Request phases]: input_launch; results/gpu/2026-12-07-h100-placement*.md).
  virtual void copy_to_device(const torch::Tensor& dst, const void* src) = 0;

  // Makes the compute stream wait for every copy enqueued so far (a switch must not end,
  // or a graph capture close, with copies still in flight on the copy stream).
  virtual void join_copies() {}

  // Note [Switch graphs]: a backend that supports graphs records what `body` enqueues on
  // its streams (copies, group waits, kernels, marks) into graph `slot` once; replay(slot)
  // then launches all of it with one call, taking host dispatch off the critical path.
  // Slots below kFirstGraphSlot are for fixed uses (the profiler's); an owner of graphs that
  // may share the backend with others (an engine per model in one worker) takes its own with
  // new_graph_slot(): two engines in one slot would replay each other's switch.
  static constexpr std::size_t kFirstGraphSlot = 16;
  std::size_t new_graph_slot() { return next_graph_slot_++; }
  virtual bool supports_graphs() const { return false; }
  virtual void capture(std::size_t slot, const std::function<void()>& body);
  virtual void replay(std::size_t slot);
  // Lets go of graph `slot` and its memory (a graph whose tensors are about to be freed must not
  // stay replayable); nothing where there is none.
  virtual void release(std::size_t /*slot*/) {}

  // Note [Graph-pipelined switch] (captured_forward.hpp): captures what `forward` enqueues on the
  // compute stream, every tensor of `parameters` already at its address on the device, and reads
  // the graph back. InputError on a backend without graphs and for a forward that cannot be
  // captured (a host synchronisation inside it); `parameters` are checked by the analysis.
  virtual std::unique_ptr<CapturedForward> capture_forward(const std::function<torch::Tensor()>& forward,
                                                           std::vector<GraphParameter> parameters);

  // The device, for profiles and reports ("NVIDIA H200", "CPU (LibTorch)").
  virtual std::string device_description() const = 0;
  // One host-to-device copy of `bytes` from pinned or pageable memory, timed on the copy
  // stream: the median of `repeats` timings (buffers allocated once per call). Each timing
  // covers `back_to_back` copies queued one after another, as a switch queues its groups,
  // and is divided by their number.
  virtual Duration time_copy(Bytes bytes, bool pinned, int repeats, int back_to_back = 1) = 0;
  // One kernel reading `bytes` (a multiple of 4) of pinned host memory in place (map_host),
  // timed on the compute stream: the median of `repeats` reads.
  virtual Duration time_mapped_read(Bytes bytes, int repeats) = 0;

  // Note [Bounded lookahead]: the host enqueues work far ahead of the device, so a decision
  // the host takes at a layer boundary (stop training now) would only take effect once the
  // device has worked through everything queued. throttle(depth) marks a point on the compute
  // stream and blocks the host until at most `depth` earlier points are still pending there,
  // which bounds that delay by `depth` layers of device work. No-op on `host`.
  virtual void throttle(std::size_t /*depth*/) {}

  // Note [Shared device memory]: the runtime's memory daemon allocates the device regions
  // once and the workers, other processes, import them (DESIGN.md §5). On `cuda`: memory from
  // cudaMalloc itself (not the caching allocator, whose blocks are parts of larger ones),
  // exported as a CUDA IPC handle; the host pages of the parameter stores are page-locked in
  // every process that maps them. The `host` backend shares memfd segments instead and
  // refuses export/import.
  virtual torch::Tensor allocate_shared_device(Bytes bytes);
  virtual std::string export_device(const torch::Tensor& region);
  virtual torch::Tensor import_device(const std::string& handle, Bytes bytes);
  // `bytes` of host memory at `data` (a mapped shared segment that outlives the tensor) as a
  // uint8 tensor, page-locked for the device when `pin` (undone when the tensor goes).
  virtual torch::Tensor register_host(void* data, Bytes bytes, bool pin);
  // Device memory free now, for the daemon's check before it allocates.
  virtual Bytes device_free_memory() const;

  // Note [Managed memory]: the unified-memory ablation (the paper's Figure 8). Memory that
  // both the host and the device address (cudaMallocManaged on `cuda`): a page lives on one
  // side and migrates, on a fault, to the side that touches it. allocate_managed() makes
  // `contents`' size of it (uint8, 1-D, on the device) and fills it from `contents` (host
  // memory) with the host's writes, so every page starts in host memory. evict_to_host()
  // sends the pages back to host memory, after the work queued on the compute stream, and
  // returns once they are there. On `host` managed memory is ordinary host memory and
  // eviction does nothing: the mode runs, but measures nothing of unified memory.
  virtual torch::Tensor allocate_managed(const torch::Tensor& contents);
  virtual void evict_to_host(const torch::Tensor& managed);

  // Timestamps on the compute stream, for measurement: mark(k) records when the compute
  // stream reaches this point; after synchronize(), elapsed(a, b) is the time between two
  // marks of the same switch.
  virtual void mark(std::size_t slot) = 0;
  // As mark(), on the copy stream: when the copies enqueued before it are done. elapsed()
  // compares marks of both streams (one clock).
  virtual void mark_copy(std::size_t slot) = 0;
  virtual Duration elapsed(std::size_t from, std::size_t to) = 0;

 private:
  std::size_t next_graph_slot_ = kFirstGraphSlot;
};

std::unique_ptr<Backend> make_host_backend();
// "host" or "cuda"; InputError when the name is unknown or this build has no CUDA.
std::unique_ptr<Backend> make_backend(const std::string& name);

}  // namespace psw::exec
