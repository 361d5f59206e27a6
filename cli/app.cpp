#include "app.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>

#include "psw/common/error.hpp"

namespace psw::cli {

int run_app(int argc, char** argv, const char* description, std::initializer_list<AddCommand> commands,
            const char* footer) {
  CLI::App app{description};
  std::map<CLI::App*, Action> actions = setup_app(app, commands, footer);
  return run_app(app, actions, argc, argv);
}

int run_app(CLI::App& app, std::map<CLI::App*, Action>& actions, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "psw: " << e.what() << "\n";
    std::cerr << "Run with --help for usage.\n";
    return 2;
  }
  try {
    for (CLI::App* sub : app.get_subcommands()) actions.at(sub)();
    // Standard output is an output like any file (`psw plan > /dev/full`): a write that
    // failed must not end in exit code 0 (Note [Checked writes] in psw/common/output.hpp).
    errno = 0;
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
      throw Error(std::string("standard output: write failed: ") + std::strerror(errno != 0 ? errno : EIO));
    }
  } catch (const InputError& e) {
    std::cerr << "psw: error: " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    // Not the user's input, but a failure the user can act on (a server that does not answer,
    // a file that cannot be written): no "internal" here.
    std::cerr << "psw: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "psw: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace psw::cli
