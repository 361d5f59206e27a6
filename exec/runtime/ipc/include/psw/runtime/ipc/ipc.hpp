#pragma once
// What the runtime's processes share (DESIGN.md §5): shared-memory segments and small
// fixed-size messages over Unix sockets, with file descriptors passed along (SCM_RIGHTS).
//
// Note [Anonymous segments]: every segment is a memfd, never a name in /dev/shm. It lives as
// long as some process holds its descriptor or a mapping, so a server that is killed leaves
// nothing behind, and two servers cannot collide on a name. Descriptors reach the workers over
// their control socket.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace psw::runtime {

// Owner of one file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A shared-memory segment mapped read-write into this process (Note [Anonymous segments]).
class SharedSegment {
 public:
  SharedSegment() = default;
  // A new zero-filled segment of `bytes`; `name` shows in /proc/PID/fd (debugging only).
  static SharedSegment create(const std::string& name, std::size_t bytes);
  // Maps a segment another process created and passed as `fd` (taken over).
  static SharedSegment attach(UniqueFd fd);
  ~SharedSegment();
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// The messages between controller, memory daemon and workers. Plain data of fixed size: one
// datagram each on a SOCK_SEQPACKET socket, so a message arrives whole or not at all.
enum class MessageType : std::uint32_t {
  Hello = 1,        // daemon/worker -> controller: started (pid in `value`)
  Segments,         // daemon -> controller, controller -> worker: the shared segments (fds)
  Region,           // daemon -> controller -> worker: one device region (an fd, or a CUDA IPC handle)
  Ready,            // worker -> controller: models bound, graphs captured (init part 1 done)
  Infer,            // controller -> worker: run `model` on the input in the io segment
  InferDone,        // worker -> controller: output in the io segment
  Train,            // controller -> worker: train `model` until step `value` or preempted
  // worker -> controller: stopped at a layer boundary or at the target; times[1] stopped (the
  // device done), times[2] and [3] when and where the job read the stop (Note [Preemption phases]).
  TrainStopped,
  Cleanup,          // controller -> worker: drop the task's state (off the critical path)
  CleanupDone,      // worker -> controller
  Shutdown,         // controller -> daemon/worker: exit
  Failed,           // any -> controller: `text` says what went wrong
  // controller -> worker, no reply (Note [Inputs read in place] in controller.hpp): map a
  // client's shared memory region, the object's fd attached: id in `value`, the region's offset
  // in the object in `value2`, its size in `bytes`.
  MapInput,
  UnmapInput,       // controller -> worker, no reply: forget region `value`
  // worker -> controller, during an Infer with kFlagGenerate (Note [Generate call] in
  // service.hpp): generated token number `value2` is id `value`, known at times[0].
  Token,
  // controller -> daemon: write the training job's checkpoint to the absolute path in `text`
  // (Note [Training checkpoint] in training.hpp); the daemon answers CheckpointDone (steps in
  // `value`, file bytes in `value2`, the loss's bits in times[0]) or Failed.
  Checkpoint,
  CheckpointDone,
  // Note [Repository load] (controller.hpp). controller -> daemon: pack and place model slot
  // `model`, its entry (YAML) in the attached segment; the daemon answers ModelStored (the
  // store's segment and, on host, the region's attached; on cuda the region's handle; the packed
  // bytes in `value`) or Failed. UnloadModel (no answer): free slot `model`'s store and region.
  LoadModel,
  ModelStored,
  UnloadModel,
  // controller -> worker, a Standby one only: bind slot `model` as a start's Region message
  // describes it (kFlagEntryText: its entry attached last); the worker answers ModelBound, with
  // `value` 0, or 1 and why in `text`. DropModel: let slot `model` go; answered ModelDropped.
  BindModel,
  ModelBound,
  DropModel,
  ModelDropped,
};

const char* to_string(MessageType type);

constexpr std::size_t kMaxRank = 8;
constexpr std::size_t kMessageText = 480;

struct Message {
  MessageType type = MessageType::Hello;
  std::uint32_t worker = 0;
  std::uint64_t request = 0;   // the controller's request id, echoed
  std::int32_t model = -1;     // index into the serve config's models (or training jobs)
  std::uint32_t flags = 0;     // kTransfer, kPoison ...
  std::int64_t value = 0;      // a step count, a pid, a byte count
  std::int64_t value2 = 0;
  std::int32_t dtype = 0;      // element type of a tensor in the io segment
  std::uint32_t rank = 0;
  std::int64_t shape[kMaxRank] = {};
  std::int64_t bytes = 0;      // of the tensor in the io segment
  // Phases measured by the worker (ns, its steady clock): e.g. started, first layer, done;
  // InferDone's [5] and [6] are an eager switch's host times (Note [Host time of an eager
  // switch], exec/pipeline.hpp), and [7] (not a generate call's) the host time of the call that
  // launched the input's copy to the device (Note [Request phases]: input_launch).
  std::int64_t times[8] = {};
  // Infer with kFlagOutputInRegion: the mapped region the client wants the output in, the byte
  // offset there and the bytes it holds (Note [Outputs written in place] in controller.hpp).
  std::uint64_t output_region = 0;
  std::int64_t output_offset = 0;
  std::int64_t output_capacity = 0;
  std::uint8_t handle[64] = {};  // Region: the CUDA IPC handle (cudaIpcMemHandle_t is 64 bytes)
  char text[kMessageText] = {};

