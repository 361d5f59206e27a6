#include "model_inputs.hpp"

#include <sstream>

#include "psw/common/error.hpp"

namespace psw::exec {

ModelInputs::ModelInputs(const std::string& file, std::vector<InputSpec> specs) : specs_(std::move(specs)) {
  if (specs_.empty()) throw InputError(file + ": the model needs its input's shape");
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].shape.empty()) throw InputError(file + ": input " + std::to_string(i) + " needs a shape, the batch first");
    if (specs_[i].shape[0] != specs_[0].shape[0]) {
      throw InputError(file + ": input " + std::to_string(i) + " has batch " + std::to_string(specs_[i].shape[0]) +
                       ", input 0 " + std::to_string(specs_[0].shape[0]) + ": every input has the same batch");
    }
    std::int64_t elements = 1;
    for (std::size_t d = 1; d < specs_[i].shape.size(); ++d) elements *= specs_[i].shape[d];
    sample_bytes_.push_back(elements * static_cast<std::int64_t>(c10::elementSize(specs_[i].dtype)));
  }
}

torch::Tensor ModelInputs::example(int batch, std::uint64_t seed) const {
  std::vector<torch::Tensor> examples;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    std::vector<std::int64_t> shape = specs_[i].shape;
    shape[0] = batch;
    auto generator = at::detail::createCPUGenerator(seed + i);
    const torch::ScalarType dtype = specs_[i].dtype;
    examples.push_back(c10::isFloatingType(dtype) ? (torch::rand(shape, generator, torch::kFloat32) * 2 - 1).to(dtype)
                                                  : torch::randint(0, 512, shape, generator, torch::dtype(dtype)));
  }
  return examples.size() == 1 ? examples.front() : pack_inputs(examples);
}

std::vector<torch::Tensor> ModelInputs::unpack(const torch::Tensor& input, const std::string& model) const {
  if (specs_.size() == 1) {
    const InputSpec& spec = specs_.front();
    const c10::IntArrayRef given = input.sizes();
    bool fits = given.size() == spec.shape.size() && input.scalar_type() == spec.dtype;
    for (std::size_t d = 1; fits && d < given.size(); ++d) fits = given[d] == spec.shape[d];
    if (!fits) {
      std::ostringstream why;  // sizes print as [1, 3, 224, 224]
      why << model << ": the input is " << input.scalar_type() << " " << given << "; it takes " << spec.dtype << " "
          << c10::IntArrayRef(spec.shape) << " (any batch)";
      throw InputError(why.str());
    }
    return {input};
  }
  std::int64_t row = 0;
  for (const std::int64_t b : sample_bytes_) row += b;
  if (input.scalar_type() != torch::kUInt8 || input.dim() != 2 || input.size(1) != row) {
    std::ostringstream why;
    why << model << ": the input is " << input.scalar_type() << " " << input.sizes() << "; a model of " << specs_.size()
        << " inputs takes them packed, Byte [batch, " << row << "] (Note [Several inputs])";
    throw InputError(why.str());
  }
  std::vector<torch::Tensor> tensors;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    std::vector<std::int64_t> shape = specs_[i].shape;
    shape[0] = input.size(0);
    tensors.push_back(input.narrow(1, offset, sample_bytes_[i]).contiguous().view(specs_[i].dtype).reshape(shape));
    offset += sample_bytes_[i];
  }
  return tensors;
}

torch::ScalarType floating_dtype(const std::vector<ZooLayer>& layers) {
  for (const ZooLayer& layer : layers) {
    for (const torch::Tensor& t : layer.tensors) {
      if (t.is_floating_point()) return t.scalar_type();
    }
  }
  return torch::kFloat32;
}

}  // namespace psw::exec
