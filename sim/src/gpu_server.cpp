#include "psw/sim/gpu_server.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <sstream>
#include <memory>
#include <optional>
#include <queue>

#include "psw/common/chrome_trace.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/common/switch_costs.hpp"
#include "psw/sim/mechanism.hpp"
#include "psw/sim/metrics.hpp"
#include "psw/sim/random_streams.hpp"
#include "psw/sim/simulator.hpp"
#include "psw/sim/workload_source.hpp"

namespace psw::sim {

namespace {

// Same-time order of the server's events (Note [Same-time order] in simulator.hpp): a
// completion frees the GPU before an arrival at the same instant is looked at, and phase
// changes of a cycles workload come last.
enum Priority : int { kCompletion = 0, kResume = 1, kArrival = 2, kPhase = 3 };

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

// Chrome trace written as it goes (constant memory), capped at a number of events. Like
// CsvWriter, finish() closes the JSON and checks the writes.
class TraceWriter {
 public:
  TraceWriter(const std::filesystem::path& path, std::size_t max_events) : out_(path), max_events_(max_events) {
    buffer_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    buffer_ << R"({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"GPU"}})";
    buffer_ << ",\n" << R"({"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"PCIe / switch"}})";
    buffer_ << ",\n" << R"({"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"queue"}})";
  }
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void slice(const std::string& name, const char* category, int track, Duration start, Duration end) {
    if (written_ >= max_events_) {
      ++dropped_;
      return;
    }
    ++written_;
    buffer_ << ",\n{\"name\":\"" << name << "\",\"cat\":\"" << category << "\",\"ph\":\"X\",\"pid\":1,\"tid\":"
            << track << ",\"ts\":" << chrome_trace_us(start) << ",\"dur\":" << chrome_trace_us(end - start) << "}";
    if (buffer_.tellp() >= kFlushAt) flush();
  }
  void finish() {
    buffer_ << "\n],\"otherData\":{\"events_dropped\":" << dropped_ << "}}\n";
    flush();
    out_.close();
  }

 private:
  void flush() {
    out_.write(buffer_.view());
    buffer_.str({});
  }
  static constexpr std::streamoff kFlushAt = 1 << 20;
  OutputFile out_;
  std::ostringstream buffer_;
  std::size_t max_events_;
  std::size_t written_ = 0;
  std::size_t dropped_ = 0;
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

class GpuServer {
 public:
  GpuServer(const ExperimentConfig& config, const SimulationOptions& options)
      : config_(config),
        mechanism_(config.mechanism, config.hardware, config.models, config.planner, config.placement,
                   config.parallel),
        source_(open_workload_source(config)),
        per_model_(config.models.size()),
        standby_(config.standby_workers) {
    check_memory();
    // Note [Processes a server starts with]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // psw serve starts its workers before it listens: one takes the training job, the others
    // (all of them without one) wait, fresh. Under stop-and-start and two processes a task needs
    // a process that has run nothing (Note [Fresh processes] in common/src/server_policy.cpp),
    // and those first ones have: the first requests of a fresh server take them with neither a
    // kill nor a start (the first forward in a fresh process they do pay). Only later requests
    // wait for a process killed and started for them. On the H200 (2026-12-03, shared-memory
    // inputs, no warm-up) the first of three stop-and-start requests took 321 ms, the next two
    // 3.1 and 3.4 s. A warm-up, or an earlier run on the same server, uses them up: psw load
    // reads how many are left when its clock starts (the server's psw_fresh_standby_workers).
    if (config.serving && traits(config.mechanism).process == ProcessModel::FreshProcess) {
      fresh_standby_ = options.fresh_standby_processes.value_or(config.standby_workers +
                                                                 (config.training_model ? 0 : 1));
    }
    if (config.serving) {
      for (std::size_t m = 0; m < config.models.size(); ++m) per_model_[m].path = config.serving->path_of(config.models[m].name);
    }
    if (config.training_model) {
      training_.emplace(config.models[*config.training_model], config.hardware, serving_training_step(config));
      mechanism_.set_training_job(config.models[*config.training_model].name, config.training_batch);
      state_ = State::Training;
      training_since_ = Duration::zero();
    }
    if (!options.out_dir.empty() && config.requests_csv) {
      csv_ = std::make_unique<CsvWriter>(options.out_dir / "requests.csv");
      csv_->text("id,model,task,arrival_ns,dispatch_ns,startup_ns,finish_ns,latency_ns,switched,slo_met\n");
    }
    if (!options.chrome_trace.empty()) {
      trace_ = std::make_unique<TraceWriter>(options.chrome_trace, options.chrome_trace_max_events);
    }
  }

