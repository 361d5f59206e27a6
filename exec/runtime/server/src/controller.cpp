#include "psw/runtime/server/controller.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "psw/common/chrome_trace.hpp"
#include "psw/common/error.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/server_policy.hpp"
#include "psw/runtime/ipc/ipc.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"

extern char** environ;

namespace psw::runtime {

namespace {

constexpr std::int64_t kBertVocabulary = 30522;  // exec/src/models/bert.cpp (bert-base-uncased)

// The KServe datatype of a zoo dtype's floating-point tensors.
const char* floating_datatype(const std::string& dtype) {
  if (dtype == "bf16") return "BF16";
  if (dtype == "fp16") return "FP16";
  return "FP32";
}

}  // namespace

ModelInfo served_model_info(const ServedModelConfig& model) {
  ModelInfo info;
  info.name = model.name;
  info.platform = "pytorch_libtorch";
  info.versions = {"1"};
  const char* floating = floating_datatype(model.dtype);
  // The sizes the models are served at (their switch graphs are captured for them): the
  // zoo's example inputs, a decoder's configured prompt; only the batch may vary.
  if (model.decoder) {
    info.inputs = {{"input_ids", "INT64", {-1, model.prompt_tokens}}};
    info.outputs = {{"logits", floating, {-1, model.decoder->vocabulary}}};
  } else if (!model.torchscript_file.empty()) {
    // Note [TorchScript models]: its inputs as the config states them; its output's as the config
    // states it (output_shape), or its rank and sizes come with each answer.
    for (const TorchScriptInput& input : model.inputs) {
      std::vector<std::int64_t> shape = {-1};
      shape.insert(shape.end(), input.shape.begin(), input.shape.end());
      info.inputs.push_back({input.name, input.dtype == "int64" ? "INT64" : floating_datatype(input.dtype), shape});
    }
    std::vector<std::int64_t> output = {-1};
    output.insert(output.end(), model.output_shape.begin(), model.output_shape.end());
    info.outputs = {{"output", floating, output}};
  } else if (model.name == "resnet152" || model.name == "inception_v3") {
    const std::int64_t side = model.name == "resnet152" ? 224 : 299;
    info.inputs = {{"input", floating, {-1, 3, side, side}}};
    info.outputs = {{"logits", floating, {-1, 1000}}};
  } else if (model.name == "bert_base" || model.name == "bert_tiny") {
    info.inputs = {{"input_ids", "INT64", {-1, 128}}};
    info.outputs = {{"pooled_output", floating, {-1, model.name == "bert_base" ? 768 : 128}}};
  } else {
    throw InputError("model '" + model.name +
                     "' is not in the zoo: expected resnet152, inception_v3, bert_base, bert_tiny or a decoder (decoder: its "
                     "config file)");
  }
  return info;
}

std::int64_t token_id_bound(const ServedModelConfig& model, std::size_t input) {
  if (!model.torchscript_file.empty()) return input < model.inputs.size() ? model.inputs[input].id_bound : 0;
  if (input != 0) return 0;
  if (model.decoder) return model.decoder->vocabulary;
  return model.name == "bert_base" || model.name == "bert_tiny" ? kBertVocabulary : 0;
}

namespace {

using Clock = std::chrono::steady_clock;

ServiceError::Code code_of(std::int64_t value) {
  if (value < 0 || value > static_cast<std::int64_t>(ServiceError::Code::Internal)) return ServiceError::Code::Internal;
  return static_cast<ServiceError::Code>(value);
}

static_assert(static_cast<int>(StatusCode::AlreadyExists) == static_cast<int>(ServiceError::Code::AlreadyExists) &&
                  static_cast<int>(StatusCode::Unavailable) == static_cast<int>(ServiceError::Code::Unavailable) &&
                  static_cast<int>(StatusCode::DeadlineExceeded) == static_cast<int>(ServiceError::Code::DeadlineExceeded),
              "the policy's status codes are the service's, in its order");
ServiceError::Code service_code(StatusCode code) { return static_cast<ServiceError::Code>(code); }
StatusCode status_code(ServiceError::Code code) { return static_cast<StatusCode>(code); }

// A worker process as the controller drives it; what it is doing (its WorkerState) is the
// policy's (Note [Server policy]).
struct Worker {
  int id = 0;
  pid_t pid = -1;
  UniqueFd socket;
  SharedSegment io;
  std::int64_t busy_since_ns = 0;  // the task it runs started (watchdog)
  std::int64_t spawned_ns = 0;     // its process was spawned (Note [Worker start])
  // Note [Replaced while polled]: which process of this worker the socket belongs to.
  std::uint64_t process = 0;
  // Note [Inputs read in place]: the client regions this process has been told to map.
  std::set<std::uint64_t> mapped_regions;
  // Its last answer to an Infer, read when the policy completes the request from it.
  Message reply;
  // Note [Repository load]: per model slot, whether this process has it bound (1), was told to
  // and has not answered (kBindUnanswered), or neither (0).
  std::vector<char> holds;
};

constexpr char kBindUnanswered = 2;

// A served model as a request reads it, outside the controller's lock: its entry and protocol
// description (Note [Repository load]: a slot's never change, so a request keeps them).
struct ServedSlot {
  ServedModelConfig entry;
  ModelInfo info;
};

// Note [Generate call] (service.hpp): the tokens of a generate call on their way from the
// scheduler thread, which receives the worker's Token messages, to the caller's thread, which
// tells them to its sink outside every lock of the controller.
class TokenStream {
 public:
  void push(const GeneratedToken& token) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tokens_.push_back(token);
    }
    changed_.notify_one();
  }
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    changed_.notify_one();
  }
  // Waits up to `wait` for a token or the end, then tells every token received to `sink`; how
  // many it told.
  std::size_t drain(std::chrono::milliseconds wait, const TokenSink& sink) {
    std::deque<GeneratedToken> ready;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait_for(lock, wait, [this] { return !tokens_.empty() || finished_; });
      ready.swap(tokens_);
    }
    if (sink) {
      for (const GeneratedToken& t : ready) sink(t);
    }
    return ready.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<GeneratedToken> tokens_;
  bool finished_ = false;
};

struct Pending {
  std::uint64_t id = 0;  // Message::request
  std::string model_name;
  std::string version;
  std::string request_id;  // the client's
  // The caller's input, read once when the request goes to its worker. Not a copy (inputs are
  // megabytes): infer() waits for the reply, and takes the request out of the queue when it
  // gives up, so the tensor outlives every read.
  const TensorData* input = nullptr;
  // Note [Raw inputs received in place]: the staging slot the input lies in, held until the
  // worker has answered, so that a caller who gives up while its worker reads does not free the
  // slot for the next request under that read.
  std::shared_ptr<void> input_lease;
  std::vector<OutputDestination> output_destinations;  // outputs the client wants in its shared memory
  int model = -1;
  std::shared_ptr<const ServedSlot> served;
  ElementType type = ElementType::Float32;
  std::int64_t arrival_ns = 0;
  std::promise<InferResponse> reply;
  std::int64_t copied_ns = 0;    // the input is in the worker's io segment (or read in place: dequeued)
  std::int64_t dispatch_ns = 0;  // the message to the worker sent
  bool transfer = false;
  // Note [Generate call]: a generate call's tokens to come (0: an inference request), their
  // stream, and from its worker's answer the first and last token's times and the prompt's bucket.
  std::int64_t max_tokens = 0;
  std::shared_ptr<TokenStream> stream;
  std::int64_t first_token_ns = 0;
  std::int64_t last_token_ns = 0;
  std::int64_t prompt_bucket = 0;
  int worker = -1;  // the one that answered
};

// Note [Serve trace]: one span of the trace (times: the runtime's monotonic clock, ns).
struct TraceSpan {
  std::string name;
  std::string track;  // "queue", "worker N", "training"
  std::int64_t begin_ns;
  std::int64_t end_ns;
  std::string detail;
};
constexpr std::size_t kMaxTraceSpans = 50'000;  // the oldest go first

// A server runs for weeks: the per-request samples behind the metrics' quantiles keep the most
// recent ones only (between half this and this many), so their memory stays bounded.
constexpr std::size_t kMaxSamples = 100'000;
void record_sample(std::vector<std::int64_t>& samples, std::int64_t ns) {
  if (samples.size() >= kMaxSamples) samples.erase(samples.begin(), samples.begin() + kMaxSamples / 2);
  samples.push_back(ns);
}

// The q-quantile of sorted samples (the nearest rank), in seconds; 0 with none.
double quantile_seconds(const std::vector<std::int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)]) * 1e-9;
}

// The latency histogram's upper bounds, in seconds (Prometheus `le`).
constexpr double kLatencyBuckets[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};

}  // namespace

struct Controller::State {
  ControllerOptions options;
  // Note [Server policy]: every decision; built once the daemon has said how large each model is.
  std::optional<ServerPolicy> policy;
  std::deque<PolicyEvent> events;  // fed, not yet handled (an action may cause another event)
  bool handling = false;
  std::ofstream decisions;         // Note [Decision log]: `psw serve --decisions FILE`

  // Processes and segments.
  pid_t daemon_pid = -1;
  UniqueFd daemon_socket;
  struct RegionGrant {
    Message message;
    std::optional<SharedSegment> segment;  // host backend: the region's shared segment
  };
  // Note [Repository load]: a model slot, the serve config's models first, then every model
  // loaded while the server runs (an unloaded one stays, its index never reused).
  struct ModelSlot {
    enum class Phase { Ready, Loading, Unloaded };
    Phase phase = Phase::Ready;
    std::shared_ptr<const ServedSlot> served;
    int config_index = -1;                   // the serve config's entry it is, or -1: entry_text's
    std::optional<SharedSegment> entry_text;  // a loaded model's entry (YAML), for the workers
    std::optional<SharedSegment> store;       // the daemon's packed parameters
    RegionGrant region;
    int holders = 0;        // worker processes that have it bound, or were told to bind it
    int binds_pending = 0;  // BindModel messages of its load not answered yet
    std::string bind_error;  // a worker's failure to bind it during its load
    std::string unloaded_why = "unloaded";  // the repository index's reason once unloaded
  };
  std::deque<ModelSlot> slots;  // under `mutex` once the scheduler runs
  std::condition_variable slots_changed;
  std::mutex repository_mutex;  // one load or unload at a time
  std::optional<SharedSegment> training_header_segment;  // Note [Segment order]
  std::optional<RegionGrant> training_region;
  SharedSegment control;                        // WorkerControl per worker
  TrainingHeader* training_header = nullptr;    // in the daemon's training segment
  std::vector<Worker> workers;
  UniqueFd wakeup;  // eventfd: a request arrived or a call changed the state

  // Everything below under `mutex`.
  std::mutex mutex;
  bool stopping = false;
  bool all_ready = false;
  std::string failure;  // set when the server cannot go on
  std::uint64_t next_request_id = 1;
  // The requests queued or running, by id (their order is the policy's).
  std::map<std::uint64_t, std::shared_ptr<Pending>> pending;
  int last_worker = -1;           // the worker of the last task started (psw_worker_switches_total)
  bool training_stopped_by_client = false;
  std::int64_t training_target = 0;
  std::int64_t stop_requested_for_arrival_ns = 0;  // the request that caused the stop
  std::int64_t stop_flag_written_ns = 0;           // and when its stop flag was written
  // Note [Training checkpoint], Note [Repository load]: the daemon's answer to the call in
  // flight (a checkpoint, a load), if any, with the descriptors it carries.
  struct DaemonAnswer {
    Message message;
    std::vector<UniqueFd> fds;
  };
  std::optional<std::promise<DaemonAnswer>> daemon_answer;
  // Note [Inputs read in place]: the client regions the workers map, by registration id.
  struct InputRegion {
    std::weak_ptr<void> owner;  // the registry's region: expired once it is gone
    int fd = -1;                // the object, open while `owner` lives
    std::uint64_t object_offset = 0;
    std::uint64_t byte_size = 0;
  };
  std::map<std::uint64_t, InputRegion> input_regions;
  ControllerStats stats;
  std::map<std::string, std::int64_t> requests_by_model_code;
  std::vector<std::int64_t> latency_bucket_counts = std::vector<std::int64_t>(std::size(kLatencyBuckets) + 1, 0);
  double latency_sum_s = 0;
  std::int64_t latency_count = 0;

  std::thread scheduler;
  std::deque<TraceSpan> trace;
  std::int64_t started_ns = monotonic_ns();
  std::int64_t paused_since_ns = 0;
  std::int64_t held_since_ns = 0;  // Note [Training held]: 0 unless stopped for a request now

