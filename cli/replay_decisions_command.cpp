// psw replay-decisions: a server's decision log (psw serve --decisions) fed to the scheduling
// policy (common/server_policy.hpp), the first differing action reported; options and printing.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "psw/common/server_policy.hpp"

namespace psw::cli {

namespace {

struct ReplayDecisionsOptions {
  std::string log_path;
  std::string format = "text";
};

}  // namespace

Action add_replay_decisions_command(CLI::App& app) {
  auto o = std::make_shared<ReplayDecisionsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay-decisions",
      "Feed a server's logged events (psw serve --decisions FILE) to the scheduling policy and report the first "
      "action that differs from what the server did (exit 3 on a difference)");
  cmd->add_option("log", o->log_path, "The decision log (JSON lines)")->required();
  cmd->add_option("--format", o->format, "text | json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  return [o] {
    const DecisionReplay replay = replay_decision_file(o->log_path);
    if (o->format == "json") {
      nlohmann::json out = {{"log", o->log_path},
                            {"identical", replay.identical},
                            {"events", replay.events},
                            {"actions", replay.actions}};
      if (!replay.identical) {
        nlohmann::json logged = nlohmann::json::array();
        nlohmann::json decided = nlohmann::json::array();
        for (const auto& a : replay.logged) logged.push_back(to_json(a));
        for (const auto& a : replay.decided) decided.push_back(to_json(a));
        out["difference"] = {{"where", replay.where}, {"event", to_json(replay.event)}, {"logged", logged},
                             {"decided", decided}};
      }
      std::printf("%s\n", out.dump(2).c_str());
    } else if (replay.identical) {
      std::printf("%s: %lld events, %lld actions: the policy decides every one as the server did\n",
                  o->log_path.c_str(), static_cast<long long>(replay.events), static_cast<long long>(replay.actions));
    } else {
      std::printf("%s\n", describe_difference(replay).c_str());
    }
    if (!replay.identical) std::exit(3);
  };
}

}  // namespace psw::cli
