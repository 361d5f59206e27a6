#include "psw/common/server_policy.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw {

PolicyConfig policy_config(const ServeConfig& config, std::vector<Bytes> model_bytes) {
  PolicyConfig p;
  p.mechanism = config.mechanism;
  p.workers = config.workers;
  p.dispatch = config.dispatch;
  p.cache = config.cache;
  p.cache_bytes = config.cache_bytes;
  p.model_bytes = std::move(model_bytes);
  p.training = config.training.has_value();
  return p;
}

ServerPolicy::ServerPolicy(PolicyConfig config) : config_(std::move(config)) {
  if (config_.workers < 1)
    throw InputError(detail::concat("the server needs at least one worker, got ", config_.workers));
  workers_.resize(static_cast<std::size_t>(config_.workers));
  if (config_.used_at_start < 0 || config_.used_at_start > config_.workers) {
    throw InputError(detail::concat("used_at_start is ", config_.used_at_start, ", the server has ", config_.workers,
                                    " workers"));
  }
  for (int i = config_.workers - config_.used_at_start; i < config_.workers; ++i) {
    workers_[static_cast<std::size_t>(i)].used = true;
  }
  if (config_.resident_at_start) {
    for (std::size_t m = 0; m < config_.model_bytes.size(); ++m) resident_.push_back(static_cast<int>(m));
  }
}

bool ServerPolicy::fresh_processes() const { return traits(config_.mechanism).process == ProcessModel::FreshProcess; }
bool ServerPolicy::shares_device() const { return traits(config_.mechanism).process == ProcessModel::SharedContext; }

bool ServerPolicy::training_running() const {
  return training_worker_ >= 0 && !training_stopping_ &&
         workers_[static_cast<std::size_t>(training_worker_)].state == WorkerState::Training;
}

bool ServerPolicy::training_wanted() const {
  return config_.training && training_wanted_ && (training_target_ == 0 || training_completed_ < training_target_);
}

bool ServerPolicy::all_workers_ready() const {
  return std::all_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.state != WorkerState::Starting && w.state != WorkerState::Dead; });
}

bool ServerPolicy::model_in_use(int model) const {
  if (inflight_ && inflight_->model == model) return true;
  return std::any_of(queue_.begin(), queue_.end(), [model](const Queued& q) { return q.model == model; });
}

std::optional<std::uint64_t> ServerPolicy::inflight() const {
  if (!inflight_) return std::nullopt;
  return inflight_->request;
}

bool ServerPolicy::awaiting_answer(int worker) const {
  const WorkerState s = worker_state(worker);
  return s == WorkerState::Inferring || s == WorkerState::CleaningUp ||
         ((s == WorkerState::Training || s == WorkerState::Paused) && training_stopping_ && worker == training_worker_);
}

// Note [Fresh processes]
// ~~~~~~~~~~~~~~~~~~~~~~
// Under stop-and-start (and two processes) every task gets a process that has run nothing yet:
// a task waits for a fresh one (process start, CUDA context, LibTorch, the models' structures),
// and the process of a finished or stopped task is killed and replaced only then, one start at a
// time, as the paper's baseline does ("kill training, start a new process, load the model, run"):
// a used worker stays idle until a task needs its replacement. (Until 2026-12-03 a stopped
// training worker was replaced at once, so a request's start ran beside the training's and both
// took 4-6 s instead of 2-3 s: results/gpu/2026-12-03-h200-serve-starts.md.) A training job is
// not paused but abandons its step in flight at the next layer boundary, before its process goes
// (a kill could land in the middle of its update of the weights), and resumes later, in a fresh
// process, from its last completed step.
// Without a fresh process per task, the process of the last task runs the next one when its
// model is still resident there (no transfer, so no switch for the paper's baseline to pay).
int ServerPolicy::free_worker(std::optional<int> model) const {
  const bool fresh = fresh_processes();
  const bool same_process = fresh && !config_.fresh_process_per_task && model && config_.cache != CachePolicy::Off &&
                            is_resident(*model);
  auto usable = [&](std::size_t i) {
    const Worker& w = workers_[i];
    return w.state == WorkerState::Standby &&
           (!fresh || !w.used || (same_process && static_cast<int>(i) == last_worker_));
  };
  // The worker of the last task when it is free (no process switch), else any standby one.
  if (last_worker_ >= 0 && usable(static_cast<std::size_t>(last_worker_))) return last_worker_;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (usable(i)) return static_cast<int>(i);
  }
  return -1;
}