  // Note [Training held]
  // ~~~~~~~~~~~~~~~~~~~~
  // A request that preempts training costs the job more than the request's own time: the
  // job stops at a layer boundary once the device has done what it had queued, waits (paused
  // in place, or in a fresh process), and runs again when the controller resumes it. The
  // controller sums the time from stopped to running again (TrainingStatus::held_ns), so that a
  // client can split the job's loss under load into the time it was held and its rate while it
  // ran (psw validate's training rows); the simulator reports the same hold (training_held_ms).
  std::int64_t training_held_ns(std::int64_t now) const {
    return stats.training_held_ns + (held_since_ns > 0 ? now - held_since_ns : 0);
  }
  void end_hold(std::int64_t now) {
    if (held_since_ns > 0) stats.training_held_ns += now - held_since_ns;
    held_since_ns = 0;
  }

  // Note [Request phases]: one phase of request `p`, over every request and over its model's.
  void record_phase(const Pending& p, RequestPhase k, std::int64_t ns) {
    record_sample(stats.phase_ns[static_cast<std::size_t>(k)], ns);
    record_sample(stats.by_model[p.model_name].phase_ns[static_cast<std::size_t>(k)], ns);
  }

  // Note [Preemption phases]: the split of the preemption just recorded, from the worker's
  // TrainStopped (times[2]: the stop read at a boundary, times[3]: where). A read before this stop's
  // flag was written is an earlier stop's (the job was stopped at the target meanwhile): no split.
  void record_preemption_split(const Message& m) {
    const std::int64_t seen = m.times[2];
    const std::int64_t where = m.times[3];
    if (seen < stop_flag_written_ns || seen > m.times[1] || where < 0 ||
        where >= static_cast<std::int64_t>(kTrainingBoundaries)) {
      return;
    }
    auto phase = [this](PreemptionPhase k, std::int64_t ns) {
      record_sample(stats.preemption_phase_ns[static_cast<std::size_t>(k)], ns);
    };
    phase(PreemptionPhase::Signal, stop_flag_written_ns - stop_requested_for_arrival_ns);
    phase(PreemptionPhase::ToBoundary, seen - stop_flag_written_ns);
    phase(PreemptionPhase::Drain, m.times[1] - seen);
    record_sample(stats.preemption_by_boundary_ns[static_cast<std::size_t>(where)],
                  m.times[1] - stop_requested_for_arrival_ns);
    const std::string place = kTrainingBoundaryNames[where];
    add_span({"to a boundary (" + place + ")", "training", stop_flag_written_ns, seen,
              "the stop flag written to the job's host thread reading it at a layer boundary"});
    add_span({"device drain", "training", seen, m.times[1], "the training work queued before the boundary"});
  }

  // The slot of the loaded (or loading) model `name`, or -1. With the mutex held.
  int slot_index(const std::string& name) const {
    for (std::size_t i = slots.size(); i-- > 0;) {
      if (slots[i].phase != ModelSlot::Phase::Unloaded && slots[i].served->entry.name == name) return static_cast<int>(i);
    }
    return -1;
  }

  // A request for `model` arrived now: its Pending, with the model's slot and description;
  // NotFound for a model not served here, Unavailable for one still loading.
  std::shared_ptr<Pending> arrived(const std::string& model) {
    auto p = std::make_shared<Pending>();
    p->arrival_ns = monotonic_ns();
    std::lock_guard<std::mutex> lock(mutex);
    p->model = slot_index(model);
    if (p->model < 0) throw ServiceError(ServiceError::Code::NotFound, "model '" + model + "' is not served here");
    const ModelSlot& slot = slots[static_cast<std::size_t>(p->model)];
    if (slot.phase == ModelSlot::Phase::Loading) {
      throw ServiceError(ServiceError::Code::Unavailable, "model '" + model + "' is loading; ask again once it is ready");
    }
    p->served = slot.served;
    return p;
  }

  using Deadline = std::optional<Clock::time_point>;
  InferResponse queue_and_wait(const std::shared_ptr<Pending>& p, const Deadline& deadline,
                               const std::function<bool()>& is_cancelled, const std::string& model,
                               const TokenSink* on_token);

