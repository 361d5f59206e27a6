#include "psw/runtime/client/load_generator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <thread>

#include "psw/common/error.hpp"
#include "psw/common/input_file.hpp"
#include "psw/common/output.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/client/client_tools.hpp"
#include "psw/common/metrics.hpp"
#include "psw/common/workload_source.hpp"

namespace psw::runtime {

Client connect_to_server(const LoadOptions& options) {
  Client client(options.target);
  client.set_token(options.token);
  client.set_timeout(std::chrono::milliseconds(options.timeout_ms));
  return client;
}

namespace {

using Clock = std::chrono::steady_clock;

struct PlannedRequest {
  Request request;
  Duration scheduled;
};

std::string where(const ExperimentConfig& config) { return config.source.string(); }

// Every request of an open-loop workload, read before the first send: a workload that cannot be
// driven (a training row, arrivals going backwards) is refused before the server sees anything,
// and the dispatcher then only sleeps and hands out indices. (Cycles are a closed loop: Note
// [Closed-loop cycles].)
std::vector<PlannedRequest> plan_requests(const ExperimentConfig& config, double time_scale) {
  std::unique_ptr<RequestSource> source = open_workload_source(config);
  if (!source) throw Error(where(config) + ": a closed-loop workload has no arrivals to plan");
  std::vector<PlannedRequest> planned;
  Duration previous = Duration::zero();
  while (std::optional<Request> r = source->next()) {
    if (r->model >= config.models.size()) throw Error("request for an unknown model index");
    if (r->task != Task::Inference) {
      throw InputError(where(config) + ": workload: request " + std::to_string(planned.size()) + " (model '" +
                       config.models[r->model].name +
                       "') is a training request; psw load sends inference requests only (the server runs "
                       "its own training job)");
    }
    if (r->arrival < previous) throw InputError(where(config) + ": the workload's arrivals go backwards");
    previous = r->arrival;
    // The scaled time, truncated to whole nanoseconds like the simulator's times.
    const Duration scheduled = nanoseconds(static_cast<std::int64_t>(static_cast<double>(r->arrival.ns()) * time_scale));
    planned.push_back({*r, scheduled});
  }
  if (planned.empty()) throw InputError(where(config) + ": the workload has no requests");
  return planned;
}

// One request per model the workload uses: random tensors of the server's metadata at the
// model's profile batch (Note [Batch of a request] in common/src/workload_source.cpp), built once
// and shared read-only by the senders, with the metadata (the outputs a shared memory region
// holds). A model the server does not serve is refused here.
struct PreparedRequest {
  ModelInfo info;
  InferRequest body;
};

std::map<std::uint32_t, PreparedRequest> build_requests(const ExperimentConfig& config, const LoadOptions& options,
                                                        const std::set<std::uint32_t>& used) {
  Client client = connect_to_server(options);
  std::map<std::uint32_t, PreparedRequest> prepared;
  std::uint64_t seed = options.seed;
  for (std::uint32_t m : used) {
    const ModelProfile& model = config.models[m];
    const std::string key = where(config) + ": models[" + std::to_string(m) + "].name '" + model.name + "'";
    PreparedRequest request;
    try {
      request.info = client.model_metadata(model.name);
    } catch (const ServiceError& e) {
      if (e.code() == ServiceError::Code::NotFound || e.code() == ServiceError::Code::InvalidArgument) {
        throw InputError(key + ": the server at " + options.target + " does not serve this model (" + e.what() + ")");
      }
      throw Error("the server at " + options.target + " did not answer the metadata of '" + model.name + "': " +
                  e.what());
    }
    request.body.model = model.name;
    try {
      for (const auto& spec : request.info.inputs) request.body.inputs.push_back(random_tensor(spec, model.batch, seed++));
    } catch (const InputError& e) {
      throw InputError(key + " at batch " + std::to_string(model.batch) + " (its profile's): " + e.what());
    }
    prepared.emplace(m, std::move(request));
  }
  return prepared;
}

// Note [Shared memory senders]: where one connection's requests find their tensors: a region
// per model, registered through that connection, or (raw inputs) nowhere: in the messages.
class SenderInputs {
 public:
  SenderInputs(Client& client, const std::map<std::uint32_t, PreparedRequest>& requests, const LoadOptions& options) {
    if (options.inputs != InputTransport::SharedMemory) return;
    for (const auto& [model, request] : requests) {
      try {
        staged_.emplace(model, std::make_unique<SharedMemoryStaging>(client, request.info, request.body));
      } catch (const std::exception& e) {
        throw Error("--shared-memory: the inputs of '" + request.body.model + "' could not be placed in shared memory " +
                    "registered with the server at " + options.target +
                    " (the extension needs the server's host and its Unix socket): " + e.what());
      }
    }
  }
  const SharedMemoryPlacement& placement(std::uint32_t model) const {
    const auto staged = staged_.find(model);
    return staged == staged_.end() ? in_messages_ : staged->second->placement();
  }

