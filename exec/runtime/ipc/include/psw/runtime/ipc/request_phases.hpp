#pragma once
// The phases of a request at the server, by the names the server's metrics give them
// (psw_request_phase_seconds{phase=...}). Here, below the server and the client, because both
// speak of them: the controller measures each phase (controller.hpp), and psw bench-serve reads
// them back from the metrics (serving_benchmark.cpp).

#include <cstddef>
#include <iterator>

namespace psw::runtime {

// Note [Request phases]: where a request's time at the server goes, each measured per request
// (the worker's device phases from events on its compute stream, from the moment it received
// the request). Together they add up to the server's latency (arrival to reply).
enum class RequestPhase {
  Queue,          // arrival at the controller until a worker takes it (training stopping, a busy worker)
  InputCopy,      // the controller copies the input into the worker's io segment (0: read in place)
  ToWorker,       // the message to the worker until the worker has it
  InputToDevice,  // the worker's copy of the input to the device
  InputLaunch,    // of InputToDevice: the worker's host time in the call that launches that copy
  DeviceStartup,  // the worker's receipt until the first layer computes (InputToDevice included)
  Compute,        // the first layer computing until the forward's end
  Output,         // the output back to the host and into the io segment
  Reply,          // the worker's reply until the controller has the response ready
};
inline constexpr const char* kRequestPhaseNames[] = {"queue",          "input_copy", "to_worker", "input_to_device", "input_launch",
                                                     "device_startup", "compute",    "output",    "reply"};
inline constexpr std::size_t kRequestPhases = std::size(kRequestPhaseNames);

// Note [Preemption phases]: where a preemption's time goes, from the request's arrival at the
// controller to the training job stopped at a layer boundary (psw_preemption_latency_seconds):
//   signal       arrival until the controller has written the stop flag (the policy's decision)
//   to_boundary  the flag written until the job's host thread reads it at a layer boundary: the
//                host work between two boundaries, and the host's waits on the device there (the
//                lookahead's bound, Note [Bounded lookahead]; the step's own synchronisations)
//   drain        the boundary until the device has done the training work queued before it
// The three add up to the preemption exactly. The boundary is counted by where in the step it
// lies, so that a tail can be traced to the part of the step it comes from.
enum class PreemptionPhase { Signal, ToBoundary, Drain };
inline constexpr const char* kPreemptionPhaseNames[] = {"signal", "to_boundary", "drain"};
inline constexpr std::size_t kPreemptionPhases = std::size(kPreemptionPhaseNames);

// Where in a training step the job read a stop (TrainingJob, Note [Preemption without loss]):
// between steps or between the pieces of the step's copy of its state slot, at a layer of the
// forward, at a parameter's gradient in the backward, between the update's pieces (Note [Update
// in pieces] in training.hpp).
enum class TrainingBoundary { StepStart, Forward, Backward, Update };
inline constexpr const char* kTrainingBoundaryNames[] = {"step_start", "forward", "backward", "update"};
inline constexpr std::size_t kTrainingBoundaries = std::size(kTrainingBoundaryNames);

}  // namespace psw::runtime
