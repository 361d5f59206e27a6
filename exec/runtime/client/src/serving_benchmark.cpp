#include "psw/runtime/client/serving_benchmark.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "psw/common/error.hpp"
#include "psw/runtime/ipc/request_phases.hpp"

namespace psw::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

InferRequest random_request(const ModelInfo& info, int batch, std::uint64_t seed) {
  InferRequest request;
  request.model = info.name;
  for (const auto& spec : info.inputs) request.inputs.push_back(random_tensor(spec, batch, seed));
  return request;
}

void wait_for_training(Client& client, const std::string& model) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (client.training_status(model).running) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw Error("the training job did not resume within 60 s");
}

// The models a benchmark requests: those named (each must be served), else the zoo's built-in
// models the server serves.
std::vector<ModelInfo> served_models(Client& client, const std::vector<std::string>& names) {
  std::vector<ModelInfo> models;
  for (const auto& name : names) {
    try {
      models.push_back(client.model_metadata(name));
    } catch (const ServiceError& e) {
      if (e.code() != ServiceError::Code::NotFound) throw;
      throw InputError("the server at " + client.target() + " does not serve model '" + name + "'");
    }
  }
  if (!names.empty()) return models;
  for (const char* name : {"resnet152", "inception_v3", "bert_base", "bert_tiny"}) {
    try {
      models.push_back(client.model_metadata(name));
    } catch (const ServiceError& e) {
      if (e.code() != ServiceError::Code::NotFound) throw;
    }
  }
  if (models.empty()) throw Error("the server serves none of the zoo's built-in models: name the models to request");
  return models;
}

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &utc);
  return text;
}

}  // namespace

