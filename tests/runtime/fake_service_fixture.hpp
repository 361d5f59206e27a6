#pragma once
// A test fixture: the fake service (fake_inference_service.hpp) behind a gRPC front end on a
// Unix socket in a fresh temporary directory (so the system shared memory extension is offered),
// its "slow" model taking 40 ms a request; what psw load's tests drive.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "fake_inference_service.hpp"
#include "grpc_test_support.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/runtime/server/grpc_server.hpp"

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

  // A workload config of one model of the fake (`name`, `name`.yaml), batch 2; the caller sets
  // the workload.
  static ExperimentConfig one_model(const std::string& name, const std::string& model) {
    ExperimentConfig config;
    config.name = name;
    config.source = name + ".yaml";
    ModelProfile profile;
    profile.name = model;
    profile.batch = 2;
    config.models.push_back(profile);
    return config;
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
