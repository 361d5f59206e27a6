#pragma once
// The runtime's LibTorch processes, started by `psw serve` through `psw-exec` (not by users):
//
//   memory daemon  allocates every model's device region and the training job's state once,
//                  packs every model's parameters into shared host memory once, sends the
//                  segments to the controller, and lives until the controller says Shutdown or
//                  goes away; it outlives every worker (DESIGN.md §5).
//   worker         receives the segments, builds every model's structure and binds it to the
//                  daemon's memory (init part 1), says Ready, then runs what the controller
//                  sends: Infer (a switch, or a resident run), Train (until stopped), Cleanup.
//
// Both talk to the controller over one SOCK_SEQPACKET socket inherited as `socket_fd`.
// Note [Segment order]: the daemon sends, and the controller forwards to every worker, one
// Segments message whose descriptors are, in order: per served model its parameter store
// (shared host memory), then the training job's header (when the config has a training job);
// the controller adds the control segment and the worker's io segment at the end. Then one
// Region message per device region: per served model its parameter region, then the training
// job's state (weights and momentum); on `host` each carries a shared segment's descriptor,
// on `cuda` a CUDA IPC handle (Note [Shared device memory] in exec/backend.hpp). Two
// mechanisms give a model no region: under no-ipc-optimization its Region message carries the
// segment of its per-group memory (host) or of its per-group handles (cuda) instead (Note
// [Per-group handles], served_models.hpp); under unified-memory it carries nothing, and each
// worker makes its own managed memory (Note [Managed memory] in exec/backend.hpp). Its
// `value` is always the model's packed bytes.

#include <string>
#include <utility>
#include <vector>

namespace psw::runtime {

struct ProcessOptions {
  std::string config_path;  // the serve config
  std::vector<std::string> config_sets;  // psw serve's --set, as given on the command line
  std::vector<std::pair<std::string, std::string>> config_overrides;  // the same, parsed
  std::string backend = "host";
  int socket_fd = 3;
  int worker_id = 0;        // workers only
};

// Both return the process's exit code; errors are reported to the controller as a Failed
// message before returning non-zero.
int run_memory_daemon(const ProcessOptions& options);
int run_worker(const ProcessOptions& options);

}  // namespace psw::runtime