 private:
  std::map<std::uint32_t, std::unique_ptr<SharedMemoryStaging>> staged_;
  SharedMemoryPlacement in_messages_;
};

Duration since(Clock::time_point start, Clock::time_point t) {
  return nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(t - start).count());
}

// A CSV field holding free text (an error message): quoted, inner quotes doubled, line breaks
// flattened so that one request stays one line.
std::string csv_text(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') {
      out += "\"\"";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

LoadSummary summarize(const ExperimentConfig& config, const LoadOptions& options,
                      const std::vector<LoadRequestRecord>& records, const std::vector<Duration>& slos) {
  auto ms = [](Duration d) { return static_cast<double>(d.ns()) / 1e6; };
  LatencyHistogram all;
  std::vector<LatencyHistogram> per_model(config.models.size());
  std::vector<LatencyHistogram> per_model_engine(config.models.size());
  std::vector<LatencyHistogram> per_model_server(config.models.size());
  std::vector<LatencyHistogram> per_model_protocol(config.models.size());
  std::vector<LatencyHistogram> per_model_first_token(config.models.size());
  std::vector<std::int64_t> model_errors(config.models.size(), 0);
  std::vector<bool> model_used(config.models.size(), false);
  std::int64_t errors = 0;
  std::int64_t late = 0;
  Duration late_max;
  long double late_sum_ns = 0;
  std::int64_t slo_total = 0;
  std::int64_t slo_met = 0;
  Duration end;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const LoadRequestRecord& r = records[i];
    model_used[r.model] = true;
    end = std::max(end, r.finish);
    const Duration lateness = std::max(r.send_late(), Duration::zero());
    late_sum_ns += static_cast<long double>(lateness.ns());
    late_max = std::max(late_max, lateness);
    if (lateness > kLateSendThreshold) ++late;
    if (slos[i] > Duration::zero()) {
      ++slo_total;
      // A failed request misses its SLO: it was never served.
      if (r.ok && r.latency() <= slos[i]) ++slo_met;
    }
    if (!r.ok) {
      ++errors;
      ++model_errors[r.model];
      continue;
    }
    all.add(r.latency());
    per_model[r.model].add(r.latency());
    if (const auto first = r.first_token_latency()) per_model_first_token[r.model].add(*first);
    if (r.engine > Duration::zero()) {
      per_model_engine[r.model].add(r.engine);
      per_model_server[r.model].add(r.server);
      per_model_protocol[r.model].add(std::max(r.protocol(), Duration::zero()));
    }
  }
  LoadSummary summary;
  for (std::size_t m = 0; m < config.models.size(); ++m) {
    if (!model_used[m]) continue;
    ModelLoadSummary& entry = summary.models[config.models[m].name];
    entry.latency = psw::summarize(per_model[m]);
    entry.errors = model_errors[m];
    if (per_model_first_token[m].count() > 0) entry.first_token_latency = psw::summarize(per_model_first_token[m]);
    // Only where the server reported every answered request's times (Note [Request path]).
    if (per_model_engine[m].count() > 0 && per_model_engine[m].count() == per_model[m].count()) {
      entry.engine_latency = psw::summarize(per_model_engine[m]);
      entry.server_latency = psw::summarize(per_model_server[m]);
      entry.protocol_latency = psw::summarize(per_model_protocol[m]);
    }
  }
  const double makespan_s = end.seconds();
  summary.name = config.name;
  summary.target = options.target;
  summary.seed = config.seed;
  summary.time_scale = options.time_scale;
  summary.senders = options.senders;
  summary.inputs = to_string(options.inputs);  // Note [Shared memory senders]
  summary.connections = options.connections > 0 ? options.connections : options.senders;
  summary.warmup_per_model = options.warmup;
  summary.generated = static_cast<std::int64_t>(records.size());
  // As psw sim's `requests`: the requests served (here: answered without error).
  summary.requests = all.count();
  summary.errors = errors;
  // Latency from each request's scheduled time to its answer (psw sim: arrival to finish).
  summary.latency = psw::summarize(all);
  summary.slo_attainment = slo_total > 0 ? static_cast<double>(slo_met) / static_cast<double>(slo_total) : 1.0;
  summary.throughput_rps = makespan_s > 0 ? static_cast<double>(all.count()) / makespan_s : 0.0;
  summary.makespan_s = makespan_s;
  summary.late_sends = {late, ms(kLateSendThreshold),
                        records.empty() ? 0.0 : static_cast<double>(late_sum_ns / records.size()) / 1e6, ms(late_max)};
  return summary;
}

// Note [Generate requests]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A request that decodes (Request::decode_tokens > 0: an azure-llm-2023 workload with `decode:
// true`, Note [Decode in the simulator]) goes as a generate call for decode_tokens + 1 tokens, so
// that the server prefills and decodes what the simulator prices. Its prompt is prompt_tokens ids
// (the trace's ContextTokens; the prepared input's length when the workload gives none): the
// prepared request's first row of ids, repeated to that length. The first streamed token's
// arrival is recorded, and per model the time from the scheduled send to it is the summary's
// first_token_latency, psw sim's key of the same name, which psw validate compares. Only a
// model whose input is one INT64 tensor of ids (a decoder) takes such requests: checked before
// the first send.
std::vector<std::int64_t> prompt_ids(const InferRequest& body, std::int64_t prompt_tokens) {
  const TensorData& ids = body.inputs.front();
  const std::int64_t row = ids.shape.size() == 2 ? ids.shape[1] : 0;
  if (row <= 0 || static_cast<std::int64_t>(ids.bytes.size()) < row * 8) {
    throw Error("the prepared prompt of '" + body.model + "' holds no row of ids");
  }
  const std::int64_t length = prompt_tokens > 0 ? prompt_tokens : row;
  std::vector<std::int64_t> prompt(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < length; ++i) {
    std::memcpy(&prompt[static_cast<std::size_t>(i)], ids.bytes.data() + (i % row) * 8, 8);
  }
  return prompt;
}

// Sends one request and records its send, its answer (or error) and the server's times.
void send_and_record(Client& client, const InferRequest& body, const SharedMemoryPlacement& placement,
                     Clock::time_point start, LoadRequestRecord& r) {
  r.send_start = since(start, Clock::now());
  try {
    if (r.decode_tokens > 0) {  // Note [Generate requests]
      GenerateRequest request;
      request.model = body.model;
      request.input_ids = prompt_ids(body, r.prompt_tokens);
      request.max_tokens = r.decode_tokens + 1;
      const GenerateResponse response = client.generate(request, [&](const GeneratedToken&) {
        if (!r.first_token) r.first_token = since(start, Clock::now());
      });
      r.server = nanoseconds(response.server_ns);
    } else {
      const InferResponse response = client.infer(body, placement);
      r.server = nanoseconds(response.server_ns);
      r.engine = nanoseconds(response.engine_ns);
    }
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.finish = since(start, Clock::now());
}

// LoadOptions::warmup requests per model, one at a time, not recorded, sent as the workload's
// are: raw, or through `inputs`, the regions the workload's requests then use (Note [Shared
// memory senders]: a region's first request pays more than the later ones).
void warm_up(Client& client, const std::map<std::uint32_t, PreparedRequest>& requests, const SenderInputs& inputs,
             int per_model) {
  for (const auto& [model, request] : requests) {
    for (int w = 0; w < per_model; ++w) client.infer(request.body, inputs.placement(model));
  }
}

// A closed loop whose server fails every request would spin through its phases; this many
// failures in a row end the run instead.
constexpr int kMaxFailuresInARow = 100;

// Note [Closed-loop cycles]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// workload.kind: cycles (the paper's Figure 6) as the simulator runs it (start_cycles in
// sim/src/simulated_server.cpp): in each round the training job has the GPU for one cycle, then
// requests for the cycle's model go back to back for one cycle. The first is issued at the
// inference phase's start, each next one when the previous answer comes, while the phase lasts;
// an answer counts for throughput when it comes within its phase, and throughput is those
// answers per second of inference phase (rounds x cycle), the simulator's definition. A
// request's scheduled (and arrival) time is when it was issued, so that its latency is the
// simulator's. One request is outstanding at a time, on one connection from the calling thread:
// --senders and --connections do not apply (psw refuses them given; the summary says 1 of
// each). The time scale multiplies the phases' times.
LoadReport run_cycles(const ExperimentConfig& config, const LoadOptions& options) {
  const WorkloadSpec& workload = config.workload;
  const std::uint32_t model = workload.cycle_model;
  const std::map<std::uint32_t, PreparedRequest> requests = build_requests(config, options, {model});
  const InferRequest& body = requests.at(model).body;
  Client client = connect_to_server(options);
  std::optional<SenderInputs> inputs;
  try {
    if (!client.server_live()) throw Error("the server at " + options.target + " is not live");
    inputs.emplace(client, requests, options);
    if (options.warmup > 0) warm_up(client, requests, *inputs, options.warmup);
  } catch (const ServiceError& e) {
    throw Error("cannot reach the server at " + options.target + ": " + e.what());
  }
  auto scaled = [&](Duration d) {
    return nanoseconds(static_cast<std::int64_t>(static_cast<double>(d.ns()) * options.time_scale));
  };
  auto unscaled = [&](Duration d) {
    return nanoseconds(static_cast<std::int64_t>(static_cast<double>(d.ns()) / options.time_scale));
  };
  LoadReport report;
  std::vector<Duration> slos;
  std::int64_t in_phase = 0;
  int failures_in_a_row = 0;
  if (options.at_clock_start) options.at_clock_start();
  const Clock::time_point start = Clock::now();
  for (std::int64_t round = 0; round < workload.rounds; ++round) {
    const Duration phase_start = scaled(workload.cycle * (2 * round + 1));
    const Duration phase_end = scaled(workload.cycle * (2 * round + 2));
    std::this_thread::sleep_until(start + std::chrono::nanoseconds(phase_start.ns()));
    Duration issued = phase_start;
    for (;;) {
      LoadRequestRecord r;
      r.id = static_cast<std::int64_t>(report.requests.size());
      r.model = model;
      r.scheduled = issued;
      r.arrival = unscaled(issued);
      send_and_record(client, body, inputs->placement(model), start, r);
      if (r.ok && r.finish <= phase_end) ++in_phase;
      failures_in_a_row = r.ok ? 0 : failures_in_a_row + 1;
      report.requests.push_back(r);
      slos.push_back(workload.slo);
      if (failures_in_a_row >= kMaxFailuresInARow) {
        throw Error(detail::concat("the server at ", options.target, " failed ", kMaxFailuresInARow,
                                   " requests of the cycles workload in a row; the last: ", r.error));
      }
      if (r.finish >= phase_end) break;
      issued = r.finish;
    }
    if (options.progress) {
      options.progress(detail::concat("round ", round + 1, "/", workload.rounds, ": ", report.requests.size(),
                                      " requests, ", in_phase, " answered within their inference phase"));
    }
  }
  report.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (options.at_last_answer) options.at_last_answer();
  LoadOptions one_at_a_time = options;
  one_at_a_time.senders = 1;
  one_at_a_time.connections = 1;
  report.summary = summarize(config, one_at_a_time, report.requests, slos);
  const double inference_s = (scaled(workload.cycle) * workload.rounds).seconds();
  report.summary.throughput_rps = inference_s > 0 ? static_cast<double>(in_phase) / inference_s : 0.0;
  return report;
}

}  // namespace

static LoadReport run_open_loop(const ExperimentConfig& config, const LoadOptions& options) {
  const std::vector<PlannedRequest> planned = plan_requests(config, options.time_scale);
  std::set<std::uint32_t> used;
  for (const auto& p : planned) used.insert(p.request.model);
  const std::map<std::uint32_t, PreparedRequest> requests = build_requests(config, options, used);

  LoadReport report;
  report.requests.resize(planned.size());
  std::vector<Duration> slos(planned.size());
  for (std::size_t i = 0; i < planned.size(); ++i) {
    LoadRequestRecord& r = report.requests[i];
    r.id = static_cast<std::int64_t>(i);
    r.model = planned[i].request.model;
    r.arrival = planned[i].request.arrival;
    r.scheduled = planned[i].scheduled;
    r.prompt_tokens = planned[i].request.prompt_tokens;
    r.decode_tokens = planned[i].request.decode_tokens;
    slos[i] = planned[i].request.slo;
    // Note [Generate requests]: only a decoder generates.
    const InferRequest& body = requests.at(r.model).body;
    if (r.decode_tokens > 0 && (body.inputs.size() != 1 || body.inputs.front().datatype != "INT64")) {
      throw InputError(where(config) + ": workload: request " + std::to_string(i) + " decodes " +
                       std::to_string(r.decode_tokens) + " tokens, but the server's '" + body.model +
                       "' does not take one INT64 tensor of token ids: only a decoder generates");
    }
  }

  // The hand-off from the dispatcher to the senders: indices of requests now due.
  std::mutex mutex;
  std::condition_variable due_cv;
  std::condition_variable connected_cv;
  std::deque<std::size_t> due;
  bool closed = false;
  int connected = 0;
  std::string connect_error;
  std::string warmup_error;  // a sender's (shared memory)
  std::mutex warmup_mutex;
  std::atomic<std::int64_t> answered{0};
  std::atomic<std::int64_t> failed{0};
  Clock::time_point start;

  // Shared connections (Note [Client connections]), made here; a Client's calls may come from
  // several threads at once.
  auto connect = [&options] {
    return std::make_unique<Client>(connect_to_server(options));
  };
  std::vector<std::unique_ptr<Client>> shared;
  for (int c = 0; c < options.connections; ++c) shared.push_back(connect());
  // Each sender's own connection and its inputs, kept here, not in the sender's thread: they
  // are given back after the last answer (Note [Shared memory senders]), the inputs before the
  // connections they were registered through.
  const auto sender_count = static_cast<std::size_t>(options.senders);
  std::vector<std::unique_ptr<Client>> own_clients(sender_count);
  std::vector<std::optional<SenderInputs>> sender_inputs(sender_count);

  auto sender = [&](int index) {
    // Each sender's connection is made (or shared) before the clock starts, so that no
    // request's latency includes connecting.
    std::unique_ptr<Client>& own = own_clients[static_cast<std::size_t>(index)];
    Client* client = nullptr;
    std::optional<SenderInputs>& inputs = sender_inputs[static_cast<std::size_t>(index)];  // before the clock too
    std::string error;
    try {  // nothing may escape a thread
      if (shared.empty()) {
        own = connect();
        client = own.get();
      } else {
        client = shared[static_cast<std::size_t>(index) % shared.size()].get();
      }
      if (!client->server_live()) {
        error = "the server at " + options.target + " is not live";
      } else {
        inputs.emplace(*client, requests, options);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    // Note [Shared memory senders]: the warm-up through this sender's own regions, one sender
    // at a time so that its requests go one at a time as the raw warm-up's do.
    if (error.empty() && options.warmup > 0 && options.inputs == InputTransport::SharedMemory) {
      try {
        std::lock_guard one_at_a_time(warmup_mutex);
        warm_up(*client, requests, *inputs, options.warmup);
      } catch (const std::exception& e) {
        error = std::string("a warm-up request failed: ") + e.what();
        std::lock_guard lock(mutex);
        if (warmup_error.empty()) warmup_error = error;
      }
    }
    {
      std::lock_guard lock(mutex);
      ++connected;
      if (!error.empty() && connect_error.empty()) connect_error = error;
    }
    connected_cv.notify_all();
    for (;;) {
      std::size_t i = 0;
      {
        std::unique_lock lock(mutex);
        due_cv.wait(lock, [&] { return closed || !due.empty(); });
        if (due.empty() || !error.empty()) return;
        i = due.front();
        due.pop_front();
      }
      LoadRequestRecord& r = report.requests[i];
      send_and_record(*client, requests.at(r.model).body, inputs->placement(r.model), start, r);
      (r.ok ? answered : failed).fetch_add(1, std::memory_order_relaxed);
    }
  };

  std::vector<std::thread> senders;
  senders.reserve(static_cast<std::size_t>(options.senders));
  for (int s = 0; s < options.senders; ++s) senders.emplace_back(sender, s);
  auto stop_senders = [&] {
    {
      std::lock_guard lock(mutex);
      closed = true;
    }
    due_cv.notify_all();
    for (auto& t : senders) t.join();
  };
  {
    std::unique_lock lock(mutex);
    connected_cv.wait(lock, [&] { return connected == options.senders; });
  }
  if (!warmup_error.empty()) {
    stop_senders();
    throw Error(warmup_error);
  }
  if (!connect_error.empty()) {
    stop_senders();
    throw Error("cannot reach the server at " + options.target + ": " + connect_error);
  }
  // Warm-up (LoadOptions::warmup) of raw inputs through one connection (the first shared one,
  // else one of its own: which connection makes no difference, Note [Client connections]); a
  // failure here is the run's (the server cannot serve the workload), before anything is
  // recorded. (Shared memory: each sender's, above.)
  if (options.warmup > 0 && options.inputs == InputTransport::Raw) {
    try {
      const std::unique_ptr<Client> own = shared.empty() ? connect() : nullptr;
      warm_up(own ? *own : *shared.front(), requests, SenderInputs(own ? *own : *shared.front(), requests, options),
              options.warmup);
    } catch (const std::exception& e) {
      stop_senders();
      throw Error(std::string("a warm-up request failed: ") + e.what());
    }
  }

  auto say_progress = [&](std::size_t sent) {
    if (!options.progress) return;
    char line[200];
    std::snprintf(line, sizeof line, "%zu/%zu sent, %lld answered, %lld failed (%.1f s)", sent, planned.size(),
                  static_cast<long long>(answered.load()), static_cast<long long>(failed.load()),
                  std::chrono::duration<double>(Clock::now() - start).count());
    options.progress(line);
  };
  // Progress every few seconds of wall time, so a long trace shows it is moving.
  constexpr auto kProgressEvery = std::chrono::seconds(5);
  if (options.at_clock_start) {
    try {
      options.at_clock_start();
    } catch (...) {
      stop_senders();
      throw;
    }
  }
  start = Clock::now();
  auto next_progress = start + kProgressEvery;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    const auto at = start + std::chrono::nanoseconds(planned[i].scheduled.ns());
    while (Clock::now() < at) {
      if (Clock::now() >= next_progress) {
        say_progress(i);
        next_progress += kProgressEvery;
      }
      std::this_thread::sleep_until(std::min(at, next_progress));
    }
    {
      std::lock_guard lock(mutex);
      due.push_back(i);
    }
    due_cv.notify_one();
  }
  stop_senders();
  report.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (options.at_last_answer) options.at_last_answer();
  sender_inputs.clear();  // Note [Shared memory senders]: only now, every request answered
  own_clients.clear();
  say_progress(planned.size());
  report.summary = summarize(config, options, report.requests, slos);
  return report;
}

namespace {

// The value of a Prometheus text's `line` from `at` on: a number of at least 0, or InputError.
double metric_value(const std::string& line, std::size_t at) {
  const std::string text = line.substr(at);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value < 0) {
    throw InputError("the server's metrics: '" + line + "' has no number of at least 0");
  }
  return value;
}

}  // namespace

std::optional<WorkerStartTotals> parse_worker_start_totals(const std::string& metrics_text) {
  std::optional<WorkerStartTotals> totals;
  std::array<bool, kWorkerStartPhases> seen{};
  bool counted = false;
  bool kills_counted = false, kills_timed = false;  // Note [Worker kill]
  std::int64_t kills = 0;
  double kill_seconds = 0;
  std::istringstream lines(metrics_text);
  for (std::string line; std::getline(lines, line);) {
    static const std::string kStarts = "psw_worker_starts_total ";
    static const std::string kSeconds = "psw_worker_start_seconds_total{phase=\"";
    static const std::string kKills = "psw_worker_kills_total ";
    static const std::string kKillSeconds = "psw_worker_kill_seconds_total ";
    if (line.rfind(kKills, 0) == 0) {
      kills = static_cast<std::int64_t>(metric_value(line, kKills.size()));
      kills_counted = true;
    } else if (line.rfind(kKillSeconds, 0) == 0) {
      kill_seconds = metric_value(line, kKillSeconds.size());
      kills_timed = true;
    } else if (line.rfind(kStarts, 0) == 0) {
      if (!totals) totals.emplace();
      totals->starts = static_cast<std::int64_t>(metric_value(line, kStarts.size()));
      counted = true;
    } else if (line.rfind(kSeconds, 0) == 0) {
      if (!totals) totals.emplace();
      const std::size_t close = line.find("\"} ", kSeconds.size());
      if (close == std::string::npos) throw InputError("the server's metrics: '" + line + "' is not a phase's line");
      const std::string phase = line.substr(kSeconds.size(), close - kSeconds.size());
      bool known = false;
      for (std::size_t i = 0; i < kWorkerStartPhases; ++i) {
        if (phase != to_string(static_cast<WorkerStartPhase>(i))) continue;
        totals->seconds[i] = metric_value(line, close + 3);
        seen[i] = known = true;
      }
      if (!known) throw InputError("the server's metrics: '" + line + "' names no phase of a worker's start");
    }
  }
  if (kills_counted != kills_timed) {
    throw InputError("the server's metrics have psw_worker_kills_total or psw_worker_kill_seconds_total without the "
                     "other (Note [Worker kill])");
  }
  if (!totals) {
    if (kills_counted) {
      throw InputError("the server's metrics count worker kills but not worker starts (Note [Worker starts measured])");
    }
    return std::nullopt;
  }
  if (!counted || std::count(seen.begin(), seen.end(), true) != static_cast<std::ptrdiff_t>(kWorkerStartPhases)) {
    throw InputError("the server's metrics have psw_worker_starts_total or psw_worker_start_seconds_total without "
                     "the other, or without every phase (Note [Worker starts measured])");
  }
  totals->kills = kills;
  totals->kill_seconds = kill_seconds;
  return totals;
}

std::optional<WorkerStartMeans> worker_starts_between(const WorkerStartTotals& before, const WorkerStartTotals& after) {
  const std::int64_t starts = after.starts - before.starts;
  if (starts < 0) {
    throw InputError(detail::concat("the server counted ", after.starts, " worker starts after the workload but ",
                                    before.starts, " before it: another server answered"));
  }
  if (starts == 0) return std::nullopt;
  WorkerStartMeans out;
  out.count = starts;
  for (std::size_t i = 0; i < kWorkerStartPhases; ++i) {
    const double ms = (after.seconds[i] - before.seconds[i]) * 1e3 / static_cast<double>(starts);
    out.mean_ms[to_string(static_cast<WorkerStartPhase>(i))] = ms;
    out.total_mean_ms += ms;
  }
  // Note [Worker kill]: the kills of the same span, where some happened.
  const std::int64_t kills = after.kills - before.kills;
  if (kills < 0) {
    throw InputError(detail::concat("the server counted ", after.kills, " worker kills after the workload but ",
                                    before.kills, " before it: another server answered"));
  }
  if (kills > 0) {
    out.kills = kills;
    out.kill_mean_ms = (after.kill_seconds - before.kill_seconds) * 1e3 / static_cast<double>(kills);
  }
  return out;
}

std::optional<std::int64_t> parse_fresh_standby_workers(const std::string& metrics_text) {
  static const std::string kFresh = "psw_fresh_standby_workers ";
  std::istringstream lines(metrics_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(kFresh, 0) == 0) return static_cast<std::int64_t>(metric_value(line, kFresh.size()));
  }
  return std::nullopt;  // a server from before the gauge
}

