// psw profile: measure per-layer forward (with --train also backward) times and the
// host-to-device link on this device, and write a measured ModelProfile (and, with --link, a HardwareProfile) as YAML.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include <iostream>

#include "commands.hpp"
#include "measured_source.hpp"
#include "model_input_options.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/profile_paths.hpp"
#include "psw/common/link_fit.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/graph_switch.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/profiler.hpp"

namespace psw::cli {

namespace {

struct ProfileOptions {
  std::string model;
  int batch = 8;
  int repeat = 50;
  std::string backend = "cuda";
  std::string dtype = "fp32";
  std::string base_profile;  // default configs/models/NAME.yaml (fp32) or DTYPE/NAME.yaml: names, kinds, bytes
  std::string hardware_base = "configs/hardware/h200-pcie5-base.yaml";
  bool link = false;
  bool train = false;
  bool train_eager = false;
  std::string link_max = "1GiB";
  std::string out_dir = "results/profiles";
  std::string hardware_name;  // name of the written hardware profile (default: the base's)
  std::int64_t prompt_tokens = 0;  // decoders: the prompt's length (0: the example's 128)
  std::vector<std::int64_t> prefill_tokens;  // decoders: the prefill curve's other lengths
  int decode_tokens = 0;                      // decoders: decode steps timed (0: none)
  std::string format = "table";              // table | json (what was measured and written, for scripts)
  ModelInputOptions input;                   // a TorchScript model's
  bool graph = false;                        // a TorchScript model's layers from its captured graph
};

// " 4.1 kB 0.84GB/s 16.4 kB 3.39GB/s ...": the measured rate of every size, for the note.
std::string rates(const std::vector<CopySample>& samples) {
  std::string out;
  for (const auto& s : samples) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.2fGB/s", format_bytes(s.bytes).c_str(),
                  static_cast<double>(s.bytes) / static_cast<double>(s.time.ns()));
    out += buf;
  }
  return out;
}

Bytes parse_size(const std::string& text) {
  if (text == "1GiB") return kGiB;
  if (text == "256MiB") return 256 * kMiB;
  if (text == "64MiB") return 64 * kMiB;
  if (text == "16MiB") return 16 * kMiB;
  throw InputError("--link-max '" + text + "': expected 16MiB, 64MiB, 256MiB or 1GiB");
}

// Note [Captured switch]: one layer per layer of the captured graph's analysis, timed from the
// capture, in the profile `psw run --graph --profile` and the planner take.
void run_graph_profile(const ProfileOptions& o) {
  if (!exec::names_model_file(o.model)) {
    throw InputError("--graph profiles a user's model (.pt, .pt2) from its captured graph; " + o.model + " is not one");
  }
  if (o.train || o.link || o.prompt_tokens != 0 || !o.prefill_tokens.empty() || o.decode_tokens != 0 ||
      !o.base_profile.empty()) {
    throw InputError("--graph: --train, --link, --base-profile and the decoder options do not apply (the layers are "
                     "the capture's, inference only)");
  }
  exec::GraphSwitchSpec spec = graph_switch_spec(o.model, o.input, o.batch, o.dtype, o.backend);
  spec.profile_repeat = o.repeat;
  const exec::CapturedProfile r = exec::profile_captured_graph(spec);
  const std::string path = profile_path_in(o.out_dir, r.profile.name, o.dtype).string();
  save_text(path, "# Measured by `psw profile --model " + o.model + " --graph` on " + r.device +
                      "; do not edit by hand.\n" + to_yaml(r.profile));
  Duration forward;
  for (const auto& layer : r.profile.layers) forward += layer.forward_time.value_or(Duration::zero());
  if (o.format == "json") {
    std::cout << nlohmann::json{{"model", r.profile.name}, {"dtype", o.dtype}, {"batch", r.profile.batch},
                                {"device", r.device}, {"nodes", r.nodes}, {"layers", r.profile.layers.size()},
                                {"profile", path}, {"layers_forward_ms", forward.ms()}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%-12s %s (%s): %zu layers of its captured graph (%zu nodes) at batch %lld on %s -> %s\n", "model",
                o.model.c_str(), o.dtype.c_str(), r.profile.layers.size(), r.nodes,
                static_cast<long long>(r.profile.batch), r.device.c_str(), path.c_str());
    std::printf("%-12s layers' forward %.3f ms (median of %d replays each)\n", "", forward.ms(), o.repeat);
  }
}

