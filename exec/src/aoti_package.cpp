// Note [AOTInductor packages] (psw/exec/torchscript.hpp): a user's model compiled ahead of time
// by torch._inductor.aoti_compile_and_package, as a ZooModel.
#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>

#include "model_inputs.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/torchscript.hpp"

#if __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#define PSW_HAS_AOTI 1
#else
#define PSW_HAS_AOTI 0
#endif

namespace psw::exec {

bool aoti_packages_supported() { return PSW_HAS_AOTI != 0; }

// Named, not anonymous: the unity build compiles this file with the zoo's.
namespace module_order_impl {

// A module path's components ("features.10.block" -> features, 10, block), a number compared as
// a number, so that features.2 comes before features.10.
struct PathComponent {
  bool number = false;
  std::uint64_t value = 0;
  std::string text;
  bool operator<(const PathComponent& other) const {
    if (number != other.number) return number;  // numbers (Sequential children) before names
    return number ? value < other.value : text < other.text;
  }
};

std::vector<PathComponent> path_components(const std::string& path) {
  std::vector<PathComponent> components;
  std::size_t begin = 0;
  while (begin <= path.size()) {
    const std::size_t end = std::min(path.find('.', begin), path.size());
    PathComponent c;
    c.text = path.substr(begin, end - begin);
    c.number = !c.text.empty() && c.text.size() <= 18 &&
               std::all_of(c.text.begin(), c.text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (c.number) c.value = std::stoull(c.text);
    components.push_back(std::move(c));
    begin = end + 1;
  }
  return components;
}

}  // namespace module_order_impl

std::vector<ModuleConstants> constants_by_module(const std::vector<std::string>& names) {
  using module_order_impl::PathComponent;
  using module_order_impl::path_components;
  std::vector<ModuleConstants> modules;
  std::unordered_map<std::string, std::size_t> index_of;  // module -> its entry
  for (std::size_t c = 0; c < names.size(); ++c) {
    const auto dot = names[c].rfind('.');
    const std::string module = dot == std::string::npos ? "(root)" : names[c].substr(0, dot);
    const auto [it, added] = index_of.emplace(module, modules.size());
    if (added) modules.push_back(ModuleConstants{module, {}, {}});
    modules[it->second].constants.push_back(c);
    modules[it->second].tensor_names.push_back(dot == std::string::npos ? names[c] : names[c].substr(dot + 1));
  }
  // The modules in the order of their paths, numbers as numbers, the root's constants last: the
  // order a model registers its numbered children in, and close to the order its forward reads
  // them, where a package's own listing has no order at all (it comes from a hash map).
  struct Keyed {
    bool root;
    std::vector<PathComponent> path;
    std::size_t module;
  };
  std::vector<Keyed> keyed;
  for (std::size_t m = 0; m < modules.size(); ++m) {
    keyed.push_back({modules[m].module == "(root)", path_components(modules[m].module), m});
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const Keyed& a, const Keyed& b) { return std::tie(a.root, a.path) < std::tie(b.root, b.path); });
  std::vector<ModuleConstants> ordered;
  for (const Keyed& k : keyed) ordered.push_back(std::move(modules[k.module]));
  return ordered;
}

#if PSW_HAS_AOTI

// Named, not anonymous: the unity build compiles this file with the zoo's.
namespace aoti_impl {

// The package's constants as (its own name, the original name), by original name: the package
// lists them from a hash map, in no order; constants_by_module orders the modules.
std::vector<std::pair<std::string, std::string>> ordered_constants(torch::inductor::AOTIModelPackageLoader& loader) {
  std::vector<std::pair<std::string, std::string>> ordered;  // (name, original name)
  for (const auto& [name, fqn] : loader.get_runner()->getConstantNamesToOriginalFQNs()) {
    ordered.emplace_back(name, fqn.empty() ? name : fqn);
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return std::tie(a.second, a.first) < std::tie(b.second, b.first); });
  return ordered;
}

class AotiPackageModel final : public ZooModel {
 public:
  AotiPackageModel(const std::filesystem::path& file, ModelInputs inputs, torch::Device device)
      : name_(file.stem().string()), inputs_(std::move(inputs)), device_(device) {
    try {
      // run_single_threaded: no lock or wait of the package's own around a run, which a CUDA
      // graph's capture could not hold (Note [Graph-pipelined switch]).
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          file.string(), "model", /*run_single_threaded=*/true, /*num_runners=*/1,
          device.has_index() ? device.index() : static_cast<c10::DeviceIndex>(device.is_cuda() ? 0 : -1));
    } catch (const std::exception& e) {
      throw InputError(file.string() + ": the AOTInductor package cannot be loaded: " + short_message(e));
    }
    const std::unordered_map<std::string, at::Tensor> constants = loader_->get_runner()->extract_constants_map(false);
    std::vector<std::string> names;  // the package's own names and the original ones, of the constants found
    std::vector<std::string> fqns;
    std::vector<at::Tensor> found;
    for (const auto& [name, fqn] : ordered_constants(*loader_)) {
      // The map is keyed by original names (LibTorch 2.11), or by the package's own; the constants
      // it leaves out (folded ones, which the package computes) are not ours to bind.
      auto it = constants.find(fqn);
      if (it == constants.end()) it = constants.find(name);
      if (it == constants.end()) continue;
      if (!it->second.is_contiguous()) {
        // The region holds each tensor contiguous; a constant laid out otherwise would be read
        // wrongly through it.
        throw InputError(file.string() + ": the package's constant " + fqn + " is not contiguous; psw binds contiguous tensors");
      }
      names.push_back(name);
      fqns.push_back(fqn);
      found.push_back(it->second);
    }
    for (ModuleConstants& module : constants_by_module(fqns)) {
      ZooLayer layer{module.module, "module", {}, std::move(module.tensor_names)};
      std::vector<std::string> package_names;
      for (const std::size_t c : module.constants) {
        // Our own tensor, not the package's, on the CPU where every model is built: ZooModel::to
        // or the engine moves it to the device, where the package reads it (bind_constants).
        layer.tensors.push_back(found[c].to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true));
        package_names.push_back(names[c]);
      }
      layers_.push_back(std::move(layer));
      constant_names_.push_back(std::move(package_names));
    }
    if (layers_.empty()) {
      std::string listed;
      for (const auto& entry : constants) listed += (listed.empty() ? "" : ", ") + entry.first;
      throw InputError(file.string() + ": the AOTInductor package has no constants to switch (it lists " +
                       std::to_string(constants.size()) + ": " + listed.substr(0, 200) + ")");
    }
    dtype_ = floating_dtype(layers_);
  }

  const std::string& name() const override { return name_; }
  std::vector<ZooLayer>& layers() override { return layers_; }
  torch::ScalarType dtype() const override { return dtype_; }

  void to(torch::Device device) override {
    if (device.type() != device_.type() && device.type() != torch::kCPU) {
      std::ostringstream why;
      why << name_ << ": an AOTInductor package runs where it was loaded (" << device_ << "), not on " << device;
      throw InputError(why.str());
    }
    for (ZooLayer& layer : layers_) {
      for (torch::Tensor& t : layer.tensors) t.set_data(t.to(device));
    }
  }

  torch::Tensor example_input(int batch, std::uint64_t seed) const override { return inputs_.example(batch, seed); }

  torch::Tensor forward(const torch::Tensor& input, const LayerGate& gate) override {
    std::vector<torch::Tensor> arguments = inputs_.unpack(input, name_);
    // As a TorchScript module's (Note [TorchScript models]): no gate inside the compiled forward.
    for (std::size_t i = 0; i < layers_.size(); ++i) gate(i);
    bind_constants();
    std::vector<at::Tensor> outputs;
    try {
      outputs = loader_->run(arguments);  // on the current stream
    } catch (const std::exception& e) {
      std::ostringstream why;
      why << name_ << ": the package refused the input " << input.sizes() << ": " << short_message(e);
      throw InputError(why.str());
    }
    if (outputs.empty()) throw InputError(name_ + ": the package's forward returned no tensor");
    return outputs.front();
  }

  std::vector<torch::Tensor> training_outputs(const torch::Tensor& /*input*/, const LayerGate& /*gate*/) override {
    throw InputError(name_ + ": an AOTInductor package holds a compiled inference forward with no backward; train a "
                             "TorchScript model (.pt) instead");
  }

 private:
  static std::string short_message(const std::exception& e) {
    if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
    return e.what();
  }

  // Note [AOTInductor packages]: the package reads our tensors where they are now, set again only
  // when the engine moved them. Its own copy stays: what else the package holds (constants it
  // folded at compile time, small tensors it keeps to itself) lives beside it, and a swap of the
  // whole set left those unset.
  void bind_constants() {
    std::vector<const void*> now;
    for (const ZooLayer& layer : layers_) {
      for (const torch::Tensor& t : layer.tensors) {
        if (t.device().type() != device_.type()) {
          std::ostringstream why;
          why << name_ << ": the package's constants are on " << t.device() << "; it runs on " << device_
              << " (move the model there first)";
          throw InputError(why.str());
        }
        now.push_back(t.data_ptr());
      }
    }
    if (now == bound_) return;  // every forward: only the pointers compared, no map built
    std::unordered_map<std::string, at::Tensor> map;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      for (std::size_t i = 0; i < layers_[l].tensors.size(); ++i) map.emplace(constant_names_[l][i], layers_[l].tensors[i]);
    }
    loader_->get_runner()->update_constant_buffer(map, /*use_inactive=*/false, /*validate_full_updates=*/true,
                                                  /*user_managed=*/true);
    bound_ = std::move(now);
  }

  std::string name_;
  ModelInputs inputs_;
  torch::Device device_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  std::vector<ZooLayer> layers_;
  std::vector<std::vector<std::string>> constant_names_;  // the package's name of each layer tensor
  std::vector<const void*> bound_;           // where the package reads them
  torch::ScalarType dtype_ = torch::kFloat32;
};

}  // namespace aoti_impl

