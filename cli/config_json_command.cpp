// psw config-json: one of the project's YAML files, checked by its strict reader, printed as
// JSON for the scripts that draw from it (Note [Config files as JSON] in common/config.hpp).
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "overrides.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/common/serve_config.hpp"
#include "psw/common/serving_profile.hpp"

namespace psw::cli {

namespace {

struct ConfigJsonOptions {
  std::string kind;
  std::string path;
  std::vector<std::string> sets;  // --set KEY=VALUE, for experiments and serve configs
};

}  // namespace

Action add_config_json_command(CLI::App& app) {
  auto o = std::make_shared<ConfigJsonOptions>();
  CLI::App* cmd = app.add_subcommand(
      "config-json", "Check a project YAML file with its reader and print its document as JSON (for scripts)");
  cmd->add_option("kind", o->kind, "hardware | model | experiment | serve | serving")
      ->required()
      ->check(CLI::IsMember({"hardware", "model", "experiment", "serve", "serving"}));
  cmd->add_option("file", o->path, "The YAML file")->required();
  cmd->add_option("--set", o->sets,
                  "Experiments and serve configs: override a key first, as psw sim and psw serve do (KEY=VALUE)");
  return [o] {
    const auto overrides = parse_sets(o->sets);
    if (!overrides.empty() && o->kind != "experiment" && o->kind != "serve") {
      throw InputError("--set: only experiment and serve configs take overrides, not a " + o->kind + " file");
    }
    // The strict reader first: a file the project would refuse is refused here too.
    if (o->kind == "hardware") {
      (void)load_hardware_profile(o->path);
    } else if (o->kind == "model") {
      (void)load_model_profile(o->path);
    } else if (o->kind == "experiment") {
      (void)load_experiment_config(o->path, overrides);
    } else if (o->kind == "serve") {
      (void)load_serve_config(o->path, overrides);
    } else {
      (void)load_serving_profile(o->path);
    }
    std::printf("%s\n", yaml_file_as_json(o->path, overrides).dump(2).c_str());
  };
}

}  // namespace psw::cli