  void add_span(TraceSpan span) {  // with the mutex held
    if (trace.size() >= kMaxTraceSpans) trace.pop_front();
    trace.push_back(std::move(span));
  }

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wakeup.get(), &one, sizeof one);
  }

  pid_t spawn(const std::vector<std::string>& args, UniqueFd child_end) {
    // The child's socket must be fd 3 with close-on-exec off: dup2 onto 3 does that, unless it
    // already is 3 (dup2 to itself keeps the flag), so move it away first.
    if (child_end.get() == 3) child_end = UniqueFd(::fcntl(child_end.get(), F_DUPFD_CLOEXEC, 10));
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(options.exec_path.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, child_end.get(), 3);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, options.exec_path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw Error("cannot start " + options.exec_path + ": " + std::strerror(rc));
    return pid;
  }

  // The server's processes read the config as the server did: the same file, the same --set.
  std::vector<std::string> process_args(const char* role) const {
    std::vector<std::string> args = {role, "--config", options.config.path.string(), "--backend", options.backend,
                                     "--socket-fd", "3"};
    for (const auto& [key, value] : options.config.overrides) {
      args.push_back("--set");
      args.push_back(key + "=" + value);
    }
    return args;
  }

  // Waits for one message from a starting process; turns its Failed report into the error.
  Message expect(int socket, MessageType type, const std::string& who, int timeout_ms,
                 std::vector<UniqueFd>* fds = nullptr) {
    const std::optional<Message> m = receive_message(socket, fds, timeout_ms);
    if (!m) throw Error(who + " exited during start-up (see its message above)");
    if (m->type == MessageType::Failed) {
      if (code_of(m->value) == ServiceError::Code::InvalidArgument) throw InputError(who + ": " + m->get_text());
      throw Error(who + ": " + m->get_text());
    }
    if (m->type != type) {
      throw Error(who + ": expected a " + to_string(type) + " message, got " + to_string(m->type));
    }
    return *m;
  }

  void start_daemon() {
    auto [mine, theirs] = message_socket_pair();
    daemon_pid = spawn(process_args("runtime-daemon"), std::move(theirs));
    daemon_socket = std::move(mine);
    expect(daemon_socket.get(), MessageType::Hello, "the memory daemon", 60'000);
    std::vector<UniqueFd> fds;
    // Packing every model's parameters takes seconds on a CPU.
    expect(daemon_socket.get(), MessageType::Segments, "the memory daemon", 600'000, &fds);
    const std::size_t n = options.config.models.size();
    const std::size_t training = options.config.training ? 1 : 0;
    if (fds.size() != n + training) {
      throw Error(detail::concat("the memory daemon sent ", fds.size(), " segments, expected ", n + training));
    }
    for (std::size_t i = 0; i < n; ++i) {
      ModelSlot slot;
      slot.served = std::make_shared<const ServedSlot>(
          ServedSlot{options.config.models[i], served_model_info(options.config.models[i])});
      slot.config_index = static_cast<int>(i);
      slot.store = SharedSegment::attach(std::move(fds[i]));
      slots.push_back(std::move(slot));
    }
    if (training != 0) {
      training_header_segment = SharedSegment::attach(std::move(fds[n]));
      training_header = reinterpret_cast<TrainingHeader*>(training_header_segment->data());
    }
    for (std::size_t i = 0; i < n + training; ++i) {
      std::vector<UniqueFd> region_fds;
      RegionGrant grant{expect(daemon_socket.get(), MessageType::Region, "the memory daemon", 600'000, &region_fds), {}};
      if (!region_fds.empty()) grant.segment = SharedSegment::attach(std::move(region_fds.front()));
      if (i < n) {
        slots[i].region = std::move(grant);
      } else {
        training_region = std::move(grant);
      }
    }
  }

  // Whether a worker should have the slot: loaded, or loading and stored by the daemon.
  static bool bindable(const ModelSlot& slot) { return slot.phase != ModelSlot::Phase::Unloaded && slot.store; }

  // Note [Segment order]: slot `index`'s Region (at a worker's start) or BindModel message, with
  // the descriptors it carries: the store, the region's segment (host), the entry (a loaded model).
  Message slot_message(std::size_t index, MessageType type, std::vector<int>& fds) const {
    const ModelSlot& slot = slots[index];
    Message m;
    if (!bindable(slot)) {
      m.type = type;
      m.flags = kFlagUnloaded;
    } else {
      m = slot.region.message;
      m.type = type;
      fds.push_back(slot.store->fd());
      if (slot.region.segment) fds.push_back(slot.region.segment->fd());
      if (slot.entry_text) {
        m.flags |= kFlagEntryText;
        fds.push_back(slot.entry_text->fd());
      }
    }
    m.model = static_cast<std::int32_t>(index);
    m.value2 = slot.config_index;
    return m;
  }

  // Note [Repository load]: a worker process's models are gone with it; a slot unloaded that no
  // process holds any more is freed in the daemon.
  void release_holds(Worker& w) {
    for (std::size_t i = 0; i < w.holds.size(); ++i) {
      if (w.holds[i] == 0) continue;
      ModelSlot& slot = slots[i];
      if (w.holds[i] == kBindUnanswered && slot.phase == ModelSlot::Phase::Loading && slot.binds_pending > 0) {
        --slot.binds_pending;
        if (slot.bind_error.empty()) slot.bind_error = detail::concat("worker ", w.id, " exited while it bound the model");
        slots_changed.notify_all();
      }
      release_hold(i);
    }
    w.holds.clear();
  }
  void release_hold(std::size_t index) {
    --slots[index].holders;
    free_if_unheld(index);
  }
  // An unloaded slot that no worker process holds: the daemon frees its store and region.
  void free_if_unheld(std::size_t index) {
    ModelSlot& slot = slots[index];
    if (slot.phase != ModelSlot::Phase::Unloaded || slot.holders > 0 || !slot.store) return;
    Message unload;
    unload.type = MessageType::UnloadModel;
    unload.model = static_cast<std::int32_t>(index);
    try {
      send_message(daemon_socket.get(), unload);
    } catch (const Error&) {
      // The daemon is gone: the loop says so and stops the server.
    }
    slot.store.reset();
    slot.region.segment.reset();
    slot.entry_text.reset();
    log("model '" + slot.served->entry.name + "' unloaded: its memory is freed");
  }

  // Note [Repository load]: brings what worker `w` has bound up to date with the slots, Drop
  // and Bind messages, which it handles before any task sent after them. Binds only for a worker
  // that reads its socket (as update_mapped_regions); a training one (running or paused) takes
  // drops only (`drops_only`), between steps. Throws Error when it cannot be reached.
  void update_models(Worker& w, bool drops_only = false) {
    w.holds.resize(slots.size(), 0);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      ModelSlot& slot = slots[i];
      const bool wanted = bindable(slot);  // a slot loading, once the daemon has stored it
      if (wanted == (w.holds[i] != 0) || (wanted && drops_only)) continue;
      std::vector<int> fds;
      Message m = wanted ? slot_message(i, MessageType::BindModel, fds) : Message{};
      if (!wanted) {
        m.type = MessageType::DropModel;
        m.model = static_cast<std::int32_t>(i);
      }
      m.worker = static_cast<std::uint32_t>(w.id);
      send_message(w.socket.get(), m, fds);
      w.holds[i] = wanted ? kBindUnanswered : 0;
      if (wanted) {
        ++slot.holders;
        if (slot.phase == ModelSlot::Phase::Loading) ++slot.binds_pending;
      }
    }
  }

  // Starts worker `id` (again) and sends it the segments; it says Ready later, on its socket.
  void start_worker(int id) {
    Worker& w = workers[static_cast<std::size_t>(id)];
    auto [mine, theirs] = message_socket_pair();
    std::vector<std::string> args = process_args("runtime-worker");
    args.push_back("--worker");
    args.push_back(std::to_string(id));
    w.spawned_ns = monotonic_ns();
    w.pid = spawn(args, std::move(theirs));
    w.socket = std::move(mine);
    ++w.process;
    w.busy_since_ns = monotonic_ns();
    w.mapped_regions.clear();  // a new process has mapped nothing
    reinterpret_cast<WorkerControl*>(control.data())[id].stop.store(0);
    std::vector<int> fds;
    if (training_header_segment) fds.push_back(training_header_segment->fd());
    fds.push_back(control.fd());
    fds.push_back(w.io.fd());
    Message segments;
    segments.type = MessageType::Segments;
    segments.worker = static_cast<std::uint32_t>(id);
    segments.value = static_cast<std::int64_t>(slots.size());
    send_message(w.socket.get(), segments, fds);
    // Note [Segment order]: every slot as it stands, so a fresh process has the models loaded
    // since the start and none of those unloaded.
    w.holds.assign(slots.size(), 0);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      std::vector<int> slot_fds;
      send_message(w.socket.get(), slot_message(i, MessageType::Region, slot_fds), slot_fds);
      if (bindable(slots[i])) {
        w.holds[i] = 1;
        ++slots[i].holders;
      }
    }
    if (training_region) {
      std::vector<int> region_fds;
      if (training_region->segment) region_fds.push_back(training_region->segment->fd());
      send_message(w.socket.get(), training_region->message, region_fds);
    }
  }

  // Note [Worker kill]
  // ~~~~~~~~~~~~~~~~~~
  // A worker is replaced by killing its process and reaping it before its successor starts, on
  // the controller's thread: the exit runs the driver's teardown of the process's CUDA context,
  // and the successor should not start beside it (Note [Fresh processes] in server_policy.cpp).
  // Under stop-and-start that wait is on every request's critical path, before its fresh
  // process's start, and it is not part of the start the worker splits (Note [Worker start]): on
  // the H200 the requests' server time beyond start and engine was 162-200 ms (2026-12-03). The
  // controller times it (psw_worker_kills_total, psw_worker_kill_seconds_total), psw load reads it
  // beside the starts (Note [Worker starts measured]) and the simulator charges it before a fresh
  // process's start (the hardware profile's startup.process_kill_ns).
  void kill_worker(Worker& w) {
    if (w.pid > 0) {
      const std::int64_t killed_ns = monotonic_ns();
      ::kill(w.pid, SIGKILL);
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      ++stats.worker_kills;
      stats.worker_kill_ns += monotonic_ns() - killed_ns;
    }
    w.socket = UniqueFd();
    release_holds(w);
  }

  void fail(const std::shared_ptr<Pending>& p, ServiceError::Code code, const std::string& message) {
    ++stats.failed_requests;
    ++requests_by_model_code[p->model_name + "\x1f" + "error"];
    p->reply.set_exception(std::make_exception_ptr(ServiceError(code, message)));
    if (p->stream) p->stream->finish();
  }

  // Note [Server policy]: with the mutex held. Every event goes through the policy, in the order
  // fed; an action that fails (a worker that cannot be reached) feeds another event, handled
  // after the actions of this one, so the decision log is one sequence.
  void feed(PolicyEvent event) {
    events.push_back(std::move(event));
    if (handling) return;
    handling = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{handling};
    while (!events.empty()) {
      const PolicyEvent next = std::move(events.front());
      events.pop_front();
      const std::vector<PolicyAction> actions = policy->handle(next);
      if (decisions.is_open()) {
        decisions << decision_line(monotonic_ns() - started_ns, next, actions);
        decisions.flush();
      }
      for (const PolicyAction& a : actions) carry_out(a);
    }
  }

  void lost(int worker, ServiceError::Code code, const std::string& why) {
    PolicyEvent e{.kind = PolicyEvent::Kind::WorkerLost, .worker = worker};
    e.code = status_code(code);
    e.text = why;
    feed(std::move(e));
  }

  WorkerControl& control_of(int worker) { return reinterpret_cast<WorkerControl*>(control.data())[worker]; }

  void carry_out(const PolicyAction& a) {
    using A = PolicyAction::Kind;
    switch (a.kind) {
      case A::Dispatch: dispatch_request(a.request, a.worker, a.transfer); return;
      case A::Complete: complete_request(a.request, a.worker); return;
      case A::FailRequest: {
        const auto it = pending.find(a.request);
        if (it == pending.end()) return;
        fail(it->second, service_code(a.code), a.text);
        pending.erase(it);
        return;
      }
      case A::StopTraining: {
        control_of(a.worker).stop.store(a.mode == StopMode::Pause ? kStopPause : kStopAbort, std::memory_order_release);
        const auto it = pending.find(a.request);
        stop_requested_for_arrival_ns = a.request != 0 && it != pending.end() ? it->second->arrival_ns : 0;
        stop_flag_written_ns = monotonic_ns();
        workers[static_cast<std::size_t>(a.worker)].busy_since_ns = monotonic_ns();
        return;
      }
      case A::ResumeTraining: resume_paused_training(a.worker); return;
      case A::StartTraining: start_training_on(a.worker); return;
      case A::Cleanup: {
        // Off the critical path: the stopped worker drops its task before its next one.
        Worker& w = workers[static_cast<std::size_t>(a.worker)];
        Message cleanup;
        cleanup.type = MessageType::Cleanup;
        w.busy_since_ns = monotonic_ns();
        try {
          send_message(w.socket.get(), cleanup);
        } catch (const Error&) {
          lost(a.worker, ServiceError::Code::Unavailable, "could not be reached");
        }
        return;
      }
      case A::RestartWorker: {
        Worker& w = workers[static_cast<std::size_t>(a.worker)];
        kill_worker(w);
        log("worker " + std::to_string(a.worker) + " " + a.text + "; starting a new one");
        if (a.fault) ++stats.worker_restarts;  // else the mechanism's own cost (Note [Fresh processes])
        start_worker(a.worker);
        std::int64_t starting = 0;
        for (const auto& other : workers) starting += policy->worker_state(other.id) == WorkerState::Starting ? 1 : 0;
        stats.most_replacements_starting = std::max(stats.most_replacements_starting, starting);
        return;
      }
      case A::KillWorker:
        kill_worker(workers[static_cast<std::size_t>(a.worker)]);
        log("worker " + std::to_string(a.worker) + " " + a.text);
        return;
      case A::Log: log(a.text); return;
    }
  }

  void dispatch_request(std::uint64_t request, int id, bool transfer) {
    const std::shared_ptr<Pending> p = pending.at(request);
    Worker& w = workers[static_cast<std::size_t>(id)];
    const std::int64_t dequeued_ns = monotonic_ns();
    const TensorData& input = *p->input;
    const IoLayout io{options.config.max_tensor_bytes};
    const std::string_view input_bytes = input.contents();
    // Note [Inputs read in place]: an input in a registered region is the worker's to read.
    const SharedRegionHandle* region = input.is_borrowed() ? input.borrowed.region : nullptr;
    bool input_ok = true;
    if (region != nullptr) {
      note_region(input.borrowed);
      p->copied_ns = dequeued_ns;  // nothing copied: the check below is the message's time (ToWorker)
      const auto end = region->object_offset + static_cast<std::uint64_t>(input.borrowed.data - region->data) +
                       input.borrowed.size;
      struct stat object {};
      input_ok = ::fstat(region->fd, &object) == 0 && static_cast<std::uint64_t>(object.st_size) >= end;
    } else {
      // Straight from the request, or from the client's shared memory, which its owner can shrink
      // under the copy (shared_memory.hpp: copy_guarded).
      input_ok = copy_guarded(w.io.data() + io.input_offset(), input_bytes.data(), input_bytes.size());
      p->copied_ns = monotonic_ns();
    }
    record_phase(*p, RequestPhase::Queue, dequeued_ns - p->arrival_ns);
    record_phase(*p, RequestPhase::InputCopy, p->copied_ns - dequeued_ns);
    if (!input_ok) {
      PolicyEvent aborted{.kind = PolicyEvent::Kind::DispatchAborted, .worker = id, .request = request};
      aborted.code = StatusCode::InvalidArgument;
      aborted.text = "the input's shared memory object shrank while the request waited";
      feed(std::move(aborted));
      return;
    }
    Message m;
    m.type = MessageType::Infer;
    m.worker = static_cast<std::uint32_t>(id);
    m.request = p->id;
    m.model = p->model;
    m.dtype = static_cast<std::int32_t>(p->type);
    m.rank = static_cast<std::uint32_t>(input.shape.size());
    for (std::size_t d = 0; d < input.shape.size(); ++d) m.shape[d] = input.shape[d];
    m.bytes = static_cast<std::int64_t>(input_bytes.size());
    if (region != nullptr) {
      m.flags |= kFlagInputInRegion;
      m.value = static_cast<std::int64_t>(region->id);
      m.value2 = input.borrowed.data - region->data;
      ++stats.inputs_read_in_place;
    }
    if (const BorrowedBytes* target = output_target(*p); target != nullptr && target->region != nullptr) {
      note_region(*target);  // Note [Outputs written in place]: mapped as an input's region is
      m.flags |= kFlagOutputInRegion;
      m.output_region = target->region->id;
      m.output_offset = target->data - target->region->data;
      m.output_capacity = static_cast<std::int64_t>(target->size);
    }
    if (transfer) {
      m.flags |= kFlagTransfer;
      ++stats.transfers;
    }
    if (p->max_tokens > 0) {  // Note [Generate call]: the prompt is the controller's own bytes, never a region's
      m.flags |= kFlagGenerate;
      m.value = p->max_tokens;
    }
    if (last_worker != id) ++stats.worker_switches;
    last_worker = id;
    w.busy_since_ns = monotonic_ns();
    p->dispatch_ns = monotonic_ns();
    p->transfer = transfer;
    try {
      update_models(w);  // the worker handles these before the Infer, in order
      update_mapped_regions(w);
      send_message(w.socket.get(), m);
    } catch (const Error&) {
      lost(id, ServiceError::Code::Unavailable, "could not be reached");
    }
  }

  // Where the client wants a request's answer in its shared memory (its first output, the one
  // a model answers with), or null. Not for a generate call, whose ids the controller collects.
  static const BorrowedBytes* output_target(const Pending& p) {
    if (p.max_tokens > 0 || p.stream) return nullptr;
    for (const auto& d : p.output_destinations) {
      if (d.name == p.served->info.outputs.front().name) return &d.destination;
    }
    return nullptr;
  }

  // Note [Inputs read in place]. With the mutex held, as everything below.
  void note_region(const BorrowedBytes& borrowed) {
    const SharedRegionHandle& r = *borrowed.region;
    if (input_regions.count(r.id) != 0) return;
    input_regions.emplace(r.id, InputRegion{borrowed.owner, r.fd, r.object_offset, r.byte_size});
  }

  // Forgets the regions that are gone: the registry dropped them and no request reads them.
  void forget_gone_regions() {
    std::erase_if(input_regions, [](const auto& entry) { return entry.second.owner.expired(); });
  }

  // Brings what worker `w` maps up to date with input_regions: Unmap what is gone, then Map
  // what is new. Only for a worker that reads its socket (never one training or paused in
  // place, which would take the message for the controller gone). Throws Error when the worker
  // cannot be reached.
  void update_mapped_regions(Worker& w) {
    for (auto it = w.mapped_regions.begin(); it != w.mapped_regions.end();) {
      if (input_regions.count(*it) != 0) {
        ++it;
        continue;
      }
      Message unmap;
      unmap.type = MessageType::UnmapInput;
      unmap.worker = static_cast<std::uint32_t>(w.id);
      unmap.value = static_cast<std::int64_t>(*it);
      send_message(w.socket.get(), unmap);
      ++stats.region_unmaps;
      it = w.mapped_regions.erase(it);
    }
    for (const auto& [region_id, r] : input_regions) {
      if (w.mapped_regions.count(region_id) != 0) continue;
      const std::shared_ptr<void> alive = r.owner.lock();  // keeps `fd` open while it is sent
      if (!alive) continue;  // gone since; forgotten at the next pass
      Message map;
      map.type = MessageType::MapInput;
      map.worker = static_cast<std::uint32_t>(w.id);
      map.value = static_cast<std::int64_t>(region_id);
      map.value2 = static_cast<std::int64_t>(r.object_offset);
      map.bytes = static_cast<std::int64_t>(r.byte_size);
      send_message(w.socket.get(), map, {r.fd});
      ++stats.region_maps;
      w.mapped_regions.insert(region_id);
    }
  }

  // Off the critical path: a worker on standby maps new regions (page-locking them takes time)
  // before a request needs them, and unmaps the gone ones; it binds models loaded and drops
  // those unloaded (a training worker only drops: Note [Repository load]).
  void update_standby_workers() {
    forget_gone_regions();
    for (auto& w : workers) {
      const WorkerState state = policy->worker_state(w.id);
      if (state == WorkerState::Training || state == WorkerState::Paused) {
        try {
          update_models(w, /*drops_only=*/true);
        } catch (const Error&) {
          lost(w.id, ServiceError::Code::Unavailable, "could not be reached");
        }
      }
      if (state != WorkerState::Standby) continue;
      try {
        update_models(w);
        update_mapped_regions(w);
      } catch (const Error&) {
        lost(w.id, ServiceError::Code::Unavailable, "could not be reached");
      }
    }
  }

  // A job paused in place goes on where it stopped (Note [Preemption without loss]).
  void resume_paused_training(int id) {
    Worker& w = workers[static_cast<std::size_t>(id)];
    if (last_worker != id) ++stats.worker_switches;
    last_worker = id;
    w.busy_since_ns = monotonic_ns();
    end_hold(w.busy_since_ns);
    // Note [Pause and resume] (ipc.hpp): counted first, so that a stop for the next request
    // cannot hide this resume from the worker.
    WorkerControl& own = control_of(id);
    own.resumes.fetch_add(1, std::memory_order_release);
    own.stop.store(kStopNone, std::memory_order_release);
    if (paused_since_ns > 0) add_span({"paused in place", "training", paused_since_ns, w.busy_since_ns, ""});
    paused_since_ns = 0;
  }

  // The job runs on worker `id` from its last completed step (Note [Training state]).
  void start_training_on(int id) {
    Worker& w = workers[static_cast<std::size_t>(id)];
    control_of(id).stop.store(kStopNone);
    Message m;
    m.type = MessageType::Train;
    m.worker = static_cast<std::uint32_t>(id);
    m.value = training_target;
    if (last_worker != id) ++stats.worker_switches;
    last_worker = id;
    w.busy_since_ns = monotonic_ns();
    end_hold(w.busy_since_ns);
    try {
      update_models(w);  // before the job, which reads nothing on its socket until it stops
      send_message(w.socket.get(), m);
    } catch (const Error&) {
      lost(id, ServiceError::Code::Unavailable, "could not be reached");
    }
  }

  // A worker said Ready (at start-up, or with the mutex held): its start logged and counted by
  // phase (Note [Worker start]).
  void worker_ready(Worker& w, const Message& ready) {
    std::string line = "worker " + std::to_string(w.id) + " ready (pid " + std::to_string(w.pid) + ") ";
    if (const std::optional<WorkerStartSplit> split = split_worker_start(w.spawned_ns, ready.times)) {
      ++stats.worker_starts;
      for (std::size_t i = 0; i < kWorkerStartPhases; ++i) stats.worker_start_ns[i] += (*split)[i];
      line += describe_worker_start(*split);
    } else {
      line += "(its start's times are out of order: not counted in psw_worker_start_seconds_total)";
    }
    log(line);
    feed(PolicyEvent{.kind = PolicyEvent::Kind::WorkerReady, .worker = w.id});
  }

  // The policy completes request `request` from worker `id`'s reply (Worker::reply).
  void complete_request(std::uint64_t request, int id) {
    const auto it = pending.find(request);
    if (it == pending.end()) return;
    const std::shared_ptr<Pending> p = it->second;
    pending.erase(it);
    const Worker& w = workers[static_cast<std::size_t>(id)];
    const Message& m = w.reply;
    InferResponse response;
    response.model = p->model_name;
    response.version = p->version.empty() ? "1" : p->version;
    response.id = p->request_id;
    TensorData out;
    out.name = p->stream ? "output_ids" : p->served->info.outputs.front().name;
    out.datatype = datatype_name(static_cast<ElementType>(m.dtype));
    out.shape.assign(m.shape, m.shape + m.rank);
    const IoLayout io{options.config.max_tensor_bytes};
    const char* produced = reinterpret_cast<const char*>(w.io.data() + io.output_offset());
    // Into the client's shared memory when it asked for that and it fits (else the front end
    // says why): there already (Note [Outputs written in place]), or copied from the io segment.
    const BorrowedBytes* target = output_target(*p);
    if (target != nullptr && (m.flags & kFlagOutputInRegion) != 0) {
      out.borrowed = BorrowedBytes{target->owner, target->data, static_cast<std::size_t>(m.bytes)};
      ++stats.outputs_written_in_place;
    } else if (target != nullptr && static_cast<std::size_t>(m.bytes) <= target->size &&
               copy_guarded(target->data, produced, static_cast<std::size_t>(m.bytes))) {
      out.borrowed = BorrowedBytes{target->owner, target->data, static_cast<std::size_t>(m.bytes)};
    } else {
      out.bytes.assign(produced, static_cast<std::size_t>(m.bytes));
    }
    response.outputs.push_back(std::move(out));
    const double latency_s = static_cast<double>(monotonic_ns() - p->arrival_ns) * 1e-9;
    std::size_t b = 0;
    while (b < std::size(kLatencyBuckets) && latency_s > kLatencyBuckets[b]) ++b;
    ++latency_bucket_counts[b];
    latency_sum_s += latency_s;
    ++latency_count;
    // Arrival at the controller to the first layer computing: the wait for the worker,
    // plus the device's own startup of the switch (times[2], from its events).
    const std::int64_t startup = m.times[0] - p->arrival_ns + m.times[2];
    const std::int64_t now = monotonic_ns();
    record_sample(stats.startup_ns, startup);
    record_sample(stats.latency_ns, now - p->arrival_ns);
    ControllerStats::ModelSamples& of_model = stats.by_model[p->model_name];
    record_sample(of_model.startup_ns, startup);
    record_sample(of_model.latency_ns, now - p->arrival_ns);
    // Note [Request phases]: the worker's times are its receipt (times[0], host clock), its
    // reply (times[1]) and, from its device's marks, receipt to first layer (times[2]), to
    // the input on the device (times[3]) and to the forward's end (times[4]).
    auto phase = [this, &p](RequestPhase k, std::int64_t ns) { record_phase(*p, k, ns); };
    phase(RequestPhase::ToWorker, m.times[0] - p->copied_ns);
    phase(RequestPhase::InputToDevice, m.times[3]);
    if (!p->stream) phase(RequestPhase::InputLaunch, m.times[7]);  // a generate call's [7] is its bucket
    phase(RequestPhase::DeviceStartup, m.times[2]);
    phase(RequestPhase::Compute, m.times[4] - m.times[2]);
    // A generate call's decode is not an output's copy: its phases end with the prefill.
    if (!p->stream) phase(RequestPhase::Output, m.times[1] - m.times[0] - m.times[4]);
    phase(RequestPhase::Reply, now - m.times[1]);
    const std::string what = p->model_name + (p->transfer ? " (switch)" : " (resident)");
    const std::string track = "worker " + std::to_string(id);
    add_span({"queue " + p->model_name, "controller", p->arrival_ns, p->dispatch_ns, "request " + p->request_id});
    add_span({"to worker", track, p->dispatch_ns, m.times[0], ""});
    add_span({"startup " + what, track, m.times[0], m.times[0] + m.times[2],
              "until the first layer computes (the input's copy to the device included)"});
    if (p->stream) {
      add_span({"prefill " + what, track, m.times[0] + m.times[2], m.value, "the prompt, to the first token"});
      add_span({"decode " + p->model_name, track, m.value, m.times[1], std::to_string(m.shape[1]) + " tokens"});
    } else {
      add_span({"run " + what, track, m.times[0] + m.times[2], m.times[1], ""});
    }
    add_span({"reply", "controller", m.times[1], now, ""});
    ++requests_by_model_code[p->model_name + "\x1f" + "ok"];
    // Note [Request path] (serving_profile.hpp): the server's and the engine's part of it.
    response.server_ns = now - p->arrival_ns;
    response.engine_ns = m.times[4] - m.times[3];
    // Note [Host time of an eager switch]: the worker's times[5] and [6], zero unless the
    // switch ran eagerly.
    if (p->transfer && (m.times[5] > 0 || m.times[6] > 0)) {
      ControllerStats::EagerSwitchHost& host = stats.eager_switch_host[p->model_name];
      ++host.switches;
      host.prepare_ns += m.times[5];
      host.forward_ns += m.times[6];
    }
    if (p->stream) {
      p->first_token_ns = m.value;
      p->last_token_ns = m.value2;
      p->prompt_bucket = m.times[7];
      p->worker = id;
    }
    p->reply.set_value(std::move(response));
    if (p->stream) p->stream->finish();
  }

  void on_message(int id, const Message& m) {  // with the mutex held
    Worker& w = workers[static_cast<std::size_t>(id)];
    switch (m.type) {
      case MessageType::Hello: return;
      case MessageType::Ready: {
        worker_ready(w, m);
        all_ready = policy->all_workers_ready();
        return;
      }
      case MessageType::InferDone:
      case MessageType::Failed: {
        w.reply = m;
        PolicyEvent e{.kind = PolicyEvent::Kind::WorkerFinished, .worker = id, .request = m.request};
        e.ok = m.type == MessageType::InferDone;
        if (!e.ok) {
          e.code = status_code(code_of(m.value));
          e.text = m.get_text();
        }
        feed(std::move(e));
        return;
      }
      case MessageType::TrainStopped: {
        PolicyEvent e{.kind = PolicyEvent::Kind::TrainingStopped, .worker = id};
        e.steps = std::max<std::int64_t>(0, m.value);
        if (m.value2 == kTrainReachedTarget) {
          e.stop = TrainingStop::ReachedTarget;
        } else if (m.value2 == kTrainAbandoned) {
          e.stop = TrainingStop::Abandoned;
        } else if (m.value2 == kTrainPaused) {
          e.stop = TrainingStop::Paused;
        } else {
          lost(id, ServiceError::Code::Internal, "sent a TrainStopped message of unknown kind " + std::to_string(m.value2));
          return;
        }
        if (policy->training_stopping() && e.stop != TrainingStop::ReachedTarget && stop_requested_for_arrival_ns > 0) {
          ++stats.preemptions;
          if (e.stop == TrainingStop::Abandoned) ++stats.preemptions_abandoning_step;
          record_sample(stats.preemption_ns, m.times[1] - stop_requested_for_arrival_ns);
          record_preemption_split(m);
          held_since_ns = m.times[1];
        }
        if (stop_requested_for_arrival_ns > 0 && e.stop != TrainingStop::ReachedTarget) {
          add_span({"stopping training", "training", stop_requested_for_arrival_ns, m.times[1],
                    "request arrival to training stopped at a layer boundary"});
        }
        if (e.stop == TrainingStop::Paused) paused_since_ns = m.times[1];  // waits in place until resumed
        stop_requested_for_arrival_ns = 0;
        feed(std::move(e));
        return;
      }
      case MessageType::Token: {
        // Note [Generate call]: progress, so the watchdog's time restarts with every token.
        w.busy_since_ns = monotonic_ns();
        const auto it = pending.find(m.request);
        if (it != pending.end() && it->second->stream) it->second->stream->push({m.value2, m.value});
        return;
      }
      case MessageType::CleanupDone:
        feed(PolicyEvent{.kind = PolicyEvent::Kind::WorkerCleanedUp, .worker = id});
        return;
      case MessageType::ModelBound: {  // Note [Repository load]
        if (m.model < 0 || static_cast<std::size_t>(m.model) >= slots.size()) return;
        ModelSlot& slot = slots[static_cast<std::size_t>(m.model)];
        if (static_cast<std::size_t>(m.model) < w.holds.size() && w.holds[static_cast<std::size_t>(m.model)] != 0) {
          w.holds[static_cast<std::size_t>(m.model)] = 1;
        }
        if (m.value != 0) {
          log(detail::concat("worker ", id, " could not bind model '", slot.served->entry.name, "': ", m.get_text()));
          if (slot.phase == ModelSlot::Phase::Loading && slot.bind_error.empty()) {
            slot.bind_error = detail::concat("worker ", id, ": ", m.get_text());
          }
        }
        if (slot.phase == ModelSlot::Phase::Loading && slot.binds_pending > 0) --slot.binds_pending;
        slots_changed.notify_all();
        return;
      }
      case MessageType::ModelDropped:
        if (m.model >= 0 && static_cast<std::size_t>(m.model) < slots.size()) release_hold(static_cast<std::size_t>(m.model));
        return;
      default:
        log(std::string("worker sent an unexpected ") + to_string(m.type) + " message");
    }
  }

  // A timer, turned into events: a worker that owes an answer for longer than the config's
  // request_timeout, or that has not started within 600 s, is lost (Note [Faults]).
  void watchdog() {  // with the mutex held
    const std::int64_t now = monotonic_ns();
    const std::int64_t limit = options.config.request_timeout.ns();
    for (auto& w : workers) {
      if (policy->awaiting_answer(w.id) && now - w.busy_since_ns > limit) {
        lost(w.id, ServiceError::Code::DeadlineExceeded, "did not answer within " + std::to_string(limit / 1'000'000) + " ms");
      } else if (policy->worker_state(w.id) == WorkerState::Starting && now - w.busy_since_ns > 600'000'000'000) {
        lost(w.id, ServiceError::Code::Unavailable, "did not start within 600 s");
      }
    }
  }

  // The server stops: the policy answers everything waiting with `why` and stops the job.
  void stop_serving(const std::string& why) {  // with the mutex held
    stopping = true;
    PolicyEvent bye{.kind = PolicyEvent::Kind::Shutdown};
    bye.text = why;
    feed(std::move(bye));
    for (auto& [id, p] : pending) fail(p, ServiceError::Code::Unavailable, why);  // none should be left
    pending.clear();
    slots_changed.notify_all();  // a load waiting for its binds answers (Note [Repository load])
  }

  // With the mutex held, the daemon's socket readable: true when it carried the answer to the
  // checkpoint in flight (handed to its caller), false when the daemon has gone (or sent
  // something else, which is as fatal).
  bool daemon_answered() {
    if (!daemon_answer) return false;
    std::optional<Message> m;
    std::vector<UniqueFd> fds;
    try {
      m = receive_message(daemon_socket.get(), &fds, 0);
    } catch (const Error&) {
      return false;
    }
    if (!m || (m->type != MessageType::CheckpointDone && m->type != MessageType::ModelStored &&
               m->type != MessageType::Failed)) {
      return false;
    }
    daemon_answer->set_value(DaemonAnswer{*m, std::move(fds)});
    daemon_answer.reset();
    return true;
  }

  void loop() {
    while (true) {
      std::vector<pollfd> fds;
      fds.push_back({wakeup.get(), POLLIN, 0});
      fds.push_back({daemon_socket.get(), POLLIN, 0});
      std::vector<int> ids;
      std::vector<std::uint64_t> processes;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stopping) return;
        for (const auto& w : workers) {
          if (w.socket) {
            fds.push_back({w.socket.get(), POLLIN, 0});
            ids.push_back(w.id);
            processes.push_back(w.process);
          }
        }
      }
      const int ready_count = ::poll(fds.data(), fds.size(), 50);
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return;
      if (ready_count > 0) {
        if ((fds[0].revents & POLLIN) != 0) {
          std::uint64_t n;
          [[maybe_unused]] const ssize_t r = ::read(wakeup.get(), &n, sizeof n);
        }
        if ((fds[1].revents & (POLLIN | POLLHUP)) != 0 && daemon_answered()) {
          // A checkpoint's answer (Note [Training checkpoint]), not the daemon's end.
        } else if ((fds[1].revents & (POLLIN | POLLHUP)) != 0) {
          if (daemon_answer) {
            daemon_answer->set_exception(std::make_exception_ptr(
                ServiceError(ServiceError::Code::Unavailable, "the memory daemon exited before it answered (a checkpoint or a load)")));
            daemon_answer.reset();
          }
          log("the memory daemon exited; the server cannot go on");
          failure = "the memory daemon exited";
          all_ready = false;
          stop_serving("the memory daemon exited");
          // Wakes `psw serve`'s main thread, which waits for SIGTERM (server.cpp), so that the
          // server stops instead of answering UNAVAILABLE forever.
          ::kill(::getpid(), SIGTERM);
          return;
        }
        for (std::size_t k = 2; k < fds.size(); ++k) {
          if (fds[k].revents == 0) continue;
          const int id = ids[k - 2];
          // Note [Replaced while polled]: a worker replaced while this thread polled without the
          // lock (a request's thread restarted it) has a new socket, often under the number of
          // the one closed; what poll said was about the old process, which is gone. Read as the
          // new one's, its silence (no message yet) once looked like an exit, and the new worker
          // was replaced as a fault (a CI run of stop-and-start, 2026-12-05).
          const Worker& polled = workers[static_cast<std::size_t>(id)];
          if (polled.socket.get() != fds[k].fd || polled.process != processes[k - 2]) continue;
          std::optional<Message> m;
          try {
            m = receive_message(workers[static_cast<std::size_t>(id)].socket.get(), nullptr, 0);
          } catch (const Error&) {
            m.reset();
          }
          if (!m) {
            lost(id, ServiceError::Code::Unavailable, "exited");
          } else {
            on_message(id, *m);
          }
        }
      }
      watchdog();
      update_standby_workers();
    }
  }
};