  void run() {
    if (config_.workload.kind == WorkloadKind::Cycles) {
      start_cycles();
    } else {
      schedule_next_arrival();
    }
    sim_.run();
    if (!completed_any_ && issued_ == 0) throw InputError(config_.source.string() + ": the workload has no requests");
    end_ = std::max(sim_.now(), end_);
    advance_training(end_);
    if (held_since_) training_held_ += end_ - *held_since_;
    held_since_.reset();
  }

  // Completes and closes requests.csv and the trace, checked (Note [Checked writes]).
  void finish_outputs() {
    if (csv_) csv_->finish();
    if (trace_) trace_->finish();
  }


  // Note [Switch counts]
  // ~~~~~~~~~~~~~~~~~~~~
  // `switches` counts the inference requests whose model had to be switched in (per model
  // under `models`); `training_switch_ins` counts the switches that brought training back in:
  // the background job resuming after inference, and training requests (Note [Training
  // requests]) that needed one. MPS switches nothing, so both stay 0 there. A job paused in
  // place goes on without a switch (Note [Paused in place]): `training_preemptions` counts the
  // times the job was stopped for requests, whichever way it came back.
  nlohmann::json summary() const {
    using nlohmann::json;
    auto ms = [](Duration d) { return static_cast<double>(d.ns()) / 1e6; };
    auto latency = [](const LatencyHistogram& h) { return latency_summary_json(h); };
    json models = json::object();
    for (std::size_t m = 0; m < per_model_.size(); ++m) {
      if (per_model_[m].latency.count() == 0) continue;
      models[config_.models[m].name] = {{"latency", latency(per_model_[m].latency)},
                                        {"engine_latency", latency(per_model_[m].engine)},
                                        {"switches", per_model_[m].switches}};
      if (config_.serving) {
        // Note [Latency parts] (validation.hpp): the keys psw load writes, for psw validate.
        models[config_.models[m].name]["server_latency"] = latency(per_model_[m].server);
        models[config_.models[m].name]["protocol_latency"] = latency(per_model_[m].protocol);
      }
      if (traits(config_.mechanism).peer_paths) {
        // Note [Parallel paths]: the switch's plan, its bound and the one-GPU plan beside it.
        const auto p = mechanism_.parallel_switch(static_cast<std::uint32_t>(m), Task::Inference);
        models[config_.models[m].name]["parallel"] = {
            {"gpus", p.gpus},
            {"helpers", p.helpers_training ? "training" : "idle"},
            {"groups", p.groups},
            {"bytes", p.bytes},
            {"via_helpers_bytes", p.via_helpers},
            {"switch_ms", ms(p.total)},
            {"bound_ms", ms(p.bound)},
            {"single_gpu_ms", ms(p.single_gpu_total)}};
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
    json out = {
        {"name", config_.name},
        {"mechanism", mechanism_name()},
        {"hardware", config_.hardware.name},
        {"seed", config_.seed},
        {"requests", latency_.count()},
        {"latency", latency(latency_)},
        {"slo_attainment", slo_total_ > 0 ? static_cast<double>(slo_met_) / static_cast<double>(slo_total_) : 1.0},
        // Cycles (Figure 6): inferences completed within the inference phases per second of
        // inference phase; otherwise completions per second of the whole run.
        {"throughput_rps",
         inference_time_s > 0
             ? static_cast<double>(config_.workload.kind == WorkloadKind::Cycles ? completed_in_phase_
                                                                                : latency_.count()) /
                   inference_time_s
             : 0.0},
        {"makespan_s", makespan_s},
        // Note [GPU busy and GPU work]
        {"gpu_busy_fraction", busy},
        {"gpu_work_fraction", work},
        {"training_iterations", training_ ? training_->iterations() : 0},
        {"training_iterations_per_s",
         training_ && makespan_s > 0 ? static_cast<double>(training_->iterations()) / makespan_s : 0.0},
        // Note [Switch counts]: inference switches and training switch-ins apart.
        {"switches", switches_},
        {"training_switch_ins", training_switch_ins_},
        {"training_preemptions", training_preemptions_},
        {"training_requests", training_requests_},
        {"training_lost_ms", ms(training_lost_)},
        {"training_held_ms", ms(training_held_)},
        {"standby_waits", standby_waits_},
        {"startup_overhead_ms", {{"mean", switched_ ? ms(startup_sum_) / static_cast<double>(switched_) : 0.0}}},
        {"total_overhead_ms",
         {{"mean", latency_.count() ? ms(overhead_sum_) / static_cast<double>(latency_.count()) : 0.0}}},
        {"models", models}};
    return out;
  }

  std::uint64_t events() const { return sim_.events_processed(); }

 private:
  enum class State { Idle, Training, Resuming, Inference };

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

  void schedule_next_arrival() {
    std::optional<Request> next = source_->next();
    if (!next) return;
    if (next->model >= config_.models.size()) throw Error("request for an unknown model index");
    if (next->arrival < sim_.now()) throw InputError(config_.source.string() + ": the workload's arrivals go backwards");
    ++issued_;
    const Request request = *next;
    sim_.schedule_at(request.arrival, kArrival, [this, request] {
      schedule_next_arrival();
      arrive(request);
    });
  }

  void arrive(const Request& request) {
    note_in_flight(state_ == State::Inference);
    if (state_ == State::Inference) {
      queue_.push_back(request);
      return;
    }
    dispatch(request);
  }

  // Training progress between the last accounting point and `now`.
  void advance_training(Duration now) {
    if (!training_) return;
    if (state_ == State::Training) {
      training_->advance(now - training_since_);
      training_ran_ += now - training_since_;
      training_since_ = now;
    } else if (mechanism_.concurrent() && state_ == State::Inference) {
      const double rate = mechanism_.concurrent_training_rate();
      training_->advance(nanoseconds(static_cast<std::int64_t>(static_cast<double>((now - training_since_).ns()) * rate)));
      training_ran_ += now - training_since_;  // beside the request, at its rate (Note [GPU busy and GPU work])
      training_since_ = now;
    }
  }

  // Note [Killed training]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // Stop-and-start (and two processes) stop training by killing its process: the iteration in
  // progress is lost, and the job resumes, once switched back in, from its last completed
  // iteration (the runtime does the same: Note [Fresh processes] in common/src/server_policy.cpp). The lost
  // work is reported as training_lost_ms and counts as GPU busy time. PipeSwitch and the
  // in-process mechanisms pause at the next layer boundary and lose nothing; Ready stops at
  // once without loss (the ideal it is); MPS never stops training.
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
  // The runtime pauses its training job in place for a request when another worker can serve
  // it (controller.cpp's stop_training; Note [Preemption without loss]): the job's worker keeps
  // its parameters and activations on the device and waits at the layer boundary, a standby
  // worker serves the request, and once the queue is empty the job goes on where it stopped.
  // So under the mechanisms of standby workers that stop at a layer boundary
  // (pauses_training_in_place) the request takes a standby worker and sends no worker to
  // cleaning, and resuming costs neither a switch of the training model nor a worker: the last
  // request's worker goes to cleaning, and the job runs again at once (with no standby worker
  // configured the job is switched out as before). The simulator once switched the training
  // model back in (its pipelined transfer, 0.56 ms per resume under PipeSwitch on the H200),
  // which made its hold 8% longer than the server's (raw-serve-2026-12-02-held-a: 3.41 s
  // simulated, 3.16 s measured, 450 resumes).
  // With one standby worker, the worker beside the paused job serves queued requests back to
  // back, and waits between them only for what psw serve's worker does after a task
  // (MechanismModel::after_task_time): nothing under PipeSwitch. Measured so on the H200
  // (by hand from the requests.csv of the LLM replay raw-serve-2026-12-02-replay-llm-e): a
  // queued BERT-base request's reply came a median 0.44 ms after the one before it plus its
  // engine time (75 pairs), less than a request's server part alone (0.72 ms), where a 1 ms
  // cleanup would have made it 1.7 ms.
  // Not modelled: the runtime abandons the step instead when no other worker is standby at that
  // moment; and the switch-in still pays for the model it replaces (no-memory-management frees
  // the training model's layers on the critical path), as before, since the recorded runs' fit
  // of cuda_malloc_ns rests on it (Note [Calibrating a cost]).
  //
  // Note [Cleanup in psw serve]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The paper's worker, its task done, cleans up off the critical path before it is standby
  // again (the profile's worker_cleanup, 1 ms on the H200: an estimate). psw serve's worker is
  // standby as soon as its reply is out (controller.cpp, InferDone): the daemon owns the memory,
  // and what is left is what MechanismModel::after_task_time names (closing the per-group
  // handles under no-ipc-optimization; nothing under PipeSwitch). So where the simulator models
  // psw serve (a serving profile) a worker leaving its task is standby after after_task_time,
  // else after cleanup_time. Figure 6's closed loop showed the difference: the next request
  // comes a protocol's time (~0.45 ms) after the answer, while the training job runs again;
  // with the 1 ms cleanup the simulator made it wait ~0.5 ms for the only standby worker, and
  // PipeSwitch's latency came out 7.6-9.1% above the H200's (raw-serve-2026-12-03-shm-fig6),
  // its part beyond the engine 0.85 ms against 0.35 ms.
  Duration worker_cleanup(std::uint32_t model) const {
    return config_.serving ? mechanism_.after_task_time(model) : mechanism_.cleanup_time(model);
  }

  void dispatch(const Request& request) {
    const Duration now = sim_.now();
    Duration stop = Duration::zero();
    std::optional<std::uint32_t> previous = active_model_;
    // The worker that was active goes to cleaning when the request takes a standby one, unless
    // it is the training job's, paused in place (Note [Paused in place]).
    bool previous_paused = false;
    bool fresh = !active_model_ || *active_model_ != request.model;
    // Note [MPS slowdown] in mechanism.cpp: under MPS the background job is never stopped, so
    // it shares the GPU whenever it is configured and the server is not idle.
    const bool beside_training = training_.has_value() && mechanism_.concurrent() && state_ != State::Idle;
    if (state_ == State::Training) {
      advance_training(now);
      previous = config_.training_model;
      fresh = true;
      if (!mechanism_.concurrent()) {
        if (mechanism_.stops_at_layer_boundary()) stop = training_->to_layer_boundary();
        training_->advance(stop);  // the current layer still completes
        training_ran_ += stop;
        if (mechanism_.kills_training()) training_lost_ += training_->discard_partial_iteration();
        if (trace_) trace_->slice("train", "training", 1, training_started_, now + stop);
        held_since_ = now + stop;  // Note [Training held] in the runtime's controller.cpp
        stop += mechanism_.training_abort();  // Note [Training abort]: then the worker is free
        ++training_preemptions_;
        // With no standby worker the runtime cannot pause in place: it abandons the step.
        training_paused_ = mechanism_.pauses_training_in_place() && config_.standby_workers > 0;
        previous_paused = training_paused_;
      }
    } else if (state_ == State::Resuming) {
      sim_.cancel(resume_event_);  // abandon switching training back in
      previous = config_.training_model;
      previous_paused = training_paused_;
      fresh = true;
    }
    // Note [Fresh processes]: psw serve hands the request the process it is starting for the
    // training job, which it waits for no longer than the rest of that start.
    Duration process_started_ago = Duration::zero();
    if (state_ == State::Resuming && fresh_process_since_) process_started_ago = now - *fresh_process_since_;
    fresh_process_since_.reset();
    if (mechanism_.concurrent()) fresh = false;  // MPS: every model stays resident, nothing to switch
    // Note [Fresh processes] (common/src/server_policy.cpp): psw serve gives every request a
    // process of its own under stop-and-start and two processes, even one queued behind a request
    // of the same model. So does the simulator where it models psw serve (a serving profile);
    // without one, back-to-back requests of one model keep their process, as in the paper's
    // baseline (its Figure 6 serves requests at 5 s cycles and longer).
    if (config_.serving && traits(mechanism_.mechanism()).process == ProcessModel::FreshProcess) {
      fresh = true;
      if (fresh_standby_ > 0) {  // Note [Processes a server starts with]: started long before
        --fresh_standby_;
        process_started_ago = Duration::max();
      }
    }
    state_ = State::Inference;

    const Task task = request.task;  // Note [Training requests]
    Duration wait = Duration::zero();  // for a standby worker
    SwitchInCost cost;
    if (!fresh) {
      cost = {Duration::zero(), mechanism_.resident_run(request.model, task, beside_training, request.prompt_tokens),
              false};
    } else {
      cost = mechanism_.switch_in(request.model, task, stop, previous, request.prompt_tokens, process_started_ago);
    }
    if (cost.switched && mechanism_.uses_standby_workers()) {
      wait = take_standby(now, previous, previous_paused);
    }
    const Duration startup = now + wait + cost.startup;
    // Note [Request path]: the server's own steps around the engine hold the worker too.
    const Duration finish = now + wait + cost.finish + server_path(request);
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
    active_model_ = request.model;
    if (trace_) {
      const std::string& name = config_.models[request.model].name;
      if (now > request.arrival) trace_->slice("queued " + name, "queue", 3, request.arrival, now);
      // Note [Waits in the trace]
      // ~~~~~~~~~~~~~~~~~~~~~~~~~
      // A wait for a standby worker (one still cleaning up, Note [Cleanup in psw serve]) is its
      // own slice on the queue track, from the dispatch to the worker being standby; the switch
      // begins then. The trace once drew the wait inside the switch slice, so a switch of a few
      // microseconds showed as one of the whole wait. requests.csv keeps both in dispatch_ns to
      // startup_ns (docs/simulator.md), and summary.json counts the waits as standby_waits.
      if (wait > Duration::zero()) trace_->slice("wait for a standby worker " + name, "queue", 3, now, now + wait);
      if (cost.switched) trace_->slice("switch in " + name, "switch", 2, now + wait, startup);
      trace_->slice((task == Task::Inference ? "infer " : "train ") + name, "compute", 1, startup, finish);
    }
    const Duration engine_from = now + wait + cost.worker_ready;
    sim_.schedule_at(finish, kCompletion,
                     [this, request, now, startup, engine_from, switched = cost.switched, beside_training] {
                       complete(request, now, startup, engine_from, switched, beside_training);
                     });
  }

  // PipeSwitch's active-standby workers: the switch needs a standby worker; the worker of
  // the previous task goes to cleaning and is standby again after its cleanup, unless it is
  // the training job's, paused in place (Note [Paused in place]).
  Duration take_standby(Duration now, std::optional<std::uint32_t> previous, bool previous_paused = false) {
    while (!cleaning_.empty() && cleaning_.top() <= now) {
      cleaning_.pop();
      ++standby_;
    }
    Duration ready = now;
    if (standby_ == 0) {
      if (cleaning_.empty()) {
        // Every other worker is the training job's, paused in place (Note [Paused in place]):
        // the previous request's worker serves this one too, after what psw serve's worker
        // does after a task (Note [After the task]), not the paper's cleanup of a worker.
        PSW_CHECK(previous && !previous_paused, "no worker to serve a request");
        const Duration after_task = mechanism_.after_task_time(*previous);
        if (after_task > Duration::zero()) ++standby_waits_;
        return after_task;
      }
      ++standby_waits_;
      ready = cleaning_.top();
      cleaning_.pop();
      ++standby_;
    }
    --standby_;
    if (previous_paused) return ready - now;  // the job's worker keeps its place
    if (previous) cleaning_.push(ready + worker_cleanup(*previous));  // Note [Cleanup in psw serve]
    else ++standby_;  // nothing was active: no worker to clean
    // The worker that served the previous task (if any) is now cleaning; the new one is active.
    return ready - now;
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
  void note_in_flight(bool serving) {
    const Duration now = sim_.now();
    while (!unanswered_.empty() && unanswered_.top() <= now) unanswered_.pop();
    in_flight_at_arrival_.push_back(static_cast<std::int64_t>(queue_.size() + (serving ? 1 : 0) + unanswered_.size()));
  }

  // `engine_from`: when the engine's clock starts (a standby worker or a fresh process taking it).
  // `beside_training`: a training job ran beside it all along (MPS, time slicing).
  void complete(const Request& request, Duration dispatched, Duration startup, Duration engine_from, bool switched,
                bool beside_training) {
    const Duration now = sim_.now();
    // When the client has the answer (Note [Request path]): the server's completion, plus the
    // protocol where a serving profile has one.
    PSW_CHECK(!in_flight_at_arrival_.empty(), "a request completed that never arrived");
    const std::int64_t in_flight = in_flight_at_arrival_.front();
    in_flight_at_arrival_.pop_front();
    const Duration answered = now + protocol_path(request, in_flight);
    if (answered > now) unanswered_.push(answered);
    const Duration latency = answered - request.arrival;
    const Duration ready = mechanism_.ready_run(request.model, request.task, request.prompt_tokens);
    inference_busy_ += ready;
    // Note [GPU busy and GPU work]: beside a training job that keeps running, the request adds
    // no busy time; alone, its ready run, within the time it held the GPU.
    if (!beside_training) inference_alone_ += std::min(ready, now - startup);
    if (request.task == Task::Inference) {
      latency_.add(latency);
      per_model_[request.model].latency.add(latency);
      per_model_[request.model].engine.add(now - engine_from - server_path(request));
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

    // Cycles (Note [Closed-loop cycles] in exec/runtime's load_generator.cpp): the client
    // issues the next inference request when it has the answer. Without a protocol that is now,
    // and the model keeps the GPU; with one, the request arrives a protocol later, and the
    // server, its queue empty meanwhile, resumes training as psw serve does.
    // A request answered after its own phase issues none (psw load goes on to the next round).
    const auto own_end = phase_end_of(request);
    if (cycle_inference_until_ && own_end && answered < *own_end && request.task == Task::Inference) {
      if (answered == now) {
        note_in_flight(false);  // the request just answered is no longer in flight
        queue_.push_back(cycle_request(now));
      } else {
        sim_.schedule_at(answered, kArrival, [this, answered] { arrive(cycle_request(answered)); });
      }
    }
    if (!queue_.empty()) {
      const Request next = queue_.front();
      queue_.pop_front();
      dispatch(next);
      return;
    }
    if (training_) {
      resume_training(now);
    } else {
      state_ = State::Idle;
    }
  }

  void resume_training(Duration now) {
    if (mechanism_.concurrent()) {
      advance_training(now);
      state_ = State::Training;
      training_since_ = now;
      training_started_ = now;
      return;
    }
    if (training_paused_) {  // Note [Paused in place]: no switch; the request's worker cleans up
      if (active_model_) cleaning_.push(now + worker_cleanup(*active_model_));  // Note [Cleanup in psw serve]
      active_model_.reset();
      state_ = State::Resuming;
      resume_event_ = sim_.schedule_at(now, kResume, [this] { run_training_again(false); });
      return;
    }
    // Switching training back in costs the mechanism's overhead for the training model.
    const std::uint32_t model = *config_.training_model;
    const SwitchInCost cost = mechanism_.switch_in(model, Task::Training, Duration::zero(), active_model_);
    const Duration overhead = cost.finish - mechanism_.resident_run(model, Task::Training);
    Duration wait = Duration::zero();
    if (cost.switched && mechanism_.uses_standby_workers()) wait = take_standby(now, active_model_);
    active_model_.reset();
    state_ = State::Resuming;
    // Note [Fresh processes]: where the simulator models psw serve, a request arriving meanwhile
    // takes the process starting now (dispatch).
    if (config_.serving && traits(mechanism_.mechanism()).process == ProcessModel::FreshProcess) {
      fresh_process_since_ = now + wait;
    }
    const Duration at = now + wait + std::max(overhead, Duration::zero());
    if (trace_ && wait > Duration::zero()) trace_->slice("wait for a standby worker training", "queue", 3, now, now + wait);
    if (trace_ && at > now + wait) trace_->slice("switch in training", "switch", 2, now + wait, at);  // Note [Waits in the trace]
    resume_event_ = sim_.schedule_at(at, kResume, [this, switched = cost.switched] { run_training_again(switched); });
  }

  void run_training_again(bool switched) {
    state_ = State::Training;
    fresh_process_since_.reset();
    training_paused_ = false;
    if (held_since_) training_held_ += sim_.now() - *held_since_;
    held_since_.reset();
    training_since_ = sim_.now();
    training_started_ = sim_.now();
    if (switched) ++training_switch_ins_;
  }

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
        arrive(cycle_request(sim_.now()));
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
  std::optional<TrainingJob> training_;

  State state_ = State::Idle;
  std::optional<std::uint32_t> active_model_;
  std::deque<Request> queue_;
  Duration training_since_;
  Duration training_started_;
  EventId resume_event_ = 0;
  bool training_paused_ = false;  // stopped for requests, paused in place (Note [Paused in place])
  std::mt19937_64 protocol_rng_ = RandomStreams(config_.seed).stream("protocol");
  // Note [Protocol under load]: per request not yet completed, in arrival order, the requests
  // in flight when it arrived; and when each completed one's answer reaches its client.
  std::deque<std::int64_t> in_flight_at_arrival_;
  std::priority_queue<Duration, std::vector<Duration>, std::greater<>> unanswered_;
  std::optional<Duration> cycle_inference_until_;
  std::int64_t completed_in_phase_ = 0;      // cycles: completions inside their inference phase

  int standby_;
  std::priority_queue<Duration, std::vector<Duration>, std::greater<>> cleaning_;

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
  // Note [Fresh processes]: when the fresh process that training resumes in began to start,
  // while it starts (psw serve semantics: a serving profile).
  std::optional<Duration> fresh_process_since_;
  int fresh_standby_ = 0;  // Note [Processes a server starts with]: unused, ready
  std::int64_t switched_ = 0;
  std::int64_t standby_waits_ = 0;
  Duration startup_sum_;
  Duration overhead_sum_;
  Duration inference_busy_;   // requests' ready runs (Note [GPU busy and GPU work])
  Duration inference_alone_;  // those of requests with no training job running beside them
  Duration training_ran_;     // time the training job ran, kept or killed
  Duration end_;

  std::unique_ptr<CsvWriter> csv_;
  std::unique_ptr<TraceWriter> trace_;
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
  std::optional<StagedFile> trace_file;
  SimulationOptions staged = options;
  if (folder) staged.out_dir = folder->path();
  if (!options.chrome_trace.empty()) {
    const std::filesystem::path inside = folder ? relative_inside(options.chrome_trace, options.out_dir)
                                                : std::filesystem::path();
    if (!inside.empty()) {
      staged.chrome_trace = folder->path() / inside;
      std::filesystem::create_directories(staged.chrome_trace.parent_path());
    } else {
      trace_file.emplace(options.chrome_trace);
      staged.chrome_trace = trace_file->path();
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
    GpuServer server(config, staged);
    server.run();
    server.finish_outputs();
    result.summary = server.summary();
    result.events = server.events();
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (folder) save_text(staged.out_dir / "summary.json", result.summary.dump(2) + "\n");
  if (trace_file) trace_file->commit();
  if (folder) folder->commit();
  return result;
}

}  // namespace psw::sim
