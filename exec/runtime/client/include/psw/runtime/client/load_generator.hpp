#pragma once
// psw load: drive a live `psw serve` with the workload of a simulator experiment config.
//
// The arrivals come from the simulator's own source (psw/common/workload_source.hpp), so a run
// here and `psw sim` on the same config see the same request ids, models and arrival times.
// The load is open loop: request i is sent at start + arrival_i * time_scale whatever the
// server does, by a pool of sender threads (each with its own connection unless told to share:
// Note [Client connections]); a slow answer
// occupies one sender and never holds back the dispatcher. When every sender is busy a request
// waits for one and starts late: its lateness is recorded (send_late_ns), never hidden, and its
// latency is still counted from its scheduled time (as the simulator counts from the arrival),
// so a slow server is not flattered by the wait.
//
// The outputs have psw sim's file names (requests.csv, summary.json, config.resolved.yaml) and,
// where they apply, its columns and keys (summary.json's `latency` object is the simulator's
// latency_summary_json). Beyond them, each request's server and engine times as the server
// reports them (requests.csv's server_ns and engine_ns; per model `engine_latency`, as psw sim
// writes it, and `server_latency`), so that the engine is compared apart from the protocol,
// and `protocol_latency`: the latency less the server's time (the send's lateness, gRPC and the
// copies; Note [Latency parts] in psw/xval/validation.hpp).
//
// Note [Client connections]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// What a request pays in gRPC for megabytes of raw input depends on the client, not only on
// the bytes (Note [Request path]): on the H200, psw profile-serving (one thread sending, 16
// connections in turn, a request every ~170 ms) measured 5.1 ms for ResNet-152's 4.8 MB, and
// psw load (16 sender threads, a connection each, a request every 500 ms) paid 9.5 ms for the
// same requests. `--connections N` lets the senders share N connections, so that a run can say
// which of the two, the connection or the sending thread, carries the difference: the thread
// (16 senders on one connection paid 10.5 ms, on 16 10.9 ms; one sender 7.5 ms), through the
// page faults of its heap (Note [Message memory] in message_memory.hpp, which removed them).
//
// Note [Shared memory senders]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With LoadOptions::inputs = SharedMemory (psw load --shared-memory; Note [Inputs in shared
// memory] in serving_profile.hpp) each sender, once connected and before the clock starts,
// registers one POSIX shared memory region per model of the workload (SharedMemoryStaging,
// client.hpp) and writes the model's request into it; every request it then sends names those
// ranges instead of carrying the bytes, and the server writes the outputs into the same region.
// One region per sender and model, not per model: requests of one model in flight on two
// senders would otherwise have their outputs written over each other. The inputs are written
// once, outside any request's latency, as a client that produces its tensors in place (decodes
// an image into the region) would: what is measured is the protocol and the server, not a copy
// the client chose to make. The warm-up (--warmup N) is each sender's, N requests per model
// through its own regions, one sender at a time: a region's first request costs the server more
// than the later ones (on the H200, 2026-12-03, its part beyond the engine was 1.4-2.3 ms for the
// first requests of each of 16 senders' ResNet-152 and Inception-v3 regions in a burst run and
// about 0.6 ms after; a worker's first copy from a region it has just page-locked is suspected,
// not measured), a one-time cost of a new region as connecting is of a new connection, which a
// client that keeps its regions pays once. Shared memory needs the server's host and its Unix
// socket (psw serve offers the extension there only): a server that refuses a region fails the
// run before the clock starts, naming it.
// The regions (and the senders' connections) are given back only after the last answer, once
// at_last_answer has run. A sender with nothing left to send once released its own at once,
// while the last requests were still in flight, and psw serve's worker then unmapped those
// regions (a cudaHostUnregister each) before the next request it ran: on the H200 (2026-12-03,
// 16 senders, 45 regions released) the last request of every one-process run waited 40-52 ms
// beyond its engine, the other mechanisms' last requests 0.5-2.3 ms.

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/experiment_config.hpp"
#include "psw/common/serving_profile.hpp"
#include "psw/common/units.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/client/load_summary.hpp"
#include "psw/runtime/ipc/ipc.hpp"