ServingProfileRun profile_serving(Client& client, const ServingProfileSpec& spec,
                                  const std::function<void(const std::string&)>& progress) {
  if (spec.name.empty()) throw InputError("a serving profile needs a name");
  if (spec.device.empty()) throw InputError("a serving profile needs the device the server runs on");
  if (spec.requests < 1) throw InputError("profile-serving needs at least one request per model");
  if (spec.connections < 1) throw InputError("profile-serving needs at least one connection");
  if (spec.gap_ms < 0 || spec.batch < 1 || spec.training_batch < 1 || spec.training_window_s < 0) {
    throw InputError("profile-serving: the batches must be positive, the gap and the training window not negative");
  }
  auto say = [&progress](const std::string& line) {
    if (progress) progress(line);
  };
  if (!client.server_ready()) throw Error("the server at " + client.target() + " is not ready");
  // The training job as found: one that is not running at the start (none configured, not
  // started, stopped) is neither waited for nor measured.
  const TrainingStatus status = client.training_status("");
  const std::string trained = status.running ? status.model : std::string();
  const std::vector<ModelInfo> models = served_models(client, spec.models);
  ServingProfileRun run;
  ServingProfile& profile = run.profile;
  profile.name = spec.name;
  std::uint64_t seed = spec.seed;
  std::vector<std::unique_ptr<Client>> connections;
  for (int c = 0; c < spec.connections; ++c) {
    connections.push_back(std::make_unique<Client>(client.another_connection()));
    // Connected before the first request, as psw load's senders are (no connect in a latency).
    if (!connections.back()->server_live()) throw Error("the server at " + client.target() + " is not live");
  }
  std::size_t sent = 0;
  for (const auto& info : models) {
    std::vector<double> latencies;
    std::vector<std::int64_t> protocol, server;
    std::vector<std::int64_t> build, to_server, front_end, to_client;  // Note [Protocol split]
    for (int i = 0; i < spec.requests; ++i) {
      if (!trained.empty()) wait_for_training(client, trained);
      std::this_thread::sleep_for(std::chrono::milliseconds(spec.gap_ms));
      const InferRequest request = random_request(info, spec.batch, seed++);
      Client& connection = *connections[sent++ % connections.size()];
      const auto t0 = Clock::now();
      const InferResponse response = connection.infer(request);
      const auto t1 = Clock::now();
      const auto client_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
      if (response.front_end_received_ns > 0 && response.front_end_replied_ns >= response.front_end_received_ns) {
        const auto at = [](Clock::time_point t) {
          return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        };
        build.push_back(response.client_sent_ns - at(t0));
        to_server.push_back(response.front_end_received_ns - response.client_sent_ns);
        front_end.push_back(response.front_end_replied_ns - response.front_end_received_ns - response.server_ns);
        to_client.push_back(at(t1) - response.front_end_replied_ns);
      }
      if (response.server_ns <= 0 || response.engine_ns <= 0) {
        throw Error("the server at " + client.target() + " does not report its times (response parameters "
                    "psw_server_ns and psw_engine_ns): it is not a psw serve of this version");
      }
      latencies.push_back(static_cast<double>(client_ns) * 1e-6);
      // The server's time is measured inside the client's and the engine's inside the
      // server's; the guards only keep a misreporting server from writing a negative cost.
      protocol.push_back(std::max<std::int64_t>(0, client_ns - response.server_ns));
      server.push_back(std::max<std::int64_t>(0, response.server_ns - response.engine_ns));
    }
    // Note [Protocol spread]: the quantiles too.
    std::vector<Duration> quantiles = evenly_spaced_quantiles(protocol, kProtocolQuantiles);
    const std::int64_t protocol_ns = median_of(std::move(protocol));
    const std::int64_t server_ns = median_of(std::move(server));
    profile.request_path.push_back(
        {info.name, nanoseconds(protocol_ns), nanoseconds(server_ns), spec.requests, std::move(quantiles)});
    run.client_ms[info.name] = summarize_latencies(latencies);
    if (!build.empty()) {
      ProtocolSplit split;
      split.requests = static_cast<std::int64_t>(build.size());
      split.build_ms = static_cast<double>(median_of(std::move(build))) * 1e-6;
      split.to_server_ms = static_cast<double>(median_of(std::move(to_server))) * 1e-6;
      split.front_end_ms = static_cast<double>(median_of(std::move(front_end))) * 1e-6;
      split.to_client_ms = static_cast<double>(median_of(std::move(to_client))) * 1e-6;
      say(detail::concat(info.name, ": protocol split (medians, ms): build ", split.build_ms, ", to server ",
                         split.to_server_ms, ", front end ", split.front_end_ms, ", to client ", split.to_client_ms));
      run.protocol_split[info.name] = split;
    }
    say(detail::concat(info.name, ": protocol ", protocol_ns / 1000, " us, server ", server_ns / 1000,
                       " us (medians of ", spec.requests, " requests)"));
  }
  std::string training_note;
  if (!trained.empty() && spec.training_window_s > 0) {
    wait_for_training(client, trained);
    auto steps = [&] { return client.training_status(trained).completed_steps; };
    const std::int64_t s0 = steps();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(spec.training_window_s));
    const std::int64_t done = steps() - s0;
    const double seconds = ms_since(t0) / 1000.0;
    if (done < 1) throw Error("the training job completed no step in " + std::to_string(seconds) + " s");
    const auto step_ns = static_cast<std::int64_t>(std::llround(seconds * 1e9 / static_cast<double>(done)));
    profile.training.push_back({trained, spec.training_batch, nanoseconds(step_ns)});
    training_note = detail::concat("; training step of ", trained, " (batch ", spec.training_batch, ") from ",
                                   done, " steps in ", seconds, " s with no requests");
    say(detail::concat(trained, " training: ", step_ns / 1000, " us per step"));
  }
  profile.source.kind = ProfileSource::Measured;
  profile.source.device = spec.device;
  profile.source.date = utc_date();
  profile.source.note = detail::concat(
      "psw profile-serving against ", client.target(), ": per model, medians over ", spec.requests,
      " cold requests of batch ", spec.batch, ", inputs in the messages, round-robin over ", spec.connections,
      " connections, each ", spec.gap_ms, trained.empty() ? " ms apart (no training job ran)" : " ms after training resumed",
      "; protocol = client latency - psw_server_ns, server = psw_server_ns - "
      "psw_engine_ns (Note [Request path]); the protocol's quantiles too (Note [Protocol spread])", training_note);
  return run;
}

