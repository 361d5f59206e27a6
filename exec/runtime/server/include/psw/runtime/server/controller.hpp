#pragma once
// The controller of `psw serve` (DESIGN.md §5): receives requests, keeps the queue, decides
// which worker runs, and drives the memory daemon and the workers with small messages
// (ipc.hpp). It links neither LibTorch nor CUDA: the daemon and the workers are `psw-exec`
// processes it starts.
//
//   client --gRPC--> front end --> Controller::infer --queue--> scheduler thread
//                                                               |  Infer / Train / Cleanup
//                                  memory daemon <--segments--  +--> worker 0 (active)
//                                  (device regions, packed         worker 1 (standby)
//                                   parameters, training state)
//
// Note [Scheduling]: FIFO, inference before training (ServerPolicy, common/server_policy.hpp,
// which makes every decision; the controller turns what it observes into the policy's events and
// carries out its actions). A request goes to a standby worker at once; if training runs, its
// worker is told to stop at its next layer boundary at the same moment (the regions are disjoint,
// so the new model's transfer overlaps the training's last layer). Training resumes, from its last
// completed step, on a standby worker once the queue is empty.
//
// Note [Faults]: a worker that exits, or does not answer a request within the config's
// request_timeout (the watchdog), is killed and replaced; the request it held is answered
// with UNAVAILABLE or DEADLINE_EXCEEDED, never left hanging; the next request goes to another
// worker. The training state lives in the daemon (Note [Training state]), so a training
// worker's death loses at most its step in flight.
//
// Note [Inputs read in place]: an input in a client's registered shared memory region
// (BorrowedBytes::region) is not copied by the controller: every worker maps the region once
// (MapInput, the object's fd attached; page-locked on cuda) and copies the input from there to
// the device itself; the Infer names the region and the offset (kFlagInputInRegion). Other
// inputs go through the worker's io segment. A worker that trains does not read its socket (any
// message would stop it), so the controller never sends it Map/Unmap: before each Infer, and
// whenever a worker is on standby, it brings the worker's set of mapped regions up to date with
// the registered ones (Unmap first, then Map), so a new or replaced worker gets them all. A region
// is gone once the registry dropped it and no request reads it (its owner expired); a request
// dispatched before its Unmap is safe, the worker handles its messages in order. Before dispatch
// the controller checks that the object still holds the input (a client may shrink it); after
// that, on cuda, the worker's copy reads page-locked pages, which stay allocated for as long as
// they are registered even if the object is truncated, so the copy cannot fault (it may read
// stale bytes: the client's own doing).
//
// Note [Outputs written in place]: likewise an output the client wants in a registered region
// (the protocol's shared memory parameters on a requested output) is written there by the worker:
// the controller maps the region in the worker as for an input and names it, the offset and the
// range's size in the Infer (kFlagOutputInRegion). On cuda the worker copies the output from the
// device straight into the page-locked pages; on the host it copies guarded (a client may shrink
// the object: shared_memory.hpp, copy_guarded). An output larger than the range goes through the
// io segment, and the front end says what size it needs. Through the io segment the controller
// copies the answer once more, on the host, while the request waits (4 MB for BERT-large at
// batch 8, 3 MB for GPT-2).

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "psw/common/serve_config.hpp"
#include "psw/runtime/ipc/ipc.hpp"
#include "psw/runtime/ipc/request_phases.hpp"
#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

struct ControllerOptions {
  ServeConfig config;
  std::string backend = "host";
  std::string exec_path;  // psw-exec
  std::function<void(const std::string&)> log;  // progress lines (startup, restarts); may be empty
  // Note [Decision log] (server_policy.hpp): where to write every event with its actions, as
  // JSON lines; empty: nowhere.
  std::filesystem::path decisions;
  // Note [Inputs read in place]: regions every worker maps at its start, before the training job
  // starts, as if registered then: psw serve's input staging (Note [Raw inputs received in
  // place]). A region told later reaches a training worker only with its first request, whose
  // latency then includes the map (page-locking the region on cuda).
  std::vector<BorrowedBytes> regions;
};