void run_profile(const ProfileOptions& o) {
  if (o.graph) return run_graph_profile(o);
  if (o.train_eager && !o.train) throw InputError("--train-eager needs --train");
  torch::ScalarType dtype;
  try {
    dtype = exec::parse_zoo_dtype(o.dtype);
  } catch (const InputError& e) {
    throw InputError(std::string("--dtype: ") + e.what());
  }
  // The analytic profile of the dtype (scripts/gen_model_profiles.py): fp32 at the top of
  // configs/models/, the others in a folder of their dtype's name. A decoder has no shipped
  // analytic profile: its layers and bytes come from the live model, in its dtype.
  // A user's model file has none either (Note [TorchScript models]): its layers are the file's.
  const bool decoder_config =
      (exec::names_decoder_config(o.model) || exec::names_model_file(o.model)) && o.base_profile.empty();
  const std::string base_path =
      o.base_profile.empty() ? profile_path_in("configs/models", o.model, o.dtype).string() : o.base_profile;
  std::optional<ModelProfile> base;
  if (!decoder_config) {
    base = load_model_profile(base_path);
    if (base->dtype != o.dtype) {
      throw InputError(base_path + ": the base profile is for dtype '" + base->dtype + "', not '" + o.dtype +
                       "' (--dtype): its bytes would not be the model's");
    }
  }
  auto backend = exec::make_backend(o.backend);
  int batch = o.batch;
  auto model = exec::open_model(o.model, 0, dtype, model_input(o.input, batch), backend->device());
  exec::Decoder* decoder = exec::as_decoder(*model);
  if ((o.prompt_tokens != 0 || !o.prefill_tokens.empty() || o.decode_tokens != 0) && decoder == nullptr) {
    throw InputError("--prompt-tokens, --prefill-tokens and --decode-tokens are for decoders (configs/zoo/*.yaml); " +
                     model->name() + " is not one");
  }
  const torch::Tensor input = decoder != nullptr && o.prompt_tokens > 0
                                  ? decoder->example_tokens(batch, o.prompt_tokens, 1)
                                  : model->example_input(batch, 1);
  ModelProfile profile = base ? *base : exec::profile_skeleton(*model, input);
  if (profile.name != model->name() || profile.num_layers() != model->layers().size()) {
    throw InputError(base_path + ": not a profile of the zoo's '" + o.model + "' (names or layer count differ)");
  }
  model->to(backend->device());
  const torch::Tensor device_input = input.to(backend->device());
  const exec::PhaseTimes forward = exec::profile_forward(*backend, *model, device_input, o.repeat);
  std::optional<exec::TrainingTimes> training;
  if (o.train) training = exec::profile_training(*backend, *model, device_input, o.repeat, !o.train_eager);
  const std::string device = backend->device_description();
  const std::string versions = libtorch_version();
  auto phase_note = [](const char* what, const exec::PhaseTimes& p) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %.3f ms (%.3f ms with per-layer marks, Note [Mark overhead])", what,
                  p.total.ms(), p.instrumented.ms());
    return std::string(buf);
  };
  std::string model_note = "per-layer times measured by psw profile (median of " + std::to_string(o.repeat) +
                     (backend->supports_graphs() ? " graph replays" : " runs") + "); " +
                     phase_note("inference forward", forward);
  if (training) {
    model_note += "; " + phase_note("training forward", training->forward) + "; " +
            phase_note("backward", training->backward) +
            "; backward per layer: the time until its gradients are ready since the previous layer's" +
            (o.train_eager && backend->supports_graphs() ? "; training iteration timed eagerly (--train-eager)" : "");
  }
  model_note += "; layer list and bytes from " + (decoder_config ? "the live model (" + o.model + ")" : base_path);
  if (decoder != nullptr) {
    model_note += "; prompt of " + std::to_string(input.size(1)) + " tokens";
    profile.prompt_tokens = input.size(1);
    if (!o.prefill_tokens.empty()) {
      std::vector<std::int64_t> lengths = o.prefill_tokens;
      lengths.push_back(profile.prompt_tokens);
      profile.prefill_curve = exec::profile_prefill_curve(*backend, *model, batch, lengths, o.repeat);
      model_note += "; prefill curve: the whole forward at each prompt length, median of " + std::to_string(o.repeat);
    }
    if (o.decode_tokens > 0) {
      profile.decode_step = exec::profile_decode_step(*backend, *model, batch, profile.prompt_tokens, o.decode_tokens);
      model_note += "; decode step: median of " + std::to_string(o.decode_tokens) + " resident greedy steps after the prompt";
    }
  }
  profile.batch = batch;
  profile.source = SourceInfo{ProfileSource::Measured, model_note, device, today_utc(), versions};
  for (std::size_t i = 0; i < profile.layers.size(); ++i) {
    auto& layer = profile.layers[i];
    // Layers that do not run in inference (training_only) keep their training forward time.
    layer.forward_time = layer.training_only && training ? training->forward.per_layer[i] : forward.per_layer[i];
    layer.backward_time.reset();
    if (training) layer.backward_time = training->backward.per_layer[i];
  }
  // The profile records its dtype (the base's, checked equal to --dtype above, or the live
  // decoder's); fp32 ones where they always were, the others in a folder of their dtype, as in
  // configs/models/.
  const std::string model_path = profile_path_in(o.out_dir, profile.name, o.dtype).string();
  save_text(model_path, "# Measured by `psw profile --model " + o.model +
                            (o.dtype == "fp32" ? "" : " --dtype " + o.dtype) + (o.train ? " --train" : "") + "` on " +
                            device + "; do not edit by hand.\n" + to_yaml(profile));
  const bool json = o.format == "json";
  // What scripts read: the whole phases as timed without and with per-layer marks (Note [Mark
  // overhead]), beside the layers' sums the profile now holds.
  nlohmann::json report;
  if (json) {
    const auto phase = [](const exec::PhaseTimes& p) {
      return nlohmann::json{{"ms", p.total.ms()}, {"with_marks_ms", p.instrumented.ms()}};
    };
    Duration forward_sum, backward_sum;
    for (const auto& layer : profile.layers) {
      forward_sum += layer.forward_time.value_or(Duration::zero());
      backward_sum += layer.backward_time.value_or(Duration::zero());
    }
    report = {{"model", profile.name},
              {"dtype", o.dtype},
              {"batch", batch},
              {"device", device},
              {"layers", profile.layers.size()},
              {"profile", model_path},
              {"phases", {{"inference_forward", phase(forward)}}},
              {"layers_forward_ms", forward_sum.ms()}};
    if (training) {
      report["phases"]["training_forward"] = phase(training->forward);
      report["phases"]["backward"] = phase(training->backward);
      report["layers_backward_ms"] = backward_sum.ms();
    }
  } else {
    std::printf("%-12s %s (%s): %zu layers at batch %d on %s -> %s\n", "model", o.model.c_str(), o.dtype.c_str(),
                profile.layers.size(), batch, device.c_str(), model_path.c_str());
    std::printf("%-12s %s\n", "", phase_note("inference forward", forward).c_str());
    if (profile.decode_step) std::printf("%-12s decode step %.3f ms (median of %d)\n", "", profile.decode_step->ms(), o.decode_tokens);
    if (training) {
      std::printf("%-12s %s\n", "", phase_note("training forward", training->forward).c_str());
      std::printf("%-12s %s\n", "", phase_note("backward", training->backward).c_str());
    }
  }

  if (!o.link) {
    if (json) std::cout << report.dump(2) << "\n";
    return;
  }
  HardwareProfile hw = load_hardware_profile(o.hardware_base);
  std::string note =
      "links fitted by psw profile (least squares: on relative error for pinned copies and mapped reads, on "
      "absolute error for pageable copies, Note [Link fit weighting]) from copies timed back to back as a switch "
      "queues them (per-copy rates):";
  for (bool pinned : {true, false}) {
    const auto samples = exec::profile_link(*backend, pinned, parse_size(o.link_max), 20);
    const LinkCost fit =
        fit_link(samples, pinned ? LinkFitWeighting::RelativeError : LinkFitWeighting::AbsoluteError);
    (pinned ? hw.pinned : hw.pageable) = fit;
    if (json) {
      report["links"][pinned ? "pinned" : "pageable"] = {{"copy_fixed_us", fit.copy_fixed.us()},
                                                         {"gb_per_s", fit.bandwidth.gb_per_second()}};
    } else {
      std::printf("%-12s %s: copy_fixed %.2f us, bandwidth %.2f GB/s\n", "link", pinned ? "pinned" : "pageable",
                  fit.copy_fixed.us(), fit.bandwidth.gb_per_second());
    }
    note += (pinned ? " pinned:" : "; pageable:") + rates(samples);
  }
  // The mapped link: kernels reading pinned host memory in place (placement, DESIGN.md §3).
  {
    const auto samples = exec::profile_mapped_reads(*backend, std::min(parse_size(o.link_max), 256 * kMiB), 20);
    hw.mapped = fit_link(samples);
    if (json) {
      report["links"]["mapped"] = {{"copy_fixed_us", hw.mapped->copy_fixed.us()},
                                   {"gb_per_s", hw.mapped->bandwidth.gb_per_second()}};
    } else {
      std::printf("%-12s %s: fixed %.2f us, bandwidth %.2f GB/s\n", "link", "mapped reads",
                  hw.mapped->copy_fixed.us(), hw.mapped->bandwidth.gb_per_second());
    }
    note += "; mapped reads (a kernel summing pinned host memory in place):" + rates(samples);
  }
  if (!o.hardware_name.empty()) hw.name = o.hardware_name;
  hw.source = SourceInfo{ProfileSource::Measured, note + "; other costs as in " + o.hardware_base, device, today_utc(), versions};
  const std::string hw_path = o.out_dir + "/" + hw.name + ".yaml";
  save_text(hw_path, "# Written by `psw profile --link` on " + device + "; do not edit by hand.\n" + to_yaml(hw));
  if (json) {
    report["hardware"] = hw_path;
    std::cout << report.dump(2) << "\n";
  } else {
    std::printf("%-12s -> %s\n", "hardware", hw_path.c_str());
  }
}

}  // namespace

