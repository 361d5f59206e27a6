#include "psw/sim/simulation.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <list>
#include <sstream>
#include <memory>
#include <optional>
#include <queue>
#include <unordered_map>

#include "psw/common/chrome_trace.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/common/server_policy.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/sim/mechanism.hpp"
#include "psw/common/metrics.hpp"
#include "psw/common/random_streams.hpp"
#include "psw/sim/simulator.hpp"
#include "psw/sim/summary.hpp"
#include "psw/common/workload_source.hpp"

namespace psw::sim {

namespace {

// Buffered CSV writer: to_chars into a large buffer, written in blocks; every write and the
// final close are checked (Note [Checked writes]). finish() must be called on success: the
// destructor only closes (a run that failed has nothing to report about its outputs).
class CsvWriter {
 public:
  explicit CsvWriter(const std::filesystem::path& path) : out_(path) { buffer_.reserve(kFlushAt + 256); }
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  void text(std::string_view s) { buffer_.append(s); }
  void number(std::int64_t v) {
    char tmp[24];
    auto [ptr, ec] = std::to_chars(tmp, tmp + sizeof tmp, v);
    buffer_.append(tmp, ptr);
  }
  void end_row() {
    buffer_.push_back('\n');
    if (buffer_.size() >= kFlushAt) flush();
  }
  void finish() {
    flush();
    out_.close();
  }

 private:
  void flush() {
    out_.write(buffer_);
    buffer_.clear();
  }
  static constexpr std::size_t kFlushAt = 1 << 20;
  OutputFile out_;
  std::string buffer_;
};

// The serving profile's measured step of the config's training job, where it has one.
std::optional<Duration> serving_training_step(const ExperimentConfig& config) {
  const ModelProfile& trained = config.models[*config.training_model];
  const TrainingStepCost* step = config.serving ? config.serving->training_of(trained.name) : nullptr;
  return step ? std::optional<Duration>(step->step) : std::nullopt;
}

// The training job: iterations of forward then backward over its layers; it can stop at
// any layer boundary and resume there without losing progress.
class TrainingJob {
 public:
  // `measured_step`: a serving profile's step of the server's job (Note [Request path]); the
  // layers' boundaries are scaled to it, in the profile's proportions.
  TrainingJob(const ModelProfile& model, const HardwareProfile& hw, std::optional<Duration> measured_step) {
    Duration t = Duration::zero();
    for (const auto& layer : model.layers) {
      t += forward_time(layer, model, hw, Task::Training);
      boundaries_.push_back(t);
    }
    for (auto it = model.layers.rbegin(); it != model.layers.rend(); ++it) {
      t += backward_time(*it, model, hw);
      boundaries_.push_back(t);
    }
    iteration_ = t;
    if (iteration_ <= Duration::zero()) throw InputError("the training model has no compute time");
    if (measured_step) {
      const double scale = static_cast<double>(measured_step->ns()) / static_cast<double>(iteration_.ns());
      for (auto& b : boundaries_) b = nanoseconds(std::llround(static_cast<double>(b.ns()) * scale));
      boundaries_.back() = *measured_step;
      iteration_ = *measured_step;
    }
  }

  Duration iteration_time() const { return iteration_; }
  // Progress (ns of training compute) is advanced by the server.
  void advance(Duration work) { progress_ += work; }
  std::int64_t iterations() const { return progress_.ns() / iteration_.ns(); }
  Duration progress() const { return progress_; }
  // Drops the work of the iteration in progress (a killed process; Note [Killed training]);
  // returns how much was lost.
  Duration discard_partial_iteration() {
    const Duration lost = nanoseconds(progress_.ns() % iteration_.ns());
    progress_ = progress_ - lost;
    return lost;
  }
  // Compute time until the current layer ends.
  Duration to_layer_boundary() const {
    const Duration into = nanoseconds(progress_.ns() % iteration_.ns());
    const auto it = std::upper_bound(boundaries_.begin(), boundaries_.end(), into);
    return it == boundaries_.end() ? Duration::zero() : *it - into;
  }

 private:
  std::vector<Duration> boundaries_;  // cumulative end of each layer's forward, then backward
  Duration iteration_;
  Duration progress_;
};

// Note [The simulator drives the server policy]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The simulator decides nothing about scheduling: the server policy (common/server_policy.hpp,
// the one psw serve's controller drives) does. SimulatedServer is its driver in virtual time,
// as the controller is in real time: it turns the workload's arrivals and its cost models'
// answers into the policy's events, and answers the policy's actions with events at simulated
// times:
//   Dispatch        the switch (MechanismModel::switch_in, or resident_run without a transfer)
//                   and the request path, then WorkerFinished;
//   StopTraining    the training job runs to its layer boundary (or is killed at once), then
//                   TrainingStopped, paused in place or abandoned;
//   StartTraining   the training model's switch-in, after which the job runs (no event: the
//                   policy counts it running from the action on);
//   ResumeTraining  the paused job goes on at once;
//   Cleanup         the worker's cleanup, then WorkerCleanedUp;
//   RestartWorker   a fresh process's start, then WorkerReady.
// What a real server's policy would also see (faults, withdrawn requests, a client's stop) has
// no cost model here and does not happen. The policy's configuration says where the simulated
// server differs from psw serve as it starts (Note [Server policy as the simulator runs it]).
// `psw sim --decisions FILE` logs the events and actions as psw serve --decisions does, and
// psw replay-decisions replays either.
class SimulatedServer {
 public:
  SimulatedServer(const ExperimentConfig& config, const SimulationOptions& options)
      : config_(config),
        mechanism_(config.mechanism, config.hardware, config.models, config.planner, config.placement,
                   config.parallel),
        source_(open_workload_source(config)),
        per_model_(config.models.size()),
        policy_(simulated_policy(config, mechanism_, options)),
        workers_(static_cast<std::size_t>(policy_.config().workers)) {
    check_memory();
    if (config.serving) {
      for (std::size_t m = 0; m < config.models.size(); ++m) per_model_[m].path = config.serving->path_of(config.models[m].name);
    }
    if (config.training_model) {
      training_.emplace(config.models[*config.training_model], config.hardware, serving_training_step(config));
      mechanism_.set_training_job(config.models[*config.training_model].name, config.training_batch);
    }
    if (!options.out_dir.empty() && config.requests_csv) {
      csv_ = std::make_unique<CsvWriter>(options.out_dir / "requests.csv");
      csv_->text("id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,latency_ns,switched,slo_met\n");
    }
    if (!options.chrome_trace.empty()) {
      trace_ = std::make_unique<ChromeTraceWriter>(options.chrome_trace, options.chrome_trace_max_events);
      trace_->thread_name(1, 1, "GPU");
      trace_->thread_name(1, 2, "PCIe / switch");
      trace_->thread_name(1, 3, "queue");
    }
    if (!options.decisions.empty()) {
      decisions_ = std::make_unique<OutputFile>(options.decisions);
      decisions_->write(decision_header_line(policy_.config()));
    }
  }