std::map<std::string, EagerSwitchSums> parse_eager_switch_totals(const std::string& metrics_text) {
  struct Seen {
    bool count = false, prepare = false, forward = false;
  };
  std::map<std::string, EagerSwitchSums> sums;
  std::map<std::string, Seen> seen;
  // From `at`, just after `{model="`: the model's name and where the rest of the line starts.
  auto model_of = [](const std::string& line, std::size_t at) {
    const std::size_t quote = line.find('"', at);
    if (quote == std::string::npos || quote == at) throw InputError("the server's metrics: '" + line + "' names no model");
    return std::pair{line.substr(at, quote - at), quote + 1};
  };
  static const std::string kCount = "psw_eager_switches_total{model=\"";
  static const std::string kSeconds = "psw_eager_switch_host_seconds_total{model=\"";
  std::istringstream lines(metrics_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(kCount, 0) == 0) {
      const auto [model, after] = model_of(line, kCount.size());
      if (line.compare(after, 2, "} ") != 0) throw InputError("the server's metrics: '" + line + "' is not a model's count");
      sums[model].switches = static_cast<std::int64_t>(metric_value(line, after + 2));
      seen[model].count = true;
    } else if (line.rfind(kSeconds, 0) == 0) {
      const auto [model, after] = model_of(line, kSeconds.size());
      static const std::string kPrepare = ",part=\"prepare\"} ", kForward = ",part=\"forward\"} ";
      if (line.compare(after, kPrepare.size(), kPrepare) == 0) {
        sums[model].prepare_seconds = metric_value(line, after + kPrepare.size());
        seen[model].prepare = true;
      } else if (line.compare(after, kForward.size(), kForward) == 0) {
        sums[model].forward_seconds = metric_value(line, after + kForward.size());
        seen[model].forward = true;
      } else {
        throw InputError("the server's metrics: '" + line + "' names no part of an eager switch");
      }
    }
  }
  for (const auto& [model, s] : seen) {
    if (!(s.count && s.prepare && s.forward)) {
      throw InputError("the server's metrics have psw_eager_switches_total and psw_eager_switch_host_seconds_total "
                       "(prepare, forward) not all three for model '" + model + "' (Note [Eager switches measured])");
    }
  }
  return sums;
}