Controller::Controller(ControllerOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  const ServeConfig& config = s.options.config;
  if (config.workers > static_cast<int>(kMaxWorkers)) throw InputError("at most 16 workers");
  // One process: training and inference take turns in one worker, which swaps models in and out
  // (one group, fresh allocations: the mechanism table); a request abandons the training's step.
  if (traits(config.mechanism).process == ProcessModel::OneProcess && config.workers != 1) {
    throw InputError(config.path.string() + ": mechanism 'one-process' runs every task in one worker: set workers: 1");
  }
  if (traits(config.mechanism).process == ProcessModel::SharedContext && config.training && config.workers < 2) {
    throw InputError(config.path.string() + ": mechanism '" + to_string(config.mechanism) +
                     "' runs inference beside the training job, in another worker: it needs workers: 2 or more");
  }
  s.wakeup = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s.wakeup) throw Error("eventfd failed");
  // Before any process starts: a log that cannot be written is the user's error, said at once.
  if (!s.options.decisions.empty()) {
    s.decisions.open(s.options.decisions, std::ios::out | std::ios::trunc);
    if (!s.decisions) {
      throw InputError("--decisions " + s.options.decisions.string() + ": cannot write it (" + std::strerror(errno) + ")");
    }
  }
  s.log("starting the memory daemon");
  s.start_daemon();
  std::vector<Bytes> model_bytes;  // the packed parameters of the serve config's models (the daemon's)
  for (const auto& slot : s.slots) model_bytes.push_back(slot.region.message.value);
  s.policy.emplace(policy_config(config, std::move(model_bytes)));
  if (s.decisions.is_open()) {
    s.decisions << decision_header_line(s.policy->config());
    s.decisions.flush();
  }
  s.control = SharedSegment::create("control", sizeof(WorkerControl) * kMaxWorkers);
  s.workers.resize(static_cast<std::size_t>(config.workers));
  for (int id = 0; id < config.workers; ++id) {
    s.workers[static_cast<std::size_t>(id)].id = id;
    s.workers[static_cast<std::size_t>(id)].io =
        SharedSegment::create("io-" + std::to_string(id), static_cast<std::size_t>(IoLayout{config.max_tensor_bytes}.total()));
  }
  s.log("starting " + std::to_string(config.workers) + " workers");
  for (int id = 0; id < config.workers; ++id) s.start_worker(id);
  // Init part 1 of every worker before the first request: wait for every Ready.
  for (auto& w : s.workers) {
    const Message m = s.expect(w.socket.get(), MessageType::Hello, "worker " + std::to_string(w.id), 60'000);
    (void)m;
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& w : s.workers) {
      s.worker_ready(w, s.expect(w.socket.get(), MessageType::Ready, "worker " + std::to_string(w.id), 600'000));
    }
    s.all_ready = true;
    // Mapped now, while every worker is on standby: the one about to train would otherwise map
    // them only with its first request.
    for (const BorrowedBytes& region : s.options.regions) {
      if (region.region != nullptr && region.owner != nullptr) s.note_region(region);
    }
    s.options.regions.clear();  // the controller keeps regions alive by its requests only
    for (auto& w : s.workers) s.update_mapped_regions(w);
    if (config.training && config.training->autostart) {
      s.feed(PolicyEvent{.kind = PolicyEvent::Kind::TrainingStartRequested});
    }
  }
  s.log("ready");
  s.scheduler = std::thread([&s] { s.loop(); });
}

Controller::~Controller() { shutdown(); }

void Controller::stop_serving(const std::string& why) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping) return;
    if (s.policy && s.control.data() != nullptr) s.stop_serving(why);
    s.stopping = true;
  }
  s.wake();
}