bool ServerPolicy::only_starting_besides(int worker) const {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const WorkerState state = workers_[i].state;
    if (static_cast<int>(i) != worker && state != WorkerState::Starting && state != WorkerState::Dead) return false;
  }
  return true;
}

int ServerPolicy::paused_worker() const {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].state == WorkerState::Paused) return static_cast<int>(i);
  }
  return -1;
}

bool ServerPolicy::is_resident(int model) const {
  return std::find(resident_.begin(), resident_.end(), model) != resident_.end();
}

// Note [Residency]: with cache off every request transfers (the paper); with active the model of
// the last task stays until another task runs (resume_training forgets it); with lru the model
// stays resident until the parameters kept exceed cache_bytes, least recently used out first;
// ready, MPS and time slicing keep every model once loaded (the last two run them beside
// training).
bool ServerPolicy::note_use(int model) {
  if (config_.mechanism == Mechanism::Ready || shares_device()) {
    if (is_resident(model)) return false;
    resident_.push_front(model);
    return true;
  }
  const bool transfer = !is_resident(model) || config_.cache == CachePolicy::Off;
  resident_.remove(model);
  if (config_.cache == CachePolicy::Off || config_.cache == CachePolicy::Active) {
    resident_ = {model};
    return transfer;
  }
  resident_.push_front(model);
  Bytes kept = 0;
  auto bytes_of = [this](int m) {
    return static_cast<std::size_t>(m) < config_.model_bytes.size() ? config_.model_bytes[static_cast<std::size_t>(m)]
                                                                    : 0;
  };
  for (int m : resident_) kept += bytes_of(m);
  while (kept > config_.cache_bytes && resident_.size() > 1) {
    kept -= bytes_of(resident_.back());
    resident_.pop_back();
  }
  return transfer;
}