  void run() {
    // The workers were started before the workload, and the training job runs from its start
    // (as psw load's clock starts on a server that is up and training).
    for (int w = 0; w < policy_.config().workers; ++w) {
      feed({.kind = PolicyEvent::Kind::WorkerReady, .worker = w});
    }
    if (training_) feed({.kind = PolicyEvent::Kind::TrainingStartRequested, .steps = 0});
    if (config_.workload.kind == WorkloadKind::Cycles) {
      start_cycles();
    } else {
      schedule_next_arrival();
    }
    sim_.run();
    if (!completed_any_ && issued_ == 0) throw InputError(config_.source.string() + ": the workload has no requests");
    PSW_CHECK(pending_.empty(), pending_.size(), " requests were never answered");
    end_ = std::max(sim_.now(), end_);
    advance_training(end_);
    if (held_since_) training_held_ += end_ - *held_since_;
    held_since_.reset();
  }

  // Completes and closes requests.csv, the trace and the decision log, checked (Note [Checked
  // writes]).
  void finish_outputs() {
    if (csv_) csv_->finish();
    if (trace_) trace_->finish();  // otherData: events_dropped
    if (decisions_) decisions_->close();
  }

  // Note [Switch counts]
  // ~~~~~~~~~~~~~~~~~~~~
  // `switches` counts the inference requests whose model had to be switched in (per model
  // under `models`); `training_switch_ins` counts the switches that brought training back in:
  // the background job resuming after inference, and training requests (Note [Training
  // requests]) that needed one. MPS switches nothing, so both stay 0 there. A job paused in
  // place goes on without a switch (Note [Paused in place]): `training_preemptions` counts the
  // times the job was stopped for requests, whichever way it came back.
  SimulationSummary summary() const {
    auto ms = [](Duration d) { return static_cast<double>(d.ns()) / 1e6; };
    SimulationSummary out;
    for (std::size_t m = 0; m < per_model_.size(); ++m) {
      if (per_model_[m].latency.count() == 0) continue;
      ModelSimulationSummary& model = out.models[config_.models[m].name];
      model.latency = summarize(per_model_[m].latency);
      model.engine_latency = summarize(per_model_[m].engine);
      model.switches = per_model_[m].switches;
      if (config_.serving) {
        // Note [Latency parts] (validation.hpp): the keys psw load writes, for psw validate.
        model.server_latency = summarize(per_model_[m].server);
        model.protocol_latency = summarize(per_model_[m].protocol);
      }
      if (per_model_[m].first_token.count() > 0) model.first_token_latency = summarize(per_model_[m].first_token);
      if (traits(config_.mechanism).peer_paths) {
        // Note [Parallel paths]: the switch's plan, its bound and the one-GPU plan beside it.
        const auto p = mechanism_.parallel_switch(static_cast<std::uint32_t>(m), Task::Inference);
        model.parallel = ParallelSwitchSummary{.gpus = p.gpus,
                                               .helpers_training = p.helpers_training,
                                               .groups = static_cast<std::int64_t>(p.groups),
                                               .bytes = p.bytes,
                                               .via_helpers_bytes = p.via_helpers,
                                               .switch_ms = ms(p.total),
                                               .bound_ms = ms(p.bound),
                                               .single_gpu_ms = ms(p.single_gpu_total)};
      }
    }
    const double makespan_s = end_.seconds();
    // Note [GPU busy and GPU work]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // Two figures, which differ where tasks share the GPU at once (MPS, time slicing):
    // - gpu_busy_fraction: the share of the makespan in which the GPU had work. A request's
    //   work is its ready run (its compute alone on a GPU that has it resident: switch
    //   overheads, waits and the server's own steps are not work), counted only where no
    //   training job ran beside it; the training job's is the time it ran (kept, or killed
    //   with its iteration). The training job runs whenever it is not stopped, and under MPS
    //   and time slicing it is never stopped, so the requests beside it add no time: the
    //   pieces never overlap, each lies inside its own stretch of the makespan, and the
    //   fraction is at most 1 by construction (not by a clamp).
    // - gpu_work_fraction: the work done, each task's at its speed alone on the GPU (a
    //   request's ready run, the training compute kept and lost), per second of makespan.
    //   Where work runs one task at a time it equals gpu_busy_fraction; under MPS it is the
    //   concurrent sum, and above 1 where the two tasks together get more done than either
    //   alone would, as the H200 profile's MPS slowdowns say they do (inference at 1/1.37 of
    //   its speed beside training at 1/1.5 of its own: 1.40 while both run). The simulator
    //   once reported this sum clamped to 1 as gpu_busy_fraction, which hid both.
    // Summed in integer ns first: where the pieces fill the makespan the ratio is exactly 1.
    const double busy = makespan_s > 0 ? (inference_alone_ + training_ran_).seconds() / makespan_s : 0.0;
    const double work = makespan_s > 0 ? (inference_busy_.seconds() + training_lost_.seconds() +
                                          (training_ ? training_->progress().seconds() : 0.0)) / makespan_s
                                       : 0.0;
    const double inference_time_s = config_.workload.kind == WorkloadKind::Cycles
                                        ? (config_.workload.cycle * config_.workload.rounds).seconds()
                                        : makespan_s;
    out.name = config_.name;
    out.mechanism = mechanism_name();
    out.hardware = config_.hardware.name;
    out.seed = config_.seed;
    out.requests = latency_.count();
    out.latency = summarize(latency_);
    out.slo_attainment = slo_total_ > 0 ? static_cast<double>(slo_met_) / static_cast<double>(slo_total_) : 1.0;
    // Cycles (Figure 6): inferences completed within the inference phases per second of
    // inference phase; otherwise completions per second of the whole run.
    out.throughput_rps =
        inference_time_s > 0
            ? static_cast<double>(config_.workload.kind == WorkloadKind::Cycles ? completed_in_phase_ : latency_.count()) /
                  inference_time_s
            : 0.0;
    out.makespan_s = makespan_s;
    out.gpu_busy_fraction = busy;  // Note [GPU busy and GPU work]
    out.gpu_work_fraction = work;
    out.training_iterations = training_ ? training_->iterations() : 0;
    out.training_iterations_per_s =
        training_ && makespan_s > 0 ? static_cast<double>(training_->iterations()) / makespan_s : 0.0;
    // Note [Switch counts]: inference switches and training switch-ins apart.
    out.switches = switches_;
    out.training_switch_ins = training_switch_ins_;
    out.training_preemptions = training_preemptions_;
    out.training_requests = training_requests_;
    out.training_lost_ms = ms(training_lost_);
    out.training_held_ms = ms(training_held_);
    out.standby_waits = standby_waits_;
    out.startup_overhead_mean_ms = switched_ ? ms(startup_sum_) / static_cast<double>(switched_) : 0.0;
    out.total_overhead_mean_ms = latency_.count() ? ms(overhead_sum_) / static_cast<double>(latency_.count()) : 0.0;
    return out;
  }

