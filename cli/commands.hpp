#pragma once
// The subcommands of `psw` and `psw-exec`. Each registers its options on the CLI11 app and
// returns the action to run after parsing; errors are thrown (psw::InputError for bad input).

#include <CLI/CLI.hpp>

#include <functional>

namespace psw::cli {

using Action = std::function<void()>;

// psw (no LibTorch)
Action add_plan_command(CLI::App& app);
Action add_compare_command(CLI::App& app);
Action add_synth_command(CLI::App& app);
Action add_sim_command(CLI::App& app);
Action add_sweep_command(CLI::App& app);
Action add_sweep_merge_command(CLI::App& app);
Action add_serve_command(CLI::App& app);
Action add_client_command(CLI::App& app);
Action add_bench_serve_command(CLI::App& app);
Action add_profile_serving_command(CLI::App& app);
Action add_compare_serve_command(CLI::App& app);
Action add_load_command(CLI::App& app);
Action add_validate_command(CLI::App& app);
Action add_calibrate_command(CLI::App& app);
Action add_replay_decisions_command(CLI::App& app);
Action add_config_json_command(CLI::App& app);
Action add_graph_command(CLI::App& app);

// psw-exec (LibTorch)
Action add_run_command(CLI::App& app);
Action add_profile_command(CLI::App& app);
Action add_runtime_daemon_command(CLI::App& app);
Action add_runtime_worker_command(CLI::App& app);

}  // namespace psw::cli
