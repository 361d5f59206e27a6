#pragma once
// A test fixture: the fake service (fake_inference_service.hpp) behind a gRPC front end on a
// Unix socket in a fresh temporary directory (so the system shared memory extension is offered),
// its "slow" model taking 40 ms a request; what psw load's tests drive.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <system_error>

#include "fake_inference_service.hpp"
#include "grpc_test_support.hpp"
#include "psw/runtime/grpc_server.hpp"

namespace psw::runtime::testing {

class FakeServiceOnSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/psw-fake-service-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    service_.slow_delay = std::chrono::milliseconds(40);
    server_ = std::make_unique<GrpcFrontEnd>(service_, Endpoint{(dir_ / "psw.sock").string(), ""},
                                             grpc_test_support::kMaxMessage);
  }

  void TearDown() override {
    server_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::filesystem::path dir_;
  FakeInferenceService service_;
  std::unique_ptr<GrpcFrontEnd> server_;
};

}  // namespace psw::runtime::testing
