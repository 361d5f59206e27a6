#pragma once
// The runtime's LibTorch processes, started by `psw serve` through `psw-exec` (not by users):
//
//   memory daemon  allocates every model's device region and the training job's state once,
//                  packs every model's parameters into shared host memory once, sends the
//                  segments to the controller, and lives until the controller says Shutdown or
//                  goes away; it outlives every worker (DESIGN.md §5). Meanwhile it loads and
//                  frees models (LoadModel, UnloadModel) and writes checkpoints.
//   worker         receives the segments, builds every model's structure and binds it to the
//                  daemon's memory (init part 1), says Ready, then runs what the controller
//                  sends: Infer (a switch, or a resident run), Train (until stopped), Cleanup,
//                  BindModel and DropModel.
//
// Both talk to the controller over one SOCK_SEQPACKET socket inherited as `socket_fd`.
// Note [Segment order]: at the start the daemon sends the controller one Segments message whose
// descriptors are, in order: per served model its parameter store (shared host memory), then the
// training job's header (when the config has a training job); then one Region message per device
// region: per served model its parameter region, then the training job's state (weights and
// optimizer state); on `host` each carries a shared segment's descriptor, on `cuda` a CUDA IPC
// handle (Note [Shared device memory] in exec/backend.hpp). Two mechanisms give a model no
// region: under no-ipc-optimization its Region message carries the segment of its per-group
// memory (host) or of its per-group handles (cuda) instead (Note [Per-group handles],
// served_models.hpp); under unified-memory it carries nothing, and each worker makes its own
// managed memory (Note [Managed memory] in exec/backend.hpp). Its `value` is always the model's
// packed bytes.
// The controller starts a worker with the models as they stand (Note [Repository load] in
// controller.hpp): a Segments message with the training header (if any), the control segment
// and the worker's io segment, and in `value` the number of model slots; then per slot a Region
// message (`model`: the slot) carrying the slot's store first and its region's segment (as
// above), or kFlagUnloaded and nothing; a model loaded while the server runs carries its entry
// (YAML) last (kFlagEntryText), one of the serve config names it in `value2`. Then the training
// state's Region (`model` -1). A BindModel message is a slot's Region message for a running worker.

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