std::map<std::string, EagerSwitchMeans> eager_switches_between(const std::map<std::string, EagerSwitchSums>& before,
                                                                const std::map<std::string, EagerSwitchSums>& after) {
  std::map<std::string, EagerSwitchMeans> out;
  for (const auto& [model, a] : after) {
    EagerSwitchSums b;
    if (const auto it = before.find(model); it != before.end()) b = it->second;
    const std::int64_t switches = a.switches - b.switches;
    if (switches < 0) {
      throw InputError(detail::concat("the server counted ", a.switches, " eager switches of '", model,
                                      "' after the workload but ", b.switches, " before it: another server answered"));
    }
    if (switches == 0) continue;
    const auto n = static_cast<double>(switches);
    out[model] = {switches, (a.prepare_seconds - b.prepare_seconds) * 1e3 / n,
                  (a.forward_seconds - b.forward_seconds) * 1e3 / n};
  }
  for (const auto& [model, b] : before) {
    if (!after.contains(model)) {
      throw InputError("the server counted eager switches of '" + model +
                       "' before the workload but none after it: another server answered");
    }
  }
  return out;
}

LoadReport run_load(const ExperimentConfig& config, const LoadOptions& options) {
  if (!(std::isfinite(options.time_scale) && options.time_scale > 0)) {
    throw InputError("--time-scale " + std::to_string(options.time_scale) + ": must be a finite number above 0");
  }
  if (options.senders < 1) throw InputError("--senders " + std::to_string(options.senders) + ": must be at least 1");
  if (options.timeout_ms < 1) throw InputError("--timeout-ms " + std::to_string(options.timeout_ms) + ": must be at least 1");
  if (options.warmup < 0) throw InputError("--warmup " + std::to_string(options.warmup) + ": must be at least 0");
  if (options.connections < 0 || options.connections > options.senders) {
    throw InputError("--connections " + std::to_string(options.connections) + ": must be between 1 and --senders (" +
                     std::to_string(options.senders) + ")");
  }
  // Note [Worker starts measured]: the server's counts around the workload's clock.
  Client metrics = connect_to_server(options);
  // The server's counters (Note [Worker starts measured], Note [Eager switches measured]).
  struct Counters {
    std::optional<WorkerStartTotals> worker_starts;
    std::map<std::string, EagerSwitchSums> eager_switches;
    std::optional<std::int64_t> fresh_standby_workers;  // Note [Processes a server starts with]
  };
  auto read_counters = [&]() -> std::optional<Counters> {
    std::string text;
    try {
      text = metrics.metrics();
    } catch (const ServiceError&) {
      return std::nullopt;  // not a psw serve: no Metrics call
    }
    return Counters{parse_worker_start_totals(text), parse_eager_switch_totals(text),
                    parse_fresh_standby_workers(text)};
  };
  std::optional<Counters> before;
  LoadOptions counted = options;
  counted.at_clock_start = [&] {
    if (options.at_clock_start) options.at_clock_start();
    before = read_counters();
  };
  std::optional<Counters> after;
  counted.at_last_answer = [&] {
    if (options.at_last_answer) options.at_last_answer();
    after = read_counters();
  };
  LoadReport report =
      config.workload.kind == WorkloadKind::Cycles ? run_cycles(config, counted) : run_open_loop(config, counted);
  if (before && after) {
    if (before->worker_starts && after->worker_starts) {
      if (auto starts = worker_starts_between(*before->worker_starts, *after->worker_starts)) {
        report.summary.worker_starts = std::move(starts);
      }
    }
    if (auto eager = eager_switches_between(before->eager_switches, after->eager_switches); !eager.empty()) {
      report.summary.eager_switches = std::move(eager);
    }
  }
  // Note [Processes a server starts with]: as the server stood when the clock started.
  if (before && before->fresh_standby_workers) report.summary.fresh_standby_workers = *before->fresh_standby_workers;
  return report;
}

