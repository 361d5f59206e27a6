#pragma once
// The pipeline engine: switch a cold model in (its parameters only in host memory) and
// run it, with the transfer of group g+1.. overlapping the compute of group g.
//
//   copy stream     | copy g0 |ev0| copy g1 |ev1| copy g2 |ev2|
//   compute stream       wait ev0 |layers of g0| wait ev1 |layers of g1| wait ev2 |g2|
//
// Note [Parameter binding]: every parameter and buffer of the model is bound once, before
// any request, to a fixed offset of one device allocation (the pool's parameter region),
// by the plan's MemoryLayout: groups contiguous, each tensor aligned. The pinned host copy
// uses the same layout, so one group is one contiguous copy and nothing is allocated on the
// switch path. (The NoMemoryManagement variant deliberately does the opposite.)

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/timeline.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/parameter_store.hpp"

namespace psw::exec {

// How the engine moves parameters; the ablations of DESIGN.md §5.
enum class TransferMode {
  Pipelined,           // the plan's groups, gated per group (PipeSwitch, single, per-layer)
  Pageable,            // as Pipelined, from pageable host memory (no pinned memory)
  AllocatePerTensor,   // no memory management: a fresh device tensor per parameter per switch
  // No optimisation (the paper's Figure 7): the plan's groups (one per layer) copied back to
  // back, one copy and one event each, but the forward waits for the last of them before its
  // first layer: the per-group costs of pipelining without its overlap.
  Unpipelined,
  // Unified memory (Figure 8): the region is managed memory that already holds the parameters
  // (Backend::allocate_managed); a switch copies nothing, the forward's page faults migrate
  // the pages it touches. evict_to_host() sends them back after the task.
  OnDemand,
};

// Note [Per-group handles]: without the IPC optimisation (the paper's Figure 8 ablation) a
// model has no device region bound once: each group lives in a device allocation of its own,
// made by the memory daemon and exported as a handle of its own, which the worker opens on the
// switch path (CUDA IPC on `cuda`, a mapping of a shared segment on `host`). The opener
// returns group `group`'s memory, at least `bytes` (uint8, 1-D), and closes it when the last
// reference to the tensor goes. The engine opens a group just before it enqueues that group's
// copies (a copy needs its destination open; the copy of group g then overlaps the opening of
// group g+1), binds the group's tensors to it, and drops every reference in close_groups().
// All of a switch's opens thus come before its forward is enqueued, which keeps the forward
// the plain eager one. The simulator (sim/mechanism.cpp) adds one open to every group's sync
// on the compute path: the same sum of opens in a switch's total when it is compute-bound,
// but its startup pays one open where this engine's pays all of them. The two disagree there;
// opening group g+1 from the forward's gate at group g would match the simulator's startup,
// at the price of enqueueing copies from inside the forward.
using GroupOpener = std::function<torch::Tensor(std::size_t group, Bytes bytes)>;

// Device-side times of the last switch or resident run, from its first operation.
struct SwitchTiming {
  Duration startup;  // until the first layer starts computing
  Duration total;    // until the forward is done
};

// Note [Host time of an eager switch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A switch replayed from its graph costs the host one launch; an eager one (per-group memory,
// per-tensor allocations, pageable copies: the ablations the server cannot capture) costs it
// every call into CUDA and LibTorch, and the device waits where the host is slower. The
// device-side times cannot say how much of a slow eager switch is host: so the engine times,
// on the host's steady clock, the two parts of its last eager switch_in_and_run:
//   prepare  entry -> the forward's first call: the memory made ready and the copies enqueued
//            (per group: its open, its tensors bound to it, its copies; per tensor: the
//            allocation, its copy, its binding)
//   forward  the forward's calls, every layer's kernels enqueued (and, pageable, the host's
//            waits in copies that the driver stages through its own buffer)
// Both zero after a graph replay or a resident run. The server sums them per model
// (psw_eager_switch_host_seconds_total), psw load reads the sums around a workload (Note
// [Eager switches measured], load_generator.hpp), and the simulator charges them (Note [Eager
// switch in the simulator], sim/mechanism.hpp). The struct is psw::EagerHostTimes
// (common/hardware_profile.hpp).

class PipelineEngine {
 public:
  static constexpr std::size_t kMarkBegin = 0;
  static constexpr std::size_t kMarkFirstLayer = 1;
  static constexpr std::size_t kMarkEnd = 2;