Action add_profile_command(CLI::App& app) {
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand("profile", "Measure per-layer forward (and backward) times and the link and write measured profiles");
  cmd->add_option("--model", options->model,
                  "resnet152 | inception_v3 | bert_base | a decoder: llama-1b, llama-8b, llama-tiny (configs/zoo/), or its config "
                  "file | a user's model: a TorchScript file (.pt) or an AOTInductor package (.pt2, cuda) with --input-shape")
      ->required();
  cmd->add_option("--prefill-tokens", options->prefill_tokens,
                  "Decoders: also time the whole prefill at these prompt lengths (comma-separated), the profile's "
                  "prefill curve, so that other prompts are predicted (Note [Prefill curve])")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 22));
  cmd->add_option("--decode-tokens", options->decode_tokens,
                  "Decoders: also time this many resident decode steps after the prompt, the profile's decode_step_ns "
                  "(Note [Decode in the simulator])")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--prompt-tokens", options->prompt_tokens,
                  "Decoders: the prompt's length the prefill is profiled at (default: 128)")
      ->check(CLI::Range(1, 1 << 22));
  auto* batch = cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::Range(1, 4096))->capture_default_str();
  add_model_input_options(cmd, options->input);
  cmd->add_option("--repeat", options->repeat, "Timed repetitions")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--backend", options->backend, "cuda | host")->capture_default_str();
  cmd->add_option("--dtype", options->dtype, "The model's dtype: fp32 | bf16 | fp16")->capture_default_str();
  cmd->add_option("--base-profile", options->base_profile,
                  "Model profile giving layer names and bytes, in --dtype (default: configs/models/MODEL.yaml for "
                  "fp32, configs/models/DTYPE/MODEL.yaml otherwise)");
  cmd->add_option("--hardware-base", options->hardware_base, "Hardware profile whose other costs are kept")->capture_default_str();
  cmd->add_flag("--train", options->train,
                "Also profile a training iteration: per-layer backward times (and training-only layers' forward)");
  cmd->add_flag("--train-eager", options->train_eager,
                "Time the training iteration eagerly instead of as a replayed graph (host dispatch included)");
  cmd->add_flag("--link", options->link, "Also measure pinned and pageable copies and fit the links");
  cmd->add_flag("--graph", options->graph,
                "A user's model (.pt, .pt2): its layers from its captured graph, each timed from the capture (cuda), "
                "the profile psw run --graph --profile plans from");
  cmd->add_option("--link-max", options->link_max, "Largest copy: 16MiB, 64MiB, 256MiB or 1GiB")->capture_default_str();
  cmd->add_option("--hardware-name", options->hardware_name, "Name of the written hardware profile");
  cmd->add_option("--out", options->out_dir, "Output folder")->capture_default_str();
  cmd->add_option("--format", options->format,
                  "table | json: what was measured (each phase without and with per-layer marks, the fitted links) "
                  "and the files written")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  return [options, batch] {
    // A shipped decoder by its name (llama-8b), from the project root as the other defaults.
    auto resolved = *options;
    resolved.model = exec::zoo_model_argument(options->model, "configs/zoo");
    resolved.input.batch_given = batch->count() > 0;
    run_profile(resolved);
  };
}

}  // namespace psw::cli
