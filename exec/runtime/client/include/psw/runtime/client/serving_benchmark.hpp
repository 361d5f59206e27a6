#pragma once
// Measures a running `psw serve` from the outside, as a client sees it (the numbers of the
// runtime, DESIGN.md §6): cold requests of every model while the training job runs,
// the server's own startup and preemption quantiles, training throughput alone and under a
// steady trickle of requests, and a long run of consecutive switches. The logic lives here and
// returns a typed report; `psw bench-serve` prints it as JSON.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "psw/common/serving_profile.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/client/client_tools.hpp"

namespace psw::runtime {

struct ServingBenchmarkSpec {
  int cold_requests = 20;          // per model, each while training runs
  int gap_ms = 300;                // between them: training resumes before the next
  int batch = 8;
  double throughput_window_s = 10; // training alone, then with requests
  // The windows alone, where they differ (0: throughput_window_s): a long window under requests
  // beside a shorter reference alone fits one bounded run (Note [Training windows]).
  double alone_window_s = 0;
  double alone_window() const { return alone_window_s > 0 ? alone_window_s : throughput_window_s; }
  double request_rate = 1.0;       // requests per second in the second window
  int switches = 0;                // consecutive requests alternating the models (0: skip)
  std::uint64_t seed = 1;
  // Tensors in shared memory (a region per model, registered once; each request's inputs are
  // written there before its clock starts, as a producer on the host would write them) instead
  // of in the messages.
  bool shared_memory = false;
  // The models to request, by name (empty: the zoo's built-in models the server serves; a
  // decoder, or a model in another dtype, is named here).
  std::vector<std::string> models;
  // The window with requests before the one alone: a job started with the server then learns
  // its first steps under requests, so that two servers' runs (one each way) give the loss
  // curve of the same steps alone and under requests.
  bool requests_first = false;
  // Pairs of windows (Note [Training windows]); each pair in the other order than the one before.
  int rounds = 1;
  // The job's rate is also reported in slices of this many seconds within each window.
  double rate_slice_s = 10;
};

// Note [Training windows]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The job's rate alone and under requests is measured in windows of `throughput_window_s` (those
// alone of `alone_window_s` where it is given), in
// `rounds` pairs whose order alternates: alone then requests, requests then alone, and so on
// (the first pair the other way with `requests_first`). A job's rate drifts by itself over
// minutes (on an H100 a served ResNet-152 job ran 13% faster in its second 100 s than in its
// first, whichever of the two had requests: results/gpu/README.md), and a single pair puts all
// that drift into the share; with an even number of rounds a linear drift weighs on both kinds alike. The
// rates are each kind's steps over its windows' time together.
struct TrainingWindow {
  bool with_requests = false;
  double start_s = 0;   // since the first window began
  double seconds = 0;   // its length, measured
  std::int64_t steps = 0;
  double held_s = 0;    // the time the job was held for requests in it
  int requests = 0;
};

// The training job's loss at a completed step, as its status said it (Note [Training objective]
// in training.hpp): sampled every 100 ms during the throughput windows, once per new step seen.
struct TrainingLossSample {
  double elapsed_s = 0;  // since the first window began
  std::int64_t step = 0;
  double loss = 0;
};

// Note [Training windows]: the job's rate within a window, slice by slice, from its sampled
// steps. A rate that moves by more than the requests could take, alone as beside them, says the
// windows are too short to tell the requests' cost from the job's drift (results/gpu/README.md,
// the five-minute run on an H100).
struct TrainingRateSlice {
  bool with_requests = false;
  double start_s = 0;  // since the first window began: the sample that opens the slice
  double seconds = 0;  // to the sample that closes it
  std::int64_t steps = 0;
};

// The slices of `slice_s` seconds in each of `windows` (whole slices only, from the window's
// start), each from the last of `samples` at or before its start to the last at or before its
// end; a slice without two distinct samples is left out. `samples` in any order, both kinds
// together. InputError for a slice of zero or less.
std::vector<TrainingRateSlice> training_rate_slices(const std::vector<TrainingWindow>& windows,
                                                    std::vector<TrainingLossSample> samples, double slice_s);

struct ServingBenchmarkReport {
  std::map<std::string, ExactLatencySummary> cold_latency_ms;  // per model, client-observed
  std::vector<TrainingWindow> training_windows;        // in the order they ran
  std::vector<TrainingLossSample> loss_alone;          // the windows of the job alone
  std::vector<TrainingLossSample> loss_with_requests;  // the windows with requests
  double training_steps_per_s_alone = 0;
  double training_steps_per_s_with_requests = 0;
  int requests_in_throughput_window = 0;  // over the windows with requests
  // Note [Training held] (controller.cpp): in the windows with requests, the time the job was
  // held for them, and its rate while not held over its rate alone (those windows' steps over
  // their time less the hold, over the rate alone): 1 where requests cost the job only the time
  // they hold it. Both 0 without the windows.
  double training_held_s_with_requests = 0;
  double training_running_share = 0;
  std::vector<TrainingRateSlice> training_rate_slices;  // of spec.rate_slice_s, in the windows' order
  // The wall clock when the first window began (seconds since the Unix epoch; 0 without the
  // windows): the windows' and slices' start_s count from it, so that what a monitor sampled
  // meanwhile (the GPU's clocks, the host's load) can be laid beside the job's rate.
  double training_started_unix_s = 0;
  ExactLatencySummary switch_latency_ms;                       // the consecutive switches
  int switches = 0;
  // The server's metrics after the run (Prometheus text) and the values read from it.
  std::string metrics;
  std::map<std::string, double> server;  // e.g. "preemption_p99_s", "startup_p50_s", "preemptions"
};

ServingBenchmarkReport run_serving_benchmark(Client& client, const ServingBenchmarkSpec& spec,
                                             const std::function<void(const std::string&)>& progress = {});

// Note [Generation measured]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A decoder's generate calls measured from the outside (psw client --generate --repeat): the
// same prompt `repeat` times, greedy, `max_tokens` each. With `evict_with`, a request of that
// model (random inputs, batch 1) goes before every call, so that under `cache: active` or `off`
// each call switches the decoder in cold; without it the calls go back to back and, under a
// cache that keeps the decoder, all but the first find it resident. The server's `switched`
// flag of each answer sorts its time to first token into cold or warm, so a run cannot report
// a warm time that was cold. Greedy decoding is deterministic: every call must answer the same
// ids, and the report says whether they did; where one did not, which call (cold or warm, on
// which worker) and from which token, so that a difference can be traced to its cause (a cold
// prefill's overlap with the copies, a worker, a position in the cache) instead of only seen.
struct GenerationSpec {
  std::string model;
  std::vector<std::int64_t> prompt_ids;
  std::int64_t max_tokens = 16;
  int repeat = 1;
  std::string evict_with;  // a model requested before each call (empty: none)
  std::uint64_t seed = 1;  // of the evicting requests' inputs
};

// A call whose ids differ from the first call's.
struct DifferingCall {
  int call = 0;                // 0-based, in the order made
  bool switched = false;       // it switched the decoder in (cold)
  int worker = -1;             // the worker that ran it
  std::size_t from_token = 0;  // the first output position that differs (a length if one is a prefix)
};

struct GenerationReport {
  std::string model;
  std::size_t prompt_tokens = 0;
  std::int64_t prompt_bucket = 0;
  std::vector<std::int64_t> output_ids;  // the first call's
  bool first_switched = false;           // the first call switched the decoder in
  int first_worker = -1;                 // and the worker that ran it
  std::vector<DifferingCall> differing_calls;  // the calls that did not answer output_ids, in order
  ExactLatencySummary ttft_cold_ms;      // calls that switched the decoder in
  ExactLatencySummary ttft_warm_ms;      // calls that found it resident
  ExactLatencySummary tpot_ms;           // per token after the first, every call

