#pragma once
// The seam between the runtime's client protocol and its controller (DESIGN.md §5).
//
// The gRPC front end (grpc_server.hpp: the open inference protocol, KServe v2, plus the
// project's Control service for training and metrics) turns each call into one of these
// plain C++ calls; the controller (controller.hpp) implements them. Neither side sees the
// other's types: no protobuf here, no LibTorch, no CUDA. A test can drive the front end with
// a fake service and the controller without any socket.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace psw::runtime {

// Bytes a tensor refers to instead of owning them: a range of a client's shared-memory region
// (the protocol's system shared memory extension), which the front end mapped. `owner` keeps the
// mapping alive for as long as any tensor (or copy of a request) refers to it, so a client that
// unregisters a region while a request still reads it does not pull the memory away. The bytes
// can change under the server's feet (the client may write them at any time); reading them once,
// straight into the worker's input, is what the extension is for.
// The registered region of a shared memory object that borrowed bytes lie in (Note [Inputs read
// in place] in controller.hpp): what another process needs to map the same bytes itself.
struct SharedRegionHandle {
  std::uint64_t id = 0;             // unique per registration in this process, never reused
  int fd = -1;                      // the object, open read-write (owned by the registry)
  std::uint64_t object_offset = 0;  // where the region starts in the object
  std::uint64_t byte_size = 0;      // of the region
  const char* data = nullptr;       // the region's first byte in this process
};

struct BorrowedBytes {
  std::shared_ptr<void> owner;  // null: nothing borrowed
  char* data = nullptr;
  std::size_t size = 0;
  // The registered region holding [data, data + size), kept alive by `owner`; null when the
  // bytes are not in one (a test's own memory), and then they can only be copied.
  const SharedRegionHandle* region = nullptr;
  // Held for as long as the bytes are in use, where they lie in a slot of the server's own that
  // is reused after (Note [Raw inputs received in place]: InputStaging); null otherwise.
  std::shared_ptr<void> lease{};
};

// One tensor as it crosses the protocol: KServe v2 datatype names ("FP32", "FP16", "BF16",
// "INT64", "INT32", "UINT8", "BOOL"), a shape, and the raw little-endian bytes in row-major
// order (the protocol's raw_input_contents / raw_output_contents), either owned (`bytes`) or in a
// client's shared memory (`borrowed`). Read them through contents(), which serves both.
struct TensorData {
  std::string name;
  std::string datatype;
  std::vector<std::int64_t> shape;
  std::string bytes;         // the contents, unless `borrowed` is set
  BorrowedBytes borrowed{};  // the contents in shared memory; `bytes` is then empty

  bool is_borrowed() const { return borrowed.owner != nullptr; }
  std::string_view contents() const {
    return is_borrowed() ? std::string_view(borrowed.data, borrowed.size) : std::string_view(bytes);
  }
};

// An output the client asked to receive in its shared memory: the service may write the output
// straight into `destination` (when it fits) and answer it as borrowed bytes of that range; the
// front end writes any output the service answered otherwise (shared_memory.hpp).
struct OutputDestination {
  std::string name;
  BorrowedBytes destination;
};

// A tensor a model takes or returns; -1 in `shape` is a dimension of any size (the batch).
struct TensorSpec {
  std::string name;
  std::string datatype;
  std::vector<std::int64_t> shape;
};

struct ModelInfo {
  std::string name;
  std::string platform;  // "pytorch_libtorch"
  std::vector<std::string> versions;  // {"1"}
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  bool ready = false;
};

// One entry of the model repository's index (Note [Repository index] in the server).
struct ModelIndexEntry {
  std::string name;
  std::string version;
  std::string state;   // "READY" | "UNAVAILABLE"
  std::string reason;  // empty when READY

  bool operator==(const ModelIndexEntry&) const = default;
};

struct InferRequest {
  std::string model;
  std::string version;  // empty: the only version
  std::string id;       // echoed in the response
  std::vector<TensorData> inputs;
  std::vector<OutputDestination> output_destinations{};  // outputs wanted in shared memory
  // Note [Deadlines] (controller.hpp): when the caller stops waiting. Its deadline on the
  // steady clock (nullopt: none), and whether it has cancelled the call (null: it cannot).
  std::optional<std::chrono::steady_clock::time_point> deadline{};
  std::function<bool()> cancelled{};

