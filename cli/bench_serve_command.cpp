// psw bench-serve: measure a running psw serve as a client (exec/runtime/serving_benchmark.hpp);
// options and JSON output only.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "load_options.hpp"
#include "validators.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/client/serving_benchmark.hpp"

namespace psw::cli {

namespace {

struct BenchServeOptions {
  std::string socket_path;
  std::string server;
  std::string token_file;
  std::string out_path;
  runtime::ServingBenchmarkSpec spec;
};

nlohmann::json to_json(const runtime::ExactLatencySummary& s) {
  return {{"count", s.count}, {"min_ms", s.min_ms}, {"median_ms", s.median_ms}, {"p99_ms", s.p99_ms}, {"max_ms", s.max_ms}};
}

}  // namespace

Action add_bench_serve_command(CLI::App& app) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* cmd = app.add_subcommand("bench-serve", "Measure a running psw serve as a client: cold switches while "
                                                    "training runs, preemption, training throughput, many switches");
  auto* socket = cmd->add_option("--socket", o->socket_path, "The server's Unix socket (default: psw serve's)");
  cmd->add_option("--server", o->server, "A server on TCP, HOST:PORT")->excludes(socket);
  add_token_file_option(cmd, o->token_file);
  cmd->add_option("--cold-requests", o->spec.cold_requests, "Cold requests per model while training runs")
      ->check(CLI::Range(0, 100000))->capture_default_str();
  cmd->add_option("--gap-ms", o->spec.gap_ms, "Pause before each cold request (training resumes)")
      ->check(CLI::Range(0, 600000))->capture_default_str();
  cmd->add_option("--batch", o->spec.batch, "Batch of every request")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--model", o->spec.models,
                  "A model to request, repeatable (default: the zoo's built-in models the server serves; name decoders here)");
  cmd->add_option("--window", o->spec.throughput_window_s, "Seconds of training alone, then with requests (0: skip)")
      ->check(finite_range(0.0, 3600.0))->capture_default_str();
  cmd->add_option("--alone-window", o->spec.alone_window_s,
                  "Seconds of each window alone where they differ from --window (0: --window's); a five-minute "
                  "window with requests beside a shorter one alone")
      ->check(finite_range(0.0, 3600.0))->capture_default_str();
  cmd->add_option("--rate", o->spec.request_rate, "Requests per second in the windows with requests")
      ->check(finite_range(0.01, 1000.0))->capture_default_str();
  cmd->add_option("--rounds", o->spec.rounds,
                  "Pairs of windows, each pair in the other order than the one before (alone then requests, "
                  "requests then alone, ...), so that a drift of the job's rate weighs on both alike; the rates are "
                  "over all windows of each kind (Note [Training windows])")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--rate-slice", o->spec.rate_slice_s,
                  "The job's rate is also reported in slices of this many seconds within each window (how much it "
                  "moves by itself)")
      ->check(finite_range(0.1, 3600.0))->capture_default_str();
  cmd->add_option("--switches", o->spec.switches, "Consecutive switches at the end (0: skip)")
      ->check(CLI::Range(0, 10000000))->capture_default_str();
  cmd->add_flag("--requests-first", o->spec.requests_first,
                "The first pair's window with requests before its window alone (a job started with the server "
                "learns its first steps under requests)");
  cmd->add_flag("--shared-memory", o->spec.shared_memory,
                "Requests name their tensors in POSIX shared memory regions, one per model, registered once "
                "(the protocol's system shared memory extension) instead of carrying them");
  cmd->add_option("--out", o->out_path, "Write the report as JSON here (default: stdout)");
  return [o] {
    const std::string target = !o->server.empty() ? o->server
                               : "unix:" + (o->socket_path.empty() ? runtime::default_socket_path() : o->socket_path);
    runtime::Client client(target);
    if (!o->token_file.empty()) client.set_token(runtime::AccessToken::from_file(o->token_file).value());
    const runtime::ServingBenchmarkReport r = runtime::run_serving_benchmark(
        client, o->spec, [](const std::string& line) { std::fprintf(stderr, "bench-serve: %s\n", line.c_str()); });
    nlohmann::json cold = nlohmann::json::object();
    for (const auto& [model, s] : r.cold_latency_ms) cold[model] = to_json(s);
    auto loss_json = [](const std::vector<runtime::TrainingLossSample>& samples) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& x : samples) rows.push_back({{"elapsed_s", x.elapsed_s}, {"step", x.step}, {"loss", x.loss}});
      return rows;
    };
    nlohmann::json windows = nlohmann::json::array();
    for (const auto& w : r.training_windows) {
      windows.push_back({{"with_requests", w.with_requests}, {"start_s", w.start_s}, {"seconds", w.seconds},
                         {"steps", w.steps}, {"held_s", w.held_s}, {"requests", w.requests}});
    }
    nlohmann::json slices = nlohmann::json::array();
    for (const auto& x : r.training_rate_slices) {
      slices.push_back({{"with_requests", x.with_requests}, {"start_s", x.start_s}, {"seconds", x.seconds}, {"steps", x.steps}});
    }
    nlohmann::json server = nlohmann::json::object();
    for (const auto& [key, value] : r.server) server[key] = std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value);
    const nlohmann::json out = {
        {"target", target},
        {"spec", {{"cold_requests", o->spec.cold_requests}, {"gap_ms", o->spec.gap_ms}, {"batch", o->spec.batch},
                  {"window_s", o->spec.throughput_window_s},
                  {"alone_window_s", o->spec.alone_window()},
                  {"rate", o->spec.request_rate}, {"switches", o->spec.switches},
                  {"shared_memory", o->spec.shared_memory},
                  {"requests_first", o->spec.requests_first}, {"rounds", o->spec.rounds},
                  {"rate_slice_s", o->spec.rate_slice_s}}},
        {"cold_latency_ms", cold},
        {"training_steps_per_s", {{"alone", r.training_steps_per_s_alone},
                                  {"with_requests", r.training_steps_per_s_with_requests},
                                  {"requests", r.requests_in_throughput_window}}},
        {"training_with_requests", {{"held_s", r.training_held_s_with_requests},
                                    {"running_share", r.training_running_share}}},
        {"training_loss", {{"alone", loss_json(r.loss_alone)}, {"with_requests", loss_json(r.loss_with_requests)}}},
        {"training_started_unix_s", r.training_started_unix_s},
        {"training_windows", windows},
        {"training_rate_slices", slices},
        {"switch_latency_ms", to_json(r.switch_latency_ms)},
        {"server", server}};
    if (o->out_path.empty()) {
      std::cout << out.dump(2) << "\n";
    } else {
      save_text(o->out_path, out.dump(2) + "\n");
    }
  };
}

}  // namespace psw::cli
