#pragma once
// ServingProfile: what a live server adds around the engine, measured on it (the
// cross-validation's calibration), so that the simulator's latencies are a client's and its
// training rate the server's job's.
//
// Note [Request path]
// ~~~~~~~~~~~~~~~~~~~
// The simulator's latency of a request is its queueing plus the engine's switch and forward
// (the timeline of DESIGN.md §4). A client of `psw serve` sees more: the protocol (gRPC over
// the socket: the request with its input and the response with its output, each serialized,
// copied and handed between threads), and inside the server the controller's and the worker's
// own steps (the input into the worker's io segment, the message to the worker, the input's
// copy to the device, the output back to the host, the reply). A serving profile measures
// both per model, as medians over cold requests to a live server:
//   protocol_ns = client latency - the server's time (arrival at the controller to response ready)
//   server_ns   = the server's time - the engine's time (the input on the device to the forward's end)
// Both come back with each response (parameters psw_server_ns and psw_engine_ns), so each
// request is split exactly; the medians make the profile. The simulator adds server_ns to a
// request's service time (the worker and the controller are busy with it: a request queued
// behind it waits for it too) and protocol_ns to its latency only (gRPC serves calls on
// threads of their own, in parallel). The numbers hold for inputs sent as the profile says
// (Note [Inputs in shared memory]): `inputs: raw`, the bytes in the message, or `inputs:
// shared-memory`, the tensors in registered shared memory regions and only their references in
// the message (`psw load --shared-memory`); the protocol of the two differs by milliseconds.
//
// Note [Inputs in shared memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With raw inputs gRPC carries each request's tensors (4.8 MB for ResNet-152 at batch 8, 8.6 MB
// for Inception-v3): on the H200 that protocol took 4-9 ms, more than the switch it wraps, and it
// moved by 10-25% between runs and machines, which set the validations' latency errors
// (2026-12-02-c: PipeSwitch's engine within 3%, its latency 7-12% short, all of it protocol).
// A client on the server's host can instead put the tensors in POSIX shared memory registered
// with the server (Triton's system shared memory extension, which `psw serve` speaks) and send
// references: the path then costs what Triton's users pay. psw load does that with
// --shared-memory (Note [Shared memory senders] in load_generator.hpp), the serving profile fitted
// from such a run says `inputs: shared-memory`, and psw validate refuses a profile whose inputs
// are not the run's, since its request path would be the other protocol's.
//
// Note [Protocol spread]
// ~~~~~~~~~~~~~~~~~~~~~~
// One protocol_ns per model gives every simulated request the same path, so the simulator's
// p99 is its p50 where the measurement's is not: on the H200 (2026-12-02, pipeswitch, 20
// requests per model) Inception-v3's protocol ran from a median of 8.24 ms to 9.18 ms and the
// simulated p99 came out 7.6% low. A profile may therefore also give the protocol's quantiles,
// `protocol_quantiles_ns`: at least two values, non-decreasing, at evenly spaced probabilities
// from 0 to 1 (psw profile-serving writes 21: 0%, 5%, ..., 100%; from a load of at least 101
// requests of the model, 101). The simulator then draws
// each request's protocol from them (a uniform draw of its own random stream, linear between
// neighbouring quantiles), and protocol_ns stays the median the rest of the profile is read
// with. The server's part keeps one number: it varied by a few tenths of a millisecond.
//
// Note [Protocol under load]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The protocol is not a request's alone: when requests overlap, each one's protocol part grows (the
// client's and the server's gRPC threads, copies and wake-ups shared among them). On the H200
// (2026-12-02, the LLM replay raw-serve-2026-12-02-replay-llm-d) Inception-v3's median protocol was
// 9.0, 9.4, 10.4, 10.6 ms with 0, 1, 2, 3 other requests in flight when it was sent, and 12.4 ms
// with 4 or more (its 90th percentile 11.3 ms alone, 24.6 ms with 4 or more); BERT-base's 90th
// percentile 1.6 ms alone, 9.1 ms with 4 or more. A profile may give the growth per request in
// flight, `protocol_per_in_flight_ns`: the simulator adds it once per other request in flight
// (arrived and not yet answered) when the request arrives, to the protocol it draws. psw
// profile-serving --from-load fits it from a load's requests.csv (least squares of each request's
// protocol on the requests in flight at its send, over the model's requests; zero unless at least
// kMinLoadedRequests of them had company) and takes the median and quantiles from the protocol less
// that growth, so that a request alone is drawn as before.