void Controller::shutdown() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping && !s.scheduler.joinable() && s.daemon_pid < 0) return;
    // Once: stop_serving() (or the daemon's death) may have answered everything already.
    const bool serving = !s.stopping;
    s.stopping = true;
    // A training worker (running or paused) abandons its step at its next layer boundary.
    if (serving && s.policy && s.control.data() != nullptr) s.stop_serving("the server is shutting down");
  }
  s.wake();
  if (s.scheduler.joinable()) s.scheduler.join();
  std::vector<pid_t> pids;
  Message bye;
  bye.type = MessageType::Shutdown;
  for (auto& w : s.workers) {
    if (w.socket) {
      try {
        send_message(w.socket.get(), bye);
      } catch (const Error&) {
      }
    }
    if (w.pid > 0) pids.push_back(w.pid);
    w.pid = -1;
  }
  // Up to 5 s to exit, then SIGKILL.
  const auto reap = [](const std::vector<pid_t>& processes) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    for (pid_t pid : processes) {
      int status = 0;
      while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
          ::kill(pid, SIGKILL);
          ::waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  };
  reap(pids);
  // Note [Training checkpoint]: with the workers gone the state is still, and the daemon writes
  // it where the config says (the scheduler's loop has ended: its answer is read here).
  const std::optional<TrainingJobConfig>& job = s.options.config.training;
  if (job && !job->checkpoint.empty() && s.daemon_socket && s.failure.empty()) {
    Message m;
    m.type = MessageType::Checkpoint;
    m.set_text(std::filesystem::absolute(job->checkpoint).lexically_normal().string());
    try {
      send_message(s.daemon_socket.get(), m);
      const std::optional<Message> answer = receive_message(s.daemon_socket.get(), nullptr, 600'000);
      if (answer && answer->type == MessageType::CheckpointDone) {
        s.log(detail::concat("training checkpoint at step ", answer->value, ": ", m.get_text()));
      } else {
        s.log("the training checkpoint failed: " + (answer ? answer->get_text() : std::string("the daemon exited")));
      }
    } catch (const Error& e) {
      s.log(std::string("the training checkpoint failed: ") + e.what());
    }
  }
  if (s.daemon_socket) {
    try {
      send_message(s.daemon_socket.get(), bye);
    } catch (const Error&) {
    }
  }
  if (s.daemon_pid > 0) reap({s.daemon_pid});
  s.daemon_pid = -1;
}

bool Controller::live() { return true; }

bool Controller::ready() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->all_ready && !state_->stopping;
}

std::vector<ModelInfo> Controller::models() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  const bool ok = s.all_ready && !s.stopping;
  std::vector<ModelInfo> infos;
  for (const auto& slot : s.slots) {
    if (slot.phase == State::ModelSlot::Phase::Unloaded) continue;
    infos.push_back(slot.served->info);
    infos.back().ready = ok && slot.phase == State::ModelSlot::Phase::Ready;
  }
  return infos;
}

namespace {

// Every token id of a request in [0, bound) (token_id_bound). Read through copy_guarded: the
// bytes may be a client's shared memory, which its owner can shrink under the read.
void check_token_ids(const std::string& model, const std::string& input, std::string_view bytes, std::int64_t bound) {
  std::vector<std::int64_t> ids(bytes.size() / sizeof(std::int64_t));
  if (!copy_guarded(ids.data(), bytes.data(), ids.size() * sizeof(std::int64_t))) {
    throw ServiceError(ServiceError::Code::InvalidArgument, "the input's shared memory object shrank while the request was read");
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= bound) {
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         detail::concat(model, "'s input '", input, "' holds token id ", ids[i], " at element ", i,
                                        ": ids must lie in [0, ", bound, ")"));
    }
  }
}

}  // namespace

