// psw serve: the PipeSwitch server (exec/runtime/): options only.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "overrides.hpp"
#include "psw/common/error.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/runtime/server/server.hpp"

namespace psw::cli {

namespace {

struct ServeOptions {
  std::string config_path;
  std::string backend = "cuda";
  std::string socket_path;
  std::string listen;
  bool quiet = false;
  std::string trace_path;
  std::string metrics_listen;
  std::string http_listen;
  std::string decisions_path;
  bool allow_remote = false;
  std::string token_file;
  std::vector<std::string> sets;
};

}  // namespace

Action add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve models over the open inference protocol (KServe v2, gRPC), "
                                              "switching the GPU between them and a training job");
  cmd->add_option("--config", o->config_path, "Serve config (configs/serve/)")->required();
  cmd->add_option("--backend", o->backend, "cuda | host")->capture_default_str();
  cmd->add_option("--socket", o->socket_path, "Unix socket (default: $XDG_RUNTIME_DIR/psw/psw.sock or /tmp/psw-UID/psw.sock)");
  cmd->add_option("--listen", o->listen, "Listen on TCP HOST:PORT instead (e.g. 127.0.0.1:8001); never all interfaces, and an address "
                  "other hosts can reach only with --allow-remote and --token-file");
  cmd->add_flag("--quiet", o->quiet, "No progress lines on stderr");
  cmd->add_option("--metrics-listen", o->metrics_listen,
                  "Serve the metrics over HTTP for Prometheus at HOST:PORT/metrics (e.g. 127.0.0.1:9464)");
  cmd->add_option("--http-listen", o->http_listen,
                  "Also serve the protocol's REST binding (KServe v2 over HTTP/JSON, binary tensors too) on "
                  "HOST:PORT (e.g. 127.0.0.1:8000); never all interfaces, and an address other hosts can reach only "
                  "with --allow-remote and --token-file");
  cmd->add_option("--trace", o->trace_path,
                  "At shutdown, write a Chrome trace of the last requests and training pauses (Perfetto)");
  cmd->add_option("--decisions", o->decisions_path,
                  "Write every event the server observed with the actions it took, as JSON lines "
                  "(psw replay-decisions checks them against the scheduling policy)");
  cmd->add_flag("--allow-remote", o->allow_remote,
                "Allow --listen, --http-listen or --metrics-listen on an address other hosts can reach; needs "
                "--token-file (Note [Remote access])");
  cmd->add_option("--token-file", o->token_file,
                  "A file only you can read holding a bearer token (16+ printable characters): every call on a "
                  "TCP listener must then carry `authorization: Bearer TOKEN`");
  cmd->add_option("--set", o->sets,
                  "Override a config key: KEY=VALUE (dotted keys, YAML values; e.g. training.batch=16, "
                  "mechanism=mps); the server's processes read the config with the same overrides");
  return [o] {
    if (o->backend != "cuda" && o->backend != "host") {
      throw InputError("unknown --backend '" + o->backend + "': expected cuda or host");
    }
    runtime::ServerOptions options;
    options.config = load_serve_config(o->config_path, parse_sets(o->sets));
    options.backend = o->backend;
    options.socket_path = o->socket_path;
    options.listen_address = o->listen;
    options.trace_path = o->trace_path;
    options.metrics_address = o->metrics_listen;
    options.http_address = o->http_listen;
    options.decisions_path = o->decisions_path;
    options.allow_remote = o->allow_remote;
    options.token_file = o->token_file;
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    options.exec_path = (self.parent_path() / "psw-exec").string();
    if (ec || !std::filesystem::exists(options.exec_path)) {
      throw InputError("psw serve needs the executor (psw-exec beside psw), which this build does not have: "
                       "LibTorch was not found at configure time");
    }
    if (!o->quiet) {
      options.log = [](const std::string& line) { std::fprintf(stderr, "psw serve: %s\n", line.c_str()); };
    }
    const int code = runtime::run_server(options);
    if (code != 0) std::exit(code);
  };
}

}  // namespace psw::cli
