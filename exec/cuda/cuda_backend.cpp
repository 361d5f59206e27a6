// The CUDA backend: a copy stream, a compute stream and one CUDA event per group. The
// compute stream waits for a group's event on the GPU (cudaStreamWaitEvent), so the host
// enqueues the whole forward at once and never blocks per group.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda_check.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/captured_forward.hpp"

namespace psw::exec {

// exec/cuda/captured_forward.cpp
std::unique_ptr<CapturedForward> make_cuda_captured_forward(const std::function<torch::Tensor()>& forward,
                                                            std::vector<GraphParameter> parameters,
                                                            c10::cuda::CUDAStream stream, std::string device);

namespace {

// Move-only owner of one CUDA event; timing disabled unless asked for (the cheapest kind to
// record and wait on).
class Event {
 public:
  explicit Event(bool timing = false) {
    PSW_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() {
    if (event_ != nullptr) PSW_CUDA_CHECK_WARN(cudaEventDestroy(event_));
  }
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  Event& operator=(Event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend()
      : copy_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false)),
        compute_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true)) {
    // Note [Compute stream]: LibTorch launches on the thread's current stream, so the
    // backend makes its compute stream current for the thread that owns it; every forward
    // the engine runs then queues behind the group waits it enqueues there.
    c10::cuda::setCurrentCUDAStream(compute_stream_);
  }

  std::string name() const override { return "cuda"; }
  torch::Device device() const override { return {torch::kCUDA, compute_stream_.device_index()}; }

  torch::Tensor allocate_device(Bytes bytes) override {
    return torch::empty({static_cast<std::int64_t>(bytes)}, torch::dtype(torch::kUInt8).device(device()));
  }
  torch::Tensor allocate_host(Bytes bytes, bool pinned) override {
    return torch::empty({static_cast<std::int64_t>(bytes)}, torch::dtype(torch::kUInt8).pinned_memory(pinned));
  }

  torch::Tensor map_host(const torch::Tensor& host) override {
    PSW_CHECK(host.is_pinned(), "only pinned host memory can be read by the device in place");
    // With unified addressing a pinned host pointer is valid on the device as it is.
    return torch::from_blob(host.data_ptr(), host.sizes(), host.options().device(device()).pinned_memory(false));
  }