InferResponse Controller::infer(const InferRequest& request) {
  State& s = *state_;
  const std::shared_ptr<Pending> p = s.arrived(request.model);
  if (!request.version.empty() && request.version != "1") {
    throw ServiceError(ServiceError::Code::NotFound,
                       "model '" + request.model + "' has only version 1, not '" + request.version + "'");
  }
  const ModelInfo& info = p->served->info;
  // Inputs by name (the protocol's): an input the model does not have, and one it has that the
  // request lacks, are refused naming it.
  const auto described = [](const TensorSpec& t) {
    std::string shape;
    for (const std::int64_t d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return "'" + t.name + "' (" + t.datatype + " [" + shape + "])";
  };
  for (const TensorData& given : request.inputs) {
    const bool known = std::any_of(info.inputs.begin(), info.inputs.end(),
                                   [&](const TensorSpec& t) { return t.name == given.name; });
    if (!known) {
      std::string takes;
      for (const TensorSpec& t : info.inputs) takes += (takes.empty() ? "" : ", ") + described(t);
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         request.model + " has no input '" + given.name + "'; it takes " + takes);
    }
  }
  for (const TensorSpec& wanted : info.inputs) {
    const bool given = std::any_of(request.inputs.begin(), request.inputs.end(),
                                   [&](const TensorData& t) { return t.name == wanted.name; });
    if (!given) {
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         request.model + "'s input " + described(wanted) + " is missing from the request");
    }
  }
  if (request.inputs.size() != info.inputs.size()) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       detail::concat(request.model, " takes ", info.inputs.size(), " input", info.inputs.size() == 1 ? "" : "s",
                                      ", got ", request.inputs.size()));
  }
  // Each input against its spec, in the model's order.
  const ServedModelConfig& served = p->served->entry;
  std::vector<const TensorData*> ordered;
  for (const TensorSpec& spec : info.inputs) {
    const TensorData& input =
        *std::find_if(request.inputs.begin(), request.inputs.end(), [&](const TensorData& t) { return t.name == spec.name; });
    ordered.push_back(&input);
    const std::string dimension = info.inputs.size() == 1 ? "input" : "input '" + spec.name + "'";
    if (input.datatype != spec.datatype) {
      throw ServiceError(ServiceError::Code::InvalidArgument, request.model + "'s input '" + spec.name + "' is " +
                                                                  spec.datatype + ", got " + input.datatype);
    }
    if (input.shape.size() != spec.shape.size()) {
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         detail::concat(request.model, "'s input '", spec.name, "' has rank ", spec.shape.size(),
                                        ", got a tensor of rank ", input.shape.size()));
    }
    for (std::size_t d = 0; d < spec.shape.size(); ++d) {
      if (spec.shape[d] >= 0 && input.shape[d] != spec.shape[d]) {
        throw ServiceError(ServiceError::Code::InvalidArgument,
                           detail::concat(request.model, "'s ", dimension, " dimension ", d, " must be ", spec.shape[d], ", got ",
                                          input.shape[d]));
      }
      if (input.shape[d] <= 0) {
        throw ServiceError(ServiceError::Code::InvalidArgument,
                           detail::concat(request.model, "'s ", dimension, " dimension ", d, " must be positive, got ", input.shape[d]));
      }
    }
    if (static_cast<std::int64_t>(input.contents().size()) > s.options.config.max_tensor_bytes) {
      throw ServiceError(ServiceError::Code::ResourceExhausted,
                         detail::concat("the input of ", input.contents().size(), " bytes exceeds the server's max_tensor_bytes ",
                                        s.options.config.max_tensor_bytes));
    }
    if (const std::int64_t bound = token_id_bound(served, ordered.size() - 1); bound > 0) {
      check_token_ids(request.model, spec.name, input.contents(), bound);
    }
    if (ordered.size() > 1 && input.shape[0] != ordered.front()->shape[0]) {
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         detail::concat(request.model, "'s input '", spec.name, "' has batch ", input.shape[0], ", '",
                                        info.inputs.front().name, "' ", ordered.front()->shape[0],
                                        ": every input has the same batch"));
    }
  }
  // Note [Several inputs] (exec/torchscript.hpp): a model of several takes them packed into one
  // byte tensor, row b holding every input's sample b in order; made here, on the request's thread.
  TensorData packed;
  if (ordered.size() > 1) {
    const std::int64_t batch = ordered.front()->shape[0];
    std::vector<std::int64_t> samples;  // each input's bytes per sample
    std::int64_t row = 0;
    for (const TensorData* t : ordered) {
      PSW_CHECK(static_cast<std::int64_t>(t->contents().size()) % batch == 0, "input '", t->name, "' of ",
                t->contents().size(), " bytes is not ", batch, " samples (the front end checks the bytes against the shape)");
      samples.push_back(static_cast<std::int64_t>(t->contents().size()) / batch);
      row += samples.back();
    }
    packed.name = "packed";
    packed.datatype = "UINT8";
    packed.shape = {batch, row};
    packed.bytes.resize(static_cast<std::size_t>(batch * row));
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      const TensorData* t = ordered[i];
      const std::int64_t sample = samples[i];
      for (std::int64_t b = 0; b < batch; ++b) {
        if (!copy_guarded(packed.bytes.data() + b * row + offset, t->contents().data() + b * sample,
                          static_cast<std::size_t>(sample))) {
          throw ServiceError(ServiceError::Code::InvalidArgument,
                             "the input's shared memory object shrank while the request was read");
        }
      }
      offset += sample;
    }
  }
  if (static_cast<std::int64_t>(packed.bytes.size()) > s.options.config.max_tensor_bytes) {
    throw ServiceError(ServiceError::Code::ResourceExhausted,
                       detail::concat("the model's ", ordered.size(), " inputs take ", packed.bytes.size(),
                                      " bytes together, more than the server's max_tensor_bytes ",
                                      s.options.config.max_tensor_bytes));
  }
  const TensorData& input = ordered.size() > 1 ? packed : *ordered.front();
  p->type = *element_type_of(input.datatype);
  p->model_name = request.model;
  p->version = request.version;
  p->request_id = request.id;
  p->input = &input;
  p->input_lease = input.borrowed.lease;
  p->output_destinations = request.output_destinations;
  return s.queue_and_wait(p, request.deadline, request.cancelled, request.model, nullptr);
}

GenerateResponse Controller::generate(const GenerateRequest& request, const TokenSink& on_token) {
  State& s = *state_;
  const std::shared_ptr<Pending> p = s.arrived(request.model);
  const ServedModelConfig& served = p->served->entry;
  if (!served.decoder) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       "model '" + request.model + "' is not a decoder: it does not generate (POST /v2/models/" +
                           request.model + "/infer serves it)");
  }
  const std::int64_t length = static_cast<std::int64_t>(request.input_ids.size());
  const std::int64_t context = served.decoder->max_positions;
  const auto invalid = [](const std::string& why) { throw ServiceError(ServiceError::Code::InvalidArgument, why); };
  if (length == 0) invalid("the prompt is empty: give input_ids, at least one token id");
  if (length > served.prompt_buckets.back()) {
    invalid(detail::concat("a prompt of ", length, " tokens is longer than ", request.model, "'s longest, ",
                           served.prompt_buckets.back(), " (its context of ", context, " positions less one)"));
  }
  if (request.max_tokens < 1) invalid(detail::concat("max_tokens must be at least 1, not ", request.max_tokens));
  if (request.max_tokens > context - length) {
    invalid(detail::concat("the prompt's ", length, " tokens and max_tokens ", request.max_tokens, " exceed ",
                           request.model, "'s context of ", context, " positions (max_tokens at most ",
                           context - length, " for this prompt)"));
  }
  const std::int64_t vocabulary = served.decoder->vocabulary;
  for (std::int64_t i = 0; i < length; ++i) {
    const std::int64_t id = request.input_ids[static_cast<std::size_t>(i)];
    if (id < 0 || id >= vocabulary) {
      invalid(detail::concat("input_ids[", i, "] is ", id, ", outside ", request.model, "'s vocabulary [0, ", vocabulary,
                             ")"));
    }
  }
  const auto out_bytes = static_cast<std::int64_t>(sizeof(std::int64_t)) * std::max(length, request.max_tokens);
  if (out_bytes > s.options.config.max_tensor_bytes) {
    throw ServiceError(ServiceError::Code::ResourceExhausted,
                       detail::concat("the prompt or the tokens to generate take ", out_bytes,
                                      " bytes, more than the server's max_tensor_bytes ", s.options.config.max_tensor_bytes));
  }
  // The prompt as an INT64 1 x L tensor in the worker's io segment, as an inference input.
  TensorData prompt;
  prompt.name = "input_ids";
  prompt.datatype = "INT64";
  prompt.shape = {1, length};
  prompt.bytes.assign(reinterpret_cast<const char*>(request.input_ids.data()),
                      request.input_ids.size() * sizeof(std::int64_t));
  p->type = ElementType::Int64;
  p->model_name = request.model;
  p->request_id = request.id;
  p->input = &prompt;
  p->max_tokens = request.max_tokens;
  p->stream = std::make_shared<TokenStream>();
  const InferResponse answer = s.queue_and_wait(p, request.deadline, request.cancelled, request.model, &on_token);
  GenerateResponse response;
  response.model = request.model;
  response.id = request.id;
  const std::string_view ids = answer.outputs.at(0).contents();
  response.output_ids.resize(ids.size() / sizeof(std::int64_t));
  std::memcpy(response.output_ids.data(), ids.data(), response.output_ids.size() * sizeof(std::int64_t));
  response.prompt_bucket = p->prompt_bucket;
  response.switched = p->transfer;
  response.ttft_ns = p->first_token_ns - p->arrival_ns;
  const auto later = static_cast<std::int64_t>(response.output_ids.size()) - 1;
  response.tpot_ns = later > 0 ? (p->last_token_ns - p->first_token_ns) / later : 0;
  response.server_ns = answer.server_ns;
  response.worker = p->worker;
  return response;
}

// Queues `p` and waits for its answer, withdrawing it when the caller gives up (Note
// [Deadlines]); a generate call's tokens go to `on_token` meanwhile (Note [Generate call]).
InferResponse Controller::State::queue_and_wait(const std::shared_ptr<Pending>& p, const Deadline& deadline,
                                                const std::function<bool()>& is_cancelled,
                                                const std::string& model, const TokenSink* on_token) {
  State& s = *this;
  // Note [Deadlines]: a request whose caller has already given up is not queued.
  if (deadline && Clock::now() >= *deadline) {
    throw ServiceError(ServiceError::Code::DeadlineExceeded,
                       "the request's deadline passed before it reached the queue of '" + model + "'");
  }
  std::future<InferResponse> reply = p->reply.get_future();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping) throw ServiceError(ServiceError::Code::Unavailable, "the server is shutting down");
    // Note [Backpressure]
    if (static_cast<std::int64_t>(s.pending.size()) >= s.options.config.max_queue) {
      ++s.stats.refused_queue_full;
      throw ServiceError(ServiceError::Code::ResourceExhausted,
                         detail::concat("the server's queue is full: ", s.pending.size(),
                                        " requests wait or run (max_queue ", s.options.config.max_queue, "); retry later"));
    }
    ++s.stats.requests;
    p->id = s.next_request_id++;
    s.pending.emplace(p->id, p);
    s.feed(PolicyEvent{.kind = PolicyEvent::Kind::RequestArrived, .request = p->id, .model = p->model});
  }
  // The watchdog answers within request_timeout of the worker starting it; the queue ahead
  // may add as much again per request, so this bound only catches a controller bug.
  // A generate call's watchdog restarts with every token (Note [Generate call]), and so does this.
  const auto patience = std::chrono::nanoseconds(s.options.config.request_timeout.ns()) * 4 + std::chrono::seconds(60);
  auto bound = Clock::now() + patience;
  const TokenSink no_sink;
  // Every 20 ms, the caller's deadline and cancellation; a generate call's tokens as they come.
  const auto answered = [&] {
    if (!p->stream) return reply.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready;
    if (p->stream->drain(std::chrono::milliseconds(20), on_token != nullptr ? *on_token : no_sink) > 0) {
      bound = Clock::now() + patience;
    }
    return reply.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  while (!answered()) {
    const auto now = Clock::now();
    const bool expired = deadline && now >= *deadline;
    const bool cancelled = is_cancelled && is_cancelled();
    if (!expired && !cancelled && now < bound) continue;
    bool dispatched = false;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      // Withdrawn unless its worker has it (the input was handed over at dispatch: Pending::input
      // is ours only until we return); a withdrawn request never runs.
      dispatched = s.policy->inflight() == p->id;
      if (!dispatched && s.pending.erase(p->id) != 0) {
        ++s.stats.withdrawn_requests;
        s.feed(PolicyEvent{.kind = PolicyEvent::Kind::RequestWithdrawn, .request = p->id});
      }
    }
    if (reply.wait_for(std::chrono::seconds(0)) == std::future_status::ready) break;
    const std::string where = dispatched ? "while its worker ran it" : "while it waited in the queue (it will not run)";
    if (cancelled) throw ServiceError(ServiceError::Code::Cancelled, "the client cancelled the request " + where);
    if (expired) throw ServiceError(ServiceError::Code::DeadlineExceeded, "the request's deadline passed " + where);
    throw ServiceError(ServiceError::Code::DeadlineExceeded, "no answer within the controller's bound");
  }
  // Every Token message came before the answer: what is left of them is in the stream.
  if (p->stream) p->stream->drain(std::chrono::milliseconds(0), on_token != nullptr ? *on_token : no_sink);
  return reply.get();
}

