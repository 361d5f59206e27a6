#pragma once
// The options psw load and psw validate share: which server, and the pool of senders that
// drives it (exec/runtime/load_generator.hpp).

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/client/load_generator.hpp"
#include "psw/runtime/ipc/access_token.hpp"

namespace psw::cli {

// --token-file, as every client command takes it (Note [Remote access]).
inline CLI::Option* add_token_file_option(CLI::App* cmd, std::string& token_file) {
  return cmd->add_option("--token-file", token_file,
                         "A file only you can read with the server's bearer token (psw serve --token-file), sent with "
                         "every call");
}

struct LoadTargetOptions {
  std::string socket_path;
  std::string server;
  std::string token_file;
  runtime::LoadOptions load;
  // Given on the command line (a closed loop refuses them: Note [Closed-loop cycles]).
  CLI::Option* senders_option = nullptr;
  CLI::Option* connections_option = nullptr;
};

inline void add_load_target_options(CLI::App* cmd, LoadTargetOptions& o) {
  auto* socket = cmd->add_option("--socket", o.socket_path, "The server's Unix socket (default: psw serve's)");
  cmd->add_option("--server", o.server, "A server on TCP, HOST:PORT")->excludes(socket);
  add_token_file_option(cmd, o.token_file);
  o.senders_option = cmd->add_option("--senders", o.load.senders,
                                     "Sender threads; a request due while all are busy is sent late, and recorded so")
                          ->check(CLI::Range(1, 4096))
                          ->capture_default_str();
  o.connections_option =
      cmd->add_option("--connections", o.load.connections,
                      "Connections the senders share, sender s taking s mod N (default: one per sender)")
          ->check(CLI::Range(1, 4096));
  cmd->add_option("--warmup", o.load.warmup,
                  "Requests per model sent one at a time before the workload, not recorded (a new server's heap grows)")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_flag_function(
      "--shared-memory",
      [&o](std::int64_t) { o.load.inputs = InputTransport::SharedMemory; },
      "Inputs and outputs in POSIX shared memory registered with the server, one region per sender and model, "
      "instead of in the messages (the server's host and Unix socket only; Note [Shared memory senders])");
  cmd->add_option("--timeout-ms", o.load.timeout_ms, "Deadline of each request")
      ->check(CLI::Range(1, 3'600'000))->capture_default_str();
}

// After parsing: the gRPC target, the config's seed for the inputs, progress on stderr as
// "<command>: ...".
inline void resolve_load_target(LoadTargetOptions& o, const ExperimentConfig& config, const char* command) {
  if (config.workload.kind == WorkloadKind::Cycles) {
    for (const CLI::Option* option : {o.senders_option, o.connections_option}) {
      if (option != nullptr && option->count() > 0) {
        throw InputError(option->get_name() + ": " + config.source.string() +
                         " has a cycles workload, a closed loop with one request outstanding on one connection "
                         "(Note [Closed-loop cycles]); senders and connections do not apply");
      }
    }
  }
  o.load.target = !o.server.empty() ? o.server
                  : "unix:" + (o.socket_path.empty() ? runtime::default_socket_path() : o.socket_path);
  if (!o.token_file.empty()) o.load.token = runtime::AccessToken::from_file(o.token_file).value();
  o.load.seed = config.seed;
  o.load.progress = [command](const std::string& line) { std::fprintf(stderr, "%s: %s\n", command, line.c_str()); };
}

}  // namespace psw::cli