std::vector<PolicyAction> ServerPolicy::handle(const PolicyEvent& e) {
  using K = PolicyEvent::Kind;
  std::vector<PolicyAction> out;
  const bool has_worker = e.worker >= 0 && e.worker < static_cast<int>(workers_.size());
  const bool needs_worker = e.kind == K::WorkerReady || e.kind == K::WorkerFinished || e.kind == K::WorkerCleanedUp ||
                            e.kind == K::TrainingStopped || e.kind == K::WorkerLost || e.kind == K::DispatchAborted;
  if (needs_worker && !has_worker) {
    throw InputError(
        detail::concat(to_string(e.kind), " of worker ", e.worker, ": the server has ", workers_.size(), " workers"));
  }
  switch (e.kind) {
    case K::RequestArrived:
      if (stopped_) {
        out.push_back({.kind = PolicyAction::Kind::FailRequest,
                       .request = e.request,
                       .code = StatusCode::Unavailable,
                       .text = "the server is shutting down"});
        return out;
      }
      queue_.push_back({e.request, e.model});
      break;
    case K::RequestWithdrawn:
      std::erase_if(queue_, [&e](const Queued& q) { return q.request == e.request; });
      break;
    case K::WorkerReady:
      workers_[static_cast<std::size_t>(e.worker)].state = WorkerState::Standby;
      break;
    case K::WorkerFinished: {
      Worker& w = workers_[static_cast<std::size_t>(e.worker)];
      if (w.state == WorkerState::Starting) {
        out.push_back({.kind = PolicyAction::Kind::Log,
                       .worker = e.worker,
                       .text = detail::concat("worker ", e.worker, " failed to start: ", e.text)});
        w.state = WorkerState::Dead;
        break;
      }
      if (w.state == WorkerState::Training) {  // the training job failed
        out.push_back({.kind = PolicyAction::Kind::Log,
                       .worker = e.worker,
                       .text = detail::concat("training failed on worker ", e.worker, ": ", e.text)});
        training_wanted_ = false;
        training_worker_ = -1;
        training_stopping_ = false;
        w.state = WorkerState::Standby;
        break;
      }
      w.state = WorkerState::Standby;
      if (!inflight_ || inflight_->worker != e.worker || inflight_->request != e.request) break;  // stale
      if (e.ok) {
        out.push_back({.kind = PolicyAction::Kind::Complete, .worker = e.worker, .request = e.request});
      } else {
        out.push_back({.kind = PolicyAction::Kind::FailRequest,
                       .worker = e.worker,
                       .request = e.request,
                       .code = e.code,
                       .text = e.text});
      }
      inflight_.reset();
      break;
    }
    case K::WorkerCleanedUp:
      workers_[static_cast<std::size_t>(e.worker)].state = WorkerState::Standby;
      break;
    case K::TrainingStopped: {
      Worker& w = workers_[static_cast<std::size_t>(e.worker)];
      if (e.stop == TrainingStop::Paused) {  // waits in place, activations kept, until resumed
        w.state = WorkerState::Paused;
        training_stopping_ = false;
        break;
      }
      w.state = WorkerState::Standby;
      if (training_worker_ == e.worker) training_worker_ = -1;
      training_stopping_ = false;
      // A target a client raised since the job stopped still holds (training_wanted).
      training_completed_ = std::max(training_completed_, e.steps);
      if (fresh_processes()) {
        // Note [Fresh processes]: left as it is, used, until a task waits for a fresh process;
        // replaced now, its start would run beside the waiting request's own and slow both.
        w.used = true;
        break;
      }
      if (stopped_) break;
      // Off the critical path: the stopped worker drops its task before its next one.
      w.state = WorkerState::CleaningUp;
      out.push_back({.kind = PolicyAction::Kind::Cleanup, .worker = e.worker});
      break;
    }
    case K::WorkerLost:
      lose_worker(e.worker, e.code, e.text, true, out);
      break;
    case K::DispatchAborted: {
      Worker& w = workers_[static_cast<std::size_t>(e.worker)];
      if (inflight_ && inflight_->request == e.request && inflight_->worker == e.worker) {
        // Nothing reached the worker: it is standby as before, and its model may not be on
        // the device (counted resident at dispatch), so its next request transfers.
        w.state = WorkerState::Standby;
        w.used = inflight_->worker_was_used;
        resident_.remove(inflight_->model);
        inflight_.reset();
      }
      out.push_back({.kind = PolicyAction::Kind::FailRequest,
                     .worker = e.worker,
                     .request = e.request,
                     .code = e.code,
                     .text = e.text});
      break;
    }
    case K::TrainingStartRequested:
      training_wanted_ = true;
      training_target_ = e.steps;
      break;
    case K::TrainingStopRequested:
      training_wanted_ = false;
      if (training_worker_ >= 0) {  // running, stopping or paused (its worker kept): abandon
        training_stopping_ = true;
        out.push_back({.kind = PolicyAction::Kind::StopTraining, .worker = training_worker_});
      }
      break;
    case K::Shutdown: {
      stopped_ = true;
      for (const Queued& q : queue_) {
        out.push_back({.kind = PolicyAction::Kind::FailRequest,
                       .request = q.request,
                       .code = StatusCode::Unavailable,
                       .text = e.text});
      }
      queue_.clear();
      if (inflight_) {
        out.push_back({.kind = PolicyAction::Kind::FailRequest,
                       .worker = inflight_->worker,
                       .request = inflight_->request,
                       .code = StatusCode::Unavailable,
                       .text = e.text});
        inflight_.reset();
      }
      // A training worker (running or paused) abandons its step at its next layer boundary.
      for (std::size_t i = 0; i < workers_.size(); ++i) {
        const WorkerState s = workers_[i].state;
        if (s == WorkerState::Training || s == WorkerState::Paused) {
          out.push_back({.kind = PolicyAction::Kind::StopTraining, .worker = static_cast<int>(i)});
        }
      }
      training_wanted_ = false;
      return out;
    }
    case K::ModelLoaded: {
      if (e.model < 0 || e.bytes < 0) {
        throw InputError(detail::concat("model_loaded of model ", e.model, " with ", e.bytes, " bytes"));
      }
      const auto slot = static_cast<std::size_t>(e.model);
      if (config_.model_bytes.size() <= slot) config_.model_bytes.resize(slot + 1, 0);
      config_.model_bytes[slot] = e.bytes;
      break;
    }
    case K::ModelUnloaded: {
      resident_.remove(e.model);
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->model != e.model) {
          ++it;
          continue;
        }
        out.push_back({.kind = PolicyAction::Kind::FailRequest,
                       .request = it->request,
                       .code = StatusCode::NotFound,
                       .text = "the model was unloaded while the request waited"});
        it = queue_.erase(it);
      }
      break;
    }
  }
  if (!stopped_) decide(out);
  return out;
}

