// psw profile-serving: a live server's request path and training step, measured as a client
// for the simulator (Note [Request path], exec/runtime/serving_benchmark.hpp); options and
// output only.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "load_options.hpp"
#include "psw/xval/validation_run.hpp"
#include "validators.hpp"
#include "psw/common/error.hpp"
#include "psw/common/input_file.hpp"
#include "psw/common/output.hpp"
#include "psw/common/serving_profile.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/client/load_generator.hpp"
#include "psw/runtime/client/serving_benchmark.hpp"

namespace psw::cli {

namespace {

struct ProfileServingOptions {
  std::string socket_path;
  std::string server;
  std::string token_file;
  std::string out_path;
  std::string from_load;      // a psw load requests.csv
  std::string training_from;  // a serving profile whose training steps are kept
  std::string training_from_validation;  // a psw validate folder whose alone windows give the step
  std::string training_model;
  std::string growth_from;  // a serving profile whose protocol growth per request in flight is kept
  std::string inputs;       // with --from-load and no summary.json beside it: how the load sent inputs
  std::string split_out;    // Note [Protocol split]: the split per model, as JSON
  runtime::ServingProfileSpec spec;
};

}  // namespace

Action add_profile_serving_command(CLI::App& app) {
  auto o = std::make_shared<ProfileServingOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile-serving", "Measure a running psw serve's request path per model and its training step, as a "
                         "serving profile for the simulator (an experiment's `serving:`)");
  auto* socket = cmd->add_option("--socket", o->socket_path, "The server's Unix socket (default: psw serve's)");
  cmd->add_option("--server", o->server, "A server on TCP, HOST:PORT")->excludes(socket);
  add_token_file_option(cmd, o->token_file);
  cmd->add_option("--name", o->spec.name, "Name of the written profile")->required();
  cmd->add_option("--device", o->spec.device, "The GPU (or host) the server runs on, for the profile's source")->required();
  cmd->add_option("--requests", o->spec.requests, "Cold requests per model")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--gap-ms", o->spec.gap_ms, "Pause before each request (training resumes)")
      ->check(CLI::Range(0, 600000))->capture_default_str();
  cmd->add_option("--connections", o->spec.connections, "Connections the requests take in turn (as psw load's --senders)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_option("--batch", o->spec.batch, "Batch of every request")->check(CLI::Range(1, 4096))->capture_default_str();
  auto* model = cmd->add_option("--model", o->spec.models,
                  "A model to request, repeatable (default: the zoo's built-in models the server serves; name decoders here)");
  cmd->add_option("--training-batch", o->spec.training_batch, "The server's training batch (its config's training.batch)")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--training-window", o->spec.training_window_s, "Seconds of training alone for its step (0: skip)")
      ->check(finite_range(0.0, 3600.0))->capture_default_str();
  auto* from_load = cmd->add_option("--from-load", o->from_load,
                                    "Fit the request path from a psw load run's requests.csv instead of a live server "
                                    "(the client the validation uses)")
                         ->check(CLI::ExistingFile)->excludes("--socket")->excludes("--server")->excludes(model);
  auto* training_from = cmd->add_option("--training-from", o->training_from,
                                        "With --from-load: keep the training steps of this serving profile")
                             ->check(CLI::ExistingFile)->needs(from_load);
  auto* training_model = cmd->add_option("--training-model", o->training_model,
                                         "With --training-from-validation: the model the run's server trained");
  cmd->add_option("--training-from-validation", o->training_from_validation,
                  "With --from-load: the training step (of --training-model at --training-batch) from this psw validate "
                  "folder's job alone (its validation.json; Note [MPS contention])")
      ->check(CLI::ExistingDirectory)->needs(from_load)->needs(training_model)->excludes(training_from);
  cmd->add_option("--protocol-growth-from", o->growth_from,
                  "With --from-load: the protocol's growth per request in flight from this serving profile, not fitted "
                  "(Note [Protocol under load])")
      ->check(CLI::ExistingFile)->needs(from_load);
  cmd->add_option("--inputs", o->inputs,
                  "With --from-load: how the load sent its inputs, where no psw load summary.json lies beside the "
                  "requests.csv to say it (Note [Inputs in shared memory])")
      ->check(CLI::IsMember({"raw", "shared-memory"}))->needs(from_load);
  cmd->add_option("--out", o->out_path, "Write the profile here (YAML; default: stdout)");
  cmd->add_option("--split-out", o->split_out,
                  "Write the protocol part's split per model here (JSON: build, to server, front end, to client; "
                  "Note [Protocol split]); a live server on this host only")
      ->excludes(from_load);
  return [o] {
    ServingProfile profile;
    // The files the note names, relative to the profile written (or to the current folder, for
    // stdout): a generated file names no path of the machine it was made on, so that it reads
    // the same in a clone elsewhere (its folder copied whole from a GPU host's output).
    const std::filesystem::path note_base = o->out_path.empty()
                                                ? std::filesystem::current_path()
                                                : std::filesystem::absolute(o->out_path).parent_path();
    const auto shown = [&note_base](const std::string& path) { return path_relative_to(path, note_base); };
    if (!o->from_load.empty()) {
      std::optional<ServingProfile> growth_from;
      if (!o->growth_from.empty()) growth_from = load_serving_profile(o->growth_from);
      profile = runtime::serving_profile_from_load(read_input(o->from_load, "psw load's requests.csv"), o->from_load,
                                                   o->spec.name, o->spec.device, runtime::inputs_of_load(o->from_load, o->inputs),
                                                   growth_from ? &*growth_from : nullptr);
      // The note names the load's file as given (its messages do too): shown here relative.
      const std::string given = "--from-load " + o->from_load;
      if (const auto at = profile.source.note.find(given); at != std::string::npos) {
        profile.source.note.replace(at, given.size(), "--from-load " + shown(o->from_load));
      }
      if (growth_from) profile.source.note += "; protocol growth per request in flight from " + shown(o->growth_from);
      if (!o->training_from.empty()) {
        profile.training = load_serving_profile(o->training_from).training;
        profile.source.note += "; training steps from " + shown(o->training_from);
      }
      if (!o->training_from_validation.empty()) {
        const std::string path = o->training_from_validation + "/validation.json";
        profile.training = {xval::training_step_alone(xval::read_recorded_validation(o->training_from_validation), path,
                                                      o->training_model, o->spec.training_batch)};
        profile.source.note += detail::concat("; training step of ", o->training_model, " (batch ", o->spec.training_batch,
                                              ") from the job alone in ", shown(o->training_from_validation));
      }
    } else {
      const std::string target = !o->server.empty() ? o->server
                                 : "unix:" + (o->socket_path.empty() ? runtime::default_socket_path() : o->socket_path);
      runtime::Client client(target);
      if (!o->token_file.empty()) client.set_token(runtime::AccessToken::from_file(o->token_file).value());
      const runtime::ServingProfileRun run = runtime::profile_serving(client, o->spec, [](const std::string& line) {
        std::fprintf(stderr, "profile-serving: %s\n", line.c_str());
      });
      profile = run.profile;
      if (!o->split_out.empty()) {
        nlohmann::json split = nlohmann::json::object();
        for (const auto& [model_name, x] : run.protocol_split) {
          split[model_name] = {{"requests", x.requests}, {"build_ms", x.build_ms}, {"to_server_ms", x.to_server_ms},
                          {"front_end_ms", x.front_end_ms}, {"to_client_ms", x.to_client_ms}};
        }
        save_text(o->split_out, split.dump(2) + "\n");
      }
    }
    const std::string text = "# Written by `psw profile-serving` on " + profile.source.device +
                             "; do not edit by hand (Note [Request path]).\n" + to_yaml(profile);
    if (o->out_path.empty()) {
      std::cout << text;
    } else {
      save_text(o->out_path, text);
      std::fprintf(stderr, "profile-serving: wrote %s\n", o->out_path.c_str());
    }
  };
}

}  // namespace psw::cli
