#include "psw/runtime/ipc/rest_codec.hpp"

#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "psw/runtime/ipc/tensor_bytes.hpp"

namespace psw::runtime {

int http_status_of(ServiceError::Code code) {
  switch (code) {
    case ServiceError::Code::InvalidArgument: return 400;
    case ServiceError::Code::NotFound: return 404;
    case ServiceError::Code::Unavailable: return 503;
    case ServiceError::Code::ResourceExhausted: return 429;
    case ServiceError::Code::DeadlineExceeded: return 504;
    case ServiceError::Code::Internal: return 500;
    case ServiceError::Code::AlreadyExists: return 409;
    case ServiceError::Code::Cancelled: return 499;
    case ServiceError::Code::FailedPrecondition: return 409;
  }
  return 500;
}

// Named, not anonymous: a unity build compiles this file with others whose helpers (invalid,
// named) would meet these.
namespace rest_codec {

[[noreturn]] void invalid(const std::string& message) {
  throw ServiceError(ServiceError::Code::InvalidArgument, message);
}

std::string named(const std::string& name) { return "'" + name + "'"; }

// The elements of a JSON tensor's `data`, flat or nested (row-major either way).
void flatten(const nlohmann::json& data, std::vector<const nlohmann::json*>& out) {
  if (data.is_array()) {
    for (const auto& element : data) flatten(element, out);
  } else {
    out.push_back(&data);
  }
}

template <typename T>
void append_raw(std::string& raw, T value) {
  raw.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Calls f(T{}) with the C++ element type of `datatype` (BOOL bool, INT8 int8_t, ..., FP64
// double) and returns true; false for FP16, BF16 (no C++ type) or a name the protocol lacks.
template <typename F>
bool with_element_type(const std::string& datatype, F&& f) {
  if (datatype == "BOOL") f(bool{});
  else if (datatype == "INT8") f(std::int8_t{});
  else if (datatype == "INT16") f(std::int16_t{});
  else if (datatype == "INT32") f(std::int32_t{});
  else if (datatype == "INT64") f(std::int64_t{});
  else if (datatype == "UINT8") f(std::uint8_t{});
  else if (datatype == "UINT16") f(std::uint16_t{});
  else if (datatype == "UINT32") f(std::uint32_t{});
  else if (datatype == "UINT64") f(std::uint64_t{});
  else if (datatype == "FP32") f(float{});
  else if (datatype == "FP64") f(double{});
  else return false;
  return true;
}

// One JSON value as an element of type T; InvalidArgument for a value of another kind or out of
// T's range (300 in an INT8 tensor is refused, not wrapped).
template <typename T>
void append_element(std::string& raw, const nlohmann::json& v, const std::string& what, const std::string& datatype) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) invalid(what + ": BOOL data must be true or false, got " + v.dump());
    append_raw<std::uint8_t>(raw, v.get<bool>() ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) invalid(what + ": " + datatype + " data must be numbers, got " + v.dump());
    append_raw<T>(raw, static_cast<T>(v.get<double>()));
  } else {
    if (!v.is_number_integer()) invalid(what + ": " + datatype + " data must be integers, got " + v.dump());
    const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<std::uint64_t>()) : std::in_range<T>(v.get<std::int64_t>());
    if (!fits) invalid(what + ": the value " + v.dump() + " does not fit " + datatype);
    append_raw<T>(raw, v.is_number_unsigned() ? static_cast<T>(v.get<std::uint64_t>()) : static_cast<T>(v.get<std::int64_t>()));
  }
}