// Note [Faults]: a worker that exited or hung is killed and replaced; the request it held is
// answered, never left hanging; nothing counts as resident (what it was writing to the device
// region is unknown).
void ServerPolicy::lose_worker(int worker, StatusCode code, const std::string& why, bool fault,
                               std::vector<PolicyAction>& out) {
  Worker& w = workers_[static_cast<std::size_t>(worker)];
  w.used = false;
  if (inflight_ && inflight_->worker == worker) {
    out.push_back({.kind = PolicyAction::Kind::FailRequest,
                   .worker = worker,
                   .request = inflight_->request,
                   .code = code,
                   .text = detail::concat("worker ", worker, " ", why, " while running the request; it was replaced")});
    inflight_.reset();
  }
  if (training_worker_ == worker) {
    training_worker_ = -1;
    training_stopping_ = false;
  }
  resident_.clear();
  if (stopped_) {
    w.state = WorkerState::Dead;
    out.push_back({.kind = PolicyAction::Kind::KillWorker, .worker = worker, .code = code, .text = why});
    return;
  }
  w.state = WorkerState::Starting;
  out.push_back(
      {.kind = PolicyAction::Kind::RestartWorker, .worker = worker, .fault = fault, .code = code, .text = why});
}

void ServerPolicy::dispatch(std::vector<PolicyAction>& out) {
  const Queued next = queue_.front();
  queue_.pop_front();
  const int id = free_worker(next.model);
  Worker& w = workers_[static_cast<std::size_t>(id)];
  const bool transfer = note_use(next.model);
  inflight_ = Inflight{next.request, id, next.model, w.used};
  last_worker_ = id;
  w.used = true;
  w.state = WorkerState::Inferring;
  out.push_back({.kind = PolicyAction::Kind::Dispatch, .worker = id, .request = next.request, .transfer = transfer});
}

void ServerPolicy::resume_training(std::vector<PolicyAction>& out) {
  // The training job runs: under `active` no inference model is the active one any more.
  if (config_.cache == CachePolicy::Active && config_.mechanism != Mechanism::Ready && !shares_device()) {
    resident_.clear();
  }
  // A job paused in place goes on where it stopped (Note [Preemption without loss]).
  const int paused = paused_worker();
  if (paused >= 0) {
    last_worker_ = paused;
    workers_[static_cast<std::size_t>(paused)].state = WorkerState::Training;
    training_worker_ = paused;
    out.push_back({.kind = PolicyAction::Kind::ResumeTraining, .worker = paused});
    return;
  }
  const int id = free_worker(std::nullopt);
  Worker& w = workers_[static_cast<std::size_t>(id)];
  last_worker_ = id;
  w.used = true;
  w.state = WorkerState::Training;
  training_worker_ = id;
  // Training has the device memory of its own segment; the inference models' parameters stay
  // where they are (Note [Residency]); with cache off the next request transfers anyway.
  out.push_back({.kind = PolicyAction::Kind::StartTraining, .worker = id});
}

// Pause in place when another worker can serve the request, else abandon the step (and always
// under fresh processes, whose job resumes in a new process).
void ServerPolicy::stop_training_for(std::uint64_t request, std::vector<PolicyAction>& out) {
  bool other_free = false;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    other_free = other_free || (static_cast<int>(i) != training_worker_ && workers_[i].state == WorkerState::Standby);
  }
  const StopMode mode = other_free && !fresh_processes() ? StopMode::Pause : StopMode::Abort;
  training_stopping_ = true;
  out.push_back(
      {.kind = PolicyAction::Kind::StopTraining, .worker = training_worker_, .request = request, .mode = mode});
}

// Note [Fresh processes]: with a task waiting and no fresh worker, restart a used one (unless
// one is starting already).
void ServerPolicy::renew_a_worker(std::vector<PolicyAction>& out) {
  for (const auto& w : workers_) {
    if (w.state == WorkerState::Starting) return;
  }
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].state == WorkerState::Standby && workers_[i].used) {
      lose_worker(static_cast<int>(i), StatusCode::Unavailable, "has run its task (stop-and-start)", false, out);
      return;
    }
  }
}