  std::uint64_t events() const { return sim_.events_processed(); }

 private:
  // Same-time order of the server's events (Note [Same-time order] in simulator.hpp): what
  // frees a worker or the GPU (an answer, a stop, a cleanup, a process ready) before an
  // arrival at the same instant is looked at, a training job switched back in before it too,
  // and phase changes of a cycles workload last.
  enum Priority : int { kCompletion = 0, kResume = 1, kArrival = 2, kPhase = 3 };

  // Where the training job is, as the cost models see it (the policy has its worker's state).
  enum class TrainingPhase {
    OffDevice,    // stopped and dropped (or never started)
    SwitchingIn,  // StartTraining's switch-in runs; it runs once that ends
    Running,
    Stopping,     // told to stop: its progress up to the stop is counted, TrainingStopped is due
    Paused,       // waits in place at a layer boundary
  };

  // What the simulator knows of a worker process beyond the policy's state of it.
  struct SimulatedWorker {
    // psw serve's worker is standby as soon as its answer is out, but is still busy with what
    // it does after a task (MechanismModel::after_task_time, Note [Cleanup in psw serve]).
    Duration busy_until;
    // When its process began to start (Note [Fresh processes]); nullopt: before the workload.
    std::optional<Duration> process_started;
  };

  struct Pending {
    Request request;
    std::int64_t in_flight = 0;  // Note [Protocol under load]: in flight at its arrival
  };

  struct ModelStats {
    LatencyHistogram latency;
    // Note [Request path]: the engine's part alone (from a worker taking the request: the
    // dispatch, after any wait for a standby worker or for a fresh process to start, to the
    // forward's end, less the server's own steps), what a live server reports as psw_engine_ns.
    LatencyHistogram engine;
    // Note [Latency parts]: with a serving profile, the server's whole time (arrival to the
    // server's answer: the queue, the switch, the engine and the server's own steps) and the
    // protocol drawn after it, which add up to `latency`.
    LatencyHistogram server;
    LatencyHistogram protocol;
    // Note [Decode in the simulator]: requests that decode, their first token.
    LatencyHistogram first_token;
    std::int64_t switches = 0;
    const RequestPathCost* path = nullptr;  // the serving profile's, looked up once
  };

  std::string mechanism_name() const { return to_string(mechanism_.mechanism()); }

  void check_memory() const {
    const Bytes capacity = config_.hardware.gpu_memory_bytes;
    Bytes needed = 0;
    if (mechanism_.keeps_models_resident()) {
      if (mechanism_.mechanism() == Mechanism::UnifiedMemory) return;  // over-subscription pages instead
      for (const auto& m : config_.models) needed += m.total_param_bytes();
    } else {
      // The active model and the incoming one share the parameter region.
      Bytes largest = 0;
      Bytes second = 0;
      for (const auto& m : config_.models) {
        const Bytes b = m.total_param_bytes();
        if (b > largest) {
          second = largest;
          largest = b;
        } else {
          second = std::max(second, b);
        }
      }
      needed = largest + second;
    }
    if (needed > capacity) {
      throw InputError(config_.source.string() + ": the models need " + format_bytes(needed) + " of GPU memory under " +
                       mechanism_name() + " but " + config_.hardware.gpu_name + " has " + format_bytes(capacity));
    }
  }

  // Note [Server policy as the simulator runs it]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The policy's configuration for an experiment config:
  // - workers: the standby workers plus the active one where the mechanism has standby
  //   workers (and psw serve's workers under fresh processes, where the simulator models psw
  //   serve: a serving profile); one process otherwise (one process, ready, the paper's
  //   stop-and-start, whose process is killed and started inside each switch); two under MPS
  //   and time slicing (the training job's and the requests').
  // - residency: where the simulator models psw serve, `cache: off` as psw serve runs by
  //   default (every request transfers); otherwise `active`, the paper's active worker: a
  //   request for the model of the task before runs without a switch.
  // - ready, MPS and time slicing: every model is on the device before the workload.
  // - fresh processes (stop-and-start, two processes): psw serve gives every task a fresh
  //   process; the paper's baseline only every switch (back-to-back requests of one model keep
  //   their process; its Figure 6 serves requests at 5 s cycles and longer).
  static PolicyConfig simulated_policy(const ExperimentConfig& config, const MechanismModel& mechanism,
                                       const SimulationOptions& options) {
    PolicyConfig p;
    p.mechanism = config.mechanism;
    const ProcessModel process = traits(config.mechanism).process;
    const bool serving = config.serving.has_value();
    switch (process) {
      case ProcessModel::StandbyWorkers:
        p.workers = mechanism.uses_standby_workers() ? config.standby_workers + 1 : 1;
        break;
      case ProcessModel::FreshProcess:
        p.workers = serving ? config.standby_workers + 1 : 1;
        break;
      case ProcessModel::SharedContext:
        p.workers = 2;
        break;
      case ProcessModel::OneProcess:
      case ProcessModel::Resident:
        p.workers = 1;
        break;
    }
    p.cache = serving ? CachePolicy::Off : CachePolicy::Active;
    for (const auto& m : config.models) p.model_bytes.push_back(m.total_param_bytes());
    p.training = config.training_model.has_value();
    p.resident_at_start = mechanism.keeps_models_resident() && config.mechanism != Mechanism::UnifiedMemory;
    p.fresh_process_per_task = serving;
    if (serving && process == ProcessModel::FreshProcess) {
      // Note [Processes a server starts with]
      // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
      // psw serve starts its workers before it listens: one takes the training job, the others
      // (all of them without one) wait, fresh. Under stop-and-start and two processes a task
      // needs a process that has run nothing (Note [Fresh processes] in
      // common/src/server_policy.cpp), and those first ones have: the first requests of a fresh
      // server take them with neither a kill nor a start (the first forward in a fresh process
      // they do pay). Only later requests wait for a process killed and started for them. On the
      // H200 (2026-12-03, shared-memory inputs, no warm-up) the first of three stop-and-start
      // requests took 321 ms, the next two 3.1 and 3.4 s. A warm-up, or an earlier run on the
      // same server, uses them up: psw load reads how many are left when its clock starts (the
      // server's psw_fresh_standby_workers), and the others start used.
      const int unused = p.workers - (p.training ? 1 : 0);
      const int fresh = std::clamp(options.fresh_standby_processes.value_or(unused), 0, unused);
      p.used_at_start = unused - fresh;
    }
    return p;
  }

