// run_switch_benchmark's checks of the dtype (the zoo in bf16/fp16): the profile and a plan file
// must be of the model's dtype, refused with one InputError that says which dtype they are of.
#include <gtest/gtest.h>

#include <string>

#include "exec_test_support.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/planner.hpp"
#include "psw/exec/switch_benchmark.hpp"

namespace psw::exec {
namespace {

using testing_support::analytic_profile;

SwitchBenchmarkSpec spec_for(const std::string& model, const std::string& dtype, const std::string& profile_dtype) {
  SwitchBenchmarkSpec spec;
  spec.model = model;
  spec.dtype = dtype;
  spec.profile = analytic_profile(model, profile_dtype);
  spec.profile_origin = profile_dtype + "/" + model + ".yaml";
  spec.hardware = load_hardware_profile(std::string(PSW_SOURCE_DIR) + "/configs/hardware/h200-pcie5.yaml");
  spec.backend = "host";
  spec.repeat = 1;
  spec.warmup = 0;
  spec.batch = 1;
  return spec;
}

std::string refusal(const SwitchBenchmarkSpec& spec) {
  try {
    run_switch_benchmark(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return {};
}

TEST(SwitchBenchmarkDtype, AProfileOfAnotherDtypeIsRefused) {
  const std::string what = refusal(spec_for("bert_base", "bf16", "fp32"));
  EXPECT_NE(what.find("fp32/bert_base.yaml: the profile is for dtype 'fp32', not 'bf16'"), std::string::npos)
      << what;
  const std::string other = refusal(spec_for("bert_base", "fp32", "fp16"));
  EXPECT_NE(other.find("the profile is for dtype 'fp16', not 'fp32'"), std::string::npos) << other;
}

TEST(SwitchBenchmarkDtype, AnUnknownDtypeIsRefusedByName) {
  const std::string what = refusal(spec_for("bert_base", "float16", "fp32"));
  EXPECT_NE(what.find("'float16'"), std::string::npos) << what;
  EXPECT_NE(what.find("fp32, bf16, fp16"), std::string::npos) << what;
}

// A plan file made from the bf16 profile, run on the fp32 model: its layer fingerprint (names
// and bytes, Note [Layer fingerprint]) is the bf16 model's, and the message says so.
TEST(SwitchBenchmarkDtype, APlanMadeForAnotherDtypeIsRefusedNamingIt) {
  SwitchBenchmarkSpec spec = spec_for("bert_base", "fp32", "fp32");
  spec.plan = make_switch_plan(analytic_profile("bert_base", "bf16"), spec.hardware, Task::Inference,
                               Strategy::Optimal, Placement::Copy);
  spec.plan_origin = "p.yaml";
  const std::string what = refusal(spec);
  EXPECT_NE(what.find("p.yaml: the plan was made for bert_base in bf16 or fp16, not in fp32"), std::string::npos)
      << what;
}

// The other way round, and the plan of the model's own dtype runs: a bf16 plan on the bf16
// model (Inception-v3 at batch 1, its cheapest run on the host).
TEST(SwitchBenchmarkDtype, APlanOfTheModelsOwnDtypeRunsAndAnFp32OneIsRefused) {
  SwitchBenchmarkSpec spec = spec_for("inception_v3", "bf16", "bf16");
  spec.plan = make_switch_plan(analytic_profile("inception_v3"), spec.hardware, Task::Inference, Strategy::Optimal,
                               Placement::Copy);
  spec.plan_origin = "fp32.yaml";
  const std::string what = refusal(spec);
  EXPECT_NE(what.find("fp32.yaml: the plan was made for inception_v3 in fp32, not in bf16"), std::string::npos)
      << what;
  spec.plan = make_switch_plan(spec.profile, spec.hardware, Task::Inference, Strategy::Optimal, Placement::Copy);
  const SwitchBenchmarkReport report = run_switch_benchmark(spec);
  EXPECT_EQ(report.plan.fingerprint, spec.plan->fingerprint);
  EXPECT_EQ(report.param_bytes, spec.profile.total_param_bytes());
  EXPECT_GT(report.latency.median_ms, 0.0);
}

}  // namespace
}  // namespace psw::exec
