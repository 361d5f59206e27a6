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
#include <memory>
#include <string>
#include <vector>

#include "psw/runtime/service.hpp"

namespace psw::runtime {

struct ServerInfo {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
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
  // Sends every input as raw contents and returns every output the server answers.
  InferResponse infer(const InferRequest& request);

  // The Control service.
  TrainingStatus start_training(const std::string& model, std::int64_t steps = 0);
  TrainingStatus stop_training(const std::string& model);
  TrainingStatus training_status(const std::string& model);
  std::string metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psw::runtime
