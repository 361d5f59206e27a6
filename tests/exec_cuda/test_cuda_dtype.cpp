// The zoo in bf16 and fp16 on the CUDA backend (label gpu): every model's
// output in each 16-bit dtype against the fp32 model of the same seed on the same GPU, within
// the tolerance of tests/exec/exec_test_support.hpp (dtype_tolerance), and the switched output
// equal to a resident run in that dtype after the region is poisoned. fp16 is tested here and
// not on the host: LibTorch 1.13's CPU kernels lack Half for the zoo's layers (see
// tests/exec/test_zoo_dtype.cpp).
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <tuple>

#include "../exec/exec_test_support.hpp"
#include "psw/common/planner.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/pipeline.hpp"

namespace psw::exec {
namespace {

using testing_support::dtype_tolerance;
using testing_support::plan_for;
using testing_support::relative_error;
using testing_support::relative_l2;

using DtypeCase = std::tuple<std::string, std::string>;  // model, dtype

class CudaDtype : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(CudaDtype, OutputWithinToleranceOfFp32AndSwitchedEqualsResident) {
  const auto& [name, dtype_name] = GetParam();
  const torch::ScalarType dtype = parse_zoo_dtype(dtype_name);
  auto backend = make_backend("cuda");
  auto reference = make_model(name, 21);
  auto model = make_model(name, 21, dtype);
  reference->to(backend->device());
  model->to(backend->device());
  const torch::Tensor x32 = reference->example_input(8, 4).to(backend->device());
  const torch::Tensor x = model->example_input(8, 4).to(backend->device());
  EXPECT_EQ(x.scalar_type(), name == "bert_base" ? torch::kInt64 : dtype);
  const torch::Tensor y32 = reference->forward(x32);
  const torch::Tensor y = model->forward(x);
  backend->synchronize();
  EXPECT_EQ(y.scalar_type(), dtype);
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  const double error = relative_l2(y, y32);
  std::cout << name << " " << dtype_name << " on " << backend->device_description() << ": relative L2 error "
            << error << " (bound " << dtype_tolerance(dtype_name) << ")\n";
  EXPECT_LT(error, dtype_tolerance(dtype_name));
  EXPECT_GT(error, 0.0);  // computed in the low precision

  auto engine_owned = make_private_pipeline(*backend, *model, plan_for(name, Strategy::Optimal, dtype_name));
  PipelineEngine& engine = *engine_owned->engine;
  engine.switch_in_and_run(x);
  const torch::Tensor resident = engine.run_resident(x).clone();
  for (int repetition = 0; repetition < 2; ++repetition) {
    engine.poison_device_parameters(static_cast<std::uint8_t>(0x5A + repetition));
    const torch::Tensor out = engine.switch_in_and_run(x);
    backend->synchronize();
    EXPECT_EQ(out.scalar_type(), dtype);
    EXPECT_LT(relative_error(out, resident), 1e-5) << name << " repetition " << repetition;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaDtype,
                         ::testing::Combine(::testing::Values("resnet152", "inception_v3", "bert_base"),
                                            ::testing::Values("bf16", "fp16")),
                         [](const auto& p) { return std::get<0>(p.param) + "_" + std::get<1>(p.param); });

}  // namespace
}  // namespace psw::exec