void check_load_workload(const ExperimentConfig& config) {
  if (config.workload.kind != WorkloadKind::Cycles) plan_requests(config, 1.0);
}

std::vector<AnsweredRequest> read_answered_requests(const std::string& requests_csv, const std::string& origin) {
  std::istringstream in(requests_csv);
  std::string line;
  if (!std::getline(in, line)) throw InputError(origin + ": empty; expected psw load's requests.csv");
  auto split = [](const std::string& text, std::size_t at_most) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    while (fields.size() + 1 < at_most) {
      const std::size_t comma = text.find(',', start);
      if (comma == std::string::npos) break;
      fields.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    fields.push_back(text.substr(start));
    return fields;
  };
  const std::vector<std::string> header = split(line, std::string::npos);
  auto column = [&](const char* wanted) {
    const auto it = std::find(header.begin(), header.end(), wanted);
    if (it == header.end()) {
      throw InputError(origin + ": no column '" + wanted + "'; expected psw load's requests.csv (with server_ns and engine_ns)");
    }
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t model_at = column("model"), latency_at = column("latency_ns"), server_at = column("server_ns"),
                    engine_at = column("engine_ns"), status_at = column("status"), send_at = column("send_start_ns"),
                    finish_at = column("finish_ns");
  std::vector<AnsweredRequest> answered;
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    // The last column (error) may hold commas: split only the columns before it.
    const std::vector<std::string> f = split(line, header.size());
    const std::string where = detail::concat(origin, ":", line_number, ": ");
    if (f.size() != header.size()) throw InputError(where + "expected " + std::to_string(header.size()) + " columns");
    if (f[status_at] != "ok") continue;
    auto number = [&](std::size_t at) {
      std::int64_t v = 0;
      const char* first = f[at].data();
      const auto [end, ec] = std::from_chars(first, first + f[at].size(), v);
      if (ec != std::errc() || end != first + f[at].size() || v < 0) {
        throw InputError(where + "column '" + header[at] + "': expected a count of ns, got '" + f[at] + "'");
      }
      return v;
    };
    AnsweredRequest a{f[model_at], number(send_at), number(finish_at), number(latency_at), number(server_at),
                      number(engine_at)};
    if (a.engine <= 0 || a.server < a.engine || a.latency < a.server) {
      throw InputError(where + "a request without the server's times (engine_ns " + std::to_string(a.engine) +
                       ", server_ns " + std::to_string(a.server) + ", latency_ns " + std::to_string(a.latency) +
                       "): the server did not report them");
    }
    if (a.finish < a.send_start) {
      throw InputError(where + detail::concat("finish_ns ", a.finish, " before send_start_ns ", a.send_start));
    }
    answered.push_back(std::move(a));
  }
  return answered;
}

