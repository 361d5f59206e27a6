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
  DeviceStartup,  // the worker's receipt until the first layer computes (InputToDevice included)
  Compute,        // the first layer computing until the forward's end
  Output,         // the output back to the host and into the io segment
  Reply,          // the worker's reply until the controller has the response ready
};
inline constexpr const char* kRequestPhaseNames[] = {"queue",         "input_copy", "to_worker", "input_to_device",
                                                     "device_startup", "compute",    "output",    "reply"};
inline constexpr std::size_t kRequestPhases = std::size(kRequestPhaseNames);

}  // namespace psw::runtime
