// psw load --shared-memory (Note [Shared memory senders] in load_generator.hpp) against the fake
// service (fake_inference_service.hpp): every request, each sender's warm-up too, reaches the service
// with its input borrowed from the client's shared memory and is answered, open loop and closed;
// the senders keep their regions until the last answer; raw inputs borrow nothing; the summary
// says which; a server that does not offer the extension (TCP) fails the run before the clock
// starts, naming the option; and psw validate's check that a serving profile was measured with
// the run's kind of inputs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "fake_service_fixture.hpp"
#include "grpc_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/client/load_generator.hpp"

namespace psw::runtime {
namespace {

namespace fs = std::filesystem;
using namespace grpc_test_support;

class LoadSharedMemoryTest : public testing::FakeServiceOnSocket {
 protected:
  // `count` requests of `model` (batch 2), one every 20 ms.
  static ExperimentConfig periodic(const std::string& model, std::int64_t count) {
    ExperimentConfig config = one_model("periodic-" + model, model);
    config.workload.kind = WorkloadKind::Periodic;
    config.workload.interval = milliseconds(20);
    config.workload.count = count;
    config.workload.models = {0};
    return config;
  }

  LoadOptions options(const std::string& target, InputTransport inputs) const {
    LoadOptions o;
    o.target = target;
    o.timeout_ms = 10'000;
    o.senders = 3;
    o.inputs = inputs;
    return o;
  }
};

TEST_F(LoadSharedMemoryTest, EveryRequestOfTheOpenLoopBorrowsItsInputAndIsAnswered) {
  LoadOptions shared = options(server_->target(), InputTransport::SharedMemory);
  shared.warmup = 1;
  const LoadReport report = run_load(periodic("double", 6), shared);
  ASSERT_EQ(report.requests.size(), 6u);
  for (const auto& r : report.requests) EXPECT_TRUE(r.ok) << r.error;
  // The warm-up: one request per sender (and model), through the sender's own regions.
  EXPECT_EQ(service_.borrowed_inputs(), 6 + 3) << "the six requests and the warm-up's, all from shared memory";
  EXPECT_EQ(service_.requests_received("double"), 6 + 3);
  EXPECT_EQ(report.summary.inputs, "shared-memory");
  // Note [Load summary]: summary.json reads back to the same summary.
  EXPECT_EQ(load_summary_from_json(nlohmann::json::parse(to_json(report.summary).dump()), "summary.json"),
            report.summary);

  const LoadReport raw = run_load(periodic("double", 4), options(server_->target(), InputTransport::Raw));
  for (const auto& r : raw.requests) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(service_.requests_received("double"), 6 + 3 + 4);
  EXPECT_EQ(service_.borrowed_inputs(), 6 + 3) << "raw inputs come in the messages";
  EXPECT_EQ(raw.summary.inputs, "raw");
}

// Note [Shared memory senders]: a sender with nothing left to send keeps its regions until the
// last answer is in, so that the server unmaps none while a request is in flight.
TEST_F(LoadSharedMemoryTest, TheSendersKeepTheirRegionsUntilTheLastAnswer) {
  Client watcher(server_->target());
  LoadOptions shared = options(server_->target(), InputTransport::SharedMemory);
  std::size_t regions_at_last_answer = 0;
  shared.at_last_answer = [&] { regions_at_last_answer = watcher.system_shared_memory_status().size(); };
  const LoadReport report = run_load(periodic("double", 6), shared);
  for (const auto& r : report.requests) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(regions_at_last_answer, 3u) << "one region per sender (three) and model (one)";
  EXPECT_TRUE(watcher.system_shared_memory_status().empty()) << "every region given back after the run";
}

TEST_F(LoadSharedMemoryTest, TheClosedLoopBorrowsToo) {
  ExperimentConfig config = periodic("slow", 1);
  config.workload.kind = WorkloadKind::Cycles;
  config.workload.cycle = milliseconds(200);
  config.workload.rounds = 1;
  config.workload.cycle_model = 0;
  const LoadReport report = run_load(config, options(server_->target(), InputTransport::SharedMemory));
  ASSERT_FALSE(report.requests.empty());
  for (const auto& r : report.requests) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(service_.borrowed_inputs(), static_cast<std::int64_t>(report.requests.size()));
}

TEST_F(LoadSharedMemoryTest, AServerWithoutTheExtensionFailsTheRunBeforeAnyRequest) {
  // Over TCP the extension answers UNIMPLEMENTED (grpc_server.hpp).
  testing::FakeInferenceService tcp_service;
  GrpcFrontEnd tcp(tcp_service, Endpoint{"", "127.0.0.1:0"}, kMaxMessage);
  try {
    run_load(periodic("double", 3), options(tcp.target(), InputTransport::SharedMemory));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--shared-memory: the inputs of 'double' could not be placed in shared memory"),
              std::string::npos)
        << what;
  }
  EXPECT_EQ(tcp_service.requests_received("double"), 0);
}

TEST(LoadInputs, ValidationRefusesAServingProfileOfTheOtherInputs) {
  ExperimentConfig config;
  config.source = "exp.yaml";
  EXPECT_NO_THROW(check_serving_inputs(config, InputTransport::SharedMemory, "this run")) << "no profile: no check";
  config.serving = ServingProfile{};
  config.serving->name = "raw-path";
  EXPECT_NO_THROW(check_serving_inputs(config, InputTransport::Raw, "this run"));
  try {
    check_serving_inputs(config, InputTransport::SharedMemory, "this run");
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exp.yaml: key 'serving': the serving profile 'raw-path' was measured with inputs raw, but "
                        "this run sends them shared-memory"),
              std::string::npos)
        << what;
  }
}

TEST(LoadInputs, ARecordedRunSaysHowItSentItsInputs) {
  auto with_inputs = [](std::optional<std::string> inputs) {
    LoadSummary s;
    s.inputs = std::move(inputs);
    return s;
  };
  EXPECT_EQ(recorded_inputs(with_inputs(std::nullopt), "s.json"), InputTransport::Raw) << "runs before the key: raw";
  EXPECT_EQ(recorded_inputs(with_inputs("shared-memory"), "s.json"), InputTransport::SharedMemory);
  EXPECT_THROW(recorded_inputs(with_inputs("shm"), "s.json"), InputError);
  // Note [Load summary]: a value of another type is refused by the reader, naming the key.
  nlohmann::json j = to_json(with_inputs("raw"));
  j["inputs"] = 1;
  try {
    (void)load_summary_from_json(j, "s.json");
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: 'inputs' is 1"), std::string::npos) << e.what();
  }

  char pattern[] = "/tmp/psw-load-inputs-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  const fs::path csv = dir / "requests.csv";
  std::ofstream(csv) << "id\n";
  EXPECT_EQ(inputs_of_load(csv, "raw"), InputTransport::Raw) << "no summary beside it: as given";
  EXPECT_THROW(inputs_of_load(csv, ""), InputError) << "no summary and nothing given";
  std::ofstream(dir / "summary.json") << to_json(with_inputs("shared-memory")).dump();
  EXPECT_EQ(inputs_of_load(csv, ""), InputTransport::SharedMemory);
  EXPECT_EQ(inputs_of_load(csv, "shared-memory"), InputTransport::SharedMemory);
  try {
    inputs_of_load(csv, "raw");
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("records the load's as shared-memory"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace psw::runtime
