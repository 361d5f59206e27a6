#pragma once
// What the gRPC front end's tests share: float tensors as raw bytes, and the code a call fails with.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime::grpc_test_support {

// The front ends under test take messages up to 1 MiB.
inline constexpr std::int64_t kMaxMessage = std::int64_t{1} << 20;

inline std::string floats_to_bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The ServiceError code a call fails with; fails the test when it does not throw one.
template <typename Call>
ServiceError::Code error_code_of(Call&& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const ServiceError& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "the call did not fail";
  return ServiceError::Code::Internal;
}

}  // namespace psw::runtime::grpc_test_support