  // One event to the policy, and its actions carried out in order.
  void feed(const PolicyEvent& event) {
    advance_training(sim_.now());  // at the rate that held up to this event
    const std::vector<PolicyAction> actions = policy_.handle(event);
    if (decisions_) decisions_->write(decision_line(sim_.now().ns(), event, actions));
    for (const PolicyAction& action : actions) carry_out(action);
  }

  void feed_at(Duration at, int priority, PolicyEvent event) {
    sim_.schedule_at(at, priority, [this, event = std::move(event)] { feed(event); });
  }

  void carry_out(const PolicyAction& a) {
    using K = PolicyAction::Kind;
    switch (a.kind) {
      case K::Dispatch:
        dispatch(a.request, a.worker, a.transfer);
        return;
      case K::Complete:
        PSW_CHECK(pending_.erase(a.request) == 1, "the policy answered request ", a.request, ", which is not pending");
        return;
      case K::StopTraining:
        stop_training(a.worker, a.mode, a.request);
        return;
      case K::ResumeTraining:
        PSW_CHECK(training_phase_ == TrainingPhase::Paused, "resumed a training job that is not paused");
        run_training_again(false);
        return;
      case K::StartTraining:
        start_training(a.worker);
        return;
      case K::Cleanup: {
        // Note [Cleanup in psw serve]: a stopped training job's worker drops its state; where
        // no standby worker waits for it (one process, ready) the stop's cost includes it.
        const Duration cleanup = mechanism_.uses_standby_workers() && config_.training_model
                                     ? worker_cleanup(*config_.training_model)
                                     : Duration::zero();
        feed_at(sim_.now() + cleanup, kCompletion, {.kind = PolicyEvent::Kind::WorkerCleanedUp, .worker = a.worker});
        return;
      }
      case K::RestartWorker: {
        PSW_CHECK(!a.fault, "a simulated worker failed: ", a.text);
        // Note [Fresh processes]: where the simulator models psw serve, the fresh process is
        // ready once started; in the paper's baseline the start is part of the switch that
        // follows (MechanismModel::switch_in), so it is ready at once.
        SimulatedWorker& w = workers_[static_cast<std::size_t>(a.worker)];
        w.process_started = sim_.now();
        w.busy_until = sim_.now();
        const Duration start = config_.serving ? mechanism_.process_start() : Duration::zero();
        feed_at(sim_.now() + start, kCompletion, {.kind = PolicyEvent::Kind::WorkerReady, .worker = a.worker});
        return;
      }
      case K::FailRequest:
      case K::KillWorker:
        throw Error(detail::concat("the server policy decided '", to_string(a.kind), "' in a simulation: ", a.text));
      case K::Log:
        return;
    }
  }

  // How long before `at` the worker's process began to start, for the switch's cost (Note
  // [Fresh processes]): where the simulator models psw serve, the process is the policy's; in
  // the paper's baseline every switch starts its own (0).
  Duration process_started_ago(int worker, Duration at) const {
    if (!config_.serving || traits(mechanism_.mechanism()).process != ProcessModel::FreshProcess) return Duration::zero();
    const auto& started = workers_[static_cast<std::size_t>(worker)].process_started;
    return started ? at - *started : Duration::max();
  }

  void schedule_next_arrival() {
    std::optional<Request> next = source_->next();
    if (!next) return;
    if (next->model >= config_.models.size()) throw Error("request for an unknown model index");
    if (next->arrival < sim_.now()) throw InputError(config_.source.string() + ": the workload's arrivals go backwards");
    ++issued_;
    const Request request = *next;
    sim_.schedule_at(request.arrival, kArrival, [this, request] {
      schedule_next_arrival();
      arrive(request, in_flight_now());
    });
  }

  // Note [Protocol under load]: at an arrival, how many requests are in flight (queued, served,
  // or answered by the server but not yet by the protocol).
  std::int64_t in_flight_now() {
    const Duration now = sim_.now();
    while (!unanswered_.empty() && unanswered_.top() <= now) unanswered_.pop();
    return static_cast<std::int64_t>(policy_.queued() + (policy_.inflight() ? 1 : 0) + unanswered_.size());
  }

  void arrive(const Request& request, std::int64_t in_flight) {
    const std::uint64_t id = next_request_++;
    pending_.emplace(id, Pending{request, in_flight});
    feed({.kind = PolicyEvent::Kind::RequestArrived, .request = id, .model = static_cast<int>(request.model)});
  }

  // Training progress between the last accounting point and `now`: at full speed, or under MPS
  // and time slicing at its rate beside a request.
  void advance_training(Duration now) {
    if (!training_ || training_phase_ != TrainingPhase::Running) return;
    const Duration ran = now - training_since_;
    if (mechanism_.concurrent() && policy_.inflight()) {
      const double rate = mechanism_.concurrent_training_rate();
      training_->advance(nanoseconds(static_cast<std::int64_t>(static_cast<double>(ran.ns()) * rate)));
    } else {
      training_->advance(ran);
    }
    training_ran_ += ran;  // beside a request, at its rate (Note [GPU busy and GPU work])
    training_since_ = now;
  }

