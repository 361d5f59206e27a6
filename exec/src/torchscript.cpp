#include "psw/exec/torchscript.hpp"

#include <torch/script.h>

#include <charconv>
#include <sstream>

#include "model_inputs.hpp"
#include "psw/common/error.hpp"

namespace psw::exec {

// Named, not anonymous: the unity build compiles this file with the zoo's.
namespace torchscript_impl {

// Note [TorchScript models]
class TorchScriptModel final : public ZooModel {
 public:
  TorchScriptModel(torch::jit::Module module, std::string name, ModelInputs inputs)
      : module_(std::move(module)), name_(std::move(name)), inputs_(std::move(inputs)) {
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
    dtype_ = floating_dtype(layers_);
  }

  const std::string& name() const override { return name_; }
  std::vector<ZooLayer>& layers() override { return layers_; }
  torch::ScalarType dtype() const override { return dtype_; }
  void to(torch::Device device) override { module_.to(device); }

  torch::Tensor example_input(int batch, std::uint64_t seed) const override { return inputs_.example(batch, seed); }

  torch::Tensor forward(const torch::Tensor& input, const LayerGate& gate) override {
    const std::vector<torch::jit::IValue> arguments = module_arguments(input);
    // Note [TorchScript models]: no gate inside the module's forward; every layer is waited for first.
    for (std::size_t i = 0; i < layers_.size(); ++i) gate(i);
    torch::NoGradGuard no_grad;
    return first_tensor(run(arguments, input));
  }

  // Note [TorchScript training]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The module's forward in training mode, with autograd: a scripted module's BatchNorm and
  // dropout follow the mode; a traced module's were fixed when it was traced (torch.jit.trace
  // records the mode it ran in), so a module traced in eval mode trains with its BatchNorm on
  // its running statistics, as it was exported. There is no gate inside the forward, so every
  // layer's gate is called first (a training job may stop there); in the backward the job's
  // gradient hooks on the parameters are its boundaries. Back in eval mode afterwards, for the
  // inference forward.
  std::vector<torch::Tensor> training_outputs(const torch::Tensor& input, const LayerGate& gate) override {
    const std::vector<torch::jit::IValue> arguments = module_arguments(input);
    for (std::size_t i = 0; i < layers_.size(); ++i) gate(i);
    struct BackToEval {
      torch::jit::Module& module;
      ~BackToEval() { module.train(false); }
    } back_to_eval{module_};
    module_.train(true);
    return {first_tensor(run(arguments, input))};
  }

 private:
  // The module's forward on `arguments`; its errors as InputErrors naming the input's shape.
  torch::jit::IValue run(const std::vector<torch::jit::IValue>& arguments, const torch::Tensor& input) {
    try {
      return module_.forward(arguments);
    } catch (const c10::Error& e) {
      std::ostringstream what;
      what << name_ << ": the module refused the input " << input.sizes() << ": " << e.what_without_backtrace();
      throw InputError(what.str());
    } catch (const std::runtime_error& e) {  // the TorchScript interpreter's own errors
      std::string message = e.what();
      // Its traceback ends with the error itself ("RuntimeError: ..."), which is what to say.
      const auto last = message.rfind("Error: ");
      if (last != std::string::npos) message = message.substr(last + 7);
      while (!message.empty() && message.back() == '\n') message.pop_back();
      std::ostringstream what;
      what << name_ << ": the module refused the input " << input.sizes() << ": " << message;
      throw InputError(what.str());
    }
  }

  // The output: the module's tensor, or the first tensor of the tuple it returns.
  torch::Tensor first_tensor(const torch::jit::IValue& out) const {
    if (out.isTensor()) return out.toTensor();
    if (out.isTuple() && !out.toTuple()->elements().empty() && out.toTuple()->elements()[0].isTensor()) {
      return out.toTuple()->elements()[0].toTensor();
    }
    throw InputError(name_ + ": the module's output is neither a tensor nor a tuple beginning with one");
  }

  // The module's arguments from the one input: itself, or unpacked (Note [Several inputs]).
  std::vector<torch::jit::IValue> module_arguments(const torch::Tensor& input) const {
    std::vector<torch::jit::IValue> arguments;
    for (torch::Tensor& t : inputs_.unpack(input, name_)) arguments.emplace_back(std::move(t));
    return arguments;
  }

