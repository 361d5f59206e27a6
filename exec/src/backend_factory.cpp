// The one place that knows which backends this build has.
#include <limits>

#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/captured_forward.hpp"

namespace psw::exec {

#if PSW_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend();  // exec/cuda/cuda_backend.cpp
#endif

void Backend::capture(std::size_t /*slot*/, const std::function<void()>& /*body*/) {
  throw InputError("the " + name() + " backend cannot capture graphs");
}

void Backend::replay(std::size_t /*slot*/) {
  throw InputError("the " + name() + " backend cannot replay graphs");
}

std::unique_ptr<CapturedForward> Backend::capture_forward(const std::function<torch::Tensor()>& /*forward*/,
                                                          std::vector<GraphParameter> /*parameters*/) {
  throw UncapturableError("the " + name() + " backend cannot capture a forward as a graph: pipelining a model "
                          "through its captured graph needs --backend cuda");
}

torch::Tensor Backend::allocate_shared_device(Bytes bytes) { return allocate_device(bytes); }

std::string Backend::export_device(const torch::Tensor& /*region*/) {
  throw InputError("the " + name() + " backend shares device memory as shared segments, not handles");
}

torch::Tensor Backend::import_device(const std::string& /*handle*/, Bytes /*bytes*/) {
  throw InputError("the " + name() + " backend shares device memory as shared segments, not handles");
}

torch::Tensor Backend::register_host(void* data, Bytes bytes, bool /*pin*/) {
  return torch::from_blob(data, {static_cast<std::int64_t>(bytes)}, torch::dtype(torch::kUInt8));
}

Bytes Backend::device_free_memory() const { return std::numeric_limits<Bytes>::max(); }

torch::Tensor Backend::allocate_managed(const torch::Tensor& /*contents*/) {
  throw InputError("the " + name() + " backend has no managed (unified) memory");
}

void Backend::evict_to_host(const torch::Tensor& /*managed*/) {
  throw InputError("the " + name() + " backend has no managed (unified) memory");
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "host") return make_host_backend();
  if (name == "cuda") {
#if PSW_WITH_CUDA
    return make_cuda_backend();
#else
    throw InputError(
        "this psw was built without CUDA (LibTorch without CUDA support); rebuild against a CUDA "
        "LibTorch: cmake -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')");
#endif
  }
  throw InputError("unknown backend '" + name + "': expected host or cuda");
}

}  // namespace psw::exec