  // Where output `name` goes, or null when it goes back in the response.
  const BorrowedBytes* output_destination(std::string_view name) const {
    for (const auto& d : output_destinations) {
      if (d.name == name) return &d.destination;
    }
    return nullptr;
  }
};

struct InferResponse {
  std::string model;
  std::string version;
  std::string id;
  std::vector<TensorData> outputs;
  // Note [Request path] (psw/common/serving_profile.hpp), 0 where the service does not say:
  // arrival at the controller to the response ready, and of it the engine's part (the input
  // on the device to the forward's end). Sent as the response parameters psw_server_ns and
  // psw_engine_ns.
  std::int64_t server_ns = 0;
  std::int64_t engine_ns = 0;
  // Note [Protocol split] (psw/runtime/client/serving_benchmark.hpp): where the rest of a
  // client's time goes, as instants on the steady clock (CLOCK_MONOTONIC: one clock for the
  // processes of one host), 0 where unknown. The gRPC front end's handler entered (the request
  // received and parsed) and its response complete (before gRPC serialises it), sent as the
  // response parameters psw_received_ns and psw_replied_ns; and the client's message built, the
  // call about to begin (set by the client, never sent).
  std::int64_t front_end_received_ns = 0;
  std::int64_t front_end_replied_ns = 0;
  std::int64_t client_sent_ns = 0;
};

// The steady clock's now in ns since its epoch (CLOCK_MONOTONIC on Linux): Note [Protocol split].
inline std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Note [Generate call]
// ~~~~~~~~~~~~~~~~~~~~
// A decoder generates: a prompt of token ids in, greedy decoding of up to `max_tokens` tokens,
// their ids out. It is one request of the model's queue, scheduled, switched and preempting
// training as an inference request is: its worker prefills the prompt through the pipelined
// switch (padded to its length bucket: Note [Prompt buckets] in exec/decoder.hpp), so the first
// token comes at the end of the switch, then decodes the rest with the KV cache, the parameters
// resident. The prompt and the generated tokens fit the decoder's context (prompt length plus
// max_tokens at most its max_positions). Every token is told to the caller (`on_token`) as its
// worker knows it, so a client can stream them. Times, from the request's arrival at the
// controller: to the first token known (TTFT), and the mean time per later token (TPOT).
struct GenerateRequest {
  std::string model;
  std::string id;  // echoed in the response
  std::vector<std::int64_t> input_ids;
  std::int64_t max_tokens = 0;
  // Note [Deadlines], as InferRequest's.
  std::optional<std::chrono::steady_clock::time_point> deadline{};
  std::function<bool()> cancelled{};
};

struct GeneratedToken {
  std::int64_t index = 0;  // 0 for the first generated token
  std::int64_t id = 0;
};
using TokenSink = std::function<void(const GeneratedToken&)>;

struct GenerateResponse {
  std::string model;
  std::string id;
  std::vector<std::int64_t> output_ids;
  std::int64_t prompt_bucket = 0;  // the length the prompt was prefilled at
  bool switched = false;           // the parameters were transferred for it (a cold start)
  std::int64_t ttft_ns = 0;
  std::int64_t tpot_ns = 0;        // 0 with a single token
  std::int64_t server_ns = 0;      // arrival at the controller to the response ready
  int worker = -1;                 // the worker that ran it (0-based; -1: not known)
};

struct TrainingStatus {
  std::string model;              // empty: no training job configured
  bool running = false;           // iterating now (not preempted, not stopped)
  bool stopped = false;           // finished, or stopped by a client (StopTraining) and let go of by its worker
  // Started (autostart or StartTraining) and neither stopped nor finished since: running, or
  // between tasks (preempted by a request, or resuming in a fresh process after one). Neither
  // running nor active: not started.
  bool active = false;
  std::int64_t completed_steps = 0;
  std::int64_t target_steps = 0;  // 0: until stopped
  std::int64_t preemptions = 0;   // times inference stopped it
  // Time stopped for requests, from stopped at a layer boundary to running again, summed
  // (Note [Training held] in controller.cpp; a hold in progress counts up to now).
  std::int64_t held_ns = 0;
  double last_loss = 0;
};