// Note [Scheduling]: inference first, FIFO, one request at a time; training only when no request
// waits or runs; a running job is stopped when a request arrives (its worker told at once, the
// request dispatched at the same moment unless `dispatch: after-stop`).
void ServerPolicy::decide(std::vector<PolicyAction>& out) {
  const bool request_waiting = !queue_.empty();
  const bool request_running = inflight_.has_value();
  const bool worker_free = free_worker(request_waiting ? std::optional<int>(queue_.front().model) : std::nullopt) >= 0;
  // Without a waiting request the two are one question.
  const bool worker_free_for_training = request_waiting ? free_worker(std::nullopt) >= 0 : worker_free;
  const bool training_wanted = this->training_wanted();
  const bool running = training_running();
  const bool stopping = training_worker_ >= 0 && training_stopping_;
  const bool paused = paused_worker() >= 0;
  if (shares_device()) {  // MPS, time slicing: nothing to stop; one request at a time beside the job
    if (request_waiting && !request_running && worker_free) {
      dispatch(out);
    } else if (training_wanted && !running && !stopping && !paused && worker_free_for_training) {
      resume_training(out);
    }
  } else {
    bool acted = false;
    if (request_waiting && running && !stopping) {
      stop_training_for(queue_.front().request, out);
      acted = true;
    }
    const bool training_in_the_way = config_.dispatch == DispatchPolicy::AfterStop && (running || stopping);
    if (request_waiting && !request_running && worker_free && !training_in_the_way) {
      dispatch(out);
      acted = true;
    }
    // Note [A paused job's worker serves]: a request waits and none runs, no worker can take it,
    // and every other worker is starting (a replacement) or dead: the paused job gives up its
    // step so that its worker serves now, not after a process start of seconds.
    if (!acted && request_waiting && !request_running && !worker_free && paused && !stopping &&
        only_starting_besides(paused_worker())) {
      training_stopping_ = true;
      out.push_back({.kind = PolicyAction::Kind::StopTraining,
                     .worker = paused_worker(),
                     .request = queue_.front().request,
                     .mode = StopMode::Abort});
      acted = true;
    }
    if (!acted && !request_waiting && !request_running && training_wanted && !running && !stopping &&
        (worker_free_for_training || paused)) {
      resume_training(out);
    }
  }
  if (!fresh_processes()) return;
  // The task that waits first: the queue's head, else the training job.
  const bool task_without_worker =
      !queue_.empty() ? free_worker(queue_.front().model) < 0
                      : training_wanted && training_worker_ < 0 && !inflight_ && free_worker(std::nullopt) < 0;
  if (task_without_worker) renew_a_worker(out);
}

// Note [Decision log] ---------------------------------------------------------------------

// Named, not anonymous: the unity build compiles this file with others of psw_core, whose
// helpers (field, int_field) would meet these.
namespace decision_json {

template <typename Enum, std::size_t N>
Enum enum_from(const std::string& text, const char* const (&names)[N], const std::string& where, const char* key) {
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<Enum>(i);
  }
  std::string choices;
  for (std::size_t i = 0; i < N; ++i) choices += (i ? ", " : "") + std::string(names[i]);
  throw InputError(where + ": '" + key + "' is '" + text + "', expected one of " + choices);
}

constexpr const char* kEventNames[] = {
    "request_arrived",          "request_withdrawn",       "worker_ready", "worker_finished",
    "worker_cleaned_up",        "training_stopped",        "worker_lost",  "dispatch_aborted",
    "training_start_requested", "training_stop_requested", "shutdown",     "model_loaded",
    "model_unloaded"};
constexpr const char* kActionNames[] = {
    "dispatch",       "complete", "fail_request",   "stop_training", "resume_training",
    "start_training", "cleanup",  "restart_worker", "kill_worker",   "log"};
constexpr const char* kWorkerStates[] = {"starting", "standby", "inferring", "cleaning_up",
                                         "training", "paused",  "dead"};
