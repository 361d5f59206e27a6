#pragma once
// Note [Server policy]
// ~~~~~~~~~~~~~~~~~~~~
// What a GPU server decides, as one deterministic object: events in, actions out. It owns the
// decisions of `psw serve`'s controller: the request queue (FIFO), which worker takes a task,
// when training is stopped (paused in place or abandoned) and resumed, which models stay
// resident (Note [Residency]), when a used process is replaced by a fresh one (Note [Fresh
// processes]), and what a lost worker costs the request it held (Note [Faults]). It has no
// clock, no thread and no I/O: a driver turns what it observes into events (a request arrived,
// a worker said Ready or answered, training stopped at a layer boundary, a process exited or
// hung) and carries out the actions (send Infer, Train, Cleanup, set the stop flag, kill and
// start a process, answer an error). Every mechanism is a configuration of it (its traits in
// the mechanism table), not a branch in the driver.
//
// Because it is deterministic, what a driver decided can be checked after the fact: the
// controller logs every event with the actions it carried out (`psw serve --decisions FILE`,
// JSON lines, DecisionRecord), and `psw replay-decisions FILE` feeds the logged events to a
// fresh policy and reports the first action that differs (replay_decisions).
//
// Inference first (the paper's controller, PAPER.md §3): requests in arrival order, one at a
// time; a running training job is told to stop when a request waits; training runs only when
// no request waits or runs. Under MPS and time slicing (a shared context) training is never
// stopped: requests run beside it.

#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "psw/common/mechanism.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/common/units.hpp"

namespace psw {

// The protocol's status of a failed request, in the order of the runtime's ServiceError::Code
// (a worker's failure carries one of these as a number).
enum class StatusCode {
  InvalidArgument,
  NotFound,
  Unavailable,
  ResourceExhausted,
  DeadlineExceeded,
  Internal,
  AlreadyExists
};

struct PolicyConfig {
  Mechanism mechanism = Mechanism::PipeSwitch;
  int workers = 2;
  DispatchPolicy dispatch = DispatchPolicy::Overlap;
  CachePolicy cache = CachePolicy::Off;
  Bytes cache_bytes = 0;
  std::vector<Bytes> model_bytes;  // per served model: its packed parameters (Note [Residency])
  bool training = false;           // a training job is configured
  // Note [Server policy as the simulator runs it]: the three below describe a server that is
  // not `psw serve` as it starts (whose values are the defaults).
  // Every model is on the device before the first request (ready, MPS and time slicing loaded
  // ahead of the workload, as the paper measures them); otherwise each transfers once first.
  bool resident_at_start = false;
  // Fresh processes (Note [Fresh processes]): every task gets a process that has run nothing
  // (psw serve), or only a task that transfers its model does, and one whose model is still
  // resident runs in the process of the task before (the paper's stop-and-start baseline).
  bool fresh_process_per_task = true;
  // How many workers (the last ones) have run a task when the policy starts (Note [Processes a
  // server starts with]: a warm-up used them); under fresh processes they take no task.
  int used_at_start = 0;
};
// The policy of a serve config; `model_bytes` from the memory daemon's regions.
PolicyConfig policy_config(const ServeConfig& config, std::vector<Bytes> model_bytes);

enum class WorkerState {
  Starting,    // its process is starting; it says Ready when it can take a task
  Standby,     // can take a task now
  Inferring,   // runs a request
  CleaningUp,  // drops a stopped training job's state before its next task
  Training,    // runs the training job (told to stop once `training_stopping`)
  Paused,      // the training job waits in place at a layer boundary (Note [Preemption without loss])
  Dead,        // failed to start, or lost while the server stops
};

// How a training job stopped at a layer boundary (the worker's TrainStopped).
enum class TrainingStop { ReachedTarget, Abandoned, Paused };
// How the policy asks training to stop: wait in place, or abandon the step in flight.
enum class StopMode { Pause, Abort };

struct PolicyEvent {
  enum class Kind {
    RequestArrived,          // request, model
    RequestWithdrawn,        // request: its client stopped waiting before it was dispatched
    WorkerReady,             // worker
    WorkerFinished,          // worker, request, ok (else code and text): its answer to Infer
    WorkerCleanedUp,         // worker
    TrainingStopped,         // worker, stop, steps (the job's completed steps)
    WorkerLost,              // worker, code, text (why: "exited", "did not answer within 10000 ms")
    DispatchAborted,         // worker, request, code, text: the input could not be handed over
    TrainingStartRequested,  // steps: a client (or autostart) wants the job to run up to this step (0: until stopped)
    TrainingStopRequested,   // a client stops the job
    Shutdown,                // text: the server stops; everything waiting is answered
    // Note [Repository load] (the server's controller): model slot `model` was loaded while the
    // server runs, with `bytes` of packed parameters (not resident until a request transfers
    // them), or unloaded (forgotten by residency; a request of it still waiting fails NOT_FOUND).
    ModelLoaded,    // model, bytes
    ModelUnloaded,  // model
  };
  Kind kind = Kind::RequestArrived;
  int worker = -1;
  std::uint64_t request = 0;
  int model = -1;
  bool ok = true;
  StatusCode code = StatusCode::Internal;
  TrainingStop stop = TrainingStop::Abandoned;
  std::int64_t steps = 0;
  std::string text = {};
  Bytes bytes = 0;