  void set_text(const std::string& s);
  std::string get_text() const;
};

// Note [Worker start]
// ~~~~~~~~~~~~~~~~~~~
// A task under stop-and-start (and two processes) waits for a fresh worker process, for which
// the simulator charges the hardware profile's process start, CUDA context and framework start:
// estimates, the last of them fitted as the sum of all three to a stop-and-start run, so a miss
// (the H200's 5.3-6.8 s against 3.8 s simulated on 2026-12-03) could not say which part moved.
// A worker therefore times its own start and sends the times in its Ready message
// (Message::times: its steady clock, CLOCK_MONOTONIC, which the controller's is too), and the
// controller splits every start, from its posix_spawn on, into these phases:
//   process   spawn -> run_worker entered: exec, the dynamic loader (LibTorch's libraries), static
//             initialisers, argument parsing                     (profile: startup.process_start_ns)
//   context   the segments attached, the serve config read (both quick), the backend made: on
//             cuda LibTorch's CUDA initialisation and the context (profile: startup.cuda_context_ns)
//   memory    the device regions imported (on cuda the CUDA IPC opens)
//   models    the served models built, their parameter stores pinned and their engines made, the
//             switch graphs captured (warm-up forwards included)
//   training  the training model built and moved to the device, and one step rehearsed on a
//             scratch copy of its state (Note [Rehearsal] in training.cpp)
//   other     the rest until Ready (the io area page-locked)
// memory + models + training + other is what startup.framework_start_ns stands for. The split
// is logged with the worker's "ready" line and summed in psw_worker_start_seconds_total.
enum class WorkerStartPhase : std::size_t { Process, Context, Memory, Models, Training, Other };
constexpr std::size_t kWorkerStartPhases = 6;
const char* to_string(WorkerStartPhase phase);
using WorkerStartSplit = std::array<std::int64_t, kWorkerStartPhases>;
// Ready's Message::times, in order: run_worker entered, backend made, memory imported, models
// ready, training job ready, Ready sent. The split of a start spawned at `spawned_ns`; nullopt
// when the times are not a start's (unset, or out of order).
std::optional<WorkerStartSplit> split_worker_start(std::int64_t spawned_ns, std::span<const std::int64_t> ready_times);
// "after 5.12 s: process 31.0 ms, context 402.3 ms, ..." (the log's words).
std::string describe_worker_start(const WorkerStartSplit& split);

constexpr std::uint32_t kFlagTransfer = 1;  // Infer: the parameters are not on the device
// Infer: the input is not in the io segment but in mapped region `value` at offset `value2`
// (Note [Inputs read in place] in controller.hpp).
constexpr std::uint32_t kFlagInputInRegion = 2;
// Infer: generate (Note [Generate call] in service.hpp) from the prompt, 1 x L token ids in the io
// segment, up to `value` tokens: Token messages as they come, then InferDone with the ids
// (1 x n int64) in the io segment, the first token's time in `value` and the last's in `value2`
// (the steady clock), the prompt's bucket in times[7].
constexpr std::uint32_t kFlagGenerate = 4;
// A model slot's Region or BindModel message (Note [Segment order] in processes.hpp): the slot
// is unloaded (nothing attached), or its entry is the attached segment's YAML (a model loaded
// while the server runs) rather than the serve config's models[model].
constexpr std::uint32_t kFlagUnloaded = 8;
constexpr std::uint32_t kFlagEntryText = 16;
// Infer: write the output into mapped region `output_region` at `output_offset` if it fits
// `output_capacity`; InferDone: it was written there, not into the io segment (Note [Outputs
// written in place] in controller.hpp).
constexpr std::uint32_t kFlagOutputInRegion = 32;
// TrainStopped::value2: why the job stopped.
constexpr std::int64_t kTrainReachedTarget = 0;
constexpr std::int64_t kTrainAbandoned = 1;  // the step in flight dropped; the worker is free
constexpr std::int64_t kTrainPaused = 2;     // waiting in place at a layer boundary; the worker stays busy

// Element types of tensors in an io segment (Message::dtype).
enum class ElementType : std::int32_t { Float32 = 0, Int64 = 1, Float16 = 2, BFloat16 = 3, Int32 = 4, UInt8 = 5 };
std::int64_t element_bytes(ElementType type);
// KServe v2 datatype names ("FP32", "INT64", ...); std::nullopt for a type the runtime lacks.
std::optional<ElementType> element_type_of(const std::string& datatype);
const char* datatype_name(ElementType type);

// Per worker, in the control segment the controller shares with it: the controller raises
// `stop` to preempt training, the worker reads it at every layer boundary (Note [Preemption
// without loss] in training.hpp). One cache line each.
struct alignas(64) WorkerControl {
  std::atomic<std::uint32_t> stop;
  // Note [Pause and resume]: how many times the controller has resumed a job paused in place
  // on this worker (raised before `stop` goes back to kStopNone).
  std::atomic<std::uint32_t> resumes;
  // Note [Per-group handles] (exec/pipeline.hpp): group memory the worker has opened since
  // its slot was made (no-ipc-optimization), counted by the worker, read by tests.
  std::atomic<std::uint64_t> group_opens;
};
// WorkerControl::stop (Note [Preemption without loss] in training.hpp).
constexpr std::uint32_t kStopNone = 0;   // run
constexpr std::uint32_t kStopPause = 1;  // pause at the next layer boundary, in place, until kStopNone
constexpr std::uint32_t kStopAbort = 2;  // abandon the step in flight; resume later from the last completed one
constexpr std::size_t kMaxWorkers = 16;

// Note [Pause and resume]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A job paused in place waits for the controller's word in the shared `stop`. The controller
// resumes it (kStopNone) when the request is answered, and may stop it again (kStopPause) for
// the next request a moment later. Read alone, `stop` can lose the resume: if both stores land
// between two reads of the waiting worker (microseconds apart, or more when the worker's thread
// is descheduled), the worker sees kStopPause throughout and stays in its first pause, while
// the controller waits for the second pause's message, which never comes; the watchdog then
// replaces the worker after request_timeout and the job loses that time. Two H200 runs show
// it: a burst run and a replay whose servers logged "worker 0 did not answer within 10000 ms"
// with no request failing (so the worker was the training job's, being stopped, not one
// serving), the burst run's job keeping 0.68 of its rate where the simulator said 0.91 (others
// of the same workload: 0.91-1.01). So the controller also counts its resumes
// (`resumes`, raised before `stop` is cleared): a worker that finds the count changed since
// it paused was resumed, goes on, and pauses again at its next boundary, with a message of
// its own for the second stop.
// Waits, paused in place (the worker read `resumes_at_pause` from `control.resumes` before it
// said it paused): true to go on (resumed), false to abandon the step (kStopAbort, or `gone()`
// says the controller went away). Polls every `poll`.
bool wait_while_paused(const WorkerControl& control, std::uint32_t resumes_at_pause, const std::function<bool()>& gone,
                       std::chrono::microseconds poll = std::chrono::microseconds(20));

// The head of the training job's segment (Note [Training state] in training.hpp), which the
// controller reads for progress and the worker writes after every completed step.
struct TrainingHeader {
  // The commit (Note [Committed slot] in training.hpp): slot completed_steps % 2 of the state
  // holds the job after this many steps. Written and read atomically (committed_steps).
  std::int64_t completed_steps;
  double slot_loss[2];         // the loss of the step whose state each slot holds (0: none yet)
  std::int64_t weights_bytes;  // of the packed weights (BatchNorm statistics included)
  std::int64_t slot_bytes;     // of one slot: the weights and the optimizer state
  std::uint64_t fingerprint;   // of the model's layers and the optimizer: another job's state is refused
};
// The completed steps as last committed (an acquire load: the slot it names is whole).
inline std::int64_t committed_steps(const TrainingHeader& header) {
  return __atomic_load_n(&header.completed_steps, __ATOMIC_ACQUIRE);
}
// The loss of the last completed step (0 before the first).
inline double committed_loss(const TrainingHeader& header) {
  return header.slot_loss[committed_steps(header) % 2];
}

// The io segment of a worker: an input area and an output area of max_tensor_bytes each.
struct IoLayout {
  std::int64_t max_tensor_bytes;
  std::int64_t input_offset() const { return 0; }
  std::int64_t output_offset() const { return max_tensor_bytes; }
  std::int64_t total() const { return 2 * max_tensor_bytes; }
};

// A connected pair of SOCK_SEQPACKET sockets (controller end, child end).
std::pair<UniqueFd, UniqueFd> message_socket_pair();

// Sends one message with `fds` attached; throws psw::Error if the peer is gone.
void send_message(int socket, const Message& message, const std::vector<int>& fds = {});
// Receives one message and the fds attached to it. std::nullopt on an orderly close by the
// peer; throws psw::Error on a malformed datagram. Blocks up to `timeout_ms` (-1: forever);
// psw::Error on a timeout.
std::optional<Message> receive_message(int socket, std::vector<UniqueFd>* fds = nullptr, int timeout_ms = -1);

// Steady-clock nanoseconds, the one clock the runtime's processes compare (same host).
std::int64_t monotonic_ns();

}  // namespace psw::runtime