// The training job's step time comes from the same server, measured alone (steps per second
// over a window, no requests): the runtime's step does more than the profile's forward and
// backward (synthetic data, the momentum update, the layer-boundary checks that make it
// preemptible), so the simulator scales its training job's layers to it.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psw/common/model_profile.hpp"
#include "psw/common/units.hpp"

namespace psw {

struct RequestPathCost {
  std::string model;
  Duration protocol;  // Note [Request path]: client latency - the server's time
  Duration server;    // the server's time - the engine's time
  int requests = 0;   // how many requests the medians are over
  // Note [Protocol spread]: empty, or the protocol's quantiles at evenly spaced probabilities
  // from 0 to 1 (at least two, non-decreasing).
  std::vector<Duration> protocol_quantiles;
  // Note [Protocol under load]: added per other request in flight at arrival (zero: none).
  Duration protocol_per_in_flight{};
};
// Note [Protocol under load]: the fit needs this many of a model's requests sent with another
// in flight; with fewer the growth is taken as zero.
inline constexpr int kMinLoadedRequests = 20;

// Note [Protocol spread]: `count` quantiles (at least 2) of `values_ns` (not empty) at evenly
// spaced probabilities from 0 to 1, each the nearest-rank value, so every one was measured.
inline constexpr int kProtocolQuantiles = 21;  // 0%, 5%, ..., 100%
// From a load of many requests, finer: 0%, 1%, ..., 100% where there are as many requests, so
// that the slowest one weighs a hundredth of the draws, not a twentieth. On the H200's
// Functions replay (2026-12-02, 986 ResNet-152 requests) the simulated p99 with its own fitted
// path was +14% with 21 quantiles and -0.6% with 101.
inline constexpr int kFineProtocolQuantiles = 101;
inline int protocol_quantile_count(std::size_t requests) {
  return requests >= static_cast<std::size_t>(kFineProtocolQuantiles) ? kFineProtocolQuantiles : kProtocolQuantiles;
}
std::vector<Duration> evenly_spaced_quantiles(std::vector<std::int64_t> values_ns, int count);
// The value at probability `u` in [0, 1) of such quantiles: linear between neighbours.
Duration quantile_at(const std::vector<Duration>& quantiles, double u);

struct TrainingStepCost {
  std::string model;
  int batch = 0;
  Duration step;  // one step of the server's training job, alone
};

// Note [Inputs in shared memory]: how the requests a profile was measured with carried their inputs.
enum class InputTransport { Raw, SharedMemory };
const char* to_string(InputTransport inputs);  // "raw", "shared-memory" (the YAML's words)
// The transport `word` names (to_string's inverse), or nothing for another word.
std::optional<InputTransport> input_transport_named(std::string_view word);

struct ServingProfile {
  std::string name;
  SourceInfo source;
  InputTransport inputs = InputTransport::Raw;
  std::vector<RequestPathCost> request_path;
  std::vector<TrainingStepCost> training;

  const RequestPathCost* path_of(const std::string& model) const;
  const TrainingStepCost* training_of(const std::string& model) const;
};

// Strict, as every YAML of the project: unknown keys, duplicate models and bad numbers are
// refused with the file, line and key.
ServingProfile parse_serving_profile(const std::string& text, const std::string& origin);
ServingProfile load_serving_profile(const std::filesystem::path& path);
std::string to_yaml(const ServingProfile& profile);

}  // namespace psw
