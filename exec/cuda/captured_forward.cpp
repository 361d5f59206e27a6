// Note [Graph-pipelined switch] (captured_forward.hpp) on CUDA: the forward captured by LibTorch's
// CUDAGraph and kept uninstantiated (keep_graph), read back node by node (the driver API gives a
// kernel's function, its argument layout and its `extra` buffer), and instantiated as clones: the
// resident forward, the forward with a timestamp per layer, and the switch with its copies.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_check.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/captured_forward.hpp"

#define PSW_CU_CHECK(expr)                                                                                \
  do {                                                                                                    \
    const CUresult psw_cu_status_ = (expr);                                                               \
    if (psw_cu_status_ != CUDA_SUCCESS) {                                                                 \
      const char* psw_cu_name_ = nullptr;                                                                 \
      cuGetErrorName(psw_cu_status_, &psw_cu_name_);                                                      \
      throw ::psw::Error(::psw::detail::concat("CUDA driver error at ", __FILE__, ":", __LINE__, ": `", #expr, \
                                               "` returned ", psw_cu_name_ != nullptr ? psw_cu_name_ : "?")); \
    }                                                                                                     \
  } while (false)

namespace psw::exec {

namespace captured_forward_cuda {

// Move-only owner of one CUDA handle, destroyed by `Destroy`.
template <typename Handle, cudaError_t (*Destroy)(Handle)>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Handle handle) : handle_(handle) {}
  ~Owned() {
    if (handle_ != nullptr) PSW_CUDA_CHECK_WARN(Destroy(handle_));
  }
  Owned(Owned&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Owned& operator=(Owned&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};
using Graph = Owned<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;
using TimingEvent = Owned<cudaEvent_t, cudaEventDestroy>;

TimingEvent timing_event() {
  cudaEvent_t event = nullptr;
  PSW_CUDA_CHECK(cudaEventCreate(&event));
  return TimingEvent(event);
}

Duration elapsed(const TimingEvent& from, const TimingEvent& to) {
  float ms = 0;
  PSW_CUDA_CHECK(cudaEventElapsedTime(&ms, from.get(), to.get()));
  return nanoseconds(static_cast<std::int64_t>(static_cast<double>(ms) * 1e6));
}

Duration median(std::vector<Duration> samples) {
  PSW_CHECK(!samples.empty(), "a median of no samples");
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

Graph clone(cudaGraph_t original) {
  cudaGraph_t copy = nullptr;
  PSW_CUDA_CHECK(cudaGraphClone(&copy, original));
  return Graph(copy);
}

GraphExec instantiate(cudaGraph_t graph) {
  cudaGraphExec_t exec = nullptr;
  PSW_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  return GraphExec(exec);
}

// cudaGraphGetNodes or cudaGraphGetRootNodes, whose arguments are the same.
using NodeListing = cudaError_t (*)(cudaGraph_t, cudaGraphNode_t*, std::size_t*);
std::vector<cudaGraphNode_t> list_nodes(NodeListing listing, cudaGraph_t graph) {
  std::size_t count = 0;
  PSW_CUDA_CHECK(listing(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) PSW_CUDA_CHECK(listing(graph, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

// CUDA 12.3 added edge data (programmatic dependent launch) and CUDA 13 folded it into these
// calls; the structure is all that is read, and added edges are plain ones.
std::vector<cudaGraphNode_t> dependencies(cudaGraphNode_t node) {
  std::size_t count = 0;
#if CUDART_VERSION >= 13000
  PSW_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  std::vector<cudaGraphEdgeData> edges(count);
  if (count > 0) PSW_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nodes.data(), edges.data(), &count));
#else
  PSW_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) PSW_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nodes.data(), &count));
#endif
  nodes.resize(count);
  return nodes;
}

void add_edge(cudaGraph_t graph, cudaGraphNode_t from, cudaGraphNode_t to) {
#if CUDART_VERSION >= 13000
  PSW_CUDA_CHECK(cudaGraphAddDependencies(graph, &from, &to, nullptr, 1));
#else
  PSW_CUDA_CHECK(cudaGraphAddDependencies(graph, &from, &to, 1));
#endif
}

cudaGraphNode_t in_clone(cudaGraphNode_t original, cudaGraph_t clone) {
  cudaGraphNode_t node = nullptr;
  PSW_CUDA_CHECK(cudaGraphNodeFindInClone(&node, original, clone));
  return node;
}

// A kernel node's function name and arguments (Note [Kernel graph analysis], 1): the arguments
// laid out by cuFuncGetParamInfo when they were given as kernelParams, or the `extra` launch
// buffer as it is (no layout: every aligned word is scanned). Left unread (nullopt) when neither
// can be read.
void read_kernel(cudaGraphNode_t node, GraphNode& out, CapturedForward::ReadStats& stats) {
  ++stats.kernels;
  CUDA_KERNEL_NODE_PARAMS params{};
  PSW_CU_CHECK(cuGraphKernelNodeGetParams(node, &params));
  CUfunction function = params.func;
  if (function == nullptr && params.kern != nullptr) PSW_CU_CHECK(cuKernelGetFunction(&function, params.kern));
  const char* name = nullptr;
  out.name = function != nullptr && cuFuncGetName(&name, function) == CUDA_SUCCESS && name != nullptr ? name : "kernel";
  if (params.kernelParams != nullptr && function != nullptr) {
    std::vector<ArgumentSlot> slots;
    bool laid_out = true;
    for (std::size_t index = 0;; ++index) {
      std::size_t offset = 0;
      std::size_t size = 0;
      const CUresult status = cuFuncGetParamInfo(function, index, &offset, &size);
      if (status == CUDA_ERROR_INVALID_VALUE) break;  // past the last argument
      if (status != CUDA_SUCCESS) {
        laid_out = false;
        break;
      }
      slots.push_back(ArgumentSlot{offset, size});
    }
    if (laid_out) {
      std::size_t end = 0;
      for (const ArgumentSlot& slot : slots) end = std::max(end, slot.offset + slot.size);
      std::vector<std::uint8_t> arguments(end, 0);
      for (std::size_t i = 0; i < slots.size(); ++i) {
        std::memcpy(arguments.data() + slots[i].offset, params.kernelParams[i], slots[i].size);
      }
      out.arguments = std::move(arguments);
      out.slots = std::move(slots);
      return;
    }
  } else if (params.extra != nullptr) {
    const void* buffer = nullptr;
    const std::size_t* size = nullptr;
    for (std::size_t k = 0; params.extra[k] != CU_LAUNCH_PARAM_END; k += 2) {
      if (params.extra[k] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = params.extra[k + 1];
      if (params.extra[k] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = static_cast<const std::size_t*>(params.extra[k + 1]);
    }
    if (buffer != nullptr && size != nullptr) {
      const auto* bytes = static_cast<const std::uint8_t*>(buffer);
      out.arguments = std::vector<std::uint8_t>(bytes, bytes + *size);
      ++stats.kernels_from_extra;
      return;
    }
  }
  ++stats.kernels_unread;  // arguments stay nullopt: the node waits for every group
}

// The span [address, address + bytes) of a pitched 3-D range starting at `position`.
std::pair<std::uint64_t, Bytes> span(const cudaPitchedPtr& pointer, const cudaPos& position, const cudaExtent& extent) {
  if (pointer.ptr == nullptr) return {0, 0};  // a CUDA array: no parameter lives there
  const std::uint64_t pitch = pointer.pitch > 0 ? pointer.pitch : extent.width;
  const std::uint64_t slice = pitch * (pointer.ysize > 0 ? pointer.ysize : std::max<std::size_t>(extent.height, 1));
  const std::uint64_t start = reinterpret_cast<std::uint64_t>(pointer.ptr) + position.x + position.y * pitch + position.z * slice;
  const std::uint64_t height = std::max<std::size_t>(extent.height, 1);
  const std::uint64_t depth = std::max<std::size_t>(extent.depth, 1);
  return {start, static_cast<Bytes>((depth - 1) * slice + (height - 1) * pitch + extent.width)};
}

void read_node(cudaGraphNode_t node, GraphNode& out, CapturedForward::ReadStats& stats) {
  cudaGraphNodeType type{};
  PSW_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  switch (type) {
    case cudaGraphNodeTypeKernel:
      out.kind = GraphNodeKind::Kernel;
      read_kernel(node, out, stats);
      return;
    case cudaGraphNodeTypeMemcpy: {
      ++stats.memcpys;
      cudaMemcpy3DParms params{};
      PSW_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &params));
      out.kind = GraphNodeKind::Memcpy;
      out.name = "memcpy";
      const auto source = span(params.srcPtr, params.srcPos, params.extent);
      const auto destination = span(params.dstPtr, params.dstPos, params.extent);
      out.address = source.first;
      out.bytes = source.second;
      out.second_address = destination.first;
      out.second_bytes = destination.second;
      return;
    }
    case cudaGraphNodeTypeMemset: {
      cudaMemsetParams params{};
      PSW_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &params));
      out.kind = GraphNodeKind::Memset;
      out.name = "memset";
      out.address = reinterpret_cast<std::uint64_t>(params.dst);
      out.bytes = static_cast<Bytes>(static_cast<std::uint64_t>(params.elementSize) * params.width +
                                     (params.height > 1 ? params.pitch * (params.height - 1) : 0));
      return;
    }
    case cudaGraphNodeTypeGraph:
      ++stats.opaque;
      out.kind = GraphNodeKind::Opaque;
      out.name = "child graph";
      return;
#if CUDART_VERSION >= 12030
    case cudaGraphNodeTypeConditional:
      ++stats.opaque;
      out.kind = GraphNodeKind::Opaque;
      out.name = "conditional";
      return;
#endif
    default:  // events, host callbacks, empty nodes, allocations: they read no parameter
      out.kind = GraphNodeKind::Empty;
      out.name = "node type " + std::to_string(static_cast<int>(type));
      return;
  }
}