  // Note [Killed training]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // Stop-and-start (and two processes) stop training by killing its process: the iteration in
  // progress is lost, and the job resumes, once switched back in, from its last completed
  // iteration (the runtime does the same: Note [Fresh processes] in
  // common/src/server_policy.cpp). The lost work is reported as training_lost_ms and counts as
  // GPU busy time. PipeSwitch and the in-process mechanisms stop at the next layer boundary and
  // lose nothing (paused in place, or their progress kept to the boundary when the policy
  // abandons the step: the simulator does not charge psw serve's loss of the partial step
  // there); Ready stops at once without loss (the ideal it is); MPS never stops training.
  //
  // Note [Overlapped stop]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // Under PipeSwitch the new model's first copy starts at dispatch, while the training job
  // is still finishing its current layer (MechanismModel::switch_in: transfers from `prep`,
  // compute from `stop`). This is not optimism about memory: check_memory() gives the
  // active task and the incoming model room side by side (the two largest models), as the
  // runtime gives every model its own region (README, "The runtime's memory is per model"),
  // so the copy never writes where training still reads. What the simulator does not model
  // is the training job's activations and optimizer state in GPU memory, nor any contention
  // of the copy with the finishing layer for memory bandwidth.
  //
  // Note [Paused in place]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // The server policy pauses the training job in place for a request when another worker is
  // standby to serve it (Note [Preemption without loss]), and abandons the step otherwise (and
  // always under fresh processes). Paused, the job's worker keeps its parameters and
  // activations on the device and waits at the layer boundary; once the queue is empty the job
  // goes on where it stopped, with neither a switch of the training model nor a worker. So the
  // simulator reports TrainingStopped as paused where the policy asked for a pause and the
  // mechanism can keep the job (pauses_training_in_place: standby workers, a stop at a layer
  // boundary, no kill), else as abandoned, after which the policy cleans the worker up and
  // later starts the job again with a switch-in. The simulator once switched the training
  // model back in on every resume (its pipelined transfer, 0.56 ms per resume under PipeSwitch
  // on the H200), which made its hold 8% longer than the server's (raw-serve-2026-12-02-held-a:
  // 3.41 s simulated, 3.16 s measured, 450 resumes).
  // With one standby worker, the worker beside the paused job serves queued requests back to
  // back, and waits between them only for what psw serve's worker does after a task
  // (MechanismModel::after_task_time): nothing under PipeSwitch. Measured so on the H200
  // (by hand from the requests.csv of the LLM replay raw-serve-2026-12-02-replay-llm-e): a
  // queued BERT-base request's reply came a median 0.44 ms after the one before it plus its
  // engine time (75 pairs), less than a request's server part alone (0.72 ms), where a 1 ms
  // cleanup would have made it 1.7 ms.
  // Not modelled: the switch-in still pays for the model it replaces (no-memory-management
  // frees the training model's layers on the critical path), as before, since the recorded
  // runs' fit of cuda_malloc_ns rests on it (Note [Calibrating a cost]).
  //
  // Note [Cleanup in psw serve]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The paper's worker, its task done, cleans up off the critical path before it is standby
  // again (the profile's worker_cleanup, 1 ms on the H200: an estimate). psw serve's worker is
  // standby as soon as its reply is out (controller.cpp, InferDone): the daemon owns the memory,
  // and what is left is what MechanismModel::after_task_time names (closing the per-group
  // handles under no-ipc-optimization; nothing under PipeSwitch), which the worker does after
  // its answer: a request dispatched to it meanwhile waits (SimulatedWorker::busy_until). The
  // simulator follows psw serve here with or without a serving profile, since the server
  // policy decides when a worker is standby. The profile's worker_cleanup is what a worker
  // pays to drop a stopped training job's state (the policy's Cleanup), and where the
  // simulator models psw serve, after_task_time again (the training worker's state is dropped
  // in place). Figure 6's closed loop showed why: the next request comes a protocol's time
  // (~0.45 ms) after the answer, while the training job runs again; with a 1 ms cleanup after
  // every task the simulator made it wait ~0.5 ms for the only standby worker, and PipeSwitch's
  // latency came out 7.6-9.1% above the H200's (raw-serve-2026-12-03-shm-fig6), its part
  // beyond the engine 0.85 ms against 0.35 ms.
  // A slice of the simulation's trace (one process; tracks 1 GPU, 2 PCIe / switch, 3 queue).
  void trace_slice(const std::string& name, const char* category, int track, Duration start, Duration end) {
    trace_->slice(name, category, 1, track, start, end);
  }

  Duration worker_cleanup(std::uint32_t model) const {
    return config_.serving ? mechanism_.after_task_time(model) : mechanism_.cleanup_time(model);
  }

  // StopTraining: the job runs to its layer boundary (the mechanisms that stop there) or is
  // stopped at once, then reports TrainingStopped; a switch-in still running is abandoned.
  void stop_training(int worker, StopMode mode, std::uint64_t request) {
    PSW_CHECK(training_ && worker == training_worker_, "stopped a training job that is not on worker ", worker);
    const Duration now = sim_.now();
    if (training_phase_ == TrainingPhase::SwitchingIn) {
      sim_.cancel(switch_in_event_);  // abandon switching training back in
      training_phase_ = TrainingPhase::Stopping;
      training_stops_at_ = now;
      sim_.schedule_at(now, kCompletion, [this, worker] { training_stopped(worker, TrainingStop::Abandoned); });
      return;
    }
    PSW_CHECK(training_phase_ == TrainingPhase::Running, "stopped a training job that is not running");
    Duration stop = mechanism_.stops_at_layer_boundary() ? training_->to_layer_boundary() : Duration::zero();
    training_->advance(stop);  // the current layer still completes
    training_ran_ += stop;
    if (mechanism_.kills_training()) training_lost_ += training_->discard_partial_iteration();
    if (trace_) trace_slice("train", "training", 1, training_started_, now + stop);
    held_since_ = now + stop;  // Note [Training held] in the runtime's controller.cpp
    stop += mechanism_.training_abort();  // Note [Training abort]: then the worker is free
    if (request != 0) ++training_preemptions_;
    training_phase_ = TrainingPhase::Stopping;
    training_stops_at_ = now + stop;
    // Note [Paused in place]: the job waits at the boundary where the mechanism can keep it.
    const bool paused = mode == StopMode::Pause && mechanism_.pauses_training_in_place();
    sim_.schedule_at(now + stop, kCompletion, [this, worker, paused] {
      training_stopped(worker, paused ? TrainingStop::Paused : TrainingStop::Abandoned);
    });
  }

