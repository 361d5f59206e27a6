// psw-exec: the commands that need LibTorch (DESIGN.md §7): `psw run` and `psw profile`, which
// `psw` hands over to this binary, and the runtime's processes that `psw serve` starts (the
// memory daemon and the workers; not for users).
#include "app.hpp"

int main(int argc, char** argv) {
  using namespace psw::cli;
  return run_app(argc, argv, "psw-exec: the executor's commands of psw (LibTorch)",
                 {&add_run_command, &add_profile_command, &add_runtime_daemon_command, &add_runtime_worker_command});
}
