// psw profile: measure per-layer forward times and the host-to-device link on this device,
// and write a measured ModelProfile (and, with --link, a HardwareProfile) as YAML.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include <torch/version.h>

#include "commands.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/link_fit.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/profiler.hpp"

namespace psw::cli {

namespace {

struct ProfileOptions {
  std::string model;
  int batch = 8;
  int repeat = 50;
  std::string backend = "cuda";
  std::string base_profile;  // default configs/models/NAME.yaml: names, kinds, bytes
  std::string hardware_base = "configs/hardware/h200-pcie5.yaml";
  bool link = false;
  std::string link_max = "1GiB";
  std::string out_dir = "results/profiles";
  std::string hardware_name;  // name of the written hardware profile (default: the base's)
};

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

Bytes parse_size(const std::string& text) {
  if (text == "1GiB") return kGiB;
  if (text == "256MiB") return 256 * kMiB;
  if (text == "64MiB") return 64 * kMiB;
  if (text == "16MiB") return 16 * kMiB;
  throw InputError("--link-max '" + text + "': expected 16MiB, 64MiB, 256MiB or 1GiB");
}

void run_profile(const ProfileOptions& o) {
  const std::string base_path = o.base_profile.empty() ? "configs/models/" + o.model + ".yaml" : o.base_profile;
  ModelProfile profile = load_model_profile(base_path);
  auto backend = exec::make_backend(o.backend);
  auto model = exec::make_model(o.model, 0);
  if (profile.name != model->name() || profile.num_layers() != model->layers().size()) {
    throw InputError(base_path + ": not a profile of the zoo's '" + o.model + "' (names or layer count differ)");
  }
  model->to(backend->device());
  const torch::Tensor input = model->example_input(o.batch, 1).to(backend->device());
  const std::vector<Duration> times = exec::profile_forward(*backend, *model, input, o.repeat);
  const std::string device = backend->device_description();
  const std::string versions = std::string("LibTorch ") + TORCH_VERSION;
  profile.batch = o.batch;
  profile.source = SourceInfo{ProfileSource::Measured,
                              "per-layer forward times measured by psw profile (median of " +
                                  std::to_string(o.repeat) + " graph replays or runs); layer list and bytes from " +
                                  base_path,
                              device, today(), versions};
  Duration total = Duration::zero();
  for (std::size_t i = 0; i < profile.layers.size(); ++i) {
    auto& layer = profile.layers[i];
    layer.forward_time = times[i];
    layer.backward_time.reset();  // backward is not profiled yet
    total += times[i];
  }
  const std::string model_path = o.out_dir + "/" + o.model + ".yaml";
  save_text(model_path, "# Measured by `psw profile --model " + o.model + "` on " + device + "; do not edit by hand.\n" +
                            to_yaml(profile));
  std::printf("%-12s %s: %zu layers, forward %.3f ms at batch %d on %s -> %s\n", "model", o.model.c_str(),
              profile.layers.size(), total.ms(), o.batch, device.c_str(), model_path.c_str());

  if (!o.link) return;
  HardwareProfile hw = load_hardware_profile(o.hardware_base);
  std::string note = "links fitted by psw profile (least squares on relative error) from copies of";
  for (bool pinned : {true, false}) {
    const auto samples = exec::profile_link(*backend, pinned, parse_size(o.link_max), 20);
    const LinkCost fit = fit_link(samples);
    (pinned ? hw.pinned : hw.pageable) = fit;
    std::printf("%-12s %s: copy_fixed %.2f us, bandwidth %.2f GB/s\n", "link", pinned ? "pinned" : "pageable",
                fit.copy_fixed.us(), fit.bandwidth.gb_per_second());
    note += pinned ? " pinned:" : "; pageable:";
    for (const auto& s : samples) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.2fGB/s", format_bytes(s.bytes).c_str(),
                    static_cast<double>(s.bytes) / static_cast<double>(s.time.ns()));
      note += buf;
    }
  }
  if (!o.hardware_name.empty()) hw.name = o.hardware_name;
  hw.source = SourceInfo{ProfileSource::Measured, note + "; other costs as in " + o.hardware_base, device, today(), versions};
  const std::string hw_path = o.out_dir + "/" + hw.name + ".yaml";
  save_text(hw_path, "# Written by `psw profile --link` on " + device + "; do not edit by hand.\n" + to_yaml(hw));
  std::printf("%-12s -> %s\n", "hardware", hw_path.c_str());
}

}  // namespace

Action add_profile_command(CLI::App& app) {
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand("profile", "Measure per-layer forward times (and the link) and write measured profiles");
  cmd->add_option("--model", options->model, "resnet152 | inception_v3 | bert_base")->required();
  cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--repeat", options->repeat, "Timed repetitions")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--backend", options->backend, "cuda | host")->capture_default_str();
  cmd->add_option("--base-profile", options->base_profile, "Model profile giving layer names and bytes");
  cmd->add_option("--hardware-base", options->hardware_base, "Hardware profile whose other costs are kept")->capture_default_str();
  cmd->add_flag("--link", options->link, "Also measure pinned and pageable copies and fit the links");
  cmd->add_option("--link-max", options->link_max, "Largest copy: 16MiB, 64MiB, 256MiB or 1GiB")->capture_default_str();
  cmd->add_option("--hardware-name", options->hardware_name, "Name of the written hardware profile");
  cmd->add_option("--out", options->out_dir, "Output folder")->capture_default_str();
  return [options] { run_profile(*options); };
}

}  // namespace psw::cli