// A checkpoint of the training job written (Note [Training checkpoint] in
// exec/runtime/worker/training.hpp): where, and the state it holds.
struct TrainingCheckpointStatus {
  std::string model;
  std::string path;  // absolute, on the server's host
  std::int64_t completed_steps = 0;
  double loss = 0;
  std::int64_t bytes = 0;
};

// The error a call fails with; the front end maps `code` to the gRPC status of the same name
// and sends `what()` as the status message.
class ServiceError : public std::runtime_error {
 public:
  // AlreadyExists comes last so that the values of the others, which workers send as numbers,
  // stay what they were.
  enum class Code {
    InvalidArgument,
    NotFound,
    Unavailable,
    ResourceExhausted,
    DeadlineExceeded,
    Internal,
    AlreadyExists,
    Cancelled,  // the caller cancelled the call (Note [Deadlines])
    FailedPrecondition,  // the server's state does not allow it now (unloading a model in use)
  };
  ServiceError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

// What the server does. Every method may be called from many threads at once.
class InferenceService {
 public:
  virtual ~InferenceService() = default;
  virtual bool live() = 0;   // the process answers
  virtual bool ready() = 0;  // workers are up and every model can be served
  // Every model the server serves (inference), with its tensors and readiness.
  virtual std::vector<ModelInfo> models() = 0;
  // Blocks until the request is answered; throws ServiceError (NotFound for an unknown model,
  // InvalidArgument for a wrong datatype, shape or byte count, ResourceExhausted for an
  // oversized tensor, Unavailable when the worker failed or the server is stopping).
  virtual InferResponse infer(const InferRequest& request) = 0;
  // Note [Generate call]: blocks until the last token; `on_token` (may be empty) is called
  // from the calling thread, in order, once per token, before the return. The errors are
  // infer's, and InvalidArgument for a model that is not a decoder. A service without
  // decoders need not override it: it answers that the model does not generate.
  virtual GenerateResponse generate(const GenerateRequest& request, const TokenSink& on_token) {
    (void)on_token;
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       "model '" + request.model + "' does not generate here (POST /v2/models/NAME/infer serves it)");
  }
  // Training jobs (the config's training section): start (or resume after a stop) for `steps`
  // more steps beyond those completed (the status's target_steps is then their sum; 0: until
  // stopped), stop at the next layer boundary, report.
  virtual TrainingStatus start_training(const std::string& model, std::int64_t steps) = 0;
  virtual TrainingStatus stop_training(const std::string& model) = 0;
  virtual TrainingStatus training_status(const std::string& model) = 0;
  // Writes the job's committed state to `path` on the server's host (empty: the config's
  // training.checkpoint), while the job goes on. A service without a training job need not
  // override it: it has none to checkpoint.
  virtual TrainingCheckpointStatus checkpoint_training(const std::string& model, const std::string& path) {
    (void)path;
    throw ServiceError(ServiceError::Code::NotFound, "no training job for model '" + model + "' to checkpoint");
  }
  // Note [Repository load] (the server's controller.hpp): loads model `name` while the server
  // runs, from the serve config's entry of that name (`config` empty) or from the entry `config`
  // gives (YAML or JSON, the keys of a serve config's models: entry), and returns once it can be
  // served; unloads one no request waits for or runs. A service that cannot need not override them.
  virtual void load_model(const std::string& name, const std::string& config) {
    (void)config;
    throw ServiceError(ServiceError::Code::FailedPrecondition,
                       "this server does not load models while it runs ('" + name + "')");
  }
  virtual void unload_model(const std::string& name) {
    throw ServiceError(ServiceError::Code::FailedPrecondition,
                       "this server does not unload models while it runs ('" + name + "')");
  }
  // Models the repository knows that are not loaded (unloaded, or whose load failed), for its
  // index; none by default.
  virtual std::vector<ModelIndexEntry> unloaded_models() { return {}; }
  // Prometheus text exposition format (version 0.0.4).
  virtual std::string metrics_text() = 0;
  // The front end registered a shared memory region (`region`: all of it, with its handle), so
  // that a service may prepare to read inputs from it (map it where it reads them) before the
  // first request does; the owner held tells when the region is gone (unregistered and no
  // request reading it). Optional: a service learns of a region from a request's input too.
  virtual void shared_memory_registered(const BorrowedBytes& /*region*/) {}
};

}  // namespace psw::runtime