TrainingStatus Controller::training_status(const std::string& model) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  TrainingStatus status;
  if (!s.options.config.training) return status;
  if (!model.empty() && model != s.options.config.training->model) {
    throw ServiceError(ServiceError::Code::NotFound, "no training job of model '" + model + "' (this server trains " +
                                                         s.options.config.training->model + ")");
  }
  status.model = s.options.config.training->model;
  status.running = s.policy->training_running();
  status.completed_steps = committed_steps(*s.training_header);
  status.target_steps = s.training_target;
  // Stopped by a client only once its worker has let go of the job: from then on the state in
  // the daemon's segment is final, which is what a client waiting for `stopped` wants to read.
  status.stopped = (s.training_stopped_by_client && s.policy->training_worker() < 0) ||
                   (s.training_target > 0 && status.completed_steps >= s.training_target);
  status.active = s.policy->training_wanted() && !status.stopped;
  status.preemptions = s.stats.preemptions;
  status.held_ns = s.training_held_ns(monotonic_ns());
  status.last_loss = committed_loss(*s.training_header);
  return status;
}

TrainingStatus Controller::start_training(const std::string& model, std::int64_t steps) {
  State& s = *state_;
  if (!s.options.config.training) {
    throw ServiceError(ServiceError::Code::NotFound, "this server has no training job (the config has no training section)");
  }
  if (steps < 0) throw ServiceError(ServiceError::Code::InvalidArgument, "steps must not be negative");
  training_status(model);  // checks the name
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.training_stopped_by_client = false;
    s.training_target = steps == 0 ? 0 : committed_steps(*s.training_header) + steps;
    s.feed(PolicyEvent{.kind = PolicyEvent::Kind::TrainingStartRequested, .steps = s.training_target});
  }
  return training_status(model);
}

TrainingCheckpointStatus Controller::checkpoint_training(const std::string& model, const std::string& path) {
  State& s = *state_;
  training_status(model);  // NotFound for another model
  const std::optional<TrainingJobConfig>& job = s.options.config.training;
  if (!job) throw ServiceError(ServiceError::Code::NotFound, "this server has no training job to checkpoint");
  std::filesystem::path target = path.empty() ? job->checkpoint : std::filesystem::path(path);
  if (target.empty()) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       "give the checkpoint's path: the serve config names no training.checkpoint");
  }
  target = std::filesystem::absolute(target).lexically_normal();
  std::error_code ec;
  if (!std::filesystem::is_directory(target.parent_path(), ec)) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       "the checkpoint's folder " + target.parent_path().string() + " does not exist on the server's host");
  }
  if (target.string().size() >= kMessageText) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       detail::concat("the checkpoint's path is ", target.string().size(), " bytes; at most ",
                                      kMessageText - 1, " are taken"));
  }
  std::future<State::DaemonAnswer> answer;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping) throw ServiceError(ServiceError::Code::Unavailable, "the server is shutting down");
    if (s.daemon_answer) {
      throw ServiceError(ServiceError::Code::Unavailable,
                         "the memory daemon is writing a checkpoint or loading a model; ask again once it is done");
    }
    Message m;
    m.type = MessageType::Checkpoint;
    m.set_text(target.string());
    try {
      send_message(s.daemon_socket.get(), m);
    } catch (const Error&) {
      throw ServiceError(ServiceError::Code::Unavailable, "the memory daemon cannot be reached");
    }
    s.daemon_answer.emplace();
    answer = s.daemon_answer->get_future();
  }
  const Message m = answer.get().message;  // the scheduler's loop hands it over, or says the daemon died
  if (m.type == MessageType::Failed) throw ServiceError(code_of(m.value), "the checkpoint failed: " + m.get_text());
  TrainingCheckpointStatus done;
  done.model = job->model;
  done.path = target.string();
  done.completed_steps = m.value;
  done.bytes = m.value2;
  std::memcpy(&done.loss, &m.times[0], sizeof done.loss);
  return done;
}

void Controller::load_model(const std::string& name, const std::string& config) {
  State& s = *state_;
  using Phase = State::ModelSlot::Phase;
  const std::lock_guard<std::mutex> one_at_a_time(s.repository_mutex);
  if (const std::string why = repository_load_refusal(s.options.config.mechanism); !why.empty()) {
    throw ServiceError(ServiceError::Code::FailedPrecondition, "cannot load '" + name + "': " + why);
  }
  if (name.empty()) throw ServiceError(ServiceError::Code::InvalidArgument, "the model name to load is empty");
  std::string text = config;
  int config_index = -1;
  if (text.empty()) {
    config_index = s.options.config.model_index(name);
    if (config_index < 0) {
      throw ServiceError(ServiceError::Code::NotFound,
                         "no model '" + name + "' in the repository (the serve config " + s.options.config.path.string() +
                             "): give its entry (the keys of a models: entry) as the load's 'config' parameter");
    }
  }
  const std::string origin = "the load of '" + name + "'";
  ServedModelConfig entry;
  try {
    entry = config_index >= 0 ? s.options.config.models[static_cast<std::size_t>(config_index)]
                              : parse_served_model_entry(s.options.config, text, origin + "'s config");
  } catch (const InputError& e) {
    throw ServiceError(ServiceError::Code::InvalidArgument, e.what());
  }
  if (entry.name != name) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       origin + ": its config names model '" + entry.name + "', not '" + name + "'");
  }
  std::shared_ptr<const ServedSlot> served;
  try {
    served = std::make_shared<const ServedSlot>(ServedSlot{entry, served_model_info(entry)});
  } catch (const std::exception& e) {  // a model the zoo does not have
    throw ServiceError(ServiceError::Code::InvalidArgument, origin + ": " + e.what());
  }
  std::future<State::DaemonAnswer> answer;
  std::size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping) throw ServiceError(ServiceError::Code::Unavailable, "the server is shutting down");
    if (s.slot_index(name) >= 0) {
      throw ServiceError(ServiceError::Code::AlreadyExists, "model '" + name + "' is loaded already: unload it first");
    }
    if (s.daemon_answer) {
      throw ServiceError(ServiceError::Code::Unavailable,
                         "the memory daemon is writing a checkpoint; ask again once it is done");
    }
    State::ModelSlot slot;
    slot.phase = Phase::Loading;
    slot.served = served;
    slot.config_index = config_index;
    if (config_index < 0) {
      slot.entry_text = SharedSegment::create("entry-" + name, text.size() + 1);
      std::memcpy(slot.entry_text->data(), text.data(), text.size());
    }
    index = s.slots.size();
    Message m;
    m.type = MessageType::LoadModel;
    m.model = static_cast<std::int32_t>(index);
    m.value2 = config_index;
    m.set_text(origin.substr(0, kMessageText - 1));
    // The daemon reads the entry from the segment, or the serve config's from its own file.
    std::vector<int> fds;
    if (slot.entry_text) {
      m.flags |= kFlagEntryText;
      fds.push_back(slot.entry_text->fd());
    }
    try {
      send_message(s.daemon_socket.get(), m, fds);
    } catch (const Error&) {
      throw ServiceError(ServiceError::Code::Unavailable, "the memory daemon cannot be reached");
    }
    s.slots.push_back(std::move(slot));
    s.daemon_answer.emplace();
    answer = s.daemon_answer->get_future();
  }
  s.log("loading model '" + name + "'");
  // The scheduler's loop hands the answer over, or says the daemon died; a server that stops
  // meanwhile answers the load.
  while (answer.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping) throw ServiceError(ServiceError::Code::Unavailable, "the server is shutting down");
  }
  State::DaemonAnswer stored = answer.get();
  std::unique_lock<std::mutex> lock(s.mutex);
  State::ModelSlot& slot = s.slots[index];
  if (stored.message.type == MessageType::Failed) {
    slot.phase = Phase::Unloaded;
    slot.entry_text.reset();
    slot.unloaded_why = "its load failed: " + stored.message.get_text();
    throw ServiceError(code_of(stored.message.value), origin + " failed: " + stored.message.get_text());
  }
  if (stored.fds.empty()) {
    slot.phase = Phase::Unloaded;
    throw ServiceError(ServiceError::Code::Internal, origin + ": the memory daemon sent no parameter store");
  }
  slot.store = SharedSegment::attach(std::move(stored.fds.front()));
  slot.region.message = stored.message;
  slot.region.message.type = MessageType::Region;
  if (stored.fds.size() > 1) slot.region.segment = SharedSegment::attach(std::move(stored.fds[1]));
  PolicyEvent loaded{.kind = PolicyEvent::Kind::ModelLoaded, .model = static_cast<int>(index)};
  loaded.bytes = stored.message.value;
  s.feed(std::move(loaded));
  s.update_standby_workers();
  s.slots_changed.wait_for(lock, std::chrono::seconds(600), [&] { return s.stopping || slot.binds_pending == 0; });
  if (s.stopping) throw ServiceError(ServiceError::Code::Unavailable, "the server is shutting down");
  if (slot.binds_pending > 0 || !slot.bind_error.empty()) {
    const std::string why = slot.binds_pending > 0 ? "its workers did not bind it within 600 s" : slot.bind_error;
    slot.phase = Phase::Unloaded;
    slot.unloaded_why = "its load failed: " + why;
    s.feed(PolicyEvent{.kind = PolicyEvent::Kind::ModelUnloaded, .model = static_cast<int>(index)});
    s.update_standby_workers();
    throw ServiceError(ServiceError::Code::Internal, origin + " failed, and is undone: " + why);
  }
  slot.phase = Phase::Ready;
  s.log(detail::concat("model '", name, "' loaded (", stored.message.value, " bytes of parameters, slot ", index, ")"));
}

void Controller::unload_model(const std::string& name) {
  State& s = *state_;
  using Phase = State::ModelSlot::Phase;
  const std::lock_guard<std::mutex> one_at_a_time(s.repository_mutex);
  if (const std::string why = repository_load_refusal(s.options.config.mechanism); !why.empty()) {
    throw ServiceError(ServiceError::Code::FailedPrecondition, "cannot unload '" + name + "': " + why);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.stopping) throw ServiceError(ServiceError::Code::Unavailable, "the server is shutting down");
  const int index = s.slot_index(name);
  if (index < 0) throw ServiceError(ServiceError::Code::NotFound, "model '" + name + "' is not loaded");
  State::ModelSlot& slot = s.slots[static_cast<std::size_t>(index)];
  if (s.policy->model_in_use(index)) {
    throw ServiceError(ServiceError::Code::FailedPrecondition,
                       "model '" + name + "' is in use: a request of it waits or runs; unload it once they are answered");
  }
  slot.phase = Phase::Unloaded;
  s.feed(PolicyEvent{.kind = PolicyEvent::Kind::ModelUnloaded, .model = index});
  s.log("model '" + name + "' unloaded; its workers drop it");
  s.update_standby_workers();
  s.free_if_unheld(static_cast<std::size_t>(index));  // no worker process may hold it (all starting)
}

std::vector<ModelIndexEntry> Controller::unloaded_models() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<ModelIndexEntry> entries;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    const State::ModelSlot& slot = s.slots[i];
    const std::string& name = slot.served->entry.name;
    if (slot.phase != State::ModelSlot::Phase::Unloaded || s.slot_index(name) >= 0) continue;
    // The last slot of that name says how it ended.
    bool later = false;
    for (std::size_t j = i + 1; j < s.slots.size(); ++j) later = later || s.slots[j].served->entry.name == name;
    if (!later) entries.push_back({name, "1", "UNAVAILABLE", slot.unloaded_why});
  }
  return entries;
}

TrainingStatus Controller::stop_training(const std::string& model) {
  State& s = *state_;
  training_status(model);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.training_stopped_by_client = true;
    s.end_hold(monotonic_ns());  // from here on the client's stop, not a request's hold
    s.feed(PolicyEvent{.kind = PolicyEvent::Kind::TrainingStopRequested});  // running, stopping or paused: abandon
  }
  return training_status(model);
}

void Controller::shared_memory_registered(const BorrowedBytes& region) {
  State& s = *state_;
  if (region.region == nullptr || region.owner == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping) return;
    s.note_region(region);
  }
  s.wake();  // the scheduler maps it in the workers on standby
}

std::string Controller::failure() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->failure;
}

ControllerStats Controller::stats() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

std::pair<const std::uint8_t*, std::size_t> Controller::training_segment() {
  State& s = *state_;
  if (!s.options.config.training) return {nullptr, 0};
  const auto& grant = *s.training_region;
  if (!grant.segment) return {nullptr, 0};  // device memory: not readable here
  return {grant.segment->data(), grant.segment->size()};
}

