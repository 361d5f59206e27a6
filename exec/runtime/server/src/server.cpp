#include "psw/runtime/server/server.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/ipc/cpu_latency.hpp"
#include "psw/runtime/server/controller.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/server/http_server.hpp"
#include "psw/runtime/server/metrics_http.hpp"
#include "psw/runtime/server/starting_service.hpp"
#include "tcp_address.hpp"

namespace psw::runtime {

StartingService::StartingService(const ServeConfig& config) {
  for (const ServedModelConfig& model : config.models) starting_.push_back(served_model_info(model));
}

void StartingService::set(InferenceService* service) {
  std::vector<EarlyRegion> early;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    service_ = service;
    if (service != nullptr) early.swap(early_regions_);
  }
  for (EarlyRegion& region : early) {
    region.bytes.owner = region.owner.lock();
    if (region.bytes.owner) service->shared_memory_registered(region.bytes);
  }
}

void StartingService::shared_memory_registered(const BorrowedBytes& region) {
  InferenceService* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = service_;
    if (s == nullptr) {
      BorrowedBytes kept = region;
      kept.owner.reset();
      kept.lease.reset();
      early_regions_.push_back({region.owner, std::move(kept)});
    }
  }
  if (s != nullptr) s->shared_memory_registered(region);
}

InferenceService* StartingService::get() {
  std::lock_guard<std::mutex> lock(mutex_);
  return service_;
}

InferenceService& StartingService::forward_to() {
  InferenceService* s = get();
  if (s == nullptr) throw ServiceError(ServiceError::Code::Unavailable, "the server is starting its workers");
  return *s;
}

bool StartingService::live() { return true; }

bool StartingService::ready() {
  InferenceService* s = get();
  return s != nullptr && s->ready();
}

std::vector<ModelInfo> StartingService::models() {
  InferenceService* s = get();
  return s == nullptr ? starting_ : s->models();  // starting_: ready false
}

void StartingService::refuse_while_starting(const std::string& model) const {
  const bool served = std::any_of(starting_.begin(), starting_.end(), [&](const ModelInfo& m) { return m.name == model; });
  if (!served) throw ServiceError(ServiceError::Code::NotFound, "model '" + model + "' is not served here");
  throw ServiceError(ServiceError::Code::Unavailable, "model '" + model + "' is not ready: the server is starting its workers");
}

InferResponse StartingService::infer(const InferRequest& request) {
  if (InferenceService* s = get()) return s->infer(request);
  refuse_while_starting(request.model);
}

GenerateResponse StartingService::generate(const GenerateRequest& request, const TokenSink& on_token) {
  if (InferenceService* s = get()) return s->generate(request, on_token);
  refuse_while_starting(request.model);
}

TrainingStatus StartingService::start_training(const std::string& model, std::int64_t steps) {
  return forward_to().start_training(model, steps);
}

TrainingStatus StartingService::stop_training(const std::string& model) { return forward_to().stop_training(model); }

TrainingStatus StartingService::training_status(const std::string& model) {
  return forward_to().training_status(model);
}

TrainingCheckpointStatus StartingService::checkpoint_training(const std::string& model, const std::string& path) {
  return forward_to().checkpoint_training(model, path);
}

void StartingService::load_model(const std::string& name, const std::string& config) {
  forward_to().load_model(name, config);
}

void StartingService::unload_model(const std::string& name) { forward_to().unload_model(name); }

std::vector<ModelIndexEntry> StartingService::unloaded_models() {
  InferenceService* s = get();
  return s == nullptr ? std::vector<ModelIndexEntry>{} : s->unloaded_models();
}

std::string StartingService::metrics_text() {
  InferenceService* s = get();
  return s == nullptr ? std::string("# psw: starting\n") : s->metrics_text();
}