  bool outputs_equal() const { return differing_calls.empty(); }  // every call answered output_ids
};

GenerationReport measure_generation(Client& client, const GenerationSpec& spec);

// Note [Request path] (psw/common/serving_profile.hpp): a live server's request path per model
// and its training job's step, measured from the outside, for the simulator (`psw
// profile-serving`). Each model gets `requests` cold requests, inputs in the messages, each
// `gap_ms` after the training job (if it runs at the start) runs again; each response's
// psw_server_ns and psw_engine_ns split the client's latency, and the medians are the
// profile's. Then that training job's steps over `training_window_s` with no requests give its
// step (no training entry when no job runs).
struct ServingProfileSpec {
  std::string name;    // of the written profile
  std::string device;  // the GPU (or host) the server runs on, for the profile's source
  int requests = 20;
  int gap_ms = 150;
  // Requests go round-robin over this many connections, as psw load's senders spread theirs
  // (LoadOptions::senders): a connection's gRPC state (its flow-control windows) is part of the
  // path being measured.
  int connections = 16;
  int batch = 8;           // of each request
  int training_batch = 8;  // the server's training job's (its config's training.batch)
  double training_window_s = 10;
  std::uint64_t seed = 1;
  std::vector<std::string> models;  // as ServingBenchmarkSpec::models
};

// Note [Protocol split]
// ~~~~~~~~~~~~~~~~~~~~~
// The protocol part of a request (client latency less the server's psw_server_ns) is split at
// the instants the client and the gRPC front end stamp on the host's one steady clock
// (InferResponse::client_sent_ns, front_end_received_ns, front_end_replied_ns), so that a cost
// is found before anything is changed:
//   build      the client's call entered to its message built (the input copied into it)
//   to_server  message built to the front end's handler holding the message: gRPC's
//              serialisation, the bytes through the socket (HTTP/2 framing, flow control)
//   front_end  the handler's time less the controller's (psw_server_ns): the message's split,
//              the request's checks and conversion (the raw inputs' one copy: Note [Raw inputs
//              received in place] in grpc_server.cpp), and the response's building
//   to_client  the handler's response complete to the client's call returned: the response's
//              serialisation, the socket, the client's parse and its reading of the outputs
// Valid only with the client on the server's host (psw serve's Unix socket or loopback).
struct ProtocolSplit {
  std::int64_t requests = 0;  // that carried the front end's stamps
  double build_ms = 0;        // medians over them
  double to_server_ms = 0;
  double front_end_ms = 0;
  double to_client_ms = 0;
};

struct ServingProfileRun {
  ServingProfile profile;
  std::map<std::string, ExactLatencySummary> client_ms;  // per model, the client's latency
  std::map<std::string, ProtocolSplit> protocol_split;   // per model (Note [Protocol split])
};

ServingProfileRun profile_serving(Client& client, const ServingProfileSpec& spec,
                                  const std::function<void(const std::string&)>& progress = {});

// One value of a Prometheus text exposition: `name` with its labels exactly as written, e.g.
// metric_value(text, "psw_preemption_latency_seconds{quantile=\"0.99\"}"); NaN when absent.
double metric_value(const std::string& text, const std::string& name);

}  // namespace psw::runtime
