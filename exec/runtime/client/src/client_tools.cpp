#include "psw/runtime/client/client_tools.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "psw/common/error.hpp"
#include "psw/runtime/ipc/tensor_bytes.hpp"

namespace psw::runtime {

// Raw contents are little-endian; copying elements with memcpy is only right on such a host.
static_assert(std::endian::native == std::endian::little, "raw tensor contents assume a little-endian host");

namespace {

std::int64_t element_bytes_or_throw(const std::string& what, const std::string& datatype) {
  const auto bytes = datatype_element_bytes(datatype);
  if (!bytes) throw InputError(what + ": datatype '" + datatype + "' has no fixed element size");
  return *bytes;
}

template <typename T>
void put(std::string& bytes, std::size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

template <typename T>
T get(const std::string& bytes, std::size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

// A uniform double in [0, 1) from the top 53 bits: std::uniform_real_distribution's algorithm
// differs between standard libraries, and the same seed must give the same tensor everywhere.
double unit_uniform(std::mt19937_64& random) {
  return static_cast<double>(random() >> 11) * 0x1.0p-53;
}

}  // namespace

std::vector<std::int64_t> concrete_shape(const TensorSpec& spec, std::int64_t batch) {
  if (batch < 1) throw InputError("the batch must be at least 1, not " + std::to_string(batch));
  std::vector<std::int64_t> shape = spec.shape;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] >= 0) continue;
    if (i != 0) {
      throw InputError("input '" + spec.name + "' has a variable dimension " + std::to_string(i) +
                       " besides the batch; its size cannot be chosen here: pass the tensor as a file");
    }
    shape[i] = batch;
  }
  if (!spec.shape.empty() && spec.shape[0] >= 0 && spec.shape[0] != batch && batch != 1) {
    throw InputError("input '" + spec.name + "' has a fixed leading dimension " + std::to_string(spec.shape[0]) +
                     "; a batch of " + std::to_string(batch) + " cannot be chosen");
  }
  return shape;
}

// Integer inputs are token ids for the zoo's models: below the smallest vocabulary (llama-tiny's
// 512), so that a generated request is one every served model accepts.
constexpr std::uint64_t kRandomIdBound = 512;

TensorData random_tensor(const TensorSpec& spec, std::int64_t batch, std::uint64_t seed) {
  const std::string what = "input '" + spec.name + "'";
  element_bytes_or_throw(what, spec.datatype);
  TensorData tensor{spec.name, spec.datatype, concrete_shape(spec, batch), {}};
  const std::int64_t byte_count = [&] {
    try {
      return tensor_byte_count(what, spec.datatype, tensor.shape);
    } catch (const ServiceError& e) {
      throw InputError(e.what());
    }
  }();
  tensor.bytes.assign(static_cast<std::size_t>(byte_count), '\0');
  const auto count = static_cast<std::size_t>(byte_count / *datatype_element_bytes(spec.datatype));
  std::mt19937_64 random(seed);
  const std::string& type = spec.datatype;
  auto signed_unit = [&] { return 2.0 * unit_uniform(random) - 1.0; };
  auto below = [&](std::uint64_t bound) { return random() % bound; };
  for (std::size_t i = 0; i < count; ++i) {
    if (type == "FP32") put(tensor.bytes, i, static_cast<float>(signed_unit()));
    else if (type == "FP64") put(tensor.bytes, i, signed_unit());
    else if (type == "FP16") put(tensor.bytes, i, float_to_fp16(static_cast<float>(signed_unit())));
    else if (type == "BF16") put(tensor.bytes, i, float_to_bf16(static_cast<float>(signed_unit())));
    else if (type == "INT64") put(tensor.bytes, i, static_cast<std::int64_t>(below(kRandomIdBound)));
    else if (type == "INT32") put(tensor.bytes, i, static_cast<std::int32_t>(below(kRandomIdBound)));
    else if (type == "INT16") put(tensor.bytes, i, static_cast<std::int16_t>(below(kRandomIdBound)));
    else if (type == "INT8") put(tensor.bytes, i, static_cast<std::int8_t>(below(128)));
    else if (type == "UINT64") put(tensor.bytes, i, static_cast<std::uint64_t>(below(kRandomIdBound)));
    else if (type == "UINT32") put(tensor.bytes, i, static_cast<std::uint32_t>(below(kRandomIdBound)));
    else if (type == "UINT16") put(tensor.bytes, i, static_cast<std::uint16_t>(below(kRandomIdBound)));
    else if (type == "UINT8") put(tensor.bytes, i, static_cast<std::uint8_t>(below(256)));
    else if (type == "BOOL") put(tensor.bytes, i, static_cast<std::uint8_t>(below(2)));
  }
  return tensor;
}