InputTransport recorded_inputs(const LoadSummary& summary, const std::string& origin) {
  if (!summary.inputs) return InputTransport::Raw;  // a run before the key: raw
  if (const std::optional<InputTransport> named = input_transport_named(*summary.inputs)) return *named;
  throw InputError(origin + ": 'inputs' is \"" + *summary.inputs + "\", expected \"raw\" or \"shared-memory\"");
}

InputTransport inputs_of_load(const std::filesystem::path& requests_csv, const std::string& given) {
  const std::optional<InputTransport> said = input_transport_named(given);
  if (!given.empty() && !said) {
    throw InputError("inputs '" + given + "' of " + requests_csv.string() + ": expected raw or shared-memory");
  }
  const std::filesystem::path summary = requests_csv.parent_path() / "summary.json";
  if (!std::filesystem::exists(summary)) {
    if (!said) {
      throw InputError(requests_csv.string() + ": no psw load summary.json beside it to say how the load sent its " +
                       "inputs (raw or shared-memory): say it (psw profile-serving --inputs)");
    }
    return *said;
  }
  const InputTransport recorded =
      recorded_inputs(load_summary_from_json(read_json_object(summary, "psw load's summary.json"), summary.string()),
                      summary.string());
  if (said && *said != recorded) {
    throw InputError(detail::concat("inputs ", given, " of ", requests_csv.string(), ": ", summary.string(),
                                    " records the load's as ", to_string(recorded)));
  }
  return recorded;
}