// What the controller has measured since it started (tests and results read these).
struct ControllerStats {
  std::int64_t requests = 0;
  std::int64_t failed_requests = 0;
  // Note [Deadlines]: requests taken out of the queue because their caller gave up (deadline or
  // cancellation) before a worker had them; Note [Backpressure]: requests refused, the queue full.
  std::int64_t withdrawn_requests = 0;
  std::int64_t refused_queue_full = 0;
  std::int64_t transfers = 0;           // inference requests that switched parameters in
  std::int64_t worker_switches = 0;     // a request or training went to another worker than the last task
  std::int64_t preemptions = 0;
  // Of the preemptions, those that abandoned the training step in progress instead of pausing it
  // (no other worker was free to serve beside the paused job, or fresh processes): its work so
  // far is lost. The simulator's PipeSwitch always pauses. (Counted to test a reading of the
  // H200's burst run, which lost more training per request than simulated: a second run counted
  // 460 preemptions and none abandoning, so it was not this; README.)
  std::int64_t preemptions_abandoning_step = 0;
  // Note [Training held]: the job's time stopped for requests, from stopped at a layer boundary
  // (the device done with what it had queued) to running again, over completed holds.
  std::int64_t training_held_ns = 0;
  std::int64_t worker_restarts = 0;
  // Note [Worker start] (ipc.hpp): worker processes started (the first ones and every
  // replacement) whose split was counted, and that split summed over them, by phase.
  std::int64_t worker_starts = 0;
  WorkerStartSplit worker_start_ns{};
  // Note [Worker kill] (controller.cpp): worker processes killed (a fault's or a fresh
  // process's predecessor), and the time from SIGKILL to reaped, summed.
  std::int64_t worker_kills = 0;
  std::int64_t worker_kill_ns = 0;
  // Note [Fresh processes]: the most workers ever starting at once when a replacement was
  // spawned (the first workers, started together, are not counted): 1 under stop-and-start.
  std::int64_t most_replacements_starting = 0;
  // Note [Host time of an eager switch] (exec/pipeline.hpp): per model, the switches its
  // workers ran eagerly (not replayed from a graph) and their host time summed, by part.
  struct EagerSwitchHost {
    std::int64_t switches = 0;
    std::int64_t prepare_ns = 0;
    std::int64_t forward_ns = 0;
  };
  std::map<std::string, EagerSwitchHost> eager_switch_host;
  std::int64_t inputs_read_in_place = 0;  // requests whose worker read the input from the client's region
  std::int64_t outputs_written_in_place = 0;  // answers the worker wrote into the client's region
  std::int64_t region_maps = 0;           // MapInput messages sent (a region, once per worker)
  std::int64_t region_unmaps = 0;         // UnmapInput messages sent
  // Per request (the most recent 50,000 to 100,000: kMaxSamples in controller.cpp).
  std::vector<std::int64_t> preemption_ns;  // request arrival -> training stopped, per preemption
  // Note [Preemption phases]: per preemption whose worker said where it read the stop, by
  // PreemptionPhase (adding up to its preemption_ns), and the preemptions by the boundary's place.
  std::array<std::vector<std::int64_t>, kPreemptionPhases> preemption_phase_ns;
  std::array<std::vector<std::int64_t>, kTrainingBoundaries> preemption_by_boundary_ns;
  std::vector<std::int64_t> startup_ns;     // request arrival -> its first layer computes on the device
  std::vector<std::int64_t> latency_ns;     // request arrival -> reply ready, at the controller
  // The same per model (by its name): a quantile over every model hides whose it is (a model
  // whose first group is large starts late on every request, and makes the startup's p99 alone),
  // and a model's client latency splits at its own server latency and phases.
  struct ModelSamples {
    std::vector<std::int64_t> startup_ns;
    std::vector<std::int64_t> latency_ns;
    std::array<std::vector<std::int64_t>, kRequestPhases> phase_ns;
  };
  std::map<std::string, ModelSamples> by_model;
  std::array<std::vector<std::int64_t>, kRequestPhases> phase_ns;  // by RequestPhase, per request
};