constexpr const char* kStatusNames[] = {"INVALID_ARGUMENT",  "NOT_FOUND", "UNAVAILABLE",   "RESOURCE_EXHAUSTED",
                                        "DEADLINE_EXCEEDED", "INTERNAL",  "ALREADY_EXISTS"};
constexpr const char* kStopNames[] = {"reached_target", "abandoned", "paused"};
constexpr const char* kModeNames[] = {"pause", "abort"};
constexpr const char* kCacheNames[] = {"off", "lru", "active"};
constexpr const char* kDispatchNames[] = {"overlap", "after-stop"};

template <std::size_t N>
const char* name_of(std::size_t i, const char* const (&names)[N]) {
  return i < N ? names[i] : "?";
}

// A key of a record, checked for its type; InputError naming `where` and the key otherwise.
const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw InputError(where + ": the record has no '" + key + "'");
  return j.at(key);
}
std::int64_t int_field(const nlohmann::json& j, const char* key, const std::string& where, std::int64_t fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number_integer()) throw InputError(where + ": '" + key + "' must be an integer");
  return v.get<std::int64_t>();
}
std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return {};
  const auto& v = j.at(key);
  if (!v.is_string()) throw InputError(where + ": '" + key + "' must be a string");
  return v.get<std::string>();
}
bool bool_field(const nlohmann::json& j, const char* key, const std::string& where, bool fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_boolean()) throw InputError(where + ": '" + key + "' must be true or false");
  return v.get<bool>();
}
int worker_field(const nlohmann::json& j, const std::string& where) {
  const std::int64_t w = int_field(j, "worker", where, -1);
  if (w < -1 || w > 1'000'000) throw InputError(where + ": 'worker' is out of range");
  return static_cast<int>(w);
}
std::uint64_t request_field(const nlohmann::json& j, const std::string& where) {
  const std::int64_t r = int_field(j, "request", where, 0);
  if (r < 0) throw InputError(where + ": 'request' must not be negative");
  return static_cast<std::uint64_t>(r);
}

std::string describe(const std::vector<PolicyAction>& actions) {
  if (actions.empty()) return "(none)";
  std::string s;
  for (const auto& a : actions) s += (s.empty() ? "" : ", ") + to_json(a).dump();
  return s;
}

}  // namespace decision_json

std::string to_string(PolicyEvent::Kind kind) {
  return decision_json::name_of(static_cast<std::size_t>(kind), decision_json::kEventNames);
}
std::string to_string(PolicyAction::Kind kind) {
  return decision_json::name_of(static_cast<std::size_t>(kind), decision_json::kActionNames);
}
std::string to_string(WorkerState state) {
  return decision_json::name_of(static_cast<std::size_t>(state), decision_json::kWorkerStates);
}

nlohmann::json to_json(const PolicyConfig& c) {
  return {{"mechanism", to_string(c.mechanism)},
          {"workers", c.workers},
          {"dispatch", decision_json::kDispatchNames[static_cast<std::size_t>(c.dispatch)]},
          {"cache", decision_json::kCacheNames[static_cast<std::size_t>(c.cache)]},
          {"cache_bytes", c.cache_bytes},
          {"model_bytes", c.model_bytes},
          {"training", c.training},
          {"resident_at_start", c.resident_at_start},
          {"fresh_process_per_task", c.fresh_process_per_task},
          {"used_at_start", c.used_at_start}};
}

nlohmann::json to_json(const PolicyEvent& e) {
  using K = PolicyEvent::Kind;
  nlohmann::json j = {{"kind", to_string(e.kind)}};
  if (e.worker >= 0) j["worker"] = e.worker;
  if (e.kind == K::RequestArrived || e.kind == K::RequestWithdrawn || e.kind == K::WorkerFinished ||
      e.kind == K::DispatchAborted) {
    j["request"] = e.request;
  }
  if (e.kind == K::RequestArrived || e.kind == K::ModelLoaded || e.kind == K::ModelUnloaded) j["model"] = e.model;
  if (e.kind == K::ModelLoaded) j["bytes"] = e.bytes;
  if (e.kind == K::WorkerFinished) j["ok"] = e.ok;
  if ((e.kind == K::WorkerFinished && !e.ok) || e.kind == K::WorkerLost || e.kind == K::DispatchAborted) {
    j["code"] = decision_json::kStatusNames[static_cast<std::size_t>(e.code)];
  }
  if (e.kind == K::TrainingStopped) j["stop"] = decision_json::kStopNames[static_cast<std::size_t>(e.stop)];
  if (e.kind == K::TrainingStopped || e.kind == K::TrainingStartRequested) j["steps"] = e.steps;
  if (!e.text.empty()) j["text"] = e.text;
  return j;
}