  void training_stopped(int worker, TrainingStop how) {
    training_phase_ = how == TrainingStop::Paused ? TrainingPhase::Paused : TrainingPhase::OffDevice;
    if (how != TrainingStop::Paused) training_worker_ = -1;
    feed({.kind = PolicyEvent::Kind::TrainingStopped, .worker = worker, .stop = how, .steps = training_->iterations()});
  }

  // StartTraining: the training model is switched in on `worker`, then runs (on the first
  // start, the job that ran before the workload began, at once).
  void start_training(int worker) {
    PSW_CHECK(training_ && training_phase_ == TrainingPhase::OffDevice, "started a training job twice");
    const Duration now = sim_.now();
    const std::uint32_t model = *config_.training_model;
    training_worker_ = worker;
    if (!training_started_once_ || mechanism_.concurrent()) {
      training_started_once_ = true;
      last_model_ = model;
      run_training_again(false);
      return;
    }
    const Duration wait = std::max(workers_[static_cast<std::size_t>(worker)].busy_until - now, Duration::zero());
    const SwitchInCost cost = mechanism_.switch_in(model, Task::Training, Duration::zero(), last_model_, 0,
                                                   process_started_ago(worker, now + wait));
    const Duration overhead = cost.finish - mechanism_.resident_run(model, Task::Training);
    last_model_ = model;
    const Duration at = now + wait + std::max(overhead, Duration::zero());
    if (trace_ && wait > Duration::zero()) trace_slice("wait for a standby worker training", "queue", 3, now, now + wait);
    if (trace_ && at > now + wait) trace_slice("switch in training", "switch", 2, now + wait, at);  // Note [Waits in the trace]
    training_phase_ = TrainingPhase::SwitchingIn;
    switch_in_event_ = sim_.schedule_at(at, kResume, [this, switched = cost.switched] {
      advance_training(sim_.now());
      run_training_again(switched);
    });
  }

  void run_training_again(bool switched) {
    training_phase_ = TrainingPhase::Running;
    last_model_ = *config_.training_model;
    if (held_since_) training_held_ += sim_.now() - *held_since_;
    held_since_.reset();
    training_since_ = sim_.now();
    training_started_ = sim_.now();
    if (switched) ++training_switch_ins_;
  }

  // Dispatch: the request's switch (or its run on the resident model) on `worker`, its request
  // path, then the worker's answer.
  void dispatch(std::uint64_t id, int worker, bool transfer) {
    const Duration now = sim_.now();
    const Request request = pending_.at(id).request;
    SimulatedWorker& w = workers_[static_cast<std::size_t>(worker)];
    // The worker may still do what psw serve's worker does after a task (Note [Cleanup in psw
    // serve]): the request waits for it.
    const Duration wait = std::max(w.busy_until - now, Duration::zero());
    if (wait > Duration::zero()) ++standby_waits_;
    const Duration begin = now + wait;
    // Note [Overlapped stop]: a training job told to stop still runs to its layer boundary; the
    // switch's copies start now, its computation once the job has stopped.
    const Duration stop = training_phase_ == TrainingPhase::Stopping ? std::max(training_stops_at_ - begin, Duration::zero())
                                                                     : Duration::zero();
    // Note [MPS slowdown] in mechanism.cpp: under MPS the background job is never stopped, so
    // it shares the GPU whenever it runs.
    const bool beside_training = training_phase_ == TrainingPhase::Running && mechanism_.concurrent();
    const Task task = request.task;  // Note [Training requests]
    const SwitchInCost cost =
        transfer ? mechanism_.switch_in(request.model, task, stop, last_model_, request.prompt_tokens,
                                        process_started_ago(worker, begin))
                 : SwitchInCost{stop, stop + mechanism_.resident_run(request.model, task, beside_training,
                                                                     request.prompt_tokens),
                                false};
    const Duration startup = begin + cost.startup;
    // Note [Request path]: the server's own steps around the engine hold the worker too; Note
    // [Decode in the simulator]: so do the decode steps after the first token.
    const Duration finish = begin + cost.finish + server_path(request) + decode_time(request);
    if (cost.switched) {
      if (task == Task::Inference) {
        ++switches_;
        ++per_model_[request.model].switches;
        ++switched_;
        startup_sum_ += startup - now;
      } else {
        ++training_switch_ins_;
      }
    }
    last_model_ = request.model;
    if (trace_) {
      const std::string& name = config_.models[request.model].name;
      if (now > request.arrival) trace_slice("queued " + name, "queue", 3, request.arrival, now);
      // Note [Waits in the trace]
      // ~~~~~~~~~~~~~~~~~~~~~~~~~
      // A wait for a worker still busy after its task (Note [Cleanup in psw serve]) is its own
      // slice on the queue track, from the dispatch to the worker being free; the switch begins
      // then. A wait for a worker cleaning up after a stopped training job is queueing: the
      // policy dispatches the request once the worker is standby. The trace once drew such waits
      // inside the switch slice, so a switch of a few microseconds showed as one of the whole
      // wait. summary.json counts the first kind as standby_waits.
      if (wait > Duration::zero()) trace_slice("wait for a standby worker " + name, "queue", 3, now, begin);
      if (cost.switched) trace_slice("switch in " + name, "switch", 2, begin, startup);
      trace_slice((task == Task::Inference ? "infer " : "train ") + name, "compute", 1, startup, finish);
    }
    const Duration engine_from = begin + cost.worker_ready;
    sim_.schedule_at(finish, kCompletion, [this, id, worker, now, startup, engine_from, switched = cost.switched,
                                           beside_training] {
      finish_request(id, worker, now, startup, engine_from, switched, beside_training);
    });
  }

