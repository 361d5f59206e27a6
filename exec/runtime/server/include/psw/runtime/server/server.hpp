#pragma once
// `psw serve` as one call: the front end listens first (a client sees the server live and not
// yet ready while the workers start), then the controller starts the daemon and the workers;
// SIGTERM or SIGINT shut everything down cleanly: the socket file removed, the processes
// stopped, the shared memory gone with them (Note [Anonymous segments]).

#include <functional>
#include <string>

#include "psw/common/serve_config.hpp"

namespace psw::runtime {

struct ServerOptions {
  ServeConfig config;
  std::string backend = "host";
  std::string socket_path;   // empty: default_socket_path() unless listen_address is set
  std::string listen_address;  // HOST:PORT, only when asked
  std::string exec_path;     // psw-exec
  std::string trace_path;    // Note [Serve trace]: written at shutdown when set
  std::string metrics_address;  // HOST:PORT of the HTTP metrics endpoint; empty: none
  std::string http_address;     // HOST:PORT of the REST front end (Note [REST front end]); empty: none
  std::string decisions_path;   // Note [Decision log]: every event and action as JSON lines when set
  // Note [Remote access] (psw/runtime/ipc/access_token.hpp): listen on addresses other hosts can
  // reach, and the file of the bearer token every TCP call must then carry (empty: none).
  bool allow_remote = false;
  std::string token_file;
  std::function<void(const std::string&)> log;
};

// Blocks until SIGTERM or SIGINT; returns the exit code. Throws InputError for an endpoint or
// config that cannot be served (before anything is started where possible).
int run_server(const ServerOptions& options);

}  // namespace psw::runtime