  bool operator==(const PolicyEvent&) const = default;
};

struct PolicyAction {
  enum class Kind {
    Dispatch,        // request, worker, transfer: send the request to the worker
    Complete,        // request, worker: answer the request from the worker's reply
    FailRequest,     // request, code, text
    StopTraining,    // worker, mode, request (the one it stops for; 0: a client's stop)
    ResumeTraining,  // worker: the job paused in place goes on
    StartTraining,   // worker: the job runs on this worker from its last completed step
    Cleanup,         // worker: drop the stopped job's state
    RestartWorker,   // worker, fault, text: kill its process and start a fresh one
    KillWorker,      // worker, text: kill its process (the server stops; no successor)
    Log,             // text: a line for the server's log
  };
  Kind kind = Kind::Log;
  int worker = -1;
  std::uint64_t request = 0;
  bool transfer = false;
  StopMode mode = StopMode::Abort;
  bool fault = false;  // RestartWorker: a failure (counted as a restart), not the mechanism's own
  StatusCode code = StatusCode::Internal;
  std::string text = {};

  bool operator==(const PolicyAction&) const = default;
};

class ServerPolicy {
 public:
  // Every worker starts in Starting; InputError for a config the policy cannot run.
  explicit ServerPolicy(PolicyConfig config);

  // Applies one event and returns what to do, in order.
  std::vector<PolicyAction> handle(const PolicyEvent& event);

  // Read-only views for the driver (watchdog, metrics, readiness).
  const PolicyConfig& config() const { return config_; }
  WorkerState worker_state(int worker) const { return workers_.at(static_cast<std::size_t>(worker)).state; }
  bool worker_used(int worker) const { return workers_.at(static_cast<std::size_t>(worker)).used; }
  int training_worker() const { return training_worker_; }
  bool training_stopping() const { return training_stopping_; }
  // A job is configured, asked to run and short of its target.
  bool training_wanted() const;
  // The job runs on a worker that has not been told to stop.
  bool training_running() const;
  bool all_workers_ready() const;  // none starting or dead
  bool stopped() const { return stopped_; }
  std::size_t queued() const { return queue_.size(); }
  std::optional<std::uint64_t> inflight() const;
  // A request of `model` waits or runs (Note [Repository load]: such a model is not unloaded).
  bool model_in_use(int model) const;
  const std::list<int>& resident() const { return resident_; }
  // Whether the worker owes the driver an answer (a task, a cleanup, a stop): the watchdog's.
  bool awaiting_answer(int worker) const;

 private:
  struct Worker {
    WorkerState state = WorkerState::Starting;
    bool used = false;  // has run a task since its process started (Note [Fresh processes])
  };
  struct Queued {
    std::uint64_t request;
    int model;
  };

  bool fresh_processes() const;
  bool shares_device() const;
  // A worker that can take the next task: a request for `model`, or the training job (nullopt).
  int free_worker(std::optional<int> model) const;
  int paused_worker() const;
  // Whether every worker but `worker` is starting or dead (none will be free within a task).
  bool only_starting_besides(int worker) const;
  bool is_resident(int model) const;
  bool note_use(int model);
  void lose_worker(int worker, StatusCode code, const std::string& why, bool fault, std::vector<PolicyAction>& out);
  void decide(std::vector<PolicyAction>& out);
  void dispatch(std::vector<PolicyAction>& out);
  void resume_training(std::vector<PolicyAction>& out);
  void stop_training_for(std::uint64_t request, std::vector<PolicyAction>& out);
  void renew_a_worker(std::vector<PolicyAction>& out);

  PolicyConfig config_;
  std::vector<Worker> workers_;
  std::deque<Queued> queue_;
  struct Inflight {
    std::uint64_t request;
    int worker;
    int model;
    bool worker_was_used;
  };
  std::optional<Inflight> inflight_;
  int last_worker_ = -1;  // the worker of the last task started
  bool training_wanted_ = false;
  std::int64_t training_target_ = 0;     // the step the job runs to (0: until stopped)
  std::int64_t training_completed_ = 0;  // its completed steps at its last stop
  int training_worker_ = -1;
  bool training_stopping_ = false;
  std::list<int> resident_;  // models whose parameters are on the device, most recent first
  bool stopped_ = false;
};

// Note [Decision log]: one JSON line per event, with the actions the driver carried out; the
// first line is the policy's configuration.
std::string to_string(PolicyEvent::Kind kind);
std::string to_string(PolicyAction::Kind kind);
std::string to_string(WorkerState state);
nlohmann::json to_json(const PolicyConfig& config);
nlohmann::json to_json(const PolicyEvent& event);
nlohmann::json to_json(const PolicyAction& action);
// InputError naming `where` (FILE:LINE) and the key for a malformed record.
PolicyConfig policy_config_from_json(const nlohmann::json& j, const std::string& where);
PolicyEvent policy_event_from_json(const nlohmann::json& j, const std::string& where);
PolicyAction policy_action_from_json(const nlohmann::json& j, const std::string& where);
// One decision: the header line (`config`) or an event with its actions.
std::string decision_header_line(const PolicyConfig& config);
std::string decision_line(std::int64_t t_ns, const PolicyEvent& event, const std::vector<PolicyAction>& actions);

struct DecisionReplay {
  std::int64_t events = 0;   // events fed before the first difference (or all)
  std::int64_t actions = 0;  // actions compared
  bool identical = true;
  // The first difference: where (FILE:LINE), the event, what was logged and what the policy decided.
  std::string where;
  PolicyEvent event;
  std::vector<PolicyAction> logged;
  std::vector<PolicyAction> decided;
};
// Feeds a decision log (`text`, read from `origin`) to a policy built from its header and
// compares every event's actions with the logged ones. InputError for a malformed log.
DecisionReplay replay_decisions(const std::string& text, const std::string& origin);
// The same for a file; InputError when it cannot be read.
DecisionReplay replay_decision_file(const std::filesystem::path& path);
// The first difference in a few lines, for a person (or "no difference").
std::string describe_difference(const DecisionReplay& replay);

}  // namespace psw
