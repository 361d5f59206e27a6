// The logic of `psw client` that needs no server: input tensors from metadata, value decoding,
// half-precision conversions, latency summaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "psw/common/error.hpp"
#include "psw/runtime/client/client_tools.hpp"
#include "psw/runtime/ipc/tensor_bytes.hpp"

namespace psw::runtime {
namespace {

TEST(GrpcTensorBytes, SizesAndOverflow) {
  EXPECT_EQ(datatype_element_bytes("FP32"), 4);
  EXPECT_EQ(datatype_element_bytes("BF16"), 2);
  EXPECT_EQ(datatype_element_bytes("BOOL"), 1);
  EXPECT_FALSE(datatype_element_bytes("BYTES"));
  EXPECT_FALSE(datatype_element_bytes("fp32"));
  EXPECT_EQ(tensor_byte_count("x", "INT64", {2, 3}), 48);
  EXPECT_EQ(tensor_byte_count("x", "FP32", {}), 4);  // a scalar
  EXPECT_EQ(tensor_byte_count("x", "FP32", {0, 5}), 0);
  EXPECT_THROW(tensor_byte_count("x", "FP32", {-1, 4}), ServiceError);
  EXPECT_THROW(tensor_byte_count("x", "FP32", {std::int64_t{1} << 31, std::int64_t{1} << 31}), ServiceError);
  EXPECT_FALSE(element_count({std::numeric_limits<std::int64_t>::max(), 2}));
}

TEST(GrpcClientTools, RandomTensorsAreSeededAndInRange) {
  const TensorSpec spec{"x", "FP32", {-1, 8}};
  const TensorData a = random_tensor(spec, 3, 42);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{3, 8}));
  EXPECT_EQ(a.bytes.size(), 3u * 8 * 4);
  EXPECT_EQ(a.bytes, random_tensor(spec, 3, 42).bytes);
  EXPECT_NE(a.bytes, random_tensor(spec, 3, 43).bytes);
  for (const double v : leading_values(a, 24)) {
    EXPECT_GE(v, -1.0);
    EXPECT_LT(v, 1.0);
  }
  for (const double v : leading_values(random_tensor({"ids", "INT64", {-1, 16}}, 2, 1), 32)) {
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 512);  // below llama-tiny's vocabulary, the zoo's smallest
    EXPECT_EQ(v, std::floor(v));
  }
  for (const char* type : {"FP16", "BF16"}) {
    const TensorData half = random_tensor({"h", type, {-1, 4}}, 2, 7);
    EXPECT_EQ(half.bytes.size(), 16u);
    for (const double v : leading_values(half, 8)) {
      EXPECT_GE(v, -1.0) << type;
      EXPECT_LE(v, 1.0) << type;  // rounding to 16 bits may reach 1
    }
  }
  EXPECT_THROW(random_tensor({"x", "FP32", {-1, -1}}, 1, 0), InputError);
  EXPECT_THROW(random_tensor({"x", "FP32", {-1, 4}}, 0, 0), InputError);
  EXPECT_THROW(random_tensor({"x", "BYTES", {-1}}, 1, 0), InputError);
  EXPECT_EQ(random_tensor({"x", "FP32", {8, 4}}, 1, 0).shape, (std::vector<std::int64_t>{8, 4}));
  EXPECT_THROW(random_tensor({"x", "FP32", {8, 4}}, 2, 0), InputError);
}

TEST(GrpcClientTools, TensorFromBytesInfersTheBatch) {
  const TensorSpec spec{"x", "FP32", {-1, 3, 2}};
  const TensorData t = tensor_from_bytes(spec, std::string(5 * 3 * 2 * 4, '\0'), "in.bin");
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{5, 3, 2}));
  EXPECT_THROW(tensor_from_bytes(spec, std::string(25, '\0'), "in.bin"), InputError);  // not whole floats
  EXPECT_THROW(tensor_from_bytes(spec, std::string(4 * 7, '\0'), "in.bin"), InputError);  // not whole items
  EXPECT_THROW(tensor_from_bytes(spec, "", "in.bin"), InputError);
  EXPECT_EQ(tensor_from_bytes({"x", "INT64", {2, 2}}, std::string(32, '\0'), "f").shape,
            (std::vector<std::int64_t>{2, 2}));
  EXPECT_THROW(tensor_from_bytes({"x", "INT64", {2, 2}}, std::string(64, '\0'), "f"), InputError);
}

TEST(GrpcClientTools, HalfPrecisionConversions) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(1e6f), 0x7C00);
  EXPECT_EQ(float_to_fp16(0x1.0p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16(1.0f + 0x1.0p-11f), 0x3C00);  // a tie rounds to even
  EXPECT_EQ(fp16_to_float(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fp16_to_float(0x0001), 0x1.0p-24f);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::nanf("")))));
  for (float v = -1.0f; v < 1.0f; v += 0.0137f) {
    EXPECT_NEAR(fp16_to_float(float_to_fp16(v)), v, 1e-3) << v;
    EXPECT_NEAR(bf16_to_float(float_to_bf16(v)), v, 1e-2) << v;
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_float(0xC000), -2.0f);
}

TEST(GrpcClientTools, ExactLatencySummary) {
  EXPECT_EQ(summarize_latencies({}).count, 0u);
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  const ExactLatencySummary s = summarize_latencies(samples);
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.min_ms, 1);
  EXPECT_EQ(s.max_ms, 100);
  EXPECT_EQ(s.median_ms, 50.5);
  EXPECT_EQ(s.p99_ms, 99);
  EXPECT_EQ(summarize_latencies({3.0}).p99_ms, 3.0);
}

}  // namespace
}  // namespace psw::runtime
