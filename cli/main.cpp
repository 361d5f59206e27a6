// psw: the one command of the project. The light commands (plan, compare, synth, sim, sweep,
// serve, client, graph) run here and never load LibTorch; the executor's commands (run, profile) live
// in psw-exec beside this binary, which psw runs in its place for them.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "app.hpp"
#include "psw/runtime/ipc/message_memory.hpp"

namespace {

// The executor's commands: psw replaces itself with psw-exec (same arguments) for them.
bool is_executor_command(const char* name) {
  const std::string n = name;
  return n == "run" || n == "profile";
}

// The commands that send or receive tensors over gRPC (Note [Message memory]).
bool is_serving_command(const char* name) {
  const std::string n = name;
  return n == "serve" || n == "client" || n == "load" || n == "validate" || n == "bench-serve" ||
         n == "profile-serving";
}

int exec_executor(char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path exe = (ec ? std::filesystem::path(argv[0]) : self).parent_path() / "psw-exec";
  if (!std::filesystem::exists(exe)) {
    std::cerr << "psw: error: '" << argv[1] << "' needs the executor (" << exe.string()
              << "), which this build does not have: LibTorch was not found at configure time\n";
    return 2;
  }
  argv[0] = const_cast<char*>("psw");
  ::execv(exe.c_str(), argv);
  std::cerr << "psw: internal error: cannot run " << exe.string() << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && is_executor_command(argv[1])) return exec_executor(argv);
  // Before any thread starts: the setting of the heap applies to the arenas made after it.
  if (argc > 1 && is_serving_command(argv[1])) psw::runtime::keep_message_memory();
  using namespace psw::cli;
  CLI::App app{kPswDescription};
  std::map<CLI::App*, Action> actions = setup_app(
      app, kPswCommands,
      "The executor's commands, where LibTorch was found:\n"
      "  run        Switch a cold model into the device and run it; measure (psw run --help)\n"
      "  profile    Measure per-layer times and the link; write profiles (psw profile --help)");
  return run_app(app, actions, argc, argv);
}
