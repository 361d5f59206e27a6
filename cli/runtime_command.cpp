// The runtime's processes as psw-exec subcommands (started by psw serve, not by users).
#include <memory>

#include "commands.hpp"
#include "overrides.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/worker/processes.hpp"

namespace psw::cli {

namespace {

CLI::App* add_process_options(CLI::App& app, const char* name, const char* what, runtime::ProcessOptions& o) {
  CLI::App* cmd = app.add_subcommand(name, what);
  cmd->group("");  // hidden: psw serve starts these
  cmd->add_option("--config", o.config_path, "Serve config")->required();
  cmd->add_option("--backend", o.backend, "host | cuda")->capture_default_str();
  cmd->add_option("--socket-fd", o.socket_fd, "The inherited control socket")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--set", o.config_sets, "The server's overrides of the serve config (KEY=VALUE)");
  return cmd;
}

}  // namespace

Action add_runtime_daemon_command(CLI::App& app) {
  auto o = std::make_shared<runtime::ProcessOptions>();
  add_process_options(app, "runtime-daemon", "The memory daemon of psw serve", *o);
  return [o] {
    o->config_overrides = parse_sets(o->config_sets);
    const int code = runtime::run_memory_daemon(*o);
    if (code != 0) std::exit(code);
  };
}

Action add_runtime_worker_command(CLI::App& app) {
  auto o = std::make_shared<runtime::ProcessOptions>();
  CLI::App* cmd = add_process_options(app, "runtime-worker", "A worker process of psw serve", *o);
  cmd->add_option("--worker", o->worker_id, "Worker index")->check(CLI::Range(0, 15));
  return [o] {
    o->config_overrides = parse_sets(o->config_sets);
    const int code = runtime::run_worker(*o);
    if (code != 0) std::exit(code);
  };
}

}  // namespace psw::cli