std::string Controller::chrome_trace() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  // Note [One Chrome trace writer]: tracks numbered in order of first use, the controller's
  // and the training job's first.
  std::map<std::string, int> tids;
  auto tid = [&tids](const std::string& track) {
    auto it = tids.find(track);
    if (it == tids.end()) it = tids.emplace(track, static_cast<int>(tids.size()) + 1).first;
    return it->second;
  };
  tid("controller");
  tid("training");
  ChromeTraceWriter trace;
  trace.process_name(1, "psw serve");
  for (const auto& span : s.trace) {
    const Duration begin = nanoseconds(span.begin_ns - s.started_ns);
    const Duration end = std::max(begin, nanoseconds(span.end_ns - s.started_ns));
    const nlohmann::json args = span.detail.empty() ? nlohmann::json() : nlohmann::json{{"detail", span.detail}};
    trace.slice(span.name, {}, 1, tid(span.track), begin, end, &args);
  }
  for (const auto& [track, id] : tids) trace.thread_name(1, id, track);
  return trace.finish();
}

std::vector<pid_t> Controller::worker_pids() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<pid_t> pids;
  for (const auto& w : state_->workers) pids.push_back(w.pid);
  return pids;
}

pid_t Controller::daemon_pid() { return state_->daemon_pid; }

// Note [Per-group handles]: what the workers counted in their control slots.
std::vector<std::uint64_t> Controller::worker_group_opens() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::uint64_t> opens;
  const auto* control = reinterpret_cast<const WorkerControl*>(state_->control.data());
  for (std::size_t i = 0; i < state_->workers.size(); ++i) opens.push_back(control[i].group_opens.load());
  return opens;
}

std::string Controller::metrics_text() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::ostringstream out;
  // Prometheus's info idiom: what this server is, as labels of a gauge that is always 1 (psw
  // validate checks that the server runs the mechanism its experiment config names).
  out << "# HELP psw_server_info The server's switching mechanism and backend (always 1).\n"
      << "# TYPE psw_server_info gauge\n"
      << "psw_server_info{mechanism=\"" << to_string(s.options.config.mechanism) << "\",backend=\""
      << s.options.backend << "\"} 1\n";
  out << "# HELP psw_requests_total Inference requests answered, by model and outcome.\n"
      << "# TYPE psw_requests_total counter\n";
  for (const auto& [key, count] : s.requests_by_model_code) {
    const auto sep = key.find('\x1f');
    out << "psw_requests_total{model=\"" << key.substr(0, sep) << "\",outcome=\"" << key.substr(sep + 1) << "\"} "
        << count << "\n";
  }
  out << "# HELP psw_request_latency_seconds Request latency at the controller (arrival to reply).\n"
      << "# TYPE psw_request_latency_seconds histogram\n";
  std::int64_t cumulative = 0;
  for (std::size_t b = 0; b < std::size(kLatencyBuckets); ++b) {
    cumulative += s.latency_bucket_counts[b];
    out << "psw_request_latency_seconds_bucket{le=\"" << kLatencyBuckets[b] << "\"} " << cumulative << "\n";
  }
  cumulative += s.latency_bucket_counts.back();
  out << "psw_request_latency_seconds_bucket{le=\"+Inf\"} " << cumulative << "\n"
      << "psw_request_latency_seconds_sum " << s.latency_sum_s << "\n"
      << "psw_request_latency_seconds_count " << s.latency_count << "\n";
  auto counter = [&out](const char* name, const char* help, std::int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << value << "\n";
  };
  auto gauge = [&out](const char* name, const char* help, std::int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n" << name << " " << value << "\n";
  };
  counter("psw_switches_total", "Inference requests that transferred their model's parameters.", s.stats.transfers);
  counter("psw_worker_switches_total", "Tasks started on another worker than the previous task.", s.stats.worker_switches);
  counter("psw_preemptions_total", "Times inference stopped training.", s.stats.preemptions);
  counter("psw_preemptions_abandoned_total",
          "Preemptions that abandoned the training step in progress instead of pausing it (no other worker free).",
          s.stats.preemptions_abandoning_step);
  counter("psw_worker_restarts_total", "Workers replaced after a crash or a hang.", s.stats.worker_restarts);
  counter("psw_requests_withdrawn_total",
          "Requests taken out of the queue because their caller gave up (Note [Deadlines]).", s.stats.withdrawn_requests);
  counter("psw_requests_refused_total", "Requests refused because the queue was full (Note [Backpressure]).",
          s.stats.refused_queue_full);
  counter("psw_inputs_read_in_place_total",
          "Requests whose worker read the input from the client's shared memory region, not copied by the controller.",
          s.stats.inputs_read_in_place);
  counter("psw_outputs_written_in_place_total",
          "Answers the worker wrote into the client's shared memory region, not copied by the controller.",
          s.stats.outputs_written_in_place);
  counter("psw_training_iterations_total", "Completed training steps.",
          s.training_header != nullptr ? committed_steps(*s.training_header) : 0);
  counter("psw_worker_starts_total", "Worker processes started whose start was split by phase (Note [Worker start]).",
          s.stats.worker_starts);
  out << "# HELP psw_worker_start_seconds_total Time worker processes took to start, from spawned to ready, by phase "
         "(Note [Worker start]).\n# TYPE psw_worker_start_seconds_total counter\n";
  for (std::size_t i = 0; i < kWorkerStartPhases; ++i) {
    out << "psw_worker_start_seconds_total{phase=\"" << to_string(static_cast<WorkerStartPhase>(i)) << "\"} "
        << static_cast<double>(s.stats.worker_start_ns[i]) * 1e-9 << "\n";
  }
  counter("psw_worker_kills_total", "Worker processes killed and reaped (Note [Worker kill]).", s.stats.worker_kills);
  out << "# HELP psw_worker_kill_seconds_total Time from killing worker processes to reaping them, summed "
         "(Note [Worker kill]).\n# TYPE psw_worker_kill_seconds_total counter\npsw_worker_kill_seconds_total "
      << static_cast<double>(s.stats.worker_kill_ns) * 1e-9 << "\n";
  // Note [Host time of an eager switch] (exec/pipeline.hpp).
  out << "# HELP psw_eager_switches_total Switches a worker ran eagerly (not replayed from a graph), by model.\n"
         "# TYPE psw_eager_switches_total counter\n";
  for (const auto& [model, host] : s.stats.eager_switch_host) {
    out << "psw_eager_switches_total{model=\"" << model << "\"} " << host.switches << "\n";
  }
  out << "# HELP psw_eager_switch_host_seconds_total The host's time in eager switches, by model and part "
         "(prepare: memory and copies enqueued; forward: the forward's calls).\n"
         "# TYPE psw_eager_switch_host_seconds_total counter\n";
  for (const auto& [model, host] : s.stats.eager_switch_host) {
    out << "psw_eager_switch_host_seconds_total{model=\"" << model << "\",part=\"prepare\"} "
        << static_cast<double>(host.prepare_ns) * 1e-9 << "\n";
    out << "psw_eager_switch_host_seconds_total{model=\"" << model << "\",part=\"forward\"} "
        << static_cast<double>(host.forward_ns) * 1e-9 << "\n";
  }
  out << "# HELP psw_training_held_seconds_total Time the training job was stopped for requests, from stopped at a "
         "layer boundary to running again.\n# TYPE psw_training_held_seconds_total counter\npsw_training_held_seconds_total "
      << static_cast<double>(s.training_held_ns(monotonic_ns())) * 1e-9 << "\n";
  // Summaries (quantiles over everything since start) of the two times the paper's system is
  // judged by.
  auto summary = [&out](const char* name, const char* help, std::vector<std::int64_t> ns) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " summary\n";
    std::sort(ns.begin(), ns.end());
    double sum = 0;
    for (std::int64_t v : ns) sum += static_cast<double>(v) * 1e-9;
    for (double q : {0.5, 0.9, 0.99}) out << name << "{quantile=\"" << q << "\"} " << quantile_seconds(ns, q) << "\n";
    out << name << "_sum " << sum << "\n" << name << "_count " << ns.size() << "\n";
  };
  // A time split by a label (one sample list per label value): p50, p99, the largest (quantile
  // 1: over a hundred samples the p99 is the second largest, and a single slow one is what a
  // tail is traced from) and the count of each. `outer`: labels before it, the same for every
  // value (`model="x",`); no HELP with help null (a metric's second call).
  auto split_summary = [&out](const char* name, const char* help, const char* label, std::span<const char* const> values,
                              std::span<const std::vector<std::int64_t>> samples, const std::string& outer) {
    if (help != nullptr) out << "# HELP " << name << " " << help << "\n# TYPE " << name << " summary\n";
    for (std::size_t k = 0; k < values.size(); ++k) {
      std::vector<std::int64_t> ns = samples[k];
      std::sort(ns.begin(), ns.end());
      const std::string labels = outer + label + "=\"" + values[k] + "\"";
      for (double q : {0.5, 0.99, 1.0}) {
        out << name << "{" << labels << ",quantile=\"" << q << "\"} " << quantile_seconds(ns, q) << "\n";
      }
      out << name << "_count{" << labels << "} " << ns.size() << "\n";
    }
  };
  summary("psw_preemption_latency_seconds", "Request arrival at the controller to training stopped at a layer boundary.",
          s.stats.preemption_ns);
  summary("psw_startup_latency_seconds", "Request arrival at the controller to its first layer computing on the device.",
          s.stats.startup_ns);
  summary("psw_server_latency_seconds", "Request arrival at the controller to its reply ready (no protocol).",
          s.stats.latency_ns);
  {
    // The same per model: whose requests make a quantile over them all (one label value a call,
    // the samples read where they are).
    auto by_model = [&](const char* name, const char* help, std::vector<std::int64_t> ControllerStats::ModelSamples::*times) {
      for (const auto& [model, samples] : s.stats.by_model) {
        const char* value = model.c_str();
        split_summary(name, help, "model", {&value, 1}, {&(samples.*times), 1}, "");
        help = nullptr;  // once per metric
      }
    };
    by_model("psw_startup_by_model_seconds", "Request arrival at the controller to its first layer computing, by model.",
             &ControllerStats::ModelSamples::startup_ns);
    by_model("psw_server_latency_by_model_seconds", "Request arrival at the controller to its reply ready, by model.",
             &ControllerStats::ModelSamples::latency_ns);
    bool described = false;
    for (const auto& [model, samples] : s.stats.by_model) {
      split_summary("psw_request_phase_by_model_seconds", described ? nullptr : "Where a request's time at the server goes, by model and phase.",
                    "phase", kRequestPhaseNames, samples.phase_ns, "model=\"" + model + "\",");
      described = true;
    }
  }
  // Note [Request phases], Note [Preemption phases]: summaries labelled by phase.
  split_summary("psw_request_phase_seconds", "Where a request's time at the server goes, by phase.", "phase",
                kRequestPhaseNames, s.stats.phase_ns, "");
  split_summary("psw_preemption_phase_seconds", "Where a preemption's time goes, by phase.", "phase",
                kPreemptionPhaseNames, s.stats.preemption_phase_ns, "");
  split_summary("psw_preemption_by_boundary_seconds",
                "Request arrival to training stopped, by where in its step the job read the stop.", "boundary",
                kTrainingBoundaryNames, s.stats.preemption_by_boundary_ns, "");
  gauge("psw_resident_models", "Models whose parameters are on the device.",
        static_cast<std::int64_t>(s.policy->resident().size()));
  // Note [Processes a server starts with] (sim/src/simulated_server.cpp): what psw load reads when its
  // clock starts, for the simulator to start where the server stood.
  gauge("psw_fresh_standby_workers", "Workers ready that have run no task since their process started.",
        std::count_if(s.workers.begin(), s.workers.end(), [&s](const Worker& w) {
          return s.policy->worker_state(w.id) == WorkerState::Standby && !s.policy->worker_used(w.id);
        }));
  std::int64_t device = 0;
  std::int64_t host = 0;
  for (const auto& slot : s.slots) {
    if (!slot.store) continue;  // freed
    host += static_cast<std::int64_t>(slot.store->size());
    device += slot.region.message.value;
  }
  if (s.training_header_segment) host += static_cast<std::int64_t>(s.training_header_segment->size());
  if (s.training_region) device += s.training_region->message.value;
  gauge("psw_device_memory_bytes", "Device memory the memory daemon holds (regions and training state).", device);
  gauge("psw_host_memory_bytes", "Shared host memory with the packed parameters.", host);
  return out.str();
}

}  // namespace psw::runtime
