#pragma once
// Note [Scheduling]: which task the GPU runs next. One small type, shared in spirit by the
// simulator's controller (sim/src/gpu_server.cpp, which applies the same rule inline over
// simulated time) and the runtime's (exec/runtime/src/control/controller.cpp), which asks
// it at every event: inference requests first, in arrival order; training only when no
// request waits or runs; a running training job is stopped when a request arrives.

namespace psw {

struct SchedulerView {
  bool request_waiting = false;   // a request is queued
  bool request_running = false;   // a worker runs a request
  bool worker_free = false;       // a standby worker can take a task now
  bool training_wanted = false;   // a training job is started and not done
  bool training_running = false;  // a worker trains (not yet told to stop)
  bool training_stopping = false; // a worker was told to stop and has not confirmed
  bool training_paused = false;   // a worker waits in place at a layer boundary
  bool dispatch_after_stop = false;  // a request waits until training has stopped
  bool share_device = false;      // MPS: tasks run side by side, training is never stopped
};

enum class SchedulerAction { Wait, DispatchRequest, StopTraining, ResumeTraining };

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // The actions to take now, in order (stopping training and dispatching a request may both
  // be due at once).
  virtual void decide(const SchedulerView& view, SchedulerAction out[2], int& count) const = 0;
};

// FIFO, inference before training (the paper's controller, PAPER.md §3).
class InferenceFirstPolicy final : public SchedulingPolicy {
 public:
  void decide(const SchedulerView& v, SchedulerAction out[2], int& count) const override {
    count = 0;
    if (v.share_device) {  // MPS: no switch, so nothing to stop; one request at a time
      if (v.request_waiting && !v.request_running && v.worker_free) out[count++] = SchedulerAction::DispatchRequest;
      if (v.training_wanted && !v.training_running && !v.training_stopping && !v.training_paused &&
          (v.worker_free && count == 0)) {
        out[count++] = SchedulerAction::ResumeTraining;
      }
      return;
    }
    if (v.request_waiting && v.training_running && !v.training_stopping) out[count++] = SchedulerAction::StopTraining;
    const bool training_in_the_way = v.dispatch_after_stop && (v.training_running || v.training_stopping);
    if (v.request_waiting && !v.request_running && v.worker_free && !training_in_the_way) {
      out[count++] = SchedulerAction::DispatchRequest;
    }
    if (count == 0 && !v.request_waiting && !v.request_running && v.training_wanted && !v.training_running &&
        !v.training_stopping && (v.worker_free || v.training_paused)) {
      out[count++] = SchedulerAction::ResumeTraining;
    }
  }
};

}  // namespace psw