  void begin_switch(std::size_t num_groups) override {
    while (events_.size() < num_groups) events_.emplace_back();
    // The copies of this switch must not overwrite parameters the previous forward reads.
    PSW_CUDA_CHECK(cudaEventRecord(fence_.get(), compute_stream_.stream()));
    PSW_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.stream(), fence_.get(), 0));
  }

  void copy_group(std::size_t group, const torch::Tensor& dst, const torch::Tensor& src) override {
    PSW_CHECK(dst.nbytes() == src.nbytes(), "copy of ", src.nbytes(), " bytes into ", dst.nbytes());
    PSW_CHECK(group < events_.size(), "group ", group, " outside the switch");
    PSW_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyHostToDevice,
                                   copy_stream_.stream()));
    PSW_CUDA_CHECK(cudaEventRecord(events_[group].get(), copy_stream_.stream()));
  }

  void wait_group(std::size_t group) override {
    PSW_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_.stream(), events_.at(group).get(), 0));
  }

  void synchronize() override {
    PSW_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.stream()));
    PSW_CUDA_CHECK(cudaStreamSynchronize(compute_stream_.stream()));
  }

  void fill(const torch::Tensor& dst, std::uint8_t value) override {
    PSW_CUDA_CHECK(cudaMemsetAsync(dst.data_ptr(), value, dst.nbytes(), compute_stream_.stream()));
  }

  void copy_to_device(const torch::Tensor& dst, const void* src) override {
    PSW_CHECK(dst.is_cuda() && dst.is_contiguous(), "copy_to_device: the destination must be contiguous on the device");
    PSW_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src, dst.nbytes(), cudaMemcpyHostToDevice, compute_stream_.stream()));
  }

  void mark(std::size_t slot) override { record_mark(slot, compute_stream_.stream()); }
  void mark_copy(std::size_t slot) override { record_mark(slot, copy_stream_.stream()); }

  void join_copies() override {
    PSW_CUDA_CHECK(cudaEventRecord(join_.get(), copy_stream_.stream()));
    PSW_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_.stream(), join_.get(), 0));
  }

  std::string device_description() const override {
    cudaDeviceProp props{};
    PSW_CUDA_CHECK(cudaGetDeviceProperties(&props, compute_stream_.device_index()));
    return props.name;
  }

  Duration time_copy(Bytes bytes, bool pinned, int repeats, int back_to_back) override {
    PSW_CHECK(back_to_back >= 1, "back_to_back must be at least 1");
    torch::Tensor src = allocate_host(bytes, pinned).fill_(1);
    torch::Tensor dst = allocate_device(bytes);
    Event start(/*timing=*/true);
    Event end(/*timing=*/true);
    std::vector<Duration> times;
    for (int i = 0; i < repeats; ++i) {
      PSW_CUDA_CHECK(cudaEventRecord(start.get(), copy_stream_.stream()));
      for (int k = 0; k < back_to_back; ++k) {
        PSW_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), static_cast<std::size_t>(bytes),
                                       cudaMemcpyHostToDevice, copy_stream_.stream()));
      }
      PSW_CUDA_CHECK(cudaEventRecord(end.get(), copy_stream_.stream()));
      PSW_CUDA_CHECK(cudaEventSynchronize(end.get()));
      float ms = 0;
      PSW_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
      times.push_back(nanoseconds(static_cast<std::int64_t>(static_cast<double>(ms) * 1e6) / back_to_back));
    }
    std::sort(times.begin(), times.end());
    return times.at(times.size() / 2);
  }

  Duration time_mapped_read(Bytes bytes, int repeats) override {
    const torch::Tensor host = allocate_host(bytes, /*pinned=*/true).fill_(0);
    const torch::Tensor mapped = map_host(host).view(torch::kFloat32);
    torch::Tensor sum = mapped.sum();  // warm-up: the reduction kernel's first launch
    synchronize();
    Event start(/*timing=*/true);
    Event end(/*timing=*/true);
    std::vector<Duration> times;
    for (int i = 0; i < repeats; ++i) {
      PSW_CUDA_CHECK(cudaEventRecord(start.get(), compute_stream_.stream()));
      sum = mapped.sum();  // on the current stream, the compute stream (Note [Compute stream])
      PSW_CUDA_CHECK(cudaEventRecord(end.get(), compute_stream_.stream()));
      PSW_CUDA_CHECK(cudaEventSynchronize(end.get()));
      float ms = 0;
      PSW_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
      times.push_back(nanoseconds(static_cast<std::int64_t>(static_cast<double>(ms) * 1e6)));
    }
    std::sort(times.begin(), times.end());
    return times.at(times.size() / 2);
  }

  torch::Tensor allocate_shared_device(Bytes bytes) override {
    // cudaMalloc may carve small allocations out of one larger block, and CUDA IPC then
    // shares, and opens at, the whole block; the CUDA programming guide recommends sharing
    // only allocations of 2 MiB-aligned sizes. Per-group memory (Note [Per-group handles] in
    // pipeline.hpp) has groups of a few KiB, so every shared allocation is rounded up.
    constexpr std::size_t kIpcGranularity = std::size_t{2} << 20;
    const std::size_t rounded =
        (static_cast<std::size_t>(bytes) + kIpcGranularity - 1) / kIpcGranularity * kIpcGranularity;
    void* data = nullptr;
    PSW_CUDA_CHECK(cudaMalloc(&data, std::max(rounded, kIpcGranularity)));
    return torch::from_blob(
        data, {static_cast<std::int64_t>(bytes)}, [](void* p) { PSW_CUDA_CHECK_WARN(cudaFree(p)); },
        torch::dtype(torch::kUInt8).device(device()));
  }

  std::string export_device(const torch::Tensor& region) override {
    cudaIpcMemHandle_t handle;
    PSW_CUDA_CHECK(cudaIpcGetMemHandle(&handle, region.data_ptr()));
    return std::string(reinterpret_cast<const char*>(&handle), sizeof handle);
  }

  torch::Tensor import_device(const std::string& handle, Bytes bytes) override {
    PSW_CHECK(handle.size() == sizeof(cudaIpcMemHandle_t), "a CUDA IPC handle of ", handle.size(), " bytes");
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof h);
    void* data = nullptr;
    PSW_CUDA_CHECK(cudaIpcOpenMemHandle(&data, h, cudaIpcMemLazyEnablePeerAccess));
    return torch::from_blob(
        data, {static_cast<std::int64_t>(bytes)}, [](void* p) { PSW_CUDA_CHECK_WARN(cudaIpcCloseMemHandle(p)); },
        torch::dtype(torch::kUInt8).device(device()));
  }

  torch::Tensor register_host(void* data, Bytes bytes, bool pin) override {
    // Mapped: a plan may leave layers in this memory for the device to read in place
    // (Note [Placement]).
    if (pin) PSW_CUDA_CHECK(cudaHostRegister(data, static_cast<std::size_t>(bytes), cudaHostRegisterMapped));
    return torch::from_blob(
        data, {static_cast<std::int64_t>(bytes)},
        [pin](void* p) {
          if (pin) PSW_CUDA_CHECK_WARN(cudaHostUnregister(p));
        },
        torch::dtype(torch::kUInt8));
  }

  // Note [Managed memory] (backend.hpp).
  torch::Tensor allocate_managed(const torch::Tensor& contents) override {
    PSW_CHECK(contents.device().is_cpu() && contents.dim() == 1 && contents.scalar_type() == torch::kUInt8 &&
                  contents.is_contiguous(),
              "managed memory is filled from contiguous uint8 host bytes");
    const int index = compute_stream_.device_index();
    int managed = 0;
    int concurrent = 0;
    PSW_CUDA_CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, index));
    PSW_CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, index));
    // Without concurrent managed access the host may not touch managed memory while any
    // kernel runs, and pages do not migrate on a device fault: not the mechanism measured.
    if (managed == 0 || concurrent == 0) {
      throw InputError(device_description() + " has no on-demand page migration (cudaDevAttrConcurrentManagedAccess is "
                       "0): the unified-memory mechanism needs it");
    }
    const auto bytes = static_cast<std::size_t>(contents.nbytes());
    void* data = nullptr;
    PSW_CUDA_CHECK(cudaMallocManaged(&data, std::max<std::size_t>(bytes, 1), cudaMemAttachGlobal));
    // Owned here until the tensor's deleter owns it.
    struct Owner {
      void* p;
      ~Owner() {
        if (p != nullptr) PSW_CUDA_CHECK_WARN(cudaFree(p));
      }
    } owner{data};
    torch::Tensor memory = torch::from_blob(
        data, {static_cast<std::int64_t>(bytes)}, [](void* p) { PSW_CUDA_CHECK_WARN(cudaFree(p)); },
        torch::dtype(torch::kUInt8).device(device()));
    owner.p = nullptr;
    // The host's writes place every page in host memory: the first forward migrates them.
    std::memcpy(data, contents.data_ptr(), bytes);
    return memory;
  }

  void evict_to_host(const torch::Tensor& managed) override {
    PSW_CHECK(managed.is_cuda(), "only managed memory is sent back to the host");
    // Behind the compute stream's work (the task that touched the pages). CUDA 13 replaced
    // the destination device ordinal (cudaCpuDeviceId for the host) with a cudaMemLocation.
#if CUDART_VERSION >= 13000
    cudaMemLocation host{};
    host.type = cudaMemLocationTypeHost;
    host.id = 0;  // ignored for the host
    PSW_CUDA_CHECK(cudaMemPrefetchAsync(managed.data_ptr(), managed.nbytes(), host, 0, compute_stream_.stream()));
#else
    PSW_CUDA_CHECK(cudaMemPrefetchAsync(managed.data_ptr(), managed.nbytes(), cudaCpuDeviceId, compute_stream_.stream()));
#endif
    PSW_CUDA_CHECK(cudaStreamSynchronize(compute_stream_.stream()));
  }

  Bytes device_free_memory() const override {
    std::size_t free = 0;
    std::size_t total = 0;
    PSW_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<Bytes>(free);
  }

  void throttle(std::size_t depth) override {
    PSW_CHECK(depth > 0 && depth < throttle_points_.size(), "a lookahead of ", depth, " points");
    const std::size_t n = throttle_points_.size();
    PSW_CUDA_CHECK(cudaEventRecord(throttle_points_[throttle_count_ % n].get(), compute_stream_.stream()));
    if (throttle_count_ >= depth) {
      PSW_CUDA_CHECK(cudaEventSynchronize(throttle_points_[(throttle_count_ - depth) % n].get()));
    }
    ++throttle_count_;
  }

  bool supports_graphs() const override { return true; }

  void capture(std::size_t slot, const std::function<void()>& body) override {
    synchronize();
    while (graphs_.size() <= slot) graphs_.push_back(nullptr);
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    // Captures on the current (compute) stream; the copy stream joins through the fence
    // event of begin_switch and leaves through join_copies.
    graph->capture_begin();
    body();
    graph->capture_end();
    graphs_[slot] = std::move(graph);
  }

  std::unique_ptr<CapturedForward> capture_forward(const std::function<torch::Tensor()>& forward,
                                                   std::vector<GraphParameter> parameters) override {
    synchronize();
    return make_cuda_captured_forward(forward, std::move(parameters), compute_stream_, device_description());
  }

  void replay(std::size_t slot) override {
    PSW_CHECK(slot < graphs_.size() && graphs_[slot], "no graph captured in slot ", slot);
    graphs_[slot]->replay();
  }
  void release(std::size_t slot) override {
    if (slot < graphs_.size() && graphs_[slot]) {
      synchronize();  // a replay still running reads the graph's memory
      graphs_[slot].reset();
    }
  }
  Duration elapsed(std::size_t from, std::size_t to) override {
    float ms = 0;
    PSW_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_.at(from).get(), marks_.at(to).get()));
    return nanoseconds(static_cast<std::int64_t>(static_cast<double>(ms) * 1e6));
  }

 private:
  void record_mark(std::size_t slot, cudaStream_t stream) {
    while (marks_.size() <= slot) marks_.emplace_back(/*timing=*/true);
    // Inside a capture the record must become a graph node that records the event at each
    // replay (an external record), so that the marks still time replays.
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    PSW_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
    if (status == cudaStreamCaptureStatusActive) {
      PSW_CUDA_CHECK(cudaEventRecordWithFlags(marks_[slot].get(), stream, cudaEventRecordExternal));
    } else {
      PSW_CUDA_CHECK(cudaEventRecord(marks_[slot].get(), stream));
    }
  }

  c10::cuda::CUDAStream copy_stream_;
  c10::cuda::CUDAStream compute_stream_;
  std::vector<Event> events_;
  std::vector<Event> marks_;
  Event join_;  // the copy stream's progress, waited for by the compute stream
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs_;
  Event fence_;  // compute stream's progress when the switch began
  std::vector<Event> throttle_points_ = std::vector<Event>(64);  // Note [Bounded lookahead]
  std::size_t throttle_count_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace psw::exec
