#pragma once
// The shared main of the project's two executables (`psw` and `psw-exec`): registers the
// subcommands, parses, runs the chosen one, and maps errors to exit codes: 0 success,
// 1 internal error, 2 bad input (arguments, configs, traces), with one message on stderr
// naming what is wrong and where.

#include <initializer_list>

#include "commands.hpp"

namespace psw::cli {

using AddCommand = Action (*)(CLI::App&);

int run_app(int argc, char** argv, const char* description, std::initializer_list<AddCommand> commands,
            const char* footer = nullptr);

}  // namespace psw::cli
