#include "psw/runtime/server/server.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/server/controller.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/server/metrics_http.hpp"

namespace psw::runtime {

namespace {

// Answers while the controller starts: live, not ready; then forwards to the controller.
class StartingService final : public InferenceService {
  InferenceService* get() {
    std::lock_guard<std::mutex> lock(mutex_);
    return service_;
  }
  template <typename F, typename T>
  T with(F&& f, T fallback) {
    InferenceService* s = get();
    return s == nullptr ? fallback : f(*s);
  }
  template <typename F>
  auto forward(F&& f) {
    InferenceService* s = get();
    if (s == nullptr) throw ServiceError(ServiceError::Code::Unavailable, "the server is starting its workers");
    return f(*s);
  }
 public:
  void set(InferenceService* service) {
    std::lock_guard<std::mutex> lock(mutex_);
    service_ = service;
  }
  bool live() override { return true; }
  bool ready() override { return with([](InferenceService& s) { return s.ready(); }, false); }
  std::vector<ModelInfo> models() override {
    return with([](InferenceService& s) { return s.models(); }, std::vector<ModelInfo>{});
  }
  InferResponse infer(const InferRequest& r) override { return forward([&](InferenceService& s) { return s.infer(r); }); }
  TrainingStatus start_training(const std::string& m, std::int64_t n) override {
    return forward([&](InferenceService& s) { return s.start_training(m, n); });
  }
  TrainingStatus stop_training(const std::string& m) override {
    return forward([&](InferenceService& s) { return s.stop_training(m); });
  }
  TrainingStatus training_status(const std::string& m) override {
    return forward([&](InferenceService& s) { return s.training_status(m); });
  }
  std::string metrics_text() override {
    return with([](InferenceService& s) { return s.metrics_text(); }, std::string("# psw: starting\n"));
  }

 private:
  std::mutex mutex_;
  InferenceService* service_ = nullptr;
};

}  // namespace

int run_server(const ServerOptions& options) {
  // Every thread started from here on inherits the blocked signals; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Endpoint endpoint;
  if (!options.listen_address.empty()) {
    if (!options.socket_path.empty()) throw InputError("--socket and --listen exclude each other");
    endpoint.tcp_address = options.listen_address;
  } else {
    endpoint.unix_path = options.socket_path.empty() ? default_socket_path() : options.socket_path;
  }
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  StartingService front;
  // The largest message carries one tensor plus its framing.
  const std::int64_t max_message = std::min<std::int64_t>(options.config.max_tensor_bytes + (1 << 20), (1LL << 31) - 1);
  GrpcFrontEnd server(front, endpoint, max_message);
  log("listening on " + server.target());
  // Before the workers start, so that a bad address fails at once; it answers from the
  // controller once there is one.
  std::unique_ptr<MetricsHttpServer> metrics;
  if (!options.metrics_address.empty()) {
    metrics = std::make_unique<MetricsHttpServer>([&front] { return front.metrics_text(); }, options.metrics_address);
    log("metrics on " + metrics->url());
  }
  ControllerOptions controller_options{options.config, options.backend, options.exec_path, options.log,
                                       options.decisions_path};
  std::unique_ptr<Controller> controller;
  try {
    controller = std::make_unique<Controller>(controller_options);
  } catch (...) {
    metrics.reset();
    server.shutdown(0);
    throw;
  }
  front.set(controller.get());
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  log(controller->failure().empty() ? std::string("shutting down (") + (signal_number == SIGTERM ? "SIGTERM" : "SIGINT") + ")"
                                    : "shutting down: " + controller->failure());
  metrics.reset();
  server.shutdown(2000);
  front.set(nullptr);
  if (!options.trace_path.empty()) {
    save_text(options.trace_path, controller->chrome_trace());
    log("wrote the trace of the last requests to " + options.trace_path);
  }
  const std::string failure = controller->failure();
  // What requests cost the training job, for the logs a GPU run keeps (the burst run's question).
  const ControllerStats stats = controller->stats();
  controller->shutdown();
  if (stats.preemptions > 0) {
    log(std::to_string(stats.preemptions) + " preemptions of training, " +
        std::to_string(stats.preemptions_abandoning_step) + " of them abandoning the step in progress");
  }
  if (!failure.empty()) {
    log("stopped: " + failure);
    return 1;
  }
  log("stopped");
  return 0;
}

}  // namespace psw::runtime