TensorData tensor_from_bytes(const TensorSpec& spec, std::string bytes, const std::string& source) {
  const std::string what = "input '" + spec.name + "'";
  const std::int64_t element_bytes = element_bytes_or_throw(what, spec.datatype);
  const auto size = static_cast<std::int64_t>(bytes.size());
  if (size % element_bytes != 0) {
    throw InputError(source + ": " + std::to_string(size) + " bytes is not a whole number of " +
                     spec.datatype + " elements (" + std::to_string(element_bytes) + " bytes each)");
  }
  // Elements of one batch item: the product of the fixed dimensions after the first.
  std::int64_t item_elements = 1;
  for (std::size_t i = 1; i < spec.shape.size(); ++i) {
    if (spec.shape[i] < 0) {
      throw InputError(what + " has a variable dimension " + std::to_string(i) +
                       " besides the batch; the batch cannot be inferred from a file's size");
    }
    item_elements *= spec.shape[i];
  }
  const std::int64_t elements = size / element_bytes;
  std::int64_t batch = 1;
  if (spec.shape.empty()) {
    if (elements != 1) {
      throw InputError(source + ": " + std::to_string(elements) + " elements for the scalar " + what);
    }
  } else if (item_elements == 0 || elements % item_elements != 0 || elements / item_elements < 1 ||
             (spec.shape[0] >= 0 && elements / item_elements != spec.shape[0])) {
    throw InputError(source + ": " + std::to_string(size) + " bytes do not fill whole items of " + what +
                     " (" + std::to_string(item_elements * element_bytes) + " bytes per item" +
                     (spec.shape[0] >= 0 ? ", " + std::to_string(spec.shape[0]) + " items" : "") + ")");
  } else {
    batch = elements / item_elements;
  }
  TensorData tensor{spec.name, spec.datatype, spec.shape, std::move(bytes)};
  if (!tensor.shape.empty()) tensor.shape[0] = batch;
  return tensor;
}

std::vector<double> leading_values(const TensorData& tensor, std::size_t count) {
  const auto element_bytes =
      static_cast<std::size_t>(element_bytes_or_throw("output '" + tensor.name + "'", tensor.datatype));
  const std::size_t available = tensor.bytes.size() / element_bytes;
  std::vector<double> values;
  const std::string& type = tensor.datatype;
  for (std::size_t i = 0; i < std::min(count, available); ++i) {
    double value = 0;
    if (type == "FP32") value = get<float>(tensor.bytes, i);
    else if (type == "FP64") value = get<double>(tensor.bytes, i);
    else if (type == "FP16") value = fp16_to_float(get<std::uint16_t>(tensor.bytes, i));
    else if (type == "BF16") value = bf16_to_float(get<std::uint16_t>(tensor.bytes, i));
    else if (type == "INT64") value = static_cast<double>(get<std::int64_t>(tensor.bytes, i));
    else if (type == "INT32") value = get<std::int32_t>(tensor.bytes, i);
    else if (type == "INT16") value = get<std::int16_t>(tensor.bytes, i);
    else if (type == "INT8") value = get<std::int8_t>(tensor.bytes, i);
    else if (type == "UINT64") value = static_cast<double>(get<std::uint64_t>(tensor.bytes, i));
    else if (type == "UINT32") value = get<std::uint32_t>(tensor.bytes, i);
    else if (type == "UINT16") value = get<std::uint16_t>(tensor.bytes, i);
    else value = get<std::uint8_t>(tensor.bytes, i);  // UINT8, BOOL
    values.push_back(value);
  }
  return values;
}

std::uint16_t float_to_bf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // stay a NaN
  const std::uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_fp16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
  const std::uint32_t magnitude = bits & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) return static_cast<std::uint16_t>(sign | 0x7E00);  // NaN
  if (magnitude >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (magnitude < 0x38800000) {
    // A subnormal half (or zero): scale into units of 2^-24 and round to nearest even.
    const float scaled = std::bit_cast<float>(magnitude) * 0x1.0p24f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
  }
  // A normal half: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  const std::uint32_t rebased = magnitude - 0x38000000;
  const std::uint32_t rounded = rebased + 0xFFF + ((rebased >> 13) & 1);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(rounded >> 13));
}

float fp16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1F;
  const std::uint32_t mantissa = bits & 0x3FF;
  float magnitude = 0;
  if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
  } else if (exponent == 0x1F) {
    magnitude = std::bit_cast<float>(0x7F800000u | (mantissa << 13));
  } else {
    magnitude = std::bit_cast<float>(((exponent + 112) << 23) | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
}

std::int64_t median_of(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

ExactLatencySummary summarize_latencies(std::vector<double> latencies_ms) {
  ExactLatencySummary summary;
  if (latencies_ms.empty()) return summary;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const std::size_t n = latencies_ms.size();
  summary.count = n;
  summary.min_ms = latencies_ms.front();
  summary.max_ms = latencies_ms.back();
  summary.median_ms = n % 2 == 1 ? latencies_ms[n / 2] : (latencies_ms[n / 2 - 1] + latencies_ms[n / 2]) / 2;
  const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(n)));
  summary.p99_ms = latencies_ms[std::max<std::size_t>(rank, 1) - 1];
  return summary;
}

}  // namespace psw::runtime
