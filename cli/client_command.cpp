// psw client: talk to a running `psw serve` over its gRPC protocol (KServe v2 + Control):
// health, metadata, inference with latencies, the training job, metrics. The logic lives in the
// client library (psw/runtime/client/client.hpp, client_tools.hpp); this file parses and prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "load_options.hpp"
#include "validators.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/client/client_tools.hpp"
#include "psw/runtime/client/serving_benchmark.hpp"
#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/server/grpc_server.hpp"

namespace psw::cli {

namespace {

using runtime::Client;
using runtime::ServiceError;

// How many leading values of each output are shown.
constexpr std::size_t kShownValues = 6;

struct ClientOptions {
  std::string socket_path;
  std::string server_address;
  std::string model;
  std::string input_path;
  bool random = false;
  bool shared_memory = false;
  std::int64_t batch = 1;
  std::uint64_t seed = 1;
  int repeat = 1;
  double timeout_s = 60;
  std::string format = "table";
  bool live = false;
  bool metadata = false;
  bool index = false;  // the model repository's index
  std::string load;          // Note [Repository load]: a model to load, from --model-config or the serve config
  std::string model_config;  // its entry, a file of YAML or JSON
  std::string unload;
  bool metrics = false;
  std::string train_start;
  std::int64_t steps = 0;
  std::string train_stop;
  std::string train_status;
  std::string train_checkpoint;
  std::string checkpoint_path;
  std::string token_file;
  std::string generate;                  // a decoder: generate from --prompt-ids
  std::vector<std::int64_t> prompt_ids;
  std::int64_t max_tokens = 16;
  std::string evict_with;                // Note [Generation measured]: requested before each call
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The largest --input file: a server's max_tensor_bytes is at most 4 GiB (serve_config.cpp).
constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{1} << 32;

std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) throw InputError("--input " + path + ": no such file");
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError("--input " + path + ": not a regular file (a directory, device, FIFO or socket)");
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError("--input " + path + ": cannot read its size: " + ec.message());
  if (size > kMaxInputBytes) {
    throw InputError("--input " + path + ": larger than 4 GiB, the largest tensor a server accepts");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError("cannot open --input " + path);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  file.read(bytes.data(), static_cast<std::streamsize>(size));
  bytes.resize(static_cast<std::size_t>(file.gcount()));
  if (file.bad()) throw InputError("cannot read --input " + path);
  return bytes;
}

nlohmann::json tensor_specs_json(const std::vector<runtime::TensorSpec>& specs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& spec : specs) list.push_back({{"name", spec.name}, {"datatype", spec.datatype}, {"shape", spec.shape}});
  return list;
}

nlohmann::json training_json(const runtime::TrainingStatus& status) {
  return {{"model", status.model},
          {"running", status.running},
          {"stopped", status.stopped},
          {"active", status.active},
          {"completed_steps", status.completed_steps},
          {"target_steps", status.target_steps},
          {"preemptions", status.preemptions},
          {"held_s", static_cast<double>(status.held_ns) * 1e-9},  // Note [Training held]
          {"last_loss", status.last_loss}};
}

void print_training(const ClientOptions& o, const runtime::TrainingStatus& status) {
  if (o.format == "json") {
    std::cout << training_json(status).dump(2) << "\n";
    return;
  }
  const char* state = status.running  ? "running"
                      : status.stopped ? "stopped"
                      : status.active  ? "between tasks (preempted, or resuming)"
                                       : "not started";
  std::printf("%-12s %s\n", "model", status.model.empty() ? "(no training job)" : status.model.c_str());
  std::printf("%-12s %s\n", "state", state);
  std::printf("%-12s %lld of %s\n", "steps", static_cast<long long>(status.completed_steps),
              status.target_steps > 0 ? std::to_string(status.target_steps).c_str() : "until stopped");
  std::printf("%-12s %lld\n", "preemptions", static_cast<long long>(status.preemptions));
  std::printf("%-12s %.3f s\n", "held", static_cast<double>(status.held_ns) * 1e-9);  // Note [Training held]
  std::printf("%-12s %g\n", "last loss", status.last_loss);
}

void print_metadata(const ClientOptions& o, Client& client) {
  if (o.model.empty()) {
    const runtime::ServerInfo server = client.server_metadata();
    if (o.format == "json") {
      std::cout << nlohmann::json{{"name", server.name}, {"version", server.version}, {"extensions", server.extensions}}.dump(2)
                << "\n";
    } else {
      std::printf("%-10s %s %s\n", "server", server.name.c_str(), server.version.c_str());
      std::string extensions;
      for (const auto& e : server.extensions) extensions += (extensions.empty() ? "" : ", ") + e;
      std::printf("%-10s %s\n", "extensions", extensions.empty() ? "(none)" : extensions.c_str());
    }
    return;
  }
  const runtime::ModelInfo model = client.model_metadata(o.model);
  if (o.format == "json") {
    std::cout << nlohmann::json{{"name", model.name},
                                {"platform", model.platform},
                                {"versions", model.versions},
                                {"ready", model.ready},
                                {"inputs", tensor_specs_json(model.inputs)},
                                {"outputs", tensor_specs_json(model.outputs)}}
                     .dump(2)
              << "\n";
    return;
  }
  std::string versions;
  for (const auto& v : model.versions) versions += (versions.empty() ? "" : ", ") + v;
  std::printf("%-10s %s (%s, versions %s, %s)\n", "model", model.name.c_str(), model.platform.c_str(),
              versions.c_str(), model.ready ? "ready" : "not ready");
  for (const auto& [kind, specs] : {std::pair{"input", &model.inputs}, std::pair{"output", &model.outputs}}) {
    for (const auto& spec : *specs) {
      std::printf("%-10s %-16s %-6s %s\n", kind, spec.name.c_str(), spec.datatype.c_str(), shape_text(spec.shape).c_str());
    }
  }
}

// Inputs for the model from its metadata: the first from --input (its batch inferred from the
// file's size), or every one random at --batch; the others random at the same batch.
runtime::InferRequest build_request(const ClientOptions& o, const runtime::ModelInfo& model) {
  if (model.inputs.empty()) throw InputError("model '" + o.model + "' declares no inputs");
  runtime::InferRequest request;
  request.model = o.model;
  request.id = "psw-client";
  std::int64_t batch = o.batch;
  for (std::size_t i = 0; i < model.inputs.size(); ++i) {
    const std::uint64_t seed = o.seed + i;  // distinct values per input, reproducible per seed
    if (i == 0 && !o.input_path.empty()) {
      request.inputs.push_back(runtime::tensor_from_bytes(model.inputs[0], read_file(o.input_path), o.input_path));
      if (!request.inputs[0].shape.empty()) batch = request.inputs[0].shape[0];
    } else {
      request.inputs.push_back(runtime::random_tensor(model.inputs[i], batch, seed));
    }
  }
  return request;
}

void run_inference(const ClientOptions& o, Client& client) {
  const runtime::ModelInfo model = client.model_metadata(o.model);
  const runtime::InferRequest request = build_request(o, model);
  // --shared-memory: the inputs and outputs in a region registered once, the requests naming it.
  std::unique_ptr<runtime::SharedMemoryStaging> staging;
  if (o.shared_memory) staging = std::make_unique<runtime::SharedMemoryStaging>(client, model, request);
  std::vector<double> latencies_ms;
  runtime::InferResponse response;
  for (int i = 0; i < o.repeat; ++i) {
    const auto started = std::chrono::steady_clock::now();
    response = staging ? client.infer(request, staging->placement()) : client.infer(request);
    latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  }
  if (staging) staging->read_outputs(response);
  const runtime::ExactLatencySummary latency = runtime::summarize_latencies(latencies_ms);
  if (o.format == "json") {
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& output : response.outputs) {
      outputs.push_back({{"name", output.name},
                         {"datatype", output.datatype},
                         {"shape", output.shape},
                         {"bytes", output.bytes.size()},
                         {"first_values", runtime::leading_values(output, kShownValues)}});
    }
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& input : request.inputs) {
      inputs.push_back({{"name", input.name}, {"datatype", input.datatype}, {"shape", input.shape}});
    }
    const nlohmann::json out = {
        {"model", response.model},
        {"version", response.version},
        {"id", response.id},
        {"shared_memory", o.shared_memory},
        {"inputs", inputs},
        {"outputs", outputs},
        {"latency_ms",
         {{"count", latency.count}, {"median", latency.median_ms}, {"p99", latency.p99_ms}, {"min", latency.min_ms},
          {"max", latency.max_ms}}}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%-9s %s (version %s)\n", "model", response.model.c_str(), response.version.c_str());
  if (staging) std::printf("%-9s system shared memory region %s\n", "tensors", staging->region().c_str());
  for (const auto& input : request.inputs) {
    std::printf("%-9s %-16s %-6s %s\n", "input", input.name.c_str(), input.datatype.c_str(),
                shape_text(input.shape).c_str());
  }
  for (const auto& output : response.outputs) {
    const std::vector<double> shown = runtime::leading_values(output, kShownValues + 1);
    std::string values;
    for (std::size_t i = 0; i < std::min(shown.size(), kShownValues); ++i) {
      const double v = shown[i];
      char text[32];
      std::snprintf(text, sizeof text, "%s%.6g", values.empty() ? "" : " ", v);
      values += text;
    }
    std::printf("%-9s %-16s %-6s %-16s %s%s\n", "output", output.name.c_str(), output.datatype.c_str(),
                shape_text(output.shape).c_str(), values.c_str(),
                shown.size() > kShownValues ? " ..." : "");
  }
  std::printf("%-9s %zu request%s: median %.3f ms, p99 %.3f ms, min %.3f ms\n", "latency", latency.count,
              latency.count == 1 ? "" : "s", latency.median_ms, latency.p99_ms, latency.min_ms);
}

nlohmann::json summary_json(const runtime::ExactLatencySummary& s) {
  return {{"count", s.count}, {"min", s.min_ms}, {"median", s.median_ms}, {"p99", s.p99_ms}, {"max", s.max_ms}};
}

// Note [Generation measured]: --repeat calls (each after a request of --evict-with, if given).
void run_generate_measurement(const ClientOptions& o, Client& client) {
  runtime::GenerationSpec spec;
  spec.model = o.generate;
  spec.prompt_ids = o.prompt_ids;
  spec.max_tokens = o.max_tokens;
  spec.repeat = o.repeat;
  spec.evict_with = o.evict_with;
  spec.seed = o.seed;
  const runtime::GenerationReport r = runtime::measure_generation(client, spec);
  if (o.format == "json") {
    nlohmann::json differing = nlohmann::json::array();
    for (const auto& d : r.differing_calls) {
      differing.push_back(
          {{"call", d.call}, {"switched", d.switched}, {"worker", d.worker}, {"from_token", d.from_token}});
    }
    std::cout << nlohmann::json{{"model_name", r.model},
                                {"prompt_tokens", r.prompt_tokens},
                                {"prompt_bucket", r.prompt_bucket},
                                {"max_tokens", o.max_tokens},
                                {"calls", o.repeat},
                                {"evict_with", o.evict_with},
                                {"output_ids", r.output_ids},
                                {"outputs_equal", r.outputs_equal()},
                                {"first_call_switched", r.first_switched},
                                {"first_call_worker", r.first_worker},
                                {"differing_calls", differing},
                                {"ttft_cold_ms", summary_json(r.ttft_cold_ms)},
                                {"ttft_warm_ms", summary_json(r.ttft_warm_ms)},
                                {"tpot_ms", summary_json(r.tpot_ms)}}
                     .dump(2)
              << "\n";
    return;
  }
  std::printf("%-12s %s, prompt of %zu tokens prefilled at %lld, %d call%s%s\n", "model", r.model.c_str(),
              r.prompt_tokens, static_cast<long long>(r.prompt_bucket), o.repeat, o.repeat == 1 ? "" : "s",
              o.evict_with.empty() ? "" : (", each after a request of " + o.evict_with).c_str());
  std::printf("%-12s %s\n", "outputs", r.outputs_equal() ? "the same ids from every call" : "ids DIFFER between calls");
  for (const auto& d : r.differing_calls) {
    std::printf("%-12s call %d (%s, worker %d) differs from call 0 (%s, worker %d) from token %zu\n", "", d.call,
                d.switched ? "cold" : "warm", d.worker, r.first_switched ? "cold" : "warm", r.first_worker, d.from_token);
  }
  for (const auto& [label, s] : {std::pair{"ttft cold", r.ttft_cold_ms}, {"ttft warm", r.ttft_warm_ms}, {"per token", r.tpot_ms}}) {
    if (s.count == 0) continue;
    std::printf("%-12s %zu: median %.3f ms, p99 %.3f ms, min %.3f ms\n", label, s.count, s.median_ms, s.p99_ms, s.min_ms);
  }
}

// Note [Generate call]: the tokens as they come, then the answer.
void run_generate(const ClientOptions& o, Client& client) {
  if (o.prompt_ids.empty()) throw InputError("--generate needs --prompt-ids (the prompt's token ids, comma-separated)");
  if (o.repeat > 1 || !o.evict_with.empty()) {
    run_generate_measurement(o, client);
    return;
  }
  runtime::GenerateRequest request;
  request.model = o.generate;
  request.id = "psw-client";
  request.input_ids = o.prompt_ids;
  request.max_tokens = o.max_tokens;
  const bool table = o.format == "table";
  if (table) std::printf("%-12s", "tokens");
  const runtime::GenerateResponse r = client.generate(request, [&](const runtime::GeneratedToken& t) {
    if (!table) return;
    std::printf(" %lld", static_cast<long long>(t.id));
    std::fflush(stdout);
  });
  if (!table) {
    std::cout << nlohmann::json{{"model_name", r.model},       {"id", r.id},       {"output_ids", r.output_ids},
                                {"prompt_bucket", r.prompt_bucket}, {"switched", r.switched},
                                {"ttft_ms", static_cast<double>(r.ttft_ns) / 1e6},
                                {"tpot_ms", static_cast<double>(r.tpot_ns) / 1e6}}
                     .dump(2)
              << "\n";
    return;
  }
  std::printf("\n%-12s %s, prompt of %zu tokens prefilled at %lld%s\n", "model", r.model.c_str(), o.prompt_ids.size(),
              static_cast<long long>(r.prompt_bucket), r.switched ? ", switched in" : "");
  std::printf("%-12s %.3f ms to the first token, %.3f ms per token after it\n", "latency", static_cast<double>(r.ttft_ns) / 1e6,
              static_cast<double>(r.tpot_ns) / 1e6);
}

void run_client(const ClientOptions& o) {
  if (o.format != "table" && o.format != "json") {
    throw InputError("unknown --format '" + o.format + "': expected table or json");
  }
  if (o.repeat < 1) throw InputError("--repeat must be at least 1");
  if (o.timeout_s <= 0) throw InputError("--timeout must be positive");
  const int actions = int{o.live} + int{o.metadata} + int{o.index} + int{o.metrics} + int{!o.train_start.empty()} +
                      int{!o.train_stop.empty()} + int{!o.train_status.empty()} + int{!o.train_checkpoint.empty()} +
                      int{!o.generate.empty()} + int{!o.load.empty()} + int{!o.unload.empty()};
  const bool inference = actions == 0;
  if (actions > 1) {
    throw InputError("give one of --live, --metadata, --index, --load, --unload, --metrics, --train-start, --train-stop, "
                     "--train-status, --train-checkpoint, --generate");
  }
  if (!o.model_config.empty() && o.load.empty()) throw InputError("--model-config is for --load");
  if (!o.prompt_ids.empty() && o.generate.empty()) throw InputError("--prompt-ids is for --generate");
  if (!o.evict_with.empty() && o.generate.empty()) throw InputError("--evict-with is for --generate");
  if (!o.checkpoint_path.empty() && o.train_checkpoint.empty()) throw InputError("--to is for --train-checkpoint");
  if (inference) {
    if (o.model.empty()) {
      throw InputError("nothing to do: give --model NAME with --input FILE or --random to run inference, or one of "
                       "--live, --metadata, --index, --load, --unload, --metrics, --train-start, --train-stop, --train-status, "
                       "--train-checkpoint, --generate");
    }
    if (o.input_path.empty() == !o.random) throw InputError("give exactly one of --input FILE and --random");
  }

  const std::string target = o.server_address.empty()
                                 ? "unix:" + (o.socket_path.empty() ? runtime::default_socket_path() : o.socket_path)
                                 : o.server_address;
  Client client(target);
  client.set_timeout(std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000)));
  if (!o.token_file.empty()) client.set_token(runtime::AccessToken::from_file(o.token_file).value());
  try {
    if (o.live) {
      const bool live = client.server_live();
      const bool ready = client.server_ready();
      if (o.format == "json") {
        std::cout << nlohmann::json{{"target", target}, {"live", live}, {"ready", ready}}.dump(2) << "\n";
      } else {
        std::printf("%-6s %s\n%-6s %s\n%-6s %s\n", "server", target.c_str(), "live", live ? "yes" : "no", "ready",
                    ready ? "yes" : "no");
      }
    } else if (o.metadata) {
      print_metadata(o, client);
    } else if (o.index) {
      const std::vector<runtime::ModelIndexEntry> index = client.repository_index();
      if (o.format == "json") {
        nlohmann::json models = nlohmann::json::array();
        for (const auto& e : index) {
          models.push_back({{"name", e.name}, {"version", e.version}, {"state", e.state}, {"reason", e.reason}});
        }
        std::cout << nlohmann::json{{"target", target}, {"models", models}}.dump(2) << "\n";
      } else {
        std::printf("%-24s %-8s %-12s %s\n", "model", "version", "state", "reason");
        for (const auto& e : index) {
          std::printf("%-24s %-8s %-12s %s\n", e.name.c_str(), e.version.c_str(), e.state.c_str(), e.reason.c_str());
        }
      }
    } else if (!o.load.empty() || !o.unload.empty()) {
      const bool load = !o.load.empty();
      const std::string& name = load ? o.load : o.unload;
      const auto started = std::chrono::steady_clock::now();
      if (load) {
        client.load_model(name, o.model_config.empty() ? std::string() : read_file(o.model_config));
      } else {
        client.unload_model(name);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (o.format == "json") {
        std::cout << nlohmann::json{{"target", target}, {"model", name}, {load ? "loaded" : "unloaded", true}, {"seconds", seconds}}
                         .dump(2)
                  << "\n";
      } else {
        std::printf("%s %s in %.3f s\n", load ? "loaded" : "unloaded", name.c_str(), seconds);
      }
    } else if (o.metrics) {
      const std::string text = client.metrics();
      if (o.format == "json") {
        std::cout << nlohmann::json{{"metrics", text}}.dump(2) << "\n";
      } else {
        std::cout << text;
      }
    } else if (!o.train_start.empty()) {
      print_training(o, client.start_training(o.train_start, o.steps));
    } else if (!o.train_stop.empty()) {
      print_training(o, client.stop_training(o.train_stop));
    } else if (!o.train_status.empty()) {
      print_training(o, client.training_status(o.train_status));
    } else if (!o.generate.empty()) {
      run_generate(o, client);
    } else if (!o.train_checkpoint.empty()) {
      const runtime::TrainingCheckpointStatus done = client.checkpoint_training(o.train_checkpoint, o.checkpoint_path);
      if (o.format == "json") {
        std::cout << nlohmann::json{{"model", done.model}, {"path", done.path}, {"completed_steps", done.completed_steps},
                                    {"loss", done.loss}, {"bytes", done.bytes}}.dump(2)
                  << "\n";
      } else {
        std::printf("%-12s %s\n%-12s %s\n%-12s %lld\n%-12s %g\n%-12s %lld\n", "model", done.model.c_str(), "checkpoint",
                    done.path.c_str(), "steps", static_cast<long long>(done.completed_steps), "loss", done.loss, "bytes",
                    static_cast<long long>(done.bytes));
      }
    } else {
      run_inference(o, client);
    }
  } catch (const ServiceError& e) {
    // What the user asked for was wrong (exit 2), or the server could not do it (exit 1).
    switch (e.code()) {
      case ServiceError::Code::InvalidArgument:
      case ServiceError::Code::NotFound:
      case ServiceError::Code::ResourceExhausted:
      case ServiceError::Code::AlreadyExists:
      case ServiceError::Code::FailedPrecondition:
        throw InputError(e.what());
      default:
        throw Error(e.what());
    }
  }
}

}  // namespace