int run_server(const ServerOptions& options) {
  // Every thread started from here on inherits the blocked signals; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Note [Remote access]: checked before anything listens.
  check_remote_access({{"--listen", options.listen_address},
                       {"--http-listen", options.http_address},
                       {"--metrics-listen", options.metrics_address}},
                      options.allow_remote, !options.token_file.empty());
  std::optional<AccessToken> token;
  if (!options.token_file.empty()) token = AccessToken::from_file(options.token_file);
  const AccessToken* required = token ? &*token : nullptr;
  Endpoint endpoint;
  if (!options.listen_address.empty()) {
    if (!options.socket_path.empty()) throw InputError("--socket and --listen exclude each other");
    endpoint.tcp_address = options.listen_address;
    endpoint.token = required;  // the Unix socket has its file's permissions instead
  } else {
    endpoint.unix_path = options.socket_path.empty() ? default_socket_path() : options.socket_path;
  }
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  // Note [CPU wake-up latency]: held from before the first request can come until the server's
  // last process is gone; refused at once where the host does not allow it.
  std::optional<CpuWakeupLatency> wakeup_latency;
  if (const auto& latency = options.config.cpu_wakeup_latency_us) {
    try {
      wakeup_latency.emplace(*latency);
    } catch (const Error& e) {
      throw Error(options.config.path.string() + ": cpu_wakeup_latency_us: " + e.what() + " (or leave the key out)");
    }
    log("CPU wake-up latency held at " + std::to_string(*latency) + " us (in force: " +
        std::to_string(wakeup_latency->in_force_us()) + " us)");
  }
  StartingService front(options.config);
  // The largest message carries one tensor plus its framing.
  const std::int64_t max_message = std::min<std::int64_t>(options.config.max_tensor_bytes + (1 << 20), (1LL << 31) - 1);
  // Note [Backpressure]: threads for every request the queue admits, and a few for the rest.
  // Note [Raw inputs received in place]: one staging for both front ends, by default slots for
  // the request running and a few waiting (one GPU serves one at a time); beyond them an input
  // is kept in its own string.
  std::unique_ptr<InputStaging> staging;
  if (options.config.input_staging_slots > 0) {
    staging = std::make_unique<InputStaging>(static_cast<std::size_t>(options.config.input_staging_slots),
                                             static_cast<std::size_t>(options.config.max_tensor_bytes));
  }
  GrpcFrontEnd server(front, endpoint, max_message, options.config.max_queue + 16, staging.get());
  log("listening on " + server.target());
  // Before the workers start, so that a bad address fails at once; it answers from the
  // controller once there is one.
  std::unique_ptr<MetricsHttpServer> metrics;
  if (!options.metrics_address.empty()) {
    metrics = std::make_unique<MetricsHttpServer>([&front] { return front.metrics_text(); }, options.metrics_address,
                                                  required);
    log("metrics on " + metrics->url());
  }
  // The REST front end, on the same service (Note [REST front end]); a bad address fails now.
  std::unique_ptr<HttpFrontEnd> http;
  if (!options.http_address.empty()) {
    try {
      http = std::make_unique<HttpFrontEnd>(front, options.http_address, max_message, required, staging.get());
    } catch (...) {
      metrics.reset();
      server.shutdown(0);
      throw;
    }
    log("REST on " + http->url());
  }
  ControllerOptions controller_options;
  controller_options.config = options.config;
  controller_options.backend = options.backend;
  controller_options.exec_path = options.exec_path;
  controller_options.log = options.log;
  controller_options.decisions = options.decisions_path;
  // Mapped by every worker before the training job starts (ControllerOptions::regions).
  if (staging) controller_options.regions.push_back(staging->whole());
  std::unique_ptr<Controller> controller;
  try {
    controller = std::make_unique<Controller>(controller_options);
  } catch (...) {
    http.reset();
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
  // The queue is answered (UNAVAILABLE) before the front end stops: its calls wait for the
  // controller's answers, and a full queue would otherwise run first, request by request.
  controller->stop_serving("the server is shutting down");
  if (http) http->shutdown();
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
