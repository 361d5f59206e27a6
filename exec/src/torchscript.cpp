#include "psw/exec/torchscript.hpp"

#include <torch/script.h>

#include <charconv>
#include <sstream>

#include "psw/common/error.hpp"

namespace psw::exec {

// Named, not anonymous: the unity build compiles this file with the zoo's.
namespace torchscript_impl {

// Note [TorchScript models]
class TorchScriptModel final : public ZooModel {
 public:
  TorchScriptModel(torch::jit::Module module, std::string name, InputSpec input)
      : module_(std::move(module)), name_(std::move(name)), input_(std::move(input)) {
    module_.eval();
    for (const torch::jit::NameModule& m : module_.named_modules()) {
      ZooLayer layer{m.name.empty() ? "(root)" : m.name, m.value.type()->name() ? m.value.type()->name()->name() : "module",
                     {}};
      for (const torch::jit::NameTensor& p : m.value.named_parameters(/*recurse=*/false)) {
        layer.tensors.push_back(p.value);
        layer.tensor_names.push_back(p.name);
      }
      for (const torch::jit::NameTensor& b : m.value.named_buffers(/*recurse=*/false)) {
        layer.tensors.push_back(b.value);
        layer.tensor_names.push_back(b.name);
      }
      if (!layer.tensors.empty()) layers_.push_back(std::move(layer));
    }
    if (layers_.empty()) throw InputError(name_ + ": the TorchScript module has no parameters or buffers to switch");
    for (const ZooLayer& layer : layers_) {
      for (const torch::Tensor& t : layer.tensors) {
        if (t.is_floating_point()) {
          dtype_ = t.scalar_type();
          return;
        }
      }
    }
  }

  const std::string& name() const override { return name_; }
  std::vector<ZooLayer>& layers() override { return layers_; }
  torch::ScalarType dtype() const override { return dtype_; }
  void to(torch::Device device) override { module_.to(device); }

  torch::Tensor example_input(int batch, std::uint64_t seed) const override {
    std::vector<std::int64_t> shape = input_.shape;
    shape[0] = batch;
    auto generator = at::detail::createCPUGenerator(seed);
    if (c10::isFloatingType(input_.dtype)) {
      return (torch::rand(shape, generator, torch::kFloat32) * 2 - 1).to(input_.dtype);
    }
    return torch::randint(0, 512, shape, generator, torch::dtype(input_.dtype));
  }

  torch::Tensor forward(const torch::Tensor& input, const LayerGate& gate) override {
    check_input(input);
    // Note [TorchScript models]: no gate inside the module's forward; every layer is waited for first.
    for (std::size_t i = 0; i < layers_.size(); ++i) gate(i);
    torch::NoGradGuard no_grad;
    torch::jit::IValue out;
    try {
      out = module_.forward({input});
    } catch (const c10::Error& e) {
      std::ostringstream what;
      what << name_ << ": the module refused the input " << input.sizes() << ": " << e.what_without_backtrace();
      throw InputError(what.str());
    }
    if (out.isTensor()) return out.toTensor();
    if (out.isTuple() && !out.toTuple()->elements().empty() && out.toTuple()->elements()[0].isTensor()) {
      return out.toTuple()->elements()[0].toTensor();
    }
    throw InputError(name_ + ": the module's output is neither a tensor nor a tuple beginning with one");
  }

  std::vector<torch::Tensor> training_outputs(const torch::Tensor&, const LayerGate&) override {
    throw InputError(name_ + ": a TorchScript model serves inference only; it cannot be trained here");
  }

 private:
  void check_input(const torch::Tensor& input) const {
    const c10::IntArrayRef given = input.sizes();
    bool fits = given.size() == input_.shape.size() && input.scalar_type() == input_.dtype;
    for (std::size_t d = 1; fits && d < given.size(); ++d) fits = given[d] == input_.shape[d];
    if (!fits) {
      std::ostringstream why;  // sizes print as [1, 3, 224, 224]
      why << name_ << ": the input is " << input.scalar_type() << " " << given << "; it takes " << input_.dtype << " "
          << c10::IntArrayRef(input_.shape) << " (any batch)";
      throw InputError(why.str());
    }
  }

  torch::jit::Module module_;
  std::string name_;
  InputSpec input_;
  std::vector<ZooLayer> layers_;
  torch::ScalarType dtype_ = torch::kFloat32;
};

}  // namespace torchscript_impl

std::vector<std::int64_t> parse_input_shape(const std::string& text) {
  std::vector<std::int64_t> shape;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::int64_t d = 0;
    const auto [end, ec] = std::from_chars(text.data() + start, text.data() + comma, d);
    if (ec != std::errc() || end != text.data() + comma || d < 1) {
      throw InputError("--input-shape '" + text + "': expected positive integers separated by commas, the batch first "
                       "(e.g. 8,3,224,224)");
    }
    shape.push_back(d);
    start = comma + 1;
  }
  return shape;
}

torch::ScalarType parse_input_dtype(const std::string& name) {
  if (name == "fp32") return torch::kFloat32;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp16") return torch::kFloat16;
  if (name == "int64") return torch::kInt64;
  throw InputError("--input-dtype '" + name + "': expected fp32, bf16, fp16 or int64");
}

bool names_torchscript(const std::string& model) {
  const auto ends_with = [&](const std::string& suffix) {
    return model.size() > suffix.size() && model.compare(model.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".pt") || ends_with(".pth");
}

std::unique_ptr<ZooModel> load_torchscript(const std::filesystem::path& file, const InputSpec& input) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) throw InputError(file.string() + ": no such file");
  if (input.shape.size() < 1) throw InputError(file.string() + ": the input needs a shape, the batch first");
  torch::jit::Module module;
  try {
    module = torch::jit::load(file.string(), torch::kCPU);
  } catch (const c10::Error& e) {
    throw InputError(file.string() + ": not a TorchScript file (torch.jit.trace or torch.jit.script, then save): " +
                     e.what_without_backtrace());
  }
  return std::make_unique<torchscript_impl::TorchScriptModel>(std::move(module), file.stem().string(), input);
}

std::unique_ptr<ZooModel> open_model(const std::string& argument, std::uint64_t seed, torch::ScalarType dtype,
                                     const std::optional<InputSpec>& input) {
  if (!names_torchscript(argument)) {
    if (input) throw InputError("--input-shape and --input-dtype are for TorchScript models (.pt); " + argument +
                                " takes its own input");
    return make_model(argument, seed, dtype);
  }
  if (!input) throw InputError(argument + ": a TorchScript model needs its input's shape (--input-shape 8,3,224,224)");
  std::unique_ptr<ZooModel> model = load_torchscript(argument, *input);
  if (model->dtype() != dtype) {
    std::ostringstream why;
    why << argument << ": the module's parameters are " << model->dtype() << ", not " << dtype
        << " (--dtype): a TorchScript model runs in the dtype it was saved in";
    throw InputError(why.str());
  }
  return model;
}

}  // namespace psw::exec