  // The worker's answer: the request's statistics, the next request of a closed loop, then
  // WorkerFinished to the policy. `engine_from`: when the engine's clock starts (after any wait
  // for the worker or for a fresh process to start). `beside_training`: a training job ran
  // beside it all along (MPS, time slicing).
  void finish_request(std::uint64_t id, int worker, Duration dispatched, Duration startup, Duration engine_from,
                      bool switched, bool beside_training) {
    const Duration now = sim_.now();
    const Pending& pending = pending_.at(id);
    const Request request = pending.request;
    // When the client has the answer (Note [Request path]): the server's completion, plus the
    // protocol where a serving profile has one.
    const Duration answered = now + protocol_path(request, pending.in_flight);
    if (answered > now) unanswered_.push(answered);
    const Duration latency = answered - request.arrival;
    const Duration decode = decode_time(request);
    const Duration ready = mechanism_.ready_run(request.model, request.task, request.prompt_tokens) + decode;
    inference_busy_ += ready;
    // Note [GPU busy and GPU work]: beside a training job that keeps running, the request adds
    // no busy time; alone, its ready run, within the time it held the GPU.
    if (!beside_training) inference_alone_ += std::min(ready, now - startup);
    if (request.task == Task::Inference) {
      latency_.add(latency);
      per_model_[request.model].latency.add(latency);
      per_model_[request.model].engine.add(now - engine_from - server_path(request));
      if (request.decode_tokens > 0) per_model_[request.model].first_token.add(latency - decode);
      if (config_.serving) {
        per_model_[request.model].server.add(now - request.arrival);
        per_model_[request.model].protocol.add(answered - now);
      }
      overhead_sum_ += (now - dispatched) - ready;
      if (const auto end = phase_end_of(request); end && answered <= *end) ++completed_in_phase_;
    } else {
      ++training_requests_;
    }
    bool slo_met = true;
    if (request.slo > Duration::zero()) {
      ++slo_total_;
      slo_met = latency <= request.slo;
      if (slo_met) ++slo_met_;
    }
    completed_any_ = true;
    end_ = std::max(end_, now);
    if (csv_) {
      csv_->number(completed_++);
      csv_->text(",");
      csv_->text(config_.models[request.model].name);
      csv_->text(request.task == Task::Inference ? ",inference" : ",training");
      for (Duration v : {request.arrival, dispatched, startup, now, latency}) {
        csv_->text(",");
        csv_->number(v.ns());
      }
      csv_->text(switched ? ",1," : ",0,");
      csv_->text(slo_met ? "1" : "0");
      csv_->end_row();
    }
    workers_[static_cast<std::size_t>(worker)].busy_until = now + mechanism_.after_task_time(request.model);

    // Cycles (Note [Closed-loop cycles] in exec/runtime's load_generator.cpp): the client
    // issues the next inference request when it has the answer. Without a protocol that is now:
    // it reaches the server before the answer is counted there, and the model keeps the GPU;
    // with one, the request arrives a protocol later, and the server, its queue empty
    // meanwhile, resumes training as psw serve does. A request answered after its own phase
    // issues none (psw load goes on to the next round).
    const auto own_end = phase_end_of(request);
    if (cycle_inference_until_ && own_end && answered < *own_end && request.task == Task::Inference) {
      if (answered == now) {
        // In flight at its arrival: the queue and the protocol's answers, not the one answered.
        arrive(cycle_request(now), in_flight_now() - 1);
      } else {
        sim_.schedule_at(answered, kArrival, [this, answered] { arrive(cycle_request(answered), in_flight_now()); });
      }
    }
    feed({.kind = PolicyEvent::Kind::WorkerFinished, .worker = worker, .request = id, .ok = true});
  }

  // Note [Training requests]
  // ~~~~~~~~~~~~~~~~~~~~~~~~
  // A `training` row of the project's CSV asks for one training iteration (forward and
  // backward) of its model. It waits in the same FIFO queue as inference and is served the
  // same way, with the training task's costs: a switch-in for training (its plan and the
  // backward pass) unless the model is already active, then the iteration at the ready speed;
  // it is not preempted. It is written to requests.csv (task `training`) with its latency, and
  // counted in training_requests and, if it needed a switch, training_switch_ins; the
  // inference statistics (requests, latency, overheads, throughput) leave it out. Its SLO, if
  // any, counts in slo_attainment like an inference's. It is independent of the background
  // training job (`training:`), which it preempts like any request.
  // Note [Request path] (serving_profile.hpp): what a live server adds to an inference around
  // the engine, inside the server (held by the worker) and in the protocol (latency only).
  // A model only trained needs no path; a requested one without it is refused when requested.
  const RequestPathCost* request_path(const Request& request) const {
    if (!config_.serving || request.task != Task::Inference) return nullptr;
    const RequestPathCost* path = per_model_[request.model].path;
    if (path == nullptr) {
      throw InputError(config_.source.string() + ": serving: the serving profile '" + config_.serving->name +
                       "' has no request_path of model '" + config_.models[request.model].name +
                       "', which the workload requests; measure it with psw profile-serving on a server of the model");
    }
    return path;
  }
  // Note [Decode in the simulator]: the steps after the first token (the config checked that
  // every decoding model's profile has a step).
  Duration decode_time(const Request& request) const {
    if (request.decode_tokens <= 0 || request.task != Task::Inference) return Duration::zero();
    const auto& step = config_.models[request.model].decode_step;
    PSW_CHECK(step.has_value(), "a request of ", config_.models[request.model].name,
              " decodes, but its profile has no decode step");
    return *step * request.decode_tokens;
  }
  Duration server_path(const Request& request) const {
    const RequestPathCost* path = request_path(request);
    return path ? path->server : Duration::zero();
  }
  // One draw per answered request where the profile has the protocol's spread (Note
  // [Protocol spread]), from a stream of its own, so the other random sources draw as before.
  // Note [Protocol under load]: plus the growth per other request in flight at its arrival.
  Duration protocol_path(const Request& request, std::int64_t in_flight) {
    const RequestPathCost* path = request_path(request);
    if (path == nullptr) return Duration::zero();
    const Duration alone = path->protocol_quantiles.empty()
                               ? path->protocol
                               : quantile_at(path->protocol_quantiles, uniform01(protocol_rng_));
    return alone + path->protocol_per_in_flight * in_flight;
  }
  // Note [Protocol under load]: at an arrival, how many requests are in flight (queued, served
  // (`serving`), or answered by the server but not yet by the protocol), kept in arrival order:
  // the server is one FIFO, so requests complete in that order.

  // Cycles: the end of the inference phase a request was issued in (every request of the
  // workload arrives inside one: the first at its start, the others at an answer within it),
  // which bounds what counts as answered in its phase and whether it issues the next one.
  std::optional<Duration> phase_end_of(const Request& request) const {
    if (config_.workload.kind != WorkloadKind::Cycles) return std::nullopt;
    const Duration cycle = config_.workload.cycle;
    return cycle * (request.arrival.ns() / cycle.ns() + 1);
  }