namespace psw::runtime {

struct LoadOptions {
  std::string target;       // the server: "unix:/path/psw.sock" or "host:port"
  std::string token;        // Note [Remote access]: the server's bearer token, or empty
  double time_scale = 1.0;  // multiplies every arrival time (< 1 replays a long trace faster)
  int senders = 16;         // sender threads sending concurrently
  // Connections to the server (Note [Client connections]): 0 gives each sender its own; N > 0
  // makes the senders share N, sender s taking connection s mod N (gRPC multiplexes the calls
  // of one connection).
  int connections = 0;
  // Requests per model of the workload sent one at a time before the clock starts, and not
  // recorded: the first requests of a freshly started server pay for growing its heap (Note
  // [Message memory]), which the simulator's steady state does not model. With shared memory,
  // per model and sender, through the sender's regions (Note [Shared memory senders]).
  int warmup = 0;
  std::int64_t timeout_ms = 60'000;  // deadline of each request
  std::uint64_t seed = 1;   // of the random input tensors
  // How the requests carry their inputs (Note [Shared memory senders]); summary.json's `inputs`.
  InputTransport inputs = InputTransport::Raw;
  // A line of progress now and then (every few seconds of a long run); may be empty.
  std::function<void(const std::string&)> progress;
  // Called just before the workload's clock starts (after connecting and the warm-up) and once
  // the last answer is in; may be empty. psw validate counts the training job's steps between
  // the two (Note [Training share]). An exception from either ends the run with it.
  std::function<void()> at_clock_start;
  std::function<void()> at_last_answer;
};

// A connection of the run: to options.target, with its token and its requests' deadline.
Client connect_to_server(const LoadOptions& options);

// A send that starts this much after its scheduled time counts as late in the summary
// (requests.csv has every request's exact lateness). Not zero: waking a thread on time costs
// tens of microseconds, which is no sign of a saturated sender pool.
inline constexpr Duration kLateSendThreshold = milliseconds(1);

struct LoadRequestRecord {
  std::int64_t id = 0;          // index in arrival order (psw sim's id for a FIFO server)
  std::uint32_t model = 0;      // index into the config's models
  Duration arrival;             // the workload's arrival (the simulator's arrival_ns)
  Duration scheduled;           // arrival * time_scale: when it was due, from the start
  Duration send_start;          // when its send began, from the start
  Duration finish;              // when the answer (or the error) came, from the start
  // Note [Request path] (psw/common/serving_profile.hpp): the server's time and the engine's
  // part of it, as the response reports them (zero when it does not).
  Duration server;
  Duration engine;
  bool ok = false;
  std::string error;            // the server's or the transport's message when not ok
  // Note [Generate requests]: a request that decodes goes as a generate call; when its first
  // token came, from the start.
  std::int64_t prompt_tokens = 0;
  std::int64_t decode_tokens = 0;
  std::optional<Duration> first_token;
  Duration latency() const { return finish - scheduled; }
  std::optional<Duration> first_token_latency() const {
    return first_token ? std::optional<Duration>(*first_token - scheduled) : std::nullopt;
  }
  Duration send_late() const { return send_start - scheduled; }
  // Note [Request path]: what the client paid beyond the server's time, its send's lateness
  // included as in profile-serving --from-load's fit and the simulator's draw (Note [Latency
  // parts]; zero when the server does not report it).
  Duration protocol() const { return server > Duration::zero() ? latency() - server : Duration::zero(); }
};

struct LoadReport {
  std::vector<LoadRequestRecord> requests;  // in id order
  LoadSummary summary;                      // summary.json is to_json(summary) (Note [Load summary])
  double wall_seconds = 0;
};

// Checks that the workload can be driven (no training rows, arrivals in order) and that the
// server serves every model it asks for (model_metadata); throws psw::InputError naming the
// config file and key otherwise. Then runs it and returns the report. Failed requests are
// recorded, not thrown. Open loop (requests leave at their arrival times, from a pool of
// senders) but for workload.kind: cycles, a closed loop (Note [Closed-loop cycles] in
// load_generator.cpp).
LoadReport run_load(const ExperimentConfig& config, const LoadOptions& options);

// Note [Worker starts measured]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under stop-and-start and two processes a task waits for a fresh worker process, whose start
// the server splits by phase and counts (Note [Worker start], ipc.hpp; the metrics
// psw_worker_starts_total and psw_worker_start_seconds_total{phase}). run_load reads both just
// before the workload's clock starts and after its last answer, and where workers started in
// between, summary.json has `worker_starts`: their count, their mean per phase and in total
// (ms). A server without those metrics (not a psw serve) leaves the key out, as does a run in
// which no worker started; the simulator's side and its comparison are Note [Worker start
// rows] (psw/xval/validation.hpp).
// Note [Worker kill] (controller.cpp): the server's kills too, where it counts them (`kills` and
// `kill_mean_ms` in `worker_starts`, when workers were killed in between).
struct WorkerStartTotals {
  std::int64_t starts = 0;
  std::array<double, kWorkerStartPhases> seconds{};  // by WorkerStartPhase
  std::int64_t kills = 0;
  double kill_seconds = 0;
};
// The two metrics of a Prometheus text, or nothing when it has neither (InputError when it
// has one without the other, or a value that is not a number); the two of the kills likewise,
// both or neither (a server from before them).
std::optional<WorkerStartTotals> parse_worker_start_totals(const std::string& metrics_text);
// summary.json's `worker_starts` for the starts between `before` and `after`, or nullopt when
// none started (InputError when `after` counts fewer than `before`: another server).
std::optional<WorkerStartMeans> worker_starts_between(const WorkerStartTotals& before, const WorkerStartTotals& after);
// The gauge psw_fresh_standby_workers of a Prometheus text (Note [Processes a server starts
// with] in sim/src/simulated_server.cpp): workers ready that have run nothing; nothing for a server from
// before it (InputError for a value that is not a number). run_load reads it when its clock
// starts into summary.json's `fresh_standby_workers`.
std::optional<std::int64_t> parse_fresh_standby_workers(const std::string& metrics_text);

// Note [Eager switches measured]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Where the server's workers switch eagerly (the ablations it cannot capture in a graph), it
// sums the host's time per switch by model and part (Note [Host time of an eager switch] in
// exec/pipeline.hpp; the metrics psw_eager_switches_total{model} and
// psw_eager_switch_host_seconds_total{model,part}). run_load reads them where it reads the
// worker starts, and where a model switched eagerly in between, summary.json has
// `eager_switches`: per model its count and the mean host time of its prepare and forward
// (ms). Neither exists in the simulator's summary; psw validate prints them beside the engine.
struct EagerSwitchSums {
  std::int64_t switches = 0;
  double prepare_seconds = 0;
  double forward_seconds = 0;
};
// Per model, the two metrics of a Prometheus text (empty when it has neither; InputError for
// a model counted without both parts, a part without a count, or a value that is not a number).
std::map<std::string, EagerSwitchSums> parse_eager_switch_totals(const std::string& metrics_text);
// summary.json's `eager_switches` for the switches between `before` and `after`: the models
// that switched eagerly in between (InputError when a count went down: another server).
std::map<std::string, EagerSwitchMeans> eager_switches_between(const std::map<std::string, EagerSwitchSums>& before,
                                                                const std::map<std::string, EagerSwitchSums>& after);

// The first check of run_load alone, without a server: InputError (naming the config file and
// key) when the workload cannot be driven. Reads the whole workload.
void check_load_workload(const ExperimentConfig& config);

// One answered request (status ok) of psw load's requests.csv, as recorded (ns).
struct AnsweredRequest {
  std::string model;
  std::int64_t send_start = 0;
  std::int64_t finish = 0;
  std::int64_t latency = 0;
  std::int64_t server = 0;
  std::int64_t engine = 0;
};

// The answered requests of psw load's requests.csv, in file order. `origin` names the file in
// errors: InputError for a file that is not psw load's requests.csv, a malformed count, or an
// answered request without the server's times.
std::vector<AnsweredRequest> read_answered_requests(const std::string& requests_csv, const std::string& origin);

// Note [Request path] from a load run: the serving profile a psw load run's requests.csv implies,
// per model the medians of latency - server_ns (protocol: the client's whole path, its send
// lateness included, as psw load's latency counts it) and server_ns - engine_ns (server), over
// the answered requests; so the calibration uses the client the validation uses. No training
// entry (the run trained beside requests, not alone). `origin` names the file in errors:
// InputError for a file that is not psw load's requests.csv or has a request without times.
// Note [Protocol under load]: the protocol's growth per request in flight is fitted from the
// same requests, or taken from `growth_from` where given (a profile fitted on a load with
// more requests in flight; InputError when it lacks a model of the file), and the median and
// quantiles are of each request's protocol less that growth.
// The profile's `inputs` are the load's (Note [Shared memory senders]: recorded_inputs).
ServingProfile serving_profile_from_load(const std::string& requests_csv, const std::string& origin,
                                         const std::string& name, const std::string& device, InputTransport inputs,
                                         const ServingProfile* growth_from = nullptr);

// Note [Shared memory senders]: how a psw load run sent its inputs, from its summary.json
// (`origin` names it in errors): its `inputs`; a summary without the key is of a run from before
// it, all of which sent them raw. InputError for a value that is neither.
InputTransport recorded_inputs(const LoadSummary& summary, const std::string& origin);
// The same for the run behind a psw load requests.csv: the summary.json beside it says, and
// `given` ("raw", "shared-memory" or empty), where not empty, must agree; without a summary.json,
// `given` must say (InputError otherwise, naming the file).
InputTransport inputs_of_load(const std::filesystem::path& requests_csv, const std::string& given);
// Note [Inputs in shared memory]: InputError when the config's serving profile (if it has one)
// was measured with inputs sent otherwise than `measured` (`measured_by` says whose they are),
// since the simulator would then add the other protocol's path.
void check_serving_inputs(const ExperimentConfig& config, InputTransport measured, const std::string& measured_by);

// Writes requests.csv, summary.json and config.resolved.yaml into `out_dir`, atomically
// (Note [Atomic output folders] in common/output.hpp), every write checked.
void write_load_outputs(const ExperimentConfig& config, const LoadReport& report, const std::filesystem::path& out_dir);

}  // namespace psw::runtime
