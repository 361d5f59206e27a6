// The zoo in bf16 and fp16: the dtype names, the conversion of the seeded
// fp32 model, and each model's bf16 output against fp32's within dtype_tolerance_on_cpu
// (exec_test_support.hpp). fp16 outputs are tested on the GPU only
// (tests/exec_cuda/test_cuda_dtype.cpp): LibTorch 1.13's CPU kernels lack Half for the zoo's
// convolutions ("slow_conv2d_cpu" not implemented for 'Half') and LayerNorm
// ("LayerNormKernelImpl"), so here fp16 is tested up to the forward (the conversion, the
// inputs).

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "exec_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/model_zoo.hpp"

#include <torch/torch.h>

namespace psw::exec {
namespace {

using testing_support::analytic_profile;
using testing_support::dtype_tolerance_on_cpu;
using testing_support::relative_l2;

TEST(ZooDtype, NamesParseAndRoundTrip) {
  EXPECT_EQ(zoo_dtype_names(), (std::vector<std::string>{"fp32", "bf16", "fp16"}));
  EXPECT_EQ(parse_zoo_dtype("fp32"), torch::kFloat32);
  EXPECT_EQ(parse_zoo_dtype("bf16"), torch::kBFloat16);
  EXPECT_EQ(parse_zoo_dtype("fp16"), torch::kFloat16);
  for (const std::string& name : zoo_dtype_names()) EXPECT_EQ(zoo_dtype_name(parse_zoo_dtype(name)), name);
  EXPECT_THROW(zoo_dtype_name(torch::kFloat64), Error);
  EXPECT_EQ(make_model("bert_base")->dtype(), torch::kFloat32);  // the default
}

TEST(ZooDtype, UnknownNamesAreRefusedNamingTheValueAndTheChoices) {
  for (const std::string bad : {"float16", "FP16", "", "fp64", "int8"}) {
    try {
      parse_zoo_dtype(bad);
      ADD_FAILURE() << "no InputError for '" << bad << "'";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'" + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("fp32, bf16, fp16"), std::string::npos) << what;
    }
  }
  EXPECT_THROW(make_model("bert_base", 0, torch::kFloat64), InputError);
  EXPECT_THROW(make_model("bert_base", 0, torch::kInt32), InputError);
}

// The same cheap inputs as test_model_zoo.cpp: 64 x 64 images (ResNet), 75 x 75 (Inception's
// minimum), 8 tokens (BERT); full-size forwards take seconds on the CI's 2 cores.
torch::Tensor small_input(const ZooModel& model, int batch, std::uint64_t seed) {
  const torch::Tensor x = model.example_input(batch, seed);
  if (model.name() == "bert_base") return x.narrow(1, 0, 8);
  const std::int64_t size = model.name() == "resnet152" ? 64 : 75;
  return x.narrow(2, 0, size).narrow(3, 0, size).contiguous();
}

using DtypeCase = std::tuple<std::string, std::string>;  // model, dtype
std::string case_name(const ::testing::TestParamInfo<DtypeCase>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param);
}

class ZooDtypeConversion : public ::testing::TestWithParam<DtypeCase> {};

// Every floating-point tensor is the fp32 model's value rounded to the dtype, in the layers'
// tensors (which share their TensorImpl with the modules: the forward test below computes
// from them); BatchNorm's int64 counts stay; the layers' bytes are the dtype's profile's.
TEST_P(ZooDtypeConversion, TheSeededFp32ModelRounded) {
  const auto& [name, dtype_name] = GetParam();
  const torch::ScalarType dtype = parse_zoo_dtype(dtype_name);
  auto reference = make_model(name, 7);
  auto model = make_model(name, 7, dtype);
  EXPECT_EQ(model->dtype(), dtype);
  const ModelProfile profile = analytic_profile(name, dtype_name);
  std::vector<ZooLayer>& layers = model->layers();
  ASSERT_EQ(layers.size(), profile.layers.size());
  ASSERT_EQ(layers.size(), reference->layers().size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const ZooLayer& r = reference->layers()[i];
    EXPECT_EQ(layers[i].bytes(), profile.layers[i].param_bytes) << layers[i].name;
    for (std::size_t k = 0; k < layers[i].tensors.size(); ++k) {
      const torch::Tensor& t = layers[i].tensors[k];
      SCOPED_TRACE(layers[i].name + "." + layers[i].tensor_names[k]);
      EXPECT_EQ(t.requires_grad(), r.tensors[k].requires_grad());
      if (r.tensors[k].is_floating_point()) {
        ASSERT_EQ(t.scalar_type(), dtype);
        EXPECT_TRUE(torch::equal(t, r.tensors[k].to(dtype)));
      } else {
        EXPECT_EQ(t.scalar_type(), torch::kInt64);
        EXPECT_TRUE(torch::equal(t, r.tensors[k]));
      }
    }
  }
  // Images in the dtype (the fp32 ones rounded), token ids int64; an fp32 image is refused.
  const torch::Tensor x32 = reference->example_input(1, 3);
  const torch::Tensor x = model->example_input(1, 3);
  if (name == "bert_base") {
    EXPECT_EQ(x.scalar_type(), torch::kInt64);
    EXPECT_TRUE(torch::equal(x, x32));
  } else {
    EXPECT_EQ(x.scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(x, x32.to(dtype)));
    EXPECT_THROW(model->forward(x32), InputError);
    EXPECT_THROW(reference->forward(x), InputError);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooDtypeConversion,
                         ::testing::Combine(::testing::Values("resnet152", "inception_v3", "bert_base"),
                                            ::testing::Values("bf16", "fp16")),
                         case_name);

class ZooDtypeOutput : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(ZooDtypeOutput, WithinToleranceOfTheFp32Output) {
  const auto& [name, dtype_name] = GetParam();
  const torch::ScalarType dtype = parse_zoo_dtype(dtype_name);
  auto reference = make_model(name, 7);
  auto model = make_model(name, 7, dtype);
  const torch::Tensor y32 = reference->forward(small_input(*reference, 1, 3));
  const torch::Tensor y = model->forward(small_input(*model, 1, 3));
  EXPECT_EQ(y.scalar_type(), dtype);  // computed in the dtype, not only stored in it
  EXPECT_EQ(y.sizes(), y32.sizes());
  ASSERT_TRUE(torch::isfinite(y).all().item<bool>());
  const double error = relative_l2(y, y32);
  RecordProperty("relative_l2", std::to_string(error));
  EXPECT_LT(error, dtype_tolerance_on_cpu(dtype_name)) << name << " " << dtype_name;
  EXPECT_GT(error, 0.0);  // really the low precision
}

// bf16 only: see the top of the file for fp16.
INSTANTIATE_TEST_SUITE_P(Zoo, ZooDtypeOutput,
                         ::testing::Combine(::testing::Values("resnet152", "inception_v3", "bert_base"),
                                            ::testing::Values("bf16")),
                         case_name);

}  // namespace
}  // namespace psw::exec