Action add_client_command(CLI::App& app) {
  auto options = std::make_shared<ClientOptions>();
  CLI::App* cmd = app.add_subcommand("client", "Talk to a running `psw serve`: health, metadata, inference, training");
  cmd->footer(
      "Without an action option, runs --model on --input FILE or --random inputs and prints its outputs and "
      "latencies.\nExamples:\n  psw client --live\n  psw client --metadata --model resnet152\n"
      "  psw client --model resnet152 --random --batch 8 --repeat 100\n"
      "  psw client --model resnet152 --random --batch 8 --repeat 100 --shared-memory\n"
      "  psw client --train-start bert_base --steps 1000");
  auto* socket = cmd->add_option("--socket", options->socket_path,
                                 "The server's Unix socket (default: $XDG_RUNTIME_DIR/psw/psw.sock, else "
                                 "/tmp/psw-<uid>/psw.sock)");
  cmd->add_option("--server", options->server_address, "A server on TCP, HOST:PORT, instead of the socket")
      ->excludes(socket);
  add_token_file_option(cmd, options->token_file);
  cmd->add_option("--model", options->model, "The model to run, or whose --metadata to show");
  auto* input = cmd->add_option("--input", options->input_path,
                                "Raw little-endian bytes of the model's first input; the batch is inferred "
                                "from the file's size (other inputs: random at that batch)");
  cmd->add_flag("--random", options->random, "Random inputs: floats in [-1, 1), integers in [0, 512) (token ids every zoo model takes)")
      ->excludes(input);
  cmd->add_flag("--shared-memory", options->shared_memory,
                "Pass the tensors in POSIX shared memory (the protocol's system shared memory extension) instead "
                "of in the messages: a client on the server's host, over its Unix socket");
  cmd->add_option("--batch", options->batch, "Batch of --random inputs (the leading -1 dimension)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of --random inputs")->check(no_minus_sign())->capture_default_str();
  cmd->add_option("--repeat", options->repeat, "Requests to send (latencies over all); with --generate, calls to measure")->check(CLI::Range(1, 10'000'000))->capture_default_str();
  cmd->add_option("--timeout", options->timeout_s, "Deadline of each call, in seconds")->check(finite_range(0.001, 86'400.0))->capture_default_str();
  cmd->add_option("--format", options->format, "table | json")->capture_default_str();
  cmd->add_flag("--live", options->live, "Show whether the server is live and ready");
  cmd->add_flag("--metadata", options->metadata, "Show the server's metadata, or --model's tensors");
  cmd->add_flag("--index", options->index,
                "Show the model repository's index: every served model, READY or UNAVAILABLE with the reason");
  cmd->add_option("--load", options->load,
                  "Load MODEL while the server runs (its serve config entry, or --model-config's) and wait until it is ready");
  cmd->add_option("--model-config", options->model_config,
                  "With --load: a file holding the model's entry, the keys of a serve config's models: entry (YAML or "
                  "JSON; its paths are on the server's host, relative to the serve config's folder)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--unload", options->unload, "Unload MODEL (refused while a request of it waits or runs)");
  cmd->add_flag("--metrics", options->metrics, "Print the server's metrics (Prometheus text)");
  cmd->add_option("--train-start", options->train_start, "Start (or resume) MODEL's training job");
  cmd->add_option("--steps", options->steps, "With --train-start: steps to run beyond those completed (0: until stopped)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 53))->capture_default_str();
  cmd->add_option("--train-stop", options->train_stop, "Stop MODEL's training job at the next layer boundary");
  cmd->add_option("--train-status", options->train_status, "Show MODEL's training job");
  cmd->add_option("--train-checkpoint", options->train_checkpoint,
                  "Write MODEL's training state (weights, statistics, optimizer state, steps) to a safetensors file "
                  "on the server's host, which the serve config's training.resume_from starts from; the job goes on");
  cmd->add_option("--to", options->checkpoint_path,
                  "With --train-checkpoint: the file (default: the serve config's training.checkpoint)");
  cmd->add_option("--generate", options->generate,
                  "Generate greedily with decoder MODEL from --prompt-ids, printing each token as it comes");
  cmd->add_option("--prompt-ids", options->prompt_ids, "With --generate: the prompt's token ids (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--max-tokens", options->max_tokens, "With --generate: tokens to generate")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--evict-with", options->evict_with,
                  "With --generate: request MODEL (random inputs, batch 1) before each call, so that each switches the "
                  "decoder in; with --repeat the calls are measured: time to first token cold and warm, per token, "
                  "and whether every call answered the same ids");
  return [options] { run_client(*options); };
}

}  // namespace psw::cli