class CudaCapturedForward final : public CapturedForward {
 public:
  CudaCapturedForward(const std::function<torch::Tensor()>& forward, std::vector<GraphParameter> parameters,
                      c10::cuda::CUDAStream stream, std::string device)
      : stream_(stream) {
    capture_.capture_begin();
    try {
      output_ = forward();
    } catch (const std::exception& e) {
      // The capture ends here too, so that the stream and the caching allocator (which routes
      // allocations to the capture's pool until capture_end) work again for an uncaptured run;
      // the capture, invalidated by what the forward did, fails to end, which is known.
      try {
        capture_.capture_end();
      } catch (const std::exception&) {
      }
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      throw UncapturableError(std::string("the forward cannot be captured as a CUDA graph (does it synchronise with "
                                          "the host, copy to the host or branch on a device value?): ") +
                              (c10_error != nullptr ? c10_error->what_without_backtrace() : e.what()));
    }
    try {
      capture_.capture_end();
    } catch (const c10::Error& e) {
      throw UncapturableError(std::string("the forward cannot be captured as a CUDA graph: ") +
                              e.what_without_backtrace());
    }
    graph_ = capture_.raw_cuda_graph();
    description_.device = std::move(device);
    description_.parameters = std::move(parameters);
    nodes_ = list_nodes(cudaGraphGetNodes, graph_);
    std::unordered_map<cudaGraphNode_t, std::size_t> index;
    for (std::size_t i = 0; i < nodes_.size(); ++i) index.emplace(nodes_[i], i);
    description_.nodes.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      read_node(nodes_[i], description_.nodes[i], stats_);
      for (cudaGraphNode_t dependency : dependencies(nodes_[i])) description_.nodes[i].dependencies.push_back(index.at(dependency));
    }
    resident_ = instantiate(graph_);
  }

  const KernelGraph& description() const override { return description_; }
  ReadStats read_stats() const override { return stats_; }

  void replay_resident() override { PSW_CUDA_CHECK(cudaGraphLaunch(resident_.get(), stream_.stream())); }

  LayerTiming time_layers(const KernelGraphAnalysis& analysis, int repeats) override {
    PSW_CHECK(repeats >= 1, "time_layers needs at least one repeat");
    Graph timed = clone(graph_);
    // One timestamp before every root (the graph's start), one after each layer that runs nodes.
    // Each timestamp is on the path: the next timed layer's nodes wait for it. A timestamp that
    // is only a leaf of the graph is recorded whenever the graph's executor gets to it; on the
    // H100 only every eighth of GPT-2's 123 leaf timestamps moved, and the profile gave 13 layers all
    // the forward's time. Layers are formed in graph order, which is a topological order of a
    // capture, so these edges make no cycle; they serialise the branches of a DAG across layer
    // boundaries, which costs what a timestamp costs and is removed with it (Note [Mark overhead]).
    std::vector<TimingEvent> events;
    events.push_back(timing_event());
    cudaGraphNode_t start = nullptr;
    const std::vector<cudaGraphNode_t> roots = list_nodes(cudaGraphGetRootNodes, timed.get());
    PSW_CUDA_CHECK(cudaGraphAddEventRecordNode(&start, timed.get(), nullptr, 0, events.front().get()));
    for (cudaGraphNode_t root : roots) add_edge(timed.get(), start, root);
    std::vector<std::size_t> event_of_layer(analysis.layers.size(), 0);  // 0: no timestamp
    cudaGraphNode_t previous_record = start;
    for (std::size_t layer = 0; layer < analysis.layers.size(); ++layer) {
      const std::vector<std::size_t>& members = analysis.layers[layer].nodes;
      if (members.empty()) continue;
      std::vector<cudaGraphNode_t> after;
      for (std::size_t node : members) after.push_back(in_clone(nodes_.at(node), timed.get()));
      if (previous_record != start) {  // the roots already wait for the start
        for (cudaGraphNode_t member : after) add_edge(timed.get(), previous_record, member);
      }
      events.push_back(timing_event());
      cudaGraphNode_t record = nullptr;
      PSW_CUDA_CHECK(cudaGraphAddEventRecordNode(&record, timed.get(), after.data(), after.size(), events.back().get()));
      event_of_layer[layer] = events.size() - 1;
      previous_record = record;
    }
    GraphExec exec = instantiate(timed.get());
    PSW_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream_.stream()));  // unmeasured
    PSW_CUDA_CHECK(cudaStreamSynchronize(stream_.stream()));
    std::vector<std::vector<Duration>> samples(analysis.layers.size());
    std::vector<Duration> totals;
    for (int r = 0; r < repeats; ++r) {
      PSW_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream_.stream()));
      PSW_CUDA_CHECK(cudaStreamSynchronize(stream_.stream()));
      std::size_t previous = 0;
      Duration latest = Duration::zero();
      for (std::size_t layer = 0; layer < analysis.layers.size(); ++layer) {
        if (event_of_layer[layer] == 0) continue;
        const Duration at = elapsed(events.front(), events[event_of_layer[layer]]);
        // Timestamps of a DAG's layers need not come in layer order: a layer ending before the
        // one before it took no time of its own.
        samples[layer].push_back(std::max(Duration::zero(), at - elapsed(events.front(), events[previous])));
        previous = event_of_layer[layer];
        latest = std::max(latest, at);
      }
      totals.push_back(latest);
    }
    LayerTiming timing;
    for (std::size_t layer = 0; layer < analysis.layers.size(); ++layer) {
      timing.per_layer.push_back(samples[layer].empty() ? Duration::zero() : median(samples[layer]));
    }
    timing.instrumented = median(totals);
    return timing;
  }

  Duration time_resident(int repeats) override {
    PSW_CHECK(repeats >= 1, "time_resident needs at least one repeat");
    const TimingEvent start = timing_event();
    const TimingEvent end = timing_event();
    replay_resident();  // unmeasured
    std::vector<Duration> samples;
    for (int r = 0; r < repeats; ++r) {
      PSW_CUDA_CHECK(cudaEventRecord(start.get(), stream_.stream()));
      replay_resident();
      PSW_CUDA_CHECK(cudaEventRecord(end.get(), stream_.stream()));
      PSW_CUDA_CHECK(cudaEventSynchronize(end.get()));
      samples.push_back(elapsed(start, end));
    }
    return median(std::move(samples));
  }

  void build_switch(const RewrittenGraph& rewrite, const torch::Tensor& host, const torch::Tensor& device) override {
    PSW_CHECK(host.nbytes() == device.nbytes() && host.scalar_type() == torch::kUInt8 && device.scalar_type() == torch::kUInt8,
              "the switch copies between a host store and a device region of the same layout");
    PSW_CHECK(host.is_pinned(), "the switch's copies are from pinned host memory");
    PSW_CHECK(rewrite.waits_for_copy.size() == nodes_.size(), "a rewrite of another graph (", rewrite.waits_for_copy.size(),
              " nodes, not ", nodes_.size(), ")");
    Graph graph = clone(graph_);
    const auto device_base = reinterpret_cast<std::uint64_t>(device.data_ptr());
    const auto* host_base = static_cast<const std::uint8_t*>(host.data_ptr());
    const auto region_bytes = static_cast<std::uint64_t>(device.nbytes());
    // The copies, chained in group order on the copy path (Note [Kernel graph analysis], 3).
    std::vector<cudaGraphNode_t> last_copy(rewrite.copies.size(), nullptr);
    cudaGraphNode_t previous = nullptr;
    for (std::size_t group = 0; group < rewrite.copies.size(); ++group) {
      for (const AddressRange& range : rewrite.copies[group].ranges) {
        PSW_CHECK(range.address >= device_base && range.address + range.bytes <= device_base + region_bytes,
                  "group ", group, " copies outside the parameter region");
        cudaGraphNode_t copy = nullptr;
        PSW_CUDA_CHECK(cudaGraphAddMemcpyNode1D(&copy, graph.get(), previous != nullptr ? &previous : nullptr,
                                                previous != nullptr ? 1 : 0, reinterpret_cast<void*>(range.address),
                                                host_base + (range.address - device_base),
                                                static_cast<std::size_t>(range.bytes), cudaMemcpyHostToDevice));
        previous = copy;
      }
      last_copy[group] = previous;  // a group of no bytes: the copies before it
    }
    for (std::size_t node = 0; node < nodes_.size(); ++node) {
      const std::optional<std::size_t>& group = rewrite.waits_for_copy[node];
      if (!group) continue;
      PSW_CHECK(*group < last_copy.size(), "node ", node, " waits for group ", *group, " of ", last_copy.size());
      if (last_copy[*group] != nullptr) add_edge(graph.get(), last_copy[*group], in_clone(nodes_[node], graph.get()));
    }
    switch_exec_ = instantiate(graph.get());
    switch_graph_ = std::move(graph);
  }

  void replay_switch() override {
    PSW_CHECK(switch_exec_.get() != nullptr, "no switch graph built");
    PSW_CUDA_CHECK(cudaGraphLaunch(switch_exec_.get(), stream_.stream()));
  }

  torch::Tensor output() const override { return output_; }

 private:
  c10::cuda::CUDAStream stream_;
  // Owns the captured graph and the memory pool its intermediates live in: declared before the
  // instantiations, which therefore go first.
  at::cuda::CUDAGraph capture_{/*keep_graph=*/true};
  cudaGraph_t graph_ = nullptr;  // capture_'s
  torch::Tensor output_;
  KernelGraph description_;
  ReadStats stats_;
  std::vector<cudaGraphNode_t> nodes_;  // graph_'s, in description_'s order
  GraphExec resident_;
  Graph switch_graph_;
  GraphExec switch_exec_;
};

}  // namespace captured_forward_cuda

std::unique_ptr<CapturedForward> make_cuda_captured_forward(const std::function<torch::Tensor()>& forward,
                                                            std::vector<GraphParameter> parameters,
                                                            c10::cuda::CUDAStream stream, std::string device) {
  return std::make_unique<captured_forward_cuda::CudaCapturedForward>(forward, std::move(parameters), stream,
                                                                     std::move(device));
}

}  // namespace psw::exec