nlohmann::json to_json(const PolicyAction& a) {
  using K = PolicyAction::Kind;
  nlohmann::json j = {{"kind", to_string(a.kind)}};
  if (a.worker >= 0) j["worker"] = a.worker;
  if (a.request != 0) j["request"] = a.request;
  if (a.kind == K::Dispatch) j["transfer"] = a.transfer;
  if (a.kind == K::StopTraining) j["mode"] = decision_json::kModeNames[static_cast<std::size_t>(a.mode)];
  if (a.kind == K::RestartWorker) j["fault"] = a.fault;
  if (a.kind == K::FailRequest || a.kind == K::RestartWorker || a.kind == K::KillWorker) {
    j["code"] = decision_json::kStatusNames[static_cast<std::size_t>(a.code)];
  }
  if (!a.text.empty()) j["text"] = a.text;
  return j;
}

PolicyConfig policy_config_from_json(const nlohmann::json& j, const std::string& where) {
  PolicyConfig c;
  c.mechanism = parse_mechanism(decision_json::field(j, "mechanism", where).get<std::string>());
  c.workers = static_cast<int>(decision_json::int_field(j, "workers", where, 0));
  if (c.workers < 1 || c.workers > 1024) throw InputError(where + ": 'workers' must lie in [1, 1024]");
  c.dispatch = decision_json::enum_from<DispatchPolicy>(decision_json::string_field(j, "dispatch", where),
                                                        decision_json::kDispatchNames, where, "dispatch");
  c.cache = decision_json::enum_from<CachePolicy>(decision_json::string_field(j, "cache", where),
                                                  decision_json::kCacheNames, where, "cache");
  c.cache_bytes = decision_json::int_field(j, "cache_bytes", where, 0);
  const auto& bytes = decision_json::field(j, "model_bytes", where);
  if (!bytes.is_array()) throw InputError(where + ": 'model_bytes' must be a list of integers");
  for (const auto& b : bytes) {
    if (!b.is_number_integer() || b.get<std::int64_t>() < 0) {
      throw InputError(where + ": 'model_bytes' must be a list of integers, none negative");
    }
    c.model_bytes.push_back(b.get<std::int64_t>());
  }
  c.training = decision_json::bool_field(j, "training", where, false);
  c.resident_at_start = decision_json::bool_field(j, "resident_at_start", where, false);
  c.fresh_process_per_task = decision_json::bool_field(j, "fresh_process_per_task", where, true);
  c.used_at_start = static_cast<int>(decision_json::int_field(j, "used_at_start", where, 0));
  if (c.used_at_start < 0 || c.used_at_start > c.workers) {
    throw InputError(where + ": 'used_at_start' must lie in [0, workers]");
  }
  return c;
}

PolicyEvent policy_event_from_json(const nlohmann::json& j, const std::string& where) {
  PolicyEvent e;
  const auto& kind = decision_json::field(j, "kind", where);
  if (!kind.is_string()) throw InputError(where + ": 'kind' must be a string");
  e.kind =
      decision_json::enum_from<PolicyEvent::Kind>(kind.get<std::string>(), decision_json::kEventNames, where, "kind");
  e.worker = decision_json::worker_field(j, where);
  e.request = decision_json::request_field(j, where);
  const std::int64_t model = decision_json::int_field(j, "model", where, -1);
  if (model < -1 || model > 1'000'000) throw InputError(where + ": 'model' is out of range");
  e.model = static_cast<int>(model);
  e.ok = decision_json::bool_field(j, "ok", where, true);
  e.steps = decision_json::int_field(j, "steps", where, 0);
  if (e.steps < 0) throw InputError(where + ": 'steps' must not be negative");
  if (j.contains("code"))
    e.code = decision_json::enum_from<StatusCode>(decision_json::string_field(j, "code", where),
                                                  decision_json::kStatusNames, where, "code");
  if (j.contains("stop"))
    e.stop = decision_json::enum_from<TrainingStop>(decision_json::string_field(j, "stop", where),
                                                    decision_json::kStopNames, where, "stop");
  e.text = decision_json::string_field(j, "text", where);
  e.bytes = decision_json::int_field(j, "bytes", where, 0);
  if (e.bytes < 0) throw InputError(where + ": 'bytes' must not be negative");
  return e;
}

