// psw load's closed loop (Note [Closed-loop cycles] in load_generator.cpp) against the fake
// service (fake_inference_service.hpp) on a Unix socket: the phases' requests issued one after
// another's answer, the throughput counted as the simulator counts it, the time scale, and a
// server that fails every request ending the run instead of spinning through its phases.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "fake_service_fixture.hpp"
#include "grpc_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/common/experiment_config.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/client/load_generator.hpp"

namespace psw::runtime {
namespace {

using namespace grpc_test_support;

class LoadCyclesTest : public testing::FakeServiceOnSocket {
 protected:
  // Cycles of `cycle` for `model` (the fake's "slow": 40 ms per request), `rounds` times.
  static ExperimentConfig cycles(const std::string& model, Duration cycle, std::int64_t rounds) {
    ExperimentConfig config = one_model("cycles-" + model, model);
    config.workload.kind = WorkloadKind::Cycles;
    config.workload.cycle = cycle;
    config.workload.rounds = rounds;
    config.workload.cycle_model = 0;
    return config;
  }

  LoadOptions options() const {
    LoadOptions o;
    o.target = server_->target();
    o.timeout_ms = 10'000;
    return o;
  }
};

TEST_F(LoadCyclesTest, EachPhaseIssuesTheNextRequestWhenTheAnswerComes) {
  // Phases of 500 ms: several 40 ms requests each, even on a loaded machine.
  const Duration cycle = milliseconds(500);
  const LoadReport report = run_load(cycles("slow", cycle, 2), options());
  std::int64_t in_phase = 0;
  std::size_t seen = 0;
  for (std::int64_t k = 0; k < 2; ++k) {
    const Duration start = cycle * (2 * k + 1), end = cycle * (2 * k + 2);
    std::vector<const LoadRequestRecord*> phase;
    for (const auto& r : report.requests) {
      if (r.scheduled >= start && r.scheduled < end) phase.push_back(&r);
    }
    ASSERT_FALSE(phase.empty()) << "phase " << k;
    seen += phase.size();
    EXPECT_EQ(phase.front()->scheduled, start) << "the phase's first request is due at its start";
    for (std::size_t i = 0; i < phase.size(); ++i) {
      const LoadRequestRecord& r = *phase[i];
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.model, 0u);
      EXPECT_GE(r.send_start, r.scheduled);
      EXPECT_GE(r.finish - r.send_start, milliseconds(40));  // the fake's delay
      if (i > 0) {
        EXPECT_EQ(r.scheduled, phase[i - 1]->finish) << "issued when the previous answer came";
      }
      if (i + 1 < phase.size()) {
        EXPECT_LT(r.finish, end);
      } else {
        EXPECT_GE(r.finish, end) << "the phase's last answer comes at or after its end";
      }
      if (r.finish <= end) ++in_phase;
    }
  }
  EXPECT_EQ(seen, report.requests.size()) << "every request belongs to an inference phase";
  EXPECT_GE(in_phase, 2);
  EXPECT_DOUBLE_EQ(report.summary.throughput_rps,
                   static_cast<double>(in_phase) / (cycle * 2).seconds());
  EXPECT_EQ(report.summary.senders, 1);
  EXPECT_EQ(report.summary.connections, 1);
  EXPECT_EQ(report.summary.generated, static_cast<std::int64_t>(report.requests.size()));
}

TEST_F(LoadCyclesTest, TheTimeScaleMultipliesThePhases) {
  LoadOptions half = options();
  half.time_scale = 0.5;
  const LoadReport report = run_load(cycles("slow", milliseconds(300), 1), half);
  ASSERT_FALSE(report.requests.empty());
  EXPECT_EQ(report.requests.front().scheduled, milliseconds(150));
  EXPECT_GE(report.requests.back().finish, milliseconds(300));
  EXPECT_LT(report.requests.back().scheduled, milliseconds(300));
}

TEST_F(LoadCyclesTest, AServerFailingEveryRequestEndsTheRun) {
  try {
    // A phase of 3 s: far longer than 100 failures take.
    run_load(cycles("unavailable", milliseconds(3'000), 1), options());
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("failed 100 requests of the cycles workload in a row"), std::string::npos) << what;
    EXPECT_NE(what.find("worker 0 crashed"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace psw::runtime