// A JSON tensor's `data` as the raw bytes the service takes.
std::string json_data_as_raw(const nlohmann::json& data, const std::string& datatype, std::int64_t count,
                             const std::string& what) {
  std::vector<const nlohmann::json*> values;
  flatten(data, values);
  if (static_cast<std::int64_t>(values.size()) != count) {
    invalid(what + ": " + std::to_string(values.size()) + " values in `data`, but its shape holds " + std::to_string(count));
  }
  std::string raw;
  const bool typed = with_element_type(datatype, [&](auto tag) {
    using T = decltype(tag);
    raw.reserve(values.size() * sizeof(T));
    for (const nlohmann::json* v : values) append_element<T>(raw, *v, what, datatype);
  });
  if (!typed) invalid(what + ": " + datatype + " tensors travel as binary data only (parameters.binary_data_size)");
  return raw;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <typename T>
T read_element(std::string_view raw, std::size_t i) {
  T v;
  std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
  return v;
}

// An output's raw bytes as a flat JSON list (FP16 and BF16 as the floats they hold).
nlohmann::json raw_as_json(std::string_view raw, const std::string& datatype) {
  nlohmann::json out = nlohmann::json::array();
  if (datatype == "BOOL") {  // a byte each, nonzero true (not read as a bool: the byte may be 2..255)
    for (const char c : raw) out.push_back(c != 0);
  } else if (datatype == "FP16") {
    for (std::size_t i = 0; i < raw.size() / 2; ++i) out.push_back(half_to_float(read_element<std::uint16_t>(raw, i)));
  } else if (datatype == "BF16") {
    for (std::size_t i = 0; i < raw.size() / 2; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(read_element<std::uint16_t>(raw, i)) << 16;
      float f = 0;
      std::memcpy(&f, &bits, sizeof f);
      out.push_back(f);
    }
  } else if (!with_element_type(datatype, [&](auto tag) {
               using T = decltype(tag);
               for (std::size_t i = 0; i < raw.size() / sizeof(T); ++i) out.push_back(read_element<T>(raw, i));
             })) {
    throw ServiceError(ServiceError::Code::Internal, "the server produced an output of datatype " + datatype);
  }
  return out;
}

const nlohmann::json* member(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// A boolean parameter of a `parameters` object (absent: false).
bool flag(const nlohmann::json& holder, const char* key, const std::string& what) {
  const nlohmann::json* parameters = member(holder, "parameters");
  if (parameters == nullptr) return false;
  if (!parameters->is_object()) invalid(what + ": `parameters` must be an object");
  const nlohmann::json* value = member(*parameters, key);
  if (value == nullptr) return false;
  if (!value->is_boolean()) invalid(what + ": parameter " + named(key) + " must be true or false");
  return value->get<bool>();
}

// A request's body as the JSON object it must be; InvalidArgument saying what it is instead.
nlohmann::json json_object_of(std::string_view body) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    invalid(std::string("the request is not JSON: ") + e.what());
  }
  if (!json.is_object()) invalid("the request must be a JSON object");
  return json;
}

