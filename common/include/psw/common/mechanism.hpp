#pragma once
// The ways of sharing a GPU that the paper compares (PAPER.md §9, Figures 5-9). A config
// names one; the simulator models each (sim/mechanism.hpp) and the executor will run them
// as modes of the same binary (DESIGN.md §5).

#include <string>
#include <vector>

namespace psw {

enum class Mechanism {
  Ready,                // every model resident, no switch: the lower bound
  PipeSwitch,           // pipelined transfer with the planned grouping, standby workers
  StopAndStart,         // kill the old process, start a new one, load, run
  Mps,                  // NVIDIA MPS: both tasks resident, running concurrently, slowed down
  OneProcess,           // one process: move the old model out and the new one in, no pipelining
  PerLayerPipeline,     // ablation: one group per layer
  GroupedTransmission,  // ablation: one group (transfer everything, then compute)
  NoOptimization,       // ablation: one copy per layer, compute only after all arrived
  NoMemoryManagement,   // ablation: cudaMalloc/cudaFree per tensor on the switch path
  NoIpcOptimization,    // ablation: an IPC handle opened per group
  NoPinnedMemory,       // ablation: pageable host memory
  UnifiedMemory,        // ablation: cudaMallocManaged, pages migrate on first touch
  TwoProcesses,         // the paper's Figure 9 name for stop-and-start
};

Mechanism parse_mechanism(const std::string& text);  // throws InputError listing the choices
std::string to_string(Mechanism mechanism);
const std::vector<Mechanism>& all_mechanisms();

}  // namespace psw