  Request cycle_request(Duration at) const {
    const std::uint32_t m = config_.workload.cycle_model;
    return Request{at, m, Task::Inference, config_.models[m].batch, config_.workload.slo};
  }

  void start_cycles() {
    const auto& w = config_.workload;
    for (std::int64_t r = 0; r < w.rounds; ++r) {
      const Duration inference_start = w.cycle * (2 * r + 1);
      const Duration inference_end = w.cycle * (2 * r + 2);
      sim_.schedule_at(inference_start, kPhase, [this, inference_end] {
        cycle_inference_until_ = inference_end;
        ++issued_;
        arrive(cycle_request(sim_.now()), in_flight_now());
      });
      sim_.schedule_at(inference_end, kPhase, [this, inference_end] {
        if (cycle_inference_until_ == inference_end) cycle_inference_until_.reset();
      });
    }
    end_ = w.cycle * (2 * w.rounds);
  }

  const ExperimentConfig& config_;
  Simulator sim_;
  MechanismModel mechanism_;
  std::unique_ptr<RequestSource> source_;
  std::vector<ModelStats> per_model_;
  ServerPolicy policy_;
  std::vector<SimulatedWorker> workers_;
  std::optional<TrainingJob> training_;

  // Requests arrived and not yet answered, by the id the policy knows them by (lookups only).
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::uint64_t next_request_ = 1;
  // The model of the task that ran last on the GPU (the training model while the job ran):
  // what a switch replaces (MechanismModel::switch_in's `previous`).
  std::optional<std::uint32_t> last_model_;
  TrainingPhase training_phase_ = TrainingPhase::OffDevice;
  int training_worker_ = -1;
  bool training_started_once_ = false;
  Duration training_since_;     // progress counted up to here
  Duration training_started_;   // its current run began (the trace's slice)
  Duration training_stops_at_;  // Stopping: it reaches its boundary (and has aborted) then
  EventId switch_in_event_ = 0;
  std::mt19937_64 protocol_rng_ = RandomStreams(config_.seed).stream("protocol");
  // Note [Protocol under load]: when each answered request's answer reaches its client.
  std::priority_queue<Duration, std::vector<Duration>, std::greater<>> unanswered_;
  std::optional<Duration> cycle_inference_until_;
  std::int64_t completed_in_phase_ = 0;  // cycles: completions inside their inference phase

  LatencyHistogram latency_;
  std::int64_t issued_ = 0;
  std::int64_t completed_ = 0;
  bool completed_any_ = false;
  std::int64_t slo_total_ = 0;
  std::int64_t slo_met_ = 0;
  std::int64_t switches_ = 0;              // inference switches (Note [Switch counts])
  std::int64_t training_switch_ins_ = 0;   // switches that brought training back in
  std::int64_t training_preemptions_ = 0;  // the job stopped for requests (Note [Switch counts])
  std::int64_t training_requests_ = 0;     // Note [Training requests]
  Duration training_lost_;                 // Note [Killed training]
  // Stopped for requests, from the layer boundary to running again (the runtime's Note
  // [Training held]): summed, and the start of the hold in progress.
  Duration training_held_;
  std::optional<Duration> held_since_;
  std::int64_t switched_ = 0;
  std::int64_t standby_waits_ = 0;
  Duration startup_sum_;
  Duration overhead_sum_;
  Duration inference_busy_;   // requests' ready runs (Note [GPU busy and GPU work])
  Duration inference_alone_;  // those of requests with no training job running beside them
  Duration training_ran_;     // time the training job ran, kept or killed
  Duration end_;

  std::unique_ptr<CsvWriter> csv_;
  std::unique_ptr<ChromeTraceWriter> trace_;
  std::unique_ptr<OutputFile> decisions_;
};

}  // namespace

namespace {

// Where the trace goes while the run is staged: inside the staged folder when the user put it
// inside --out (it then moves with the folder), else beside its target (StagedFile).
std::filesystem::path relative_inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::absolute(path).lexically_normal().lexically_relative(fs::absolute(folder).lexically_normal());
  if (rel.empty() || *rel.begin() == ".." || rel == ".") return {};
  return rel;
}

}  // namespace

std::optional<Duration> training_step(const ExperimentConfig& config) {
  if (!config.training_model) return std::nullopt;
  return TrainingJob(config.models[*config.training_model], config.hardware, serving_training_step(config))
      .iteration_time();
}

SimulationResult run_simulation(const ExperimentConfig& config, const SimulationOptions& options) {
  // Note [Atomic output folders]: everything is written under temporary names and moved into
  // place only after the run and every write succeeded.
  std::optional<StagedFolder> folder;
  if (!options.out_dir.empty()) folder.emplace(options.out_dir, "config.resolved.yaml");
  SimulationOptions staged = options;
  if (folder) staged.out_dir = folder->path();
  // The trace and the decision log: inside the staged folder when the user put them inside
  // --out (they then move with it), else staged beside their targets.
  std::list<StagedFile> staged_files;  // neither copied nor moved
  for (auto* path : {&staged.chrome_trace, &staged.decisions}) {
    if (path->empty()) continue;
    const std::filesystem::path inside = folder ? relative_inside(*path, options.out_dir) : std::filesystem::path();
    if (!inside.empty()) {
      *path = folder->path() / inside;
      std::filesystem::create_directories(path->parent_path());
    } else {
      staged_files.emplace_back(*path);
      *path = staged_files.back().path();
    }
  }
  if (folder) {
    // Note [Resolved configs]: its paths relative to where it lies (the staged folder is a
    // sibling of --out, so they hold once it is moved into place).
    const std::filesystem::path resolved = staged.out_dir / "config.resolved.yaml";
    save_text(resolved, resolved_yaml(config, resolved));
  }
  const auto started = std::chrono::steady_clock::now();
  SimulationResult result;
  {
    SimulatedServer server(config, staged);
    server.run();
    server.finish_outputs();
    result.summary = server.summary();
    result.events = server.events();
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (folder) save_text(staged.out_dir / "summary.json", to_json(result.summary).dump(2) + "\n");
  for (auto& file : staged_files) file.commit();
  if (folder) folder->commit();
  return result;
}

}  // namespace psw::sim