// parse_rest_infer's body, inside this namespace (its helpers' names are its own).
RestInferRequest parse_infer(std::string_view body, const std::optional<std::string>& header_length,
                             const std::string& model, const std::string& version, InputStaging* staging) {
  std::string_view binary;
  if (header_length) {
    const std::string& text = *header_length;
    std::size_t length = 0;
    try {
      std::size_t used = 0;
      const long long value = std::stoll(text, &used);
      if (used != text.size() || value < 0) throw std::invalid_argument(text);
      length = static_cast<std::size_t>(value);
    } catch (const std::exception&) {
      invalid("Inference-Header-Content-Length '" + text + "' is not a byte count");
    }
    if (length > body.size()) {
      invalid("Inference-Header-Content-Length is " + std::to_string(length) + ", but the body has only " +
              std::to_string(body.size()) + " bytes");
    }
    binary = body.substr(length);
    body = body.substr(0, length);
  }
  const nlohmann::json json = json_object_of(body);
  RestInferRequest parsed;
  InferRequest& request = parsed.request;
  request.model = model;
  request.version = version;
  if (const nlohmann::json* id = member(json, "id")) {
    if (!id->is_string()) invalid("`id` must be a string");
    request.id = id->get<std::string>();
  }
  const nlohmann::json* inputs = member(json, "inputs");
  if (inputs == nullptr || !inputs->is_array() || inputs->empty()) invalid("the request has no `inputs` (a non-empty list)");
  std::size_t binary_used = 0;
  for (std::size_t i = 0; i < inputs->size(); ++i) {
    const nlohmann::json& input = (*inputs)[i];
    if (!input.is_object()) invalid("inputs[" + std::to_string(i) + "] must be an object");
    const nlohmann::json* name = member(input, "name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
      invalid("inputs[" + std::to_string(i) + "] has no `name`");
    }
    TensorData tensor;
    tensor.name = name->get<std::string>();
    const std::string what = "input " + named(tensor.name);
    for (const TensorData& earlier : request.inputs) {
      if (earlier.name == tensor.name) invalid(what + " is given twice");
    }
    const nlohmann::json* datatype = member(input, "datatype");
    if (datatype == nullptr || !datatype->is_string()) invalid(what + " has no `datatype`");
    tensor.datatype = datatype->get<std::string>();
    const nlohmann::json* shape = member(input, "shape");
    if (shape == nullptr || !shape->is_array()) invalid(what + " has no `shape` (a list of dimensions)");
    for (const auto& dim : *shape) {
      if (!dim.is_number_integer()) invalid(what + ": `shape` must hold integers, got " + dim.dump());
      tensor.shape.push_back(dim.get<std::int64_t>());
    }
    const std::int64_t bytes = tensor_byte_count(what, tensor.datatype, tensor.shape);
    const nlohmann::json* parameters = member(input, "parameters");
    const nlohmann::json* binary_size = parameters != nullptr && parameters->is_object() ? member(*parameters, "binary_data_size") : nullptr;
    const nlohmann::json* data = member(input, "data");
    if (binary_size != nullptr) {
      if (data != nullptr) invalid(what + " has both `data` and parameters.binary_data_size; give its values one way");
      if (!binary_size->is_number_unsigned()) invalid(what + ": binary_data_size must be a byte count");
      const std::uint64_t size = binary_size->get<std::uint64_t>();
      if (size != static_cast<std::uint64_t>(bytes)) {
        invalid(what + ": binary_data_size is " + std::to_string(size) + ", but " + tensor.datatype + " of its shape needs " +
                std::to_string(bytes));
      }
      if (binary_used + size > binary.size()) {
        invalid(what + ": the binary data after the JSON ends " + std::to_string(binary_used + size - binary.size()) +
                " bytes short (Inference-Header-Content-Length)");
      }
      const std::string_view contents = binary.substr(binary_used, size);
      std::optional<BorrowedBytes> slot = staging != nullptr && size > 0 ? staging->acquire(size) : std::nullopt;
      if (slot) {
        std::memcpy(slot->data, contents.data(), contents.size());
        tensor.borrowed = std::move(*slot);
      } else {
        tensor.bytes.assign(contents);
      }
      binary_used += size;
    } else {
      if (data == nullptr) invalid(what + " has no `data` (nor parameters.binary_data_size)");
      const std::int64_t count = bytes / *datatype_element_bytes(tensor.datatype);
      tensor.bytes = json_data_as_raw(*data, tensor.datatype, count, what);
    }
    request.inputs.push_back(std::move(tensor));
  }
  if (binary_used != binary.size()) {
    invalid(std::to_string(binary.size() - binary_used) + " bytes of binary data after the JSON belong to no input");
  }
  parsed.all_binary = flag(json, "binary_data_output", "the request");
  if (const nlohmann::json* outputs = member(json, "outputs")) {
    if (!outputs->is_array()) invalid("`outputs` must be a list");
    for (const auto& output : *outputs) {
      const nlohmann::json* name = output.is_object() ? member(output, "name") : nullptr;
      if (name == nullptr || !name->is_string()) invalid("every entry of `outputs` needs a `name`");
      const std::string what = "output " + named(name->get<std::string>());
      parsed.outputs.push_back({name->get<std::string>(), parsed.all_binary || flag(output, "binary_data", what)});
    }
  }
  return parsed;
}

GenerateRequest parse_generate(std::string_view body, const std::string& model) {
  const nlohmann::json json = json_object_of(body);
  GenerateRequest request;
  request.model = model;
  for (const auto& [key, value] : json.items()) {
    if (key != "input_ids" && key != "parameters" && key != "id") {
      invalid("unknown key " + named(key) + " (a generate call takes input_ids, parameters and id)");
    }
  }
  if (const nlohmann::json* id = member(json, "id")) {
    if (!id->is_string()) invalid("`id` must be a string");
    request.id = id->get<std::string>();
  }
  const nlohmann::json* ids = member(json, "input_ids");
  if (ids == nullptr || !ids->is_array()) invalid("the request has no `input_ids` (a list of token ids)");
  for (std::size_t i = 0; i < ids->size(); ++i) {
    const nlohmann::json& id = (*ids)[i];
    if (!id.is_number_integer() || (id.is_number_unsigned() && !std::in_range<std::int64_t>(id.get<std::uint64_t>()))) {
      invalid("input_ids[" + std::to_string(i) + "] must be a token id (an integer), got " + id.dump());
    }
    request.input_ids.push_back(id.get<std::int64_t>());
  }
  const nlohmann::json* parameters = member(json, "parameters");
  if (parameters == nullptr || !parameters->is_object()) {
    invalid("the request has no `parameters` with max_tokens (how many tokens to generate)");
  }
  for (const auto& [key, value] : parameters->items()) {
    if (key != "max_tokens") invalid("unknown parameter " + named(key) + " (a generate call takes max_tokens)");
  }
  const nlohmann::json* max_tokens = member(*parameters, "max_tokens");
  if (max_tokens == nullptr) invalid("the request's parameters have no max_tokens (how many tokens to generate)");
  if (!max_tokens->is_number_integer() || !max_tokens->is_number_unsigned() ||
      !std::in_range<std::int64_t>(max_tokens->get<std::uint64_t>()) || max_tokens->get<std::int64_t>() < 1) {
    invalid("max_tokens must be a positive integer, got " + max_tokens->dump());
  }
  request.max_tokens = max_tokens->get<std::int64_t>();
  return request;
}

}  // namespace rest_codec

