#pragma once
// The ways of sharing a GPU that the paper compares (PAPER.md §9, Figures 5-9). A config
// names one; the simulator models each (sim/mechanism.hpp) and the executor will run them
// as modes of the same binary (DESIGN.md §5).

#include <optional>
#include <string>
#include <vector>

#include "psw/common/plan.hpp"
#include "psw/common/switch_costs.hpp"

namespace psw {

enum class Mechanism {
  Ready,                // every model resident, no switch: the lower bound
  PipeSwitch,           // pipelined transfer with the planned grouping, standby workers
  StopAndStart,         // kill the old process, start a new one, load, run
  Mps,                  // NVIDIA MPS: both tasks resident, running concurrently, slowed down
  TimeSliced,           // both tasks resident in their own processes, the GPU time-slicing between them (no MPS)
  OneProcess,           // one process: move the old model out and the new one in, no pipelining
  PerLayerPipeline,     // ablation: one group per layer
  GroupedTransmission,  // ablation: one group (transfer everything, then compute)
  NoOptimization,       // ablation: one copy per layer, compute only after all arrived
  NoMemoryManagement,   // ablation: cudaMalloc/cudaFree per tensor on the switch path
  NoIpcOptimization,    // ablation: an IPC handle opened per group
  NoPinnedMemory,       // ablation: pageable host memory
  UnifiedMemory,        // ablation: cudaMallocManaged, pages migrate on first touch
  TwoProcesses,         // the paper's Figure 9 name for stop-and-start
  PipeSwitchParallel,   // PipeSwitch whose groups also travel through helper GPUs and NVLink (Note [Parallel paths])
};

// Note [Mechanism table]: what each mechanism is made of, in one table that the simulator
// (sim/mechanism.cpp), `psw run` and the server (exec/runtime/) all read, so the two engines
// cannot drift apart on what "no-pinned-memory" or "grouped-transmission" means.
enum class ProcessModel {
  StandbyWorkers,  // warm worker processes, one active (PipeSwitch and its ablations)
  FreshProcess,    // a new process per switch (stop-and-start, two processes)
  OneProcess,      // one process swaps models in and out
  SharedContext,   // tasks resident at once in their own processes (MPS, time slicing)
  Resident,        // every model stays on the device (ready)
};
enum class Allocation {
  Preallocated,     // one device region, allocated at start (unified memory management)
  PerTensorMalloc,  // cudaMalloc/cudaFree per tensor on the switch path
  Managed,          // cudaMallocManaged: pages migrate on first touch
};

struct MechanismTraits {
  Mechanism mechanism;
  const char* name;
  // The grouping the mechanism imposes; empty: the configured planner's.
  std::optional<Strategy> grouping;
  HostMemory host_memory;
  ProcessModel process;
  Allocation allocation;
  // A PipeSwitch variant: the switch is the pipelined transfer with some part changed.
  bool pipeswitch_family;
  bool ipc_handle_per_group;  // no IPC optimisation: one handle opened per group
  // Groups split over the direct link and helper GPUs' links (Note [Parallel paths]); only
  // the simulator has it so far: the executor's switch through peer GPUs is not built.
  bool peer_paths;
};

const MechanismTraits& traits(Mechanism mechanism);
// The grouping strategy a mechanism uses when the configuration asks for `planner`.
Strategy grouping_strategy(Mechanism mechanism, Strategy planner);

// Whether psw serve's workers run the mechanism's switches eagerly, call by call, instead of
// replaying them from a graph captured at start: where the switch's memory changes from one
// switch to the next (per-group handles, per-tensor allocations) or its copies cannot be
// captured (pageable memory). Note [Host time of an eager switch] (exec/pipeline.hpp).
bool switches_eagerly_in_server(Mechanism mechanism);
// Whether a hardware profile may hold the server's host times of the mechanism's eager switch
// (its `eager_switch` section, Note [Eager switch in the simulator]): PipeSwitch's variants the
// server runs eagerly, and one process (per-tensor allocations on its one worker).
bool has_eager_host_times(Mechanism mechanism);

Mechanism parse_mechanism(const std::string& text);  // throws InputError listing the choices
std::string to_string(Mechanism mechanism);
const std::vector<Mechanism>& all_mechanisms();

}  // namespace psw
