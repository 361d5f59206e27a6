#pragma once
// The shared main of the project's two executables (`psw` and `psw-exec`): registers the
// subcommands, parses, runs the chosen one, and maps errors to exit codes: 0 success,
// 1 internal error, 2 bad input (arguments, configs, traces), with one message on stderr
// naming what is wrong and where.

#include <initializer_list>
#include <map>

#include "commands.hpp"

namespace psw::cli {

using AddCommand = Action (*)(CLI::App&);

// The subcommands of psw, in the order of its help (psw's main, and the CLI fuzz target).
inline constexpr AddCommand kPswCommands[] = {&add_plan_command,  &add_compare_command, &add_synth_command,
                                              &add_sim_command,   &add_sweep_command,   &add_sweep_merge_command, &add_serve_command,
                                              &add_client_command, &add_bench_serve_command, &add_compare_serve_command,
                                              &add_load_command, &add_validate_command, &add_profile_serving_command,
                                              &add_calibrate_command, &add_replay_decisions_command,
                                              &add_config_json_command, &add_graph_command};
inline constexpr const char* kPswDescription =
    "psw: PipeSwitch in C++ -- plan, simulate, serve and execute millisecond GPU switches";

// Registers `commands` on `app` (one subcommand required); returns each subcommand's action.
template <typename Commands>
std::map<CLI::App*, Action> setup_app(CLI::App& app, const Commands& commands, const char* footer = nullptr) {
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  if (footer != nullptr) app.footer(footer);
  std::map<CLI::App*, Action> actions;
  for (AddCommand add : commands) {
    const std::size_t before = app.get_subcommands({}).size();
    Action action = add(app);
    actions[app.get_subcommands({}).at(before)] = std::move(action);
  }
  return actions;
}

int run_app(CLI::App& app, std::map<CLI::App*, Action>& actions, int argc, char** argv);

int run_app(int argc, char** argv, const char* description, std::initializer_list<AddCommand> commands,
            const char* footer = nullptr);

}  // namespace psw::cli