RestInferRequest parse_rest_infer(std::string_view body, const std::optional<std::string>& header_length,
                                  const std::string& model, const std::string& version, InputStaging* staging) {
  return rest_codec::parse_infer(body, header_length, model, version, staging);
}

RestInferAnswer encode_rest_infer(const RestInferRequest& parsed, const InferResponse& result) {
  using rest_codec::invalid;
  using rest_codec::named;
  using rest_codec::raw_as_json;
  const InferRequest& request = parsed.request;
  const std::string& model = request.model;
  const bool all_binary = parsed.all_binary;
  std::vector<RestOutput> wanted = parsed.outputs;
  if (wanted.empty()) {
    for (const TensorData& output : result.outputs) wanted.push_back({output.name, all_binary});
  }
  nlohmann::json answer = {{"model_name", result.model.empty() ? model : result.model},
                           {"model_version", result.version},
                           {"outputs", nlohmann::json::array()}};
  if (!request.id.empty() || !result.id.empty()) answer["id"] = result.id.empty() ? request.id : result.id;
  nlohmann::json parameters = nlohmann::json::object();
  if (result.server_ns > 0) parameters["psw_server_ns"] = result.server_ns;
  if (result.engine_ns > 0) parameters["psw_engine_ns"] = result.engine_ns;
  if (!parameters.empty()) answer["parameters"] = parameters;
  std::string tail;
  for (const RestOutput& w : wanted) {
    const TensorData* output = nullptr;
    for (const TensorData& produced : result.outputs) {
      if (produced.name == w.name) output = &produced;
    }
    if (output == nullptr) invalid("model " + named(model) + " has no output " + named(w.name));
    const std::string_view bytes = output->contents();
    nlohmann::json entry = {{"name", output->name}, {"datatype", output->datatype}, {"shape", output->shape}};
    if (w.binary) {
      entry["parameters"] = {{"binary_data_size", bytes.size()}};
      tail.append(bytes);
    } else {
      entry["data"] = raw_as_json(bytes, output->datatype);
    }
    answer["outputs"].push_back(std::move(entry));
  }
  RestInferAnswer out;
  out.body = answer.dump();
  if (!tail.empty()) {
    out.header_length = out.body.size();
    out.body += tail;
  }
  return out;
}

GenerateRequest parse_rest_generate(std::string_view body, const std::string& model) {
  return rest_codec::parse_generate(body, model);
}

nlohmann::json rest_generate_answer(const GenerateResponse& r) {
  nlohmann::json answer = {{"model_name", r.model},
                           {"output_ids", r.output_ids},
                           {"prompt_bucket", r.prompt_bucket},
                           {"switched", r.switched},
                           {"ttft_ms", static_cast<double>(r.ttft_ns) * 1e-6},
                           {"tpot_ms", static_cast<double>(r.tpot_ns) * 1e-6},
                           {"worker", r.worker}};
  if (!r.id.empty()) answer["id"] = r.id;
  return answer;
}

nlohmann::json rest_tensor_metadata(const std::vector<TensorSpec>& specs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorSpec& t : specs) out.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  return out;
}

std::string parse_rest_repository_body(std::string_view body, bool load) {
  if (body.empty()) return "";
  const char* takes = load ? "a JSON object {\"parameters\": {\"config\": \"<the model's entry, YAML or JSON>\"}}"
                           : "a JSON object {\"parameters\": {}}";
  const auto refuse = [&](const std::string& why) {
    throw ServiceError(ServiceError::Code::InvalidArgument,
                       std::string("the ") + (load ? "load" : "unload") + " takes no body, or " + takes + ": " + why);
  };
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) refuse("the body is not a JSON object");
  std::string config;
  for (const auto& [key, value] : parsed.items()) {
    if (key != "parameters") refuse("unknown key '" + key + "'");
    if (!value.is_object()) refuse("'parameters' is not an object");
    for (const auto& [name, parameter] : value.items()) {
      if (!load || name != "config") refuse("unknown parameter '" + name + "'");
      if (!parameter.is_string()) refuse("'config' is not a string");
      config = parameter.get<std::string>();
    }
  }
  return config;
}

}  // namespace psw::runtime