PolicyAction policy_action_from_json(const nlohmann::json& j, const std::string& where) {
  PolicyAction a;
  const auto& kind = decision_json::field(j, "kind", where);
  if (!kind.is_string()) throw InputError(where + ": 'kind' must be a string");
  a.kind =
      decision_json::enum_from<PolicyAction::Kind>(kind.get<std::string>(), decision_json::kActionNames, where, "kind");
  a.worker = decision_json::worker_field(j, where);
  a.request = decision_json::request_field(j, where);
  a.transfer = decision_json::bool_field(j, "transfer", where, false);
  if (j.contains("mode"))
    a.mode = decision_json::enum_from<StopMode>(decision_json::string_field(j, "mode", where),
                                                decision_json::kModeNames, where, "mode");
  a.fault = decision_json::bool_field(j, "fault", where, false);
  if (j.contains("code"))
    a.code = decision_json::enum_from<StatusCode>(decision_json::string_field(j, "code", where),
                                                  decision_json::kStatusNames, where, "code");
  a.text = decision_json::string_field(j, "text", where);
  return a;
}

std::string decision_header_line(const PolicyConfig& config) {
  return nlohmann::json{{"policy", to_json(config)}}.dump() + "\n";
}

std::string decision_line(std::int64_t t_ns, const PolicyEvent& event, const std::vector<PolicyAction>& actions) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& a : actions) list.push_back(to_json(a));
  return nlohmann::json{{"t_ns", t_ns}, {"event", to_json(event)}, {"actions", list}}.dump() + "\n";
}

namespace decision_json {

// The log read line by line from `in`, so that a long server's log is never held whole.
DecisionReplay replay_stream(std::istream& in, const std::string& origin) {
  std::string line;
  std::int64_t number = 0;
  std::optional<ServerPolicy> policy;
  DecisionReplay result;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = detail::concat(origin, ":", number);
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(where + ": not a JSON record: " + e.what());
    }
    if (!policy) {
      if (!j.is_object() || !j.contains("policy")) {
        throw InputError(where + ": a decision log starts with the policy's record ({\"policy\": ...})");
      }
      policy.emplace(policy_config_from_json(j.at("policy"), where));
      continue;
    }
    const PolicyEvent event = policy_event_from_json(decision_json::field(j, "event", where), where);
    const auto& list = decision_json::field(j, "actions", where);
    if (!list.is_array()) throw InputError(where + ": 'actions' must be a list");
    std::vector<PolicyAction> logged;
    for (const auto& a : list) logged.push_back(policy_action_from_json(a, where));
    std::vector<PolicyAction> decided;
    try {
      decided = policy->handle(event);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    if (decided != logged) {
      result.identical = false;
      result.where = where;
      result.event = event;
      result.logged = std::move(logged);
      result.decided = std::move(decided);
      return result;
    }
    ++result.events;
    result.actions += static_cast<std::int64_t>(decided.size());
  }
  if (in.bad()) throw InputError(origin + ": reading the decision log failed");
  if (!policy) throw InputError(origin + ": the decision log is empty");
  return result;
}

}  // namespace decision_json

DecisionReplay replay_decisions(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  return decision_json::replay_stream(in, origin);
}

DecisionReplay replay_decision_file(const std::filesystem::path& path) {
  std::error_code ec;
  // A FIFO or a device would block the read or never end: only a regular file is a log.
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string() + ": cannot read the decision log" +
                     (std::filesystem::exists(path, ec) ? " (not a regular file)" : ""));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot read the decision log");
  return decision_json::replay_stream(in, path.string());
}

std::string describe_difference(const DecisionReplay& r) {
  if (r.identical) return "no difference";
  return r.where + ": after " + std::to_string(r.events) + " identical events, " + to_json(r.event).dump() +
         "\n  logged:  " + decision_json::describe(r.logged) + "\n  decided: " + decision_json::describe(r.decided);
}

}  // namespace psw
