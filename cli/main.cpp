// psw: the one command of the project. Exit codes: 0 success, 1 internal error,
// 2 bad input (arguments, configs, traces), with one message on stderr naming what is
// wrong and where.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

#include "commands.hpp"
#include "psw/common/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"psw: PipeSwitch in C++ -- plan, simulate and execute millisecond GPU switches"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  std::map<CLI::App*, psw::cli::Action> actions;
  auto register_command = [&](psw::cli::Action (*add)(CLI::App&)) {
    const std::size_t before = app.get_subcommands({}).size();
    psw::cli::Action action = add(app);
    actions[app.get_subcommands({}).at(before)] = std::move(action);
  };
  register_command(&psw::cli::add_plan_command);
  register_command(&psw::cli::add_compare_command);
  register_command(&psw::cli::add_synth_command);
  register_command(&psw::cli::add_sim_command);
  register_command(&psw::cli::add_sweep_command);
#if PSW_HAVE_EXEC
  register_command(&psw::cli::add_run_command);
  register_command(&psw::cli::add_profile_command);
#endif

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
  } catch (const psw::InputError& e) {
    std::cerr << "psw: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "psw: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