  torch::jit::Module module_;
  std::string name_;
  ModelInputs inputs_;
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

namespace torchscript_impl {
bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace torchscript_impl

bool names_torchscript(const std::string& model) {
  return torchscript_impl::ends_with(model, ".pt") || torchscript_impl::ends_with(model, ".pth");
}

bool names_aoti_package(const std::string& model) { return torchscript_impl::ends_with(model, ".pt2"); }

bool names_model_file(const std::string& model) { return names_torchscript(model) || names_aoti_package(model); }

namespace torchscript_impl {

torch::jit::Module load_module(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) throw InputError(file.string() + ": no such file");
  try {
    return torch::jit::load(file.string(), torch::kCPU);
  } catch (const c10::Error& e) {
    throw InputError(file.string() + ": not a TorchScript file (torch.jit.trace or torch.jit.script, then save): " +
                     e.what_without_backtrace());
  }
}

// The forward's arguments after `self`, and how many of them have no default.
std::vector<std::string> argument_names(const torch::jit::Module& module, const std::filesystem::path& file,
                                        std::size_t* required = nullptr) {
  std::vector<std::string> names;
  if (!module.find_method("forward")) throw InputError(file.string() + ": the TorchScript module has no forward method");
  const auto& arguments = module.get_method("forward").function().getSchema().arguments();
  if (required != nullptr) *required = 0;
  for (std::size_t i = 1; i < arguments.size(); ++i) {  // 0 is self
    names.push_back(arguments[i].name());
    if (required != nullptr && !arguments[i].default_value()) ++*required;
  }
  return names;
}

}  // namespace torchscript_impl

std::vector<std::string> torchscript_input_names(const std::filesystem::path& file) {
  return torchscript_impl::argument_names(torchscript_impl::load_module(file), file);
}

torch::Tensor pack_inputs(const std::vector<torch::Tensor>& inputs) {
  if (inputs.empty()) throw InputError("no inputs to pack");
  std::vector<torch::Tensor> rows;
  const std::int64_t batch = inputs.front().dim() > 0 ? inputs.front().size(0) : -1;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dim() < 1 || inputs[i].size(0) != batch) {
      std::ostringstream why;
      why << "input " << i << " is " << inputs[i].sizes() << ": every input has the batch (" << batch << ") first";
      throw InputError(why.str());
    }
    rows.push_back(inputs[i].contiguous().reshape({batch, -1}).view(torch::kUInt8));
  }
  return torch::cat(rows, 1);
}

std::unique_ptr<ZooModel> load_torchscript(const std::filesystem::path& file, const InputSpec& input) {
  return load_torchscript(file, std::vector<InputSpec>{input});
}

std::unique_ptr<ZooModel> load_torchscript(const std::filesystem::path& file, const std::vector<InputSpec>& inputs) {
  ModelInputs layout(file.string(), inputs);
  torch::jit::Module module = torchscript_impl::load_module(file);
  std::size_t required = 0;
  const std::vector<std::string> names = torchscript_impl::argument_names(module, file, &required);
  if (inputs.size() < required || inputs.size() > names.size()) {
    std::string listed;
    for (const auto& n : names) listed += (listed.empty() ? "" : ", ") + n;
    const std::string count = required == names.size() ? std::to_string(required)
                                                        : std::to_string(required) + " to " + std::to_string(names.size());
    throw InputError(file.string() + ": the module's forward takes " + count + " input" + (names.size() == 1 ? "" : "s") +
                     " (" + listed + "), " + std::to_string(inputs.size()) + " given (one --input-shape per input, in order)");
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].name.empty() && inputs[i].name != names[i]) {
      throw InputError(file.string() + ": input " + std::to_string(i) + " of the forward is '" + names[i] +
                       "', but the serve config lists '" + inputs[i].name +
                       "' there (list the inputs by the forward's names, in its order)");
    }
  }
  return std::make_unique<torchscript_impl::TorchScriptModel>(std::move(module), file.stem().string(), std::move(layout));
}

std::unique_ptr<ZooModel> open_model(const std::string& argument, std::uint64_t seed, torch::ScalarType dtype,
                                     const std::vector<InputSpec>& inputs, torch::Device device) {
  if (!names_model_file(argument)) {
    if (!inputs.empty()) throw InputError("--input-shape and --input-dtype are for TorchScript models (.pt) and "
                                          "AOTInductor packages (.pt2); " + argument + " takes its own input");
    return make_model(argument, seed, dtype);
  }
  if (inputs.empty()) {
    throw InputError(argument + ": a user's model needs its input's shape (--input-shape 8,3,224,224)");
  }
  const bool package = names_aoti_package(argument);
  std::unique_ptr<ZooModel> model = package ? load_aoti_package(argument, inputs, device) : load_torchscript(argument, inputs);
  if (model->dtype() != dtype) {
    std::ostringstream why;
    why << argument << ": the " << (package ? "package's constants" : "module's parameters") << " are " << model->dtype()
        << ", not " << dtype << " (--dtype): a " << (package ? "package" : "TorchScript model")
        << " runs in the dtype it was saved in";
    throw InputError(why.str());
  }
  return model;
}

}  // namespace psw::exec