  // Binds the model's tensors to `region` by the layout of `plan` (checked against the live
  // model: Note [Layer fingerprint]); copies come from `store`, which must already hold the
  // model packed by the same layout (pack_layout + ParameterStore::pack). The engine owns
  // neither: both must outlive it. `region` may be null only for AllocatePerTensor.
  // plan.host_mapped: layers the device reads in place from pinned host memory instead of
  // copying (DESIGN.md §3 placement), e.g. an embedding table of which a forward gathers only
  // a few rows. Throws InputError for a plan of another model, a store or region too small,
  // or a store whose memory kind does not match `mode`.
  PipelineEngine(Backend& backend, ZooModel& model, const SwitchPlan& plan, const ParameterStore& store,
                 const DeviceRegion* region, TransferMode mode = TransferMode::Pipelined, Bytes alignment = 512);
  // Note [Per-group handles]: pipelined transfers from the pinned `store` into memory opened
  // per group by `open_group` on every switch and resident run. Until then, and after
  // close_groups(), the model's tensors are empty: nothing stale can be read. No graphs (the
  // addresses change from one switch to the next).
  PipelineEngine(Backend& backend, ZooModel& model, const SwitchPlan& plan, const ParameterStore& store,
                 GroupOpener open_group, Bytes alignment = 512);

  // One switch: the device parameter region is assumed stale (poison it with
  // poison_device_parameters() to prove it); copies every group and runs the forward, each
  // group's first layer waiting for its group. Returns the output (on the backend's device).
  torch::Tensor switch_in_and_run(const torch::Tensor& input);
  // Runs the forward with the parameters already resident (the ready model).
  torch::Tensor run_resident(const torch::Tensor& input);
  // The same two with another pass over the model's layers in place of its forward (a
  // decoder's prefill into a KV cache: Note [Prompt buckets] in decoder.hpp). `forward` must
  // call the gate before each layer computes, in layer order, as ZooModel::forward does.
  using Forward = std::function<torch::Tensor(const torch::Tensor& input, const LayerGate& gate)>;
  torch::Tensor switch_in_and_run(const torch::Tensor& input, const Forward& forward);
  torch::Tensor run_resident(const torch::Tensor& input, const Forward& forward);

  // Note [Switch graphs] (backend.hpp): records one switch and one resident run, with
  // `example` as the input, into two graphs; afterwards switch_in_and_run_graph and
  // run_resident_graph replay them (the input is copied into the captured input tensor).
  // Needs a backend with graphs, pinned host memory (pageable copies cannot be captured) and
  // one region (Pipelined, Unpipelined, OnDemand; not per-group memory, whose addresses
  // change per switch). A third graph holds the switch with tracing on (Note [Measured
  // trace]). `traced`: also the traced switch's graph (a third memory pool; the runtime does
  // not need it); OnDemand has no groups to trace and captures none.
  // poison_device_parameters(): InputError in the OnDemand mode (it would destroy the only
  // copy in the managed region).
  void capture_graphs(const torch::Tensor& example, bool traced = true);
  torch::Tensor switch_in_and_run_graph(const torch::Tensor& input, bool traced = false);
  torch::Tensor run_resident_graph(const torch::Tensor& input);
  void poison_device_parameters(std::uint8_t value = 0xFF);
  // Waits for the last switch_in_and_run / run_resident and returns its device-side times.
  SwitchTiming last_timing();
  // Note [Host time of an eager switch]: of the last switch_in_and_run outside a graph
  // capture; zero after a graph replay or a resident run.
  EagerHostTimes last_eager_host_times() const { return eager_host_; }

  // Note [After the task]: what a mode undoes once the task's reply is out, off the critical
  // path. close_groups(): waits for the device, unbinds the model's tensors and drops the
  // group memory, so that its handles close and the next switch opens them again (CUDA
  // returns the same pointer, reference counted, for a handle opened twice in a process);
  // nothing to do without per-group memory. evict_to_host(): waits for the device and sends
  // the managed region's pages back to host memory, so that the next switch migrates them
  // again; InputError outside the OnDemand mode.
  void close_groups();
  void evict_to_host();
  // Group memory opened since the engine was made (Note [Per-group handles]): one per group
  // with parameters, per switch or resident run.
  std::uint64_t group_opens() const { return group_opens_; }
  bool per_group_memory() const { return static_cast<bool>(open_group_); }