double metric_value(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 && line[name.size()] == ' ') {
      return std::stod(line.substr(name.size() + 1));
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::vector<TrainingRateSlice> training_rate_slices(const std::vector<TrainingWindow>& windows,
                                                    std::vector<TrainingLossSample> samples, double slice_s) {
  if (!(slice_s > 0)) throw InputError("the training rate's slices must be longer than zero seconds");
  std::stable_sort(samples.begin(), samples.end(),
                   [](const TrainingLossSample& a, const TrainingLossSample& b) { return a.elapsed_s < b.elapsed_s; });
  // The last sample at or before `t`, or none.
  const auto at_or_before = [&](double t) -> const TrainingLossSample* {
    const auto after = std::upper_bound(samples.begin(), samples.end(), t,
                                        [](double x, const TrainingLossSample& s) { return x < s.elapsed_s; });
    return after == samples.begin() ? nullptr : &*std::prev(after);
  };
  std::vector<TrainingRateSlice> slices;
  for (const TrainingWindow& w : windows) {
    const auto whole = static_cast<std::int64_t>(std::floor(w.seconds / slice_s));
    for (std::int64_t k = 0; k < whole; ++k) {
      const double a = w.start_s + static_cast<double>(k) * slice_s;
      const TrainingLossSample* first = at_or_before(a);
      const TrainingLossSample* last = at_or_before(a + slice_s);
      // A window's first slice may open at the window before's last sample (a sampling period
      // or a request earlier): a few of the other kind's steps in a slice of many.
      if (first == nullptr || last == nullptr || !(last->elapsed_s > first->elapsed_s)) continue;
      slices.push_back({w.with_requests, first->elapsed_s, last->elapsed_s - first->elapsed_s, last->step - first->step});
    }
  }
  return slices;
}

ServingBenchmarkReport run_serving_benchmark(Client& client, const ServingBenchmarkSpec& spec,
                                             const std::function<void(const std::string&)>& progress) {
  auto say = [&progress](const std::string& line) {
    if (progress) progress(line);
  };
  if (spec.rounds < 1) throw InputError("bench-serve: the pairs of training windows (rounds) must be at least 1");
  if (!(spec.alone_window_s >= 0)) throw InputError("bench-serve: the window alone must not be negative");
  if (!(spec.rate_slice_s > 0)) throw InputError("bench-serve: the rate's slices must be longer than zero");
  if (!client.server_ready()) throw Error("the server at " + client.target() + " is not ready");
  // The models: every one the metadata of the server's models lists; the server's training job.
  const TrainingStatus training = client.training_status("");
  const std::vector<ModelInfo> models = served_models(client, spec.models);
  ServingBenchmarkReport report;
  std::uint64_t seed = spec.seed;
  // spec.shared_memory: each model's tensors in its own region, registered at its first request;
  // placed() writes a request's inputs there and says where they are (nothing without it).
  std::map<std::string, std::unique_ptr<SharedMemoryStaging>> staged;
  const SharedMemoryPlacement in_messages;
  auto placed = [&](const ModelInfo& info, const InferRequest& request) -> const SharedMemoryPlacement& {
    if (!spec.shared_memory) return in_messages;
    auto& staging = staged[info.name];
    if (!staging) {
      staging = std::make_unique<SharedMemoryStaging>(client, info, request);
    } else {
      staging->write_inputs(request);
    }
    return staging->placement();
  };
  // 1. Cold requests while training runs (cache off in the config: each one transfers).
  for (const auto& info : models) {
    std::vector<double> latencies;
    for (int i = 0; i < spec.cold_requests; ++i) {
      if (!training.model.empty()) wait_for_training(client, training.model);
      std::this_thread::sleep_for(std::chrono::milliseconds(spec.gap_ms));
      const InferRequest request = random_request(info, spec.batch, seed++);
      const SharedMemoryPlacement& placement = placed(info, request);
      const auto t0 = Clock::now();
      client.infer(request, placement);
      latencies.push_back(ms_since(t0));
    }
    report.cold_latency_ms[info.name] = summarize_latencies(latencies);
    say(info.name + ": " + std::to_string(spec.cold_requests) + " cold requests, median " +
        std::to_string(report.cold_latency_ms[info.name].median_ms) + " ms");
  }
  // 2. Training throughput alone and under requests at the given rate (Note [Training windows]).
  if (!training.model.empty() && spec.throughput_window_s > 0) {
    wait_for_training(client, training.model);
    const auto seconds = [](double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
    const auto loaded_window = seconds(spec.throughput_window_s);
    const auto alone_window = seconds(spec.alone_window());
    const auto first = Clock::now();
    report.training_started_unix_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    // The job's loss, sampled until `until` (a new step's only), every 100 ms.
    auto sample_loss = [&](std::vector<TrainingLossSample>& into, Clock::time_point since, Clock::time_point until) {
      while (true) {
        const TrainingStatus status = client.training_status(training.model);
        if (status.completed_steps > 0 && (into.empty() || into.back().step != status.completed_steps)) {
          into.push_back({ms_since(since) / 1000.0, status.completed_steps, status.last_loss});
        }
        const auto next = Clock::now() + std::chrono::milliseconds(100);
        if (next >= until) break;
        std::this_thread::sleep_until(next);
      }
    };
    // One window: the job alone, or under requests at the given rate; its steps, time and hold.
    auto run_window = [&](bool with_requests) {
      TrainingWindow w;
      w.with_requests = with_requests;
      const TrainingStatus before = client.training_status(training.model);
      const auto t0 = Clock::now();
      w.start_s = std::chrono::duration<double>(t0 - first).count();
      if (!with_requests) {
        sample_loss(report.loss_alone, first, t0 + alone_window);
        std::this_thread::sleep_until(t0 + alone_window);
      } else {
        const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / spec.request_rate));
        auto next = t0;
        std::size_t k = 0;
        while (Clock::now() - t0 < loaded_window) {
          sample_loss(report.loss_with_requests, first, next);
          std::this_thread::sleep_until(next);
          const ModelInfo& info = models[k++ % models.size()];
          const InferRequest request = random_request(info, spec.batch, seed++);
          client.infer(request, placed(info, request));
          ++w.requests;
          next += period;
        }
      }
      const TrainingStatus after = client.training_status(training.model);
      w.seconds = ms_since(t0) / 1000.0;
      w.steps = after.completed_steps - before.completed_steps;
      w.held_s = static_cast<double>(after.held_ns - before.held_ns) / 1e9;
      report.training_windows.push_back(w);
    };
    for (int round = 0; round < spec.rounds; ++round) {
      const bool requests_first = spec.requests_first != (round % 2 == 1);
      run_window(requests_first);
      run_window(!requests_first);
    }
    // The rates over all windows of each kind; the hold and the share over the windows with requests.
    double alone_s = 0, loaded_s = 0;
    std::int64_t alone_steps = 0, loaded_steps = 0;
    for (const TrainingWindow& w : report.training_windows) {
      (w.with_requests ? loaded_s : alone_s) += w.seconds;
      (w.with_requests ? loaded_steps : alone_steps) += w.steps;
      if (w.with_requests) {
        report.training_held_s_with_requests += w.held_s;
        report.requests_in_throughput_window += w.requests;
      }
    }
    report.training_steps_per_s_alone = static_cast<double>(alone_steps) / alone_s;
    report.training_steps_per_s_with_requests = static_cast<double>(loaded_steps) / loaded_s;
    const double running_s = loaded_s - report.training_held_s_with_requests;
    if (running_s > 0 && report.training_steps_per_s_alone > 0) {
      report.training_running_share = static_cast<double>(loaded_steps) / running_s / report.training_steps_per_s_alone;
    }
    std::vector<TrainingLossSample> samples = report.loss_alone;
    samples.insert(samples.end(), report.loss_with_requests.begin(), report.loss_with_requests.end());
    report.training_rate_slices = training_rate_slices(report.training_windows, std::move(samples), spec.rate_slice_s);
    say("training: " + std::to_string(report.training_steps_per_s_alone) + " steps/s alone, " +
        std::to_string(report.training_steps_per_s_with_requests) + " with requests");
  }
  // 3. Consecutive switches: the models in turn, back to back (training stopped).
  if (spec.switches > 0) {
    if (!training.model.empty()) client.stop_training(training.model);
    std::vector<InferRequest> requests;
    std::vector<SharedMemoryPlacement> placements;
    for (const auto& info : models) {
      requests.push_back(random_request(info, spec.batch, seed++));
      placements.push_back(placed(info, requests.back()));  // a model's region holds its request
    }
    std::vector<double> latencies;
    latencies.reserve(static_cast<std::size_t>(spec.switches));
    for (int i = 0; i < spec.switches; ++i) {
      const auto t0 = Clock::now();
      const std::size_t r = static_cast<std::size_t>(i) % requests.size();
      client.infer(requests[r], placements[r]);
      latencies.push_back(ms_since(t0));
      if ((i + 1) % 1000 == 0) say(std::to_string(i + 1) + " switches");
    }
    report.switches = spec.switches;
    report.switch_latency_ms = summarize_latencies(latencies);
    if (!training.model.empty()) client.start_training(training.model, 0);
  }
  report.metrics = client.metrics();
  for (const auto& [key, metric] : std::map<std::string, std::string>{
           {"preemption_p50_s", "psw_preemption_latency_seconds{quantile=\"0.5\"}"},
           {"preemption_p99_s", "psw_preemption_latency_seconds{quantile=\"0.99\"}"},
           {"preemptions", "psw_preemptions_total"},
           {"startup_p50_s", "psw_startup_latency_seconds{quantile=\"0.5\"}"},
           {"startup_p99_s", "psw_startup_latency_seconds{quantile=\"0.99\"}"},
           {"server_latency_p50_s", "psw_server_latency_seconds{quantile=\"0.5\"}"},
           {"server_latency_p99_s", "psw_server_latency_seconds{quantile=\"0.99\"}"},
           {"switches", "psw_switches_total"},
           {"worker_restarts", "psw_worker_restarts_total"},
           {"device_memory_bytes", "psw_device_memory_bytes"},
           {"training_iterations", "psw_training_iterations_total"}}) {
    report.server[key] = metric_value(report.metrics, metric);
  }
  // Note [Request phases], Note [Preemption phases]: where the server's and the preemptions' time
  // went, and where in the step the job read its stop (phase_<phase>_p50_s, preemption_<phase>_p99_s,
  // preemption_at_<boundary>_p99_s, preemptions_at_<boundary>).
  auto split = [&report](const std::string& metric, const std::string& label, const char* value, const std::string& key) {
    const std::string labels = label + "=\"" + value + "\"";
    for (const auto& [q, suffix] : {std::pair{"0.5", "_p50_s"}, std::pair{"0.99", "_p99_s"}, std::pair{"1", "_max_s"}}) {
      report.server[key + suffix] = metric_value(report.metrics, metric + "{" + labels + ",quantile=\"" + q + "\"}");
    }
    return metric_value(report.metrics, metric + "_count{" + labels + "}");
  };
  for (const char* phase : kRequestPhaseNames) split("psw_request_phase_seconds", "phase", phase, std::string("phase_") + phase);
  for (const char* phase : kPreemptionPhaseNames) {
    split("psw_preemption_phase_seconds", "phase", phase, std::string("preemption_") + phase);
  }
  for (const char* place : kTrainingBoundaryNames) {
    report.server[std::string("preemptions_at_") + place] =
        split("psw_preemption_by_boundary_seconds", "boundary", place, std::string("preemption_at_") + place);
  }
  // Per model (startup_<model>_p50_s, server_latency_<model>_p99_s, phase_<model>_<phase>_p50_s):
  // the client's latency of a model less its server latency is that model's protocol part.
  for (const auto& info : models) {
    split("psw_startup_by_model_seconds", "model", info.name.c_str(), "startup_" + info.name);
    split("psw_server_latency_by_model_seconds", "model", info.name.c_str(), "server_latency_" + info.name);
    for (const char* phase : kRequestPhaseNames) {
      split("psw_request_phase_by_model_seconds", "model=\"" + info.name + "\",phase", phase,
            "phase_" + info.name + "_" + phase);
    }
  }
  return report;
}

