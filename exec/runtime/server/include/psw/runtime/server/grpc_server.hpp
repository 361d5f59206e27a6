#pragma once
// The client protocol of `psw serve` (DESIGN.md §5): the open inference protocol (KServe v2,
// inference.GRPCInferenceService) and the project's Control service (training, metrics), both
// served over gRPC on one endpoint and both forwarded to an InferenceService (service.hpp).
//
// Endpoints. By default a Unix socket with mode 0600 in a directory only its owner can write:
// anyone who can connect can run models and stop training, so the file system is the access
// control. TCP only when asked, and only on loopback or a named interface, never on every
// interface at once.
//
// No gRPC or protobuf type appears here, so the controller and `psw` need not see them.

#include <cstdint>
#include <memory>
#include <string>

#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"
#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

// Where the server listens: exactly one of the two is set.
struct Endpoint {
  std::string unix_path;    // a Unix socket, e.g. default_socket_path()
  std::string tcp_address;  // "HOST:PORT", "[IPV6]:PORT"; port 0 picks a free port
  // Note [Remote access] (psw/runtime/ipc/access_token.hpp): every call must present this token;
  // null: none asked. Must outlive the front end.
  const AccessToken* token = nullptr;
};

// $XDG_RUNTIME_DIR/psw/psw.sock where XDG_RUNTIME_DIR is set to an absolute path of a directory
// owned by the current user, else /tmp/psw-<uid>/psw.sock. The `psw` directory (resp.
// `psw-<uid>`) is created with mode 0700 when missing; whether an existing one is safe to use is
// checked when a server binds (GrpcFrontEnd), not here, so that a client may call this too.
std::string default_socket_path();

// The gRPC server. Listening when constructed; every call runs on gRPC's own threads (the
// synchronous API) and is forwarded to `service`, which must outlive the front end.
//
// The front end validates what the protocol itself fixes before the service is called: a model
// name, raw contents (one per input not in shared memory; the typed `contents` form is refused),
// known datatypes, non-negative dimensions, and byte counts equal to product(shape) x element
// size. On a Unix socket it also offers the system shared memory extension (shared_memory.hpp):
// registered regions, inputs handed to the service as borrowed ranges of them, outputs written
// into them; over TCP those calls answer UNIMPLEMENTED (shared_memory.hpp: Security). Messages
// larger than `max_message_bytes` are refused by gRPC with RESOURCE_EXHAUSTED, in both
// directions. ServiceError codes become the gRPC status of the same name; any other exception
// becomes INTERNAL with its message.
class GrpcFrontEnd {
 public:
  // Throws psw::InputError when the endpoint cannot be used: a socket directory that another user
  // owns or that group or others can write, a path that exists and is not a socket, another
  // server already listening on the socket, a path too long for a Unix socket, a wildcard or
  // malformed TCP address, a port in use, or a max_message_bytes outside [1, 2^31 - 1]. A stale
  // socket file (nobody answers on it) is removed and replaced. `max_threads` bounds the
  // threads that handle calls (Note [Backpressure] in controller.hpp); 0: gRPC's default.
  // Note [Raw inputs received in place]: with `staging` (which must outlive the front end; the
  // service is told of it at once), each raw input is copied once, into a free slot of it that
  // the service reads in place; without, or when no slot is free, into the tensor's own string.
  GrpcFrontEnd(InferenceService& service, const Endpoint& endpoint, std::int64_t max_message_bytes,
               int max_threads = 0, InputStaging* staging = nullptr);
  ~GrpcFrontEnd();  // shutdown()
  GrpcFrontEnd(const GrpcFrontEnd&) = delete;
  GrpcFrontEnd& operator=(const GrpcFrontEnd&) = delete;

  // Stops accepting calls, gives calls in flight up to `grace_ms` to finish and cancels the rest,
  // then removes the socket file (only if it is still the one this server created). Idempotent.
  // Blocks until every handler has returned, so it must not be called from inside a service
  // call; call it from the thread that waits for the stop signal.
  void shutdown(std::int64_t grace_ms = 5000);

  // Blocks until shutdown() has been called (from another thread, e.g. a signal watcher).
  void wait();

  // What a client connects to: "unix:/path/psw.sock" or "host:port" (the port chosen when the
  // endpoint asked for port 0).
  std::string target() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psw::runtime