  // Note [Measured trace]: with tracing on, a switch also records when each group's copies
  // end (on the copy stream) and when its computation starts and ends (on the compute
  // stream). measured_timeline() waits for that switch and returns it in the form the
  // timeline evaluation predicts (times from the switch's begin; `ready` and `overhead` are
  // left zero for the caller). A group none of whose layers runs computes for zero time where
  // the previous group ended. The extra records cost a few µs each, so measure latency with
  // tracing off. InputError in the AllocatePerTensor mode, which has no groups to trace.
  void set_tracing(bool on);
  Timeline measured_timeline();

  const MemoryLayout& layout() const { return layout_; }
  const Grouping& groups() const { return groups_; }

 private:
  struct TensorSlot {
    std::size_t layer;
    torch::Tensor tensor;  // shares its TensorImpl with the model's parameter or buffer
    Bytes offset;          // within the parameter region (and the host buffer)
    // What the tensor is, kept apart from it: per-group memory unbinds it between tasks.
    std::vector<std::int64_t> sizes;
    torch::Dtype dtype;
    Bytes bytes;
  };

  PipelineEngine(Backend& backend, ZooModel& model, const SwitchPlan& plan, const ParameterStore& store,
                 const DeviceRegion* region, TransferMode mode, Bytes alignment, GroupOpener open_group);
  void bind_to(const torch::Tensor& region);
  void open_group(std::size_t group);  // Note [Per-group handles]
  // Where bytes [offset, offset + length) of the packed layout are on the device.
  torch::Tensor device_range(std::size_t group, Bytes offset, Bytes length) const;
  torch::Tensor switch_in(const torch::Tensor& input, const Forward* forward);
  torch::Tensor resident(const torch::Tensor& input, const Forward* forward);
  torch::Tensor forward_marked(const torch::Tensor& input, const LayerGate& gate, const Forward* forward);

  Backend& backend_;
  ZooModel& model_;
  Grouping groups_;
  TransferMode mode_;
  MemoryLayout layout_;
  std::vector<TensorSlot> slots_;
  std::vector<std::size_t> group_of_layer_;
  std::vector<bool> host_mapped_;
  // Per group, the byte ranges [offset, offset + length) to copy: the group's span without
  // its host-mapped layers.
  std::vector<std::vector<std::pair<Bytes, Bytes>>> group_pieces_;
  bool tracing_ = false;
  std::vector<bool> traced_group_ran_;  // in the last traced switch (or its capture)
  torch::Tensor graph_input_;
  // This engine's graph slots (Note [Switch graphs]), taken from the backend at capture.
  std::size_t switch_graph_ = 0;
  std::size_t resident_graph_ = 0;
  std::size_t traced_switch_graph_ = 0;
  torch::Tensor graph_switch_output_;
  torch::Tensor graph_resident_output_;
  torch::Tensor graph_traced_output_;
  torch::Tensor host_;    // packed parameters (pinned unless Pageable): the store's
  torch::Tensor device_;  // the parameter region: the region's (undefined with per-group memory)
  GroupOpener open_group_;                  // Note [Per-group handles]
  std::vector<torch::Tensor> group_memory_; // per group, while open
  std::vector<std::size_t> group_slots_;    // per group, its first slot (slots are in layer order)
  std::uint64_t group_opens_ = 0;
  EagerHostTimes eager_host_{};  // Note [Host time of an eager switch]
};

// An engine with a store and a region of its own, made for it (psw run, tests): allocates
// both, packs the model's current parameters, and builds the engine. The members stay where
// they are (the engine refers to the other two), hence the unique_ptr.
struct PrivatePipeline {
  ParameterStore store;
  std::optional<DeviceRegion> region;
  std::optional<PipelineEngine> engine;
};
std::unique_ptr<PrivatePipeline> make_private_pipeline(Backend& backend, ZooModel& model, const SwitchPlan& plan,
                                                       TransferMode mode = TransferMode::Pipelined,
                                                       Bytes alignment = 512);
// The same from a grouping (a plan with strategy Fixed, made from the live model).
std::unique_ptr<PrivatePipeline> make_private_pipeline(Backend& backend, ZooModel& model, Grouping groups,
                                                       TransferMode mode = TransferMode::Pipelined,
                                                       Bytes alignment = 512, std::vector<bool> host_mapped = {});

}  // namespace psw::exec