void check_serving_inputs(const ExperimentConfig& config, InputTransport measured, const std::string& measured_by) {
  if (!config.serving || config.serving->inputs == measured) return;
  throw InputError(config.source.string() + ": key 'serving': the serving profile '" + config.serving->name +
                   "' was measured with inputs " + to_string(config.serving->inputs) + ", but " + measured_by +
                   " sends them " + to_string(measured) +
                   " (Note [Inputs in shared memory]: the request path of one is not the other's; psw load "
                   "--shared-memory sends them in shared memory)");
}

ServingProfile serving_profile_from_load(const std::string& requests_csv, const std::string& origin,
                                         const std::string& name, const std::string& device, InputTransport inputs,
                                         const ServingProfile* growth_from) {
  struct Answered {
    std::size_t model;  // into `order`
    std::int64_t send_start, finish, protocol, server_part;
    std::int64_t in_flight = 0;  // Note [Protocol under load]: others in flight at its send
  };
  std::vector<Answered> answered;
  std::vector<std::string> order;
  for (const AnsweredRequest& a : read_answered_requests(requests_csv, origin)) {
    const auto known = std::find(order.begin(), order.end(), a.model);
    const auto model = static_cast<std::size_t>(known - order.begin());
    if (known == order.end()) order.push_back(a.model);
    answered.push_back({model, a.send_start, a.finish, a.latency - a.server, a.server - a.engine});
  }
  if (order.empty()) throw InputError(origin + ": no answered request");
  // Note [Protocol under load]: the requests in flight at each send (sent before it, not yet
  // answered), in one sweep in sending order.
  {
    std::vector<std::size_t> by_send(answered.size());
    std::iota(by_send.begin(), by_send.end(), std::size_t{0});
    std::stable_sort(by_send.begin(), by_send.end(),
                     [&](std::size_t a, std::size_t b) { return answered[a].send_start < answered[b].send_start; });
    std::priority_queue<std::int64_t, std::vector<std::int64_t>, std::greater<>> finishes;
    for (std::size_t i : by_send) {
      while (!finishes.empty() && finishes.top() <= answered[i].send_start) finishes.pop();
      answered[i].in_flight = static_cast<std::int64_t>(finishes.size());
      finishes.push(answered[i].finish);
    }
  }
  ServingProfile profile;
  profile.name = name;
  profile.inputs = inputs;
  profile.source.kind = ProfileSource::Measured;
  profile.source.device = device;
  profile.source.note = "psw profile-serving --from-load " + origin +
                        ": per model, medians over the load's answered requests of latency_ns - server_ns (protocol, "
                        "send lateness included) and server_ns - engine_ns (server) (Note [Request path]), the "
                        "protocol's growth per request in flight at its send (least squares; Note [Protocol under "
                        "load]) and the protocol's quantiles less that growth (Note [Protocol spread])";
  for (std::size_t m = 0; m < order.size(); ++m) {
    // Note [Protocol under load]: least squares of the protocol on the requests in flight.
    double n = 0, sum_k = 0, sum_p = 0, sum_kk = 0, sum_kp = 0;
    int loaded = 0;
    for (const auto& a : answered) {
      if (a.model != m) continue;
      const auto k = static_cast<double>(a.in_flight), p = static_cast<double>(a.protocol);
      n += 1;
      sum_k += k;
      sum_p += p;
      sum_kk += k * k;
      sum_kp += k * p;
      if (a.in_flight > 0) ++loaded;
    }
    const double sxx = sum_kk - sum_k * sum_k / n, sxy = sum_kp - sum_k * sum_p / n;
    std::int64_t growth =
        loaded >= kMinLoadedRequests && sxx > 0 ? std::max<std::int64_t>(0, std::llround(sxy / sxx)) : 0;
    if (growth_from != nullptr) {
      const RequestPathCost* given = growth_from->path_of(order[m]);
      if (given == nullptr) {
        throw InputError(origin + ": model '" + order[m] + "' has no request path in the profile '" + growth_from->name +
                         "' its protocol's growth per request in flight is to come from");
      }
      growth = given->protocol_per_in_flight.ns();
    }
    std::vector<std::int64_t> protocol, server_part;
    for (const auto& a : answered) {
      if (a.model != m) continue;
      protocol.push_back(std::max<std::int64_t>(0, a.protocol - growth * a.in_flight));
      server_part.push_back(a.server_part);
    }
    RequestPathCost cost{order[m], nanoseconds(median_of(protocol)), nanoseconds(median_of(server_part)),
                         static_cast<int>(protocol.size()),
                         evenly_spaced_quantiles(protocol, protocol_quantile_count(protocol.size()))};
    cost.protocol_per_in_flight = nanoseconds(growth);
    profile.request_path.push_back(std::move(cost));
  }
  return profile;
}