// Note [Deadlines]
// ~~~~~~~~~~~~~~~~
// A request carries when its caller stops waiting: the gRPC deadline and cancellation
// (InferRequest::deadline, ::cancelled). One already past its deadline is not queued
// (DEADLINE_EXCEEDED). A waiting one whose caller gives up is withdrawn from the queue (the
// policy's RequestWithdrawn) and never runs: DEADLINE_EXCEEDED or CANCELLED, saying so. One its
// worker already runs completes there (the worker cannot be stopped mid-forward without
// replacing it), but the caller is answered at once. So work for callers who left does not
// hold the GPU, and handler threads do not pile up behind it.
//
// Note [Backpressure]
// ~~~~~~~~~~~~~~~~~~~
// At most `max_queue` requests wait or run at once (serve config, default 256); one more is
// RESOURCE_EXHAUSTED at once ("the server's queue is full ... retry later"; HTTP 429), counted in
// psw_requests_refused_total. The gRPC front end's threads are bounded from it
// (max_queue plus a few for health, metadata and control calls), so a burst of callers cannot
// grow the server's threads without limit.
// Note [Repository load]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The model repository extension's load and unload (Triton's RepositoryModelLoad/Unload; POST
// /v2/repository/models/NAME/load|unload; `psw client --load/--unload`): models come and go while
// the server runs and training goes on. The models are slots: the serve config's first, then one
// per load, never reused (a request holds its model's slot and description, which never change).
//   load    the entry is the serve config's of that name, or the one the call gives (the keys of
//           a models: entry, YAML or JSON, paths against the serve config's folder), parsed here
//           first. The memory daemon builds the model, plans it, checks that its region fits the
//           device's free memory and the config's device_memory_bytes (Note [Device memory limit]
//           in serve_config.hpp; else RESOURCE_EXHAUSTED with the numbers), packs it into a new
//           store and places its region (LoadModel, ModelStored). The policy hears ModelLoaded
//           (its residency knows the bytes). Every Standby worker binds it (BindModel: builds the
//           model over the store, captures its graphs) and answers; one that is training, paused
//           or starting binds it before its next task (a fresh process gets every slot at its
//           start). The call returns once the Standby workers have bound it: the model is READY.
//           While it loads, a request of it is UNAVAILABLE; if a worker cannot bind it, the load
//           is undone and fails with that worker's reason.
//   unload  refused (FAILED_PRECONDITION) while a request of the model waits or runs; otherwise
//           the model is gone at once (NOT_FOUND for later requests; the index lists it as
//           unloaded), the policy hears ModelUnloaded, and each worker drops it (DropModel) when
//           it next reads its socket. Once no worker process holds it, the daemon frees its
//           store and region (UnloadModel): the memory is the next load's.
// Only where each model has a region of its own: under no-ipc-optimization (per-group
// handles) and unified memory both calls are FAILED_PRECONDITION, saying why.
class Controller final : public InferenceService {
 public:
  // Starts the daemon and the workers and returns once every worker is ready; InputError for
  // a config the processes refuse (with their message), Error when they fail to start.
  explicit Controller(ControllerOptions options);
  ~Controller() override;  // shutdown()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Answers queued requests with UNAVAILABLE, stops the workers and the daemon (killing what
  // does not exit within a few seconds). Idempotent.
  void shutdown();
  // The first half of shutdown(): every request waiting (queued or on a worker) is answered
  // UNAVAILABLE with `why` and new ones are refused, so that the front end's calls return at
  // once; the processes stay until shutdown(). Idempotent.
  void stop_serving(const std::string& why);

  bool live() override;
  bool ready() override;
  std::vector<ModelInfo> models() override;
  InferResponse infer(const InferRequest& request) override;
  GenerateResponse generate(const GenerateRequest& request, const TokenSink& on_token) override;
  TrainingStatus start_training(const std::string& model, std::int64_t steps) override;
  TrainingStatus stop_training(const std::string& model) override;
  TrainingStatus training_status(const std::string& model) override;
  TrainingCheckpointStatus checkpoint_training(const std::string& model, const std::string& path) override;
  void load_model(const std::string& name, const std::string& config) override;
  void unload_model(const std::string& name) override;
  std::vector<ModelIndexEntry> unloaded_models() override;
  std::string metrics_text() override;
  void shared_memory_registered(const BorrowedBytes& region) override;

  ControllerStats stats();
  // Why the controller cannot serve any more (the memory daemon exited); empty while it can.
  std::string failure();
  // The training job's segment (Note [Training state]) as the daemon holds it: header,
  // weights, momentum; empty without a training job. For tests comparing it with a run.
  std::pair<const std::uint8_t*, std::size_t> training_segment();
  // Note [Serve trace]: a Chrome trace (chrome://tracing, Perfetto) of the last requests and
  // training pauses: per request its wait in the queue, the worker's handling, the device from
  // the switch's start to its first layer and on to the reply; per pause the time from the
  // request's arrival to the training stopped, and the pause itself.
  std::string chrome_trace();
  std::vector<pid_t> worker_pids();
  pid_t daemon_pid();
  // Per worker, the group memory it has opened (Note [Per-group handles]: under
  // no-ipc-optimization one per group with parameters, per task; zero otherwise).
  std::vector<std::uint64_t> worker_group_opens();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The tensors a served model takes and returns over the protocol, in its dtype (the controller
// does not link the zoo; tests/runtime checks this table against it): the built-in models at
// their example sizes, a decoder a prompt of prompt_tokens ids returning the last position's
// logits. InputError for a name the zoo lacks.
ModelInfo served_model_info(const ServedModelConfig& model);
// The bound of the ids a served model's input `input` holds (its vocabulary, or a TorchScript
// input's id_bound: every id must lie in [0, bound)), or 0 when it holds no ids. The controller
// checks every request's ids against it: an id out of range would index past the embedding table
// (on a GPU a device-side assert that ends the worker's CUDA context).
std::int64_t token_id_bound(const ServedModelConfig& model, std::size_t input = 0);

}  // namespace psw::runtime