std::unique_ptr<ZooModel> load_aoti_package(const std::filesystem::path& file, const std::vector<InputSpec>& inputs,
                                            torch::Device device) {
  ModelInputs layout(file.string(), inputs);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) throw InputError(file.string() + ": no such file");
  std::unordered_map<std::string, std::string> metadata;
  try {
    metadata = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(file.string(), "model");
  } catch (const std::exception& e) {
    throw InputError(file.string() + ": not an AOTInductor package (torch._inductor.aoti_compile_and_package output): " +
                     e.what());
  }
  const auto key = metadata.find("AOTI_DEVICE_KEY");
  const std::string compiled_for = key == metadata.end() ? std::string("?") : key->second;
  if (compiled_for != c10::DeviceTypeName(device.type(), /*lower_case=*/true)) {
    std::ostringstream why;
    why << file.string() << ": the AOTInductor package was compiled for " << compiled_for << ", and this backend runs on "
        << device << " (compile it for the device it will run on)";
    throw InputError(why.str());
  }
  // A package's code checks its inputs' shapes and dtypes only where this is set (read once, at
  // its first run); without it an input of another shape than the compiled one is read out of
  // bounds. The user's --input-shape is not checked against the package otherwise.
  ::setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  return std::make_unique<aoti_impl::AotiPackageModel>(file, std::move(layout), device);
}

#else

std::unique_ptr<ZooModel> load_aoti_package(const std::filesystem::path& file, const std::vector<InputSpec>& inputs,
                                            torch::Device /*device*/) {
  ModelInputs layout(file.string(), inputs);
  throw InputError(file.string() + ": an AOTInductor package needs LibTorch 2.6 or later; this build's LibTorch " +
                   TORCH_VERSION + " has no AOTInductor (export the model with torch.jit.trace to a .pt instead)");
}

#endif

}  // namespace psw::exec