void write_load_outputs(const ExperimentConfig& config, const LoadReport& report, const std::filesystem::path& out_dir) {
  // The same marker as psw sim's folders: the files are the same kind.
  StagedFolder folder(out_dir, "config.resolved.yaml");
  save_text(folder.path() / "config.resolved.yaml", resolved_yaml(config, folder.path() / "config.resolved.yaml"));
  // As psw sim: no requests.csv when the config turns it off (outputs.requests_csv).
  if (config.requests_csv) {
    std::string csv =
        "id,model,task,arrival_ns,scheduled_ns,send_start_ns,send_late_ns,finish_ns,latency_ns,server_ns,engine_ns,status,"
        "error,first_token_ns\n";
    for (const LoadRequestRecord& r : report.requests) {
      csv += std::to_string(r.id) + "," + config.models[r.model].name + ",inference," + std::to_string(r.arrival.ns()) +
             "," + std::to_string(r.scheduled.ns()) + "," + std::to_string(r.send_start.ns()) + "," +
             std::to_string(r.send_late().ns()) + "," + std::to_string(r.finish.ns()) + "," +
             std::to_string(r.latency().ns()) + "," + std::to_string(r.server.ns()) + "," + std::to_string(r.engine.ns()) +
             (r.ok ? ",ok," : ",error,") + (r.ok ? "" : csv_text(r.error)) + "," +
             // Note [Generate requests]: its first token's latency (empty for an inference request).
             (r.first_token_latency() ? std::to_string(r.first_token_latency()->ns()) : "") + "\n";
    }
    save_text(folder.path() / "requests.csv", csv);
  }
  save_text(folder.path() / "summary.json", to_json(report.summary).dump(2) + "\n");
  folder.commit();
}

}  // namespace psw::runtime
