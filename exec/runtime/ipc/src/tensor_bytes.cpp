#include "psw/runtime/ipc/tensor_bytes.hpp"

#include <array>
#include <limits>
#include <string>
#include <utility>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

std::optional<std::int64_t> datatype_element_bytes(std::string_view datatype) {
  static constexpr std::array<std::pair<std::string_view, std::int64_t>, 13> sizes{{
      {"BOOL", 1}, {"UINT8", 1}, {"INT8", 1}, {"UINT16", 2}, {"INT16", 2}, {"FP16", 2}, {"BF16", 2},
      {"UINT32", 4}, {"INT32", 4}, {"FP32", 4}, {"UINT64", 8}, {"INT64", 8}, {"FP64", 8},
  }};
  for (const auto& [name, bytes] : sizes) {
    if (name == datatype) return bytes;
  }
  return std::nullopt;
}

std::optional<std::int64_t> element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (const std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim != 0 && count > std::numeric_limits<std::int64_t>::max() / dim) return std::nullopt;
    count *= dim;
  }
  return count;
}

std::int64_t tensor_byte_count(std::string_view what, std::string_view datatype,
                               const std::vector<std::int64_t>& shape) {
  const std::string subject(what);
  const auto element_bytes = datatype_element_bytes(datatype);
  if (!element_bytes) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       subject + ": unsupported datatype '" + std::string(datatype) +
                           "' (expected BOOL, UINT8, INT8, UINT16, INT16, FP16, BF16, UINT32, "
                           "INT32, FP32, UINT64, INT64 or FP64)");
  }
  for (const std::int64_t dim : shape) {
    if (dim < 0) {
      throw ServiceError(ServiceError::Code::InvalidArgument,
                         subject + ": negative dimension " + std::to_string(dim) +
                             " in the shape (a request's shape must be concrete)");
    }
  }
  const auto count = element_count(shape);
  if (!count || *count > std::numeric_limits<std::int64_t>::max() / *element_bytes) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       subject + ": the shape's size overflows 64-bit arithmetic");
  }
  return *count * *element_bytes;
}

}  // namespace psw::runtime