// Note [Generation measured] (serving_benchmark.hpp).
GenerationReport measure_generation(Client& client, const GenerationSpec& spec) {
  if (spec.repeat < 1) throw InputError("the generate calls to measure must be at least 1");
  if (spec.prompt_ids.empty()) throw InputError("a generate call needs a prompt (token ids)");
  std::optional<ModelInfo> evicting;
  if (!spec.evict_with.empty()) {
    if (spec.evict_with == spec.model) {
      throw InputError("the model requested between the generate calls must be another than '" + spec.model + "'");
    }
    evicting = served_models(client, {spec.evict_with}).front();
  }
  GenerationReport report;
  report.model = spec.model;
  report.prompt_tokens = spec.prompt_ids.size();
  std::vector<double> cold, warm, per_token;
  std::uint64_t seed = spec.seed;
  for (int i = 0; i < spec.repeat; ++i) {
    if (evicting) client.infer(random_request(*evicting, 1, seed++), SharedMemoryPlacement{});
    GenerateRequest request;
    request.model = spec.model;
    request.id = detail::concat("measure-", i);
    request.input_ids = spec.prompt_ids;
    request.max_tokens = spec.max_tokens;
    const GenerateResponse r = client.generate(request);
    if (i == 0) {
      report.output_ids = r.output_ids;
      report.prompt_bucket = r.prompt_bucket;
      report.first_switched = r.switched;
      report.first_worker = r.worker;
    } else if (r.output_ids != report.output_ids) {
      const auto [differs, _] = std::mismatch(r.output_ids.begin(), r.output_ids.end(), report.output_ids.begin(),
                                              report.output_ids.end());
      report.differing_calls.push_back(
          {i, r.switched, r.worker, static_cast<std::size_t>(std::distance(r.output_ids.begin(), differs))});
    }
    (r.switched ? cold : warm).push_back(static_cast<double>(r.ttft_ns) / 1e6);
    if (r.output_ids.size() > 1) per_token.push_back(static_cast<double>(r.tpot_ns) / 1e6);
  }
  report.ttft_cold_ms = summarize_latencies(std::move(cold));
  report.ttft_warm_ms = summarize_latencies(std::move(warm));
  report.tpot_ms = summarize_latencies(std::move(per_token));
  return report;
}

}  // namespace psw::runtime
