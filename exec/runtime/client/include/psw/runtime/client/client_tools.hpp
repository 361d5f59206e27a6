#pragma once
// What `psw client` does besides calling the server: build an input tensor from a model's
// metadata (random values, or a file of raw bytes), decode the first values of an answer, and
// summarise request latencies. Kept here, beside the client, so the command only parses options
// and prints, and tests can check the logic without a process.

#include <cstdint>
#include <string>
#include <vector>

#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

// The concrete shape of `spec` at batch `batch`: a leading -1 becomes `batch`; a fixed leading
// dimension is kept. Throws psw::InputError when another dimension is -1 (its size cannot be
// guessed), when `batch` < 1, or when `batch` is neither 1 (the default) nor the fixed leading
// dimension.
std::vector<std::int64_t> concrete_shape(const TensorSpec& spec, std::int64_t batch);

// A tensor of `spec` at `batch` with seeded uniform values, the same on every platform:
// FP32, FP64, FP16, BF16 in [-1, 1); INT64, INT32, INT16 in [0, 512) (token ids below every zoo
// model's vocabulary); INT8 in [0, 128); UINT8 in [0, 256); UINT16, UINT32, UINT64 in [0, 512);
// BOOL 0 or 1. Throws psw::InputError for a
// datatype without a fixed element size.
TensorData random_tensor(const TensorSpec& spec, std::int64_t batch, std::uint64_t seed);

// A tensor of `spec` holding `bytes` (raw little-endian contents). The leading -1 dimension is
// whatever batch makes the sizes agree; throws psw::InputError when no whole batch does, naming
// `source` (e.g. the file) and the sizes.
TensorData tensor_from_bytes(const TensorSpec& spec, std::string bytes, const std::string& source);

// The first `count` elements of `tensor` as numbers (FP16 and BF16 widened, integers converted);
// fewer when the tensor is smaller. Throws psw::InputError for a datatype without a fixed size.
std::vector<double> leading_values(const TensorData& tensor, std::size_t count);

// IEEE half and bfloat16 conversions (round to nearest even), exact for what they can hold.
std::uint16_t float_to_fp16(float value);
float fp16_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16(float value);
float bf16_to_float(std::uint16_t bits);

// The exact order statistics of a few samples (psw client, bench-serve: tens of requests), where
// summary.json's LatencySummary (psw/common/metrics.hpp) is a histogram's over any number.
struct ExactLatencySummary {
  std::size_t count = 0;
  double min_ms = 0;
  double median_ms = 0;
  double p99_ms = 0;  // nearest rank: the smallest value >= 99 % of the samples
  double max_ms = 0;
};

// Summary of request latencies in milliseconds; all zero for no samples.
ExactLatencySummary summarize_latencies(std::vector<double> latencies_ms);

// The median of integer samples (of two middle ones, their mean rounded down), in integers so
// that a profile's nanoseconds are the samples' own; `values` must not be empty.
std::int64_t median_of(std::vector<std::int64_t> values);

}  // namespace psw::runtime
