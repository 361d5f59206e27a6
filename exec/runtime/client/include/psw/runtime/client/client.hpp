#pragma once
// A client of `psw serve` (or of any KServe v2 gRPC server, for the inference calls): one
// connection, blocking calls, the plain structs of service.hpp.
//
// Every failed call throws ServiceError with the gRPC status mapped back to its code
// (INVALID_ARGUMENT -> InvalidArgument, ..., codes service.hpp does not name -> Internal with the
// status name in the message); a server that does not answer is Unavailable. Every call has a
// deadline (60 s unless set), after which it fails with DeadlineExceeded.
//
// The header includes no gRPC or protobuf header, so users of the client need not see them.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "psw/runtime/ipc/service.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"

namespace psw::runtime {

struct ServerInfo {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

// A range of a registered shared memory region (offset within the region), where a tensor's
// bytes are (the system shared memory extension: shared_memory.hpp).
struct SharedMemoryRef {
  std::string region;
  std::int64_t offset = 0;
  std::int64_t byte_size = 0;
};

// Which tensors of a request are in shared memory.
struct SharedMemoryPlacement {
  // By input name: sent as this range instead of raw bytes (the caller wrote them there).
  std::map<std::string, SharedMemoryRef> inputs;
  // The outputs asked for, in order, each written by the server into its range or (none) sent
  // back as raw bytes. Empty: every output, raw.
  struct Output {
    std::string name;
    std::optional<SharedMemoryRef> shared_memory;
  };
  std::vector<Output> outputs;
};

class Client {
 public:
  static constexpr std::int64_t default_max_message_bytes = std::int64_t{256} << 20;

  // `target`: "unix:/path/psw.sock" or "host:port". The connection is made on the first call, so
  // constructing never fails for an absent server. Throws psw::InputError for an empty target or a
  // max_message_bytes outside [1, 2^31 - 1]; the limit applies to requests and answers.
  explicit Client(const std::string& target, std::int64_t max_message_bytes = default_max_message_bytes);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Note [Remote access] (psw/runtime/ipc/access_token.hpp): every later call carries
  // `authorization: Bearer TOKEN` (empty: none).
  void set_token(std::string token);
  // A connection of its own to the same server, with the same token, message limit and timeout
  // (a tool that spreads its calls over several connections makes them from one).
  Client another_connection() const;

  // The deadline of each later call, counted from its start.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;
  const std::string& target() const;

  // The open inference protocol.
  bool server_live();
  bool server_ready();
  bool model_ready(const std::string& model, const std::string& version = "");
  ServerInfo server_metadata();
  // The model's tensors (ModelMetadata) and its readiness (ModelReady): two calls.
  ModelInfo model_metadata(const std::string& model, const std::string& version = "");
  // The model repository's index (RepositoryIndex): every model, READY or UNAVAILABLE with the
  // reason; `ready_only`: the ready ones.
  std::vector<ModelIndexEntry> repository_index(bool ready_only = false);
  // Note [Repository load] (the server's controller.hpp): loads `name` (its serve config entry, or
  // `config`, a models: entry as YAML or JSON) and returns once it is ready; unloads it.
  void load_model(const std::string& name, const std::string& config = {});
  void unload_model(const std::string& name);
  // Sends every input as raw contents and returns every output the server answers.
  InferResponse infer(const InferRequest& request);
  // Sends the inputs `placement` names as references to their shared memory ranges (their
  // `bytes` in `request` are not read) and the others raw. The outputs placed in shared memory
  // come back with their name, datatype and shape and no bytes: read them from the region.
  InferResponse infer(const InferRequest& request, const SharedMemoryPlacement& placement);

  // The system shared memory extension (a server on this host; `psw serve` offers it on its Unix
  // socket only). Registers [offset, offset + byte_size) of the POSIX shared memory object `key`
  // ("/name") as region `name`; unregisters one region or (name empty) all; lists one or all.
  void register_system_shared_memory(const std::string& name, const std::string& key, std::uint64_t byte_size,
                                     std::uint64_t offset = 0);
  void unregister_system_shared_memory(const std::string& name = "");
  std::vector<SharedMemoryRegionInfo> system_shared_memory_status(const std::string& name = "");

  // The Control service.
  TrainingStatus start_training(const std::string& model, std::int64_t steps = 0);
  // Note [Training checkpoint]: the job's state to `path` on the server's host (empty: the
  // config's training.checkpoint).
  TrainingCheckpointStatus checkpoint_training(const std::string& model, const std::string& path = "");
  // Note [Generate call]: a decoder's greedy generation over the Control service's stream;
  // `on_token` hears each token as it comes (may be empty). The request's deadline and cancelled
  // are not used: the call's timeout is the client's.
  GenerateResponse generate(const GenerateRequest& request, const TokenSink& on_token = {});
  TrainingStatus stop_training(const std::string& model);
  TrainingStatus training_status(const std::string& model);
  std::string metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request's tensors in shared memory, for a client on the server's host: a POSIX shared
// memory object this process creates (mode 0600), holding the request's inputs and then the
// outputs whose size the model's metadata fixes at the request's batch (only a leading -1
// dimension), each at a 64-byte boundary, registered with the server as one region. Built once
// per model and batch, it serves any number of requests: write_inputs, infer with placement(),
// read_outputs. The object's name is unlinked as soon as the server has mapped it, so nothing is
// left in /dev/shm even if this process is killed; the destructor unregisters the region (errors
// ignored: the server may be gone).
class SharedMemoryStaging {
 public:
  // Lays out `request`'s inputs (their current sizes) and `model`'s outputs; throws
  // psw::InputError when the object cannot be created, ServiceError when the server refuses
  // the region.
  SharedMemoryStaging(Client& client, const ModelInfo& model, const InferRequest& request);
  ~SharedMemoryStaging();
  SharedMemoryStaging(const SharedMemoryStaging&) = delete;
  SharedMemoryStaging& operator=(const SharedMemoryStaging&) = delete;

  // Copies the inputs of `request` into the object; throws psw::InputError when one is not the
  // size laid out.
  void write_inputs(const InferRequest& request);
  const SharedMemoryPlacement& placement() const { return placement_; }
  // Fills the bytes of the outputs the server wrote into the object.
  void read_outputs(InferResponse& response) const;
  const std::string& region() const { return region_; }

 private:
  Client& client_;
  std::string region_;
  std::unique_ptr<SharedMemoryObject> object_;
  SharedMemoryPlacement placement_;
};

}  // namespace psw::runtime
