#include "psw/runtime/server/http_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "psw/runtime/ipc/tensor_bytes.hpp"
#include "model_lookup.hpp"
#include "tcp_address.hpp"

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

// Named, not anonymous: the unity build compiles this file with the gRPC front end, whose
// helpers (invalid, in_quotes) would meet these.
namespace rest {

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

struct HttpAnswer {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::optional<std::size_t> header_length;  // Inference-Header-Content-Length
};

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

HttpAnswer error_answer(int status, const std::string& message) {
  return {status, nlohmann::json{{"error", message}}.dump(), "application/json", std::nullopt};
}

// parse_rest_infer's body, inside this namespace (its helpers' names are its own).
RestInferRequest parse_infer(std::string_view body, const std::optional<std::string>& header_length,
                             const std::string& model, const std::string& version) {
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
      tensor.bytes.assign(binary.substr(binary_used, size));
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

// The inference call: the request parsed, to the service, the answer back in the protocol's form.
HttpAnswer infer(InferenceService& service, const std::string& model, const std::string& version,
                 const httplib::Request& http) {
  std::optional<std::string> header_length;
  if (http.has_header("Inference-Header-Content-Length")) {
    header_length = http.get_header_value("Inference-Header-Content-Length");
  }
  RestInferRequest parsed = parse_rest_infer(http.body, header_length, model, version);
  const InferRequest& request = parsed.request;
  const bool all_binary = parsed.all_binary;
  std::vector<RestOutput>& wanted = parsed.outputs;
  const InferResponse result = service.infer(request);
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
  HttpAnswer out;
  out.body = answer.dump();
  if (!tail.empty()) {
    out.header_length = out.body.size();
    out.body += tail;
    out.content_type = "application/octet-stream";
  }
  return out;
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

nlohmann::json generate_answer(const GenerateResponse& r) {
  nlohmann::json answer = {{"model_name", r.model},
                           {"output_ids", r.output_ids},
                           {"prompt_bucket", r.prompt_bucket},
                           {"switched", r.switched},
                           {"ttft_ms", static_cast<double>(r.ttft_ns) * 1e-6},
                           {"tpot_ms", static_cast<double>(r.tpot_ns) * 1e-6}};
  if (!r.id.empty()) answer["id"] = r.id;
  return answer;
}

std::string server_sent_event(const char* event, const nlohmann::json& data) {
  return (event != nullptr ? std::string("event: ") + event + "\n" : std::string()) + "data: " + data.dump() + "\n\n";
}

// Note [REST front end]: a streaming generate call runs on a thread of its own, so that an
// error before the first token is still an HTTP status; the handler waits for the first event,
// then the response streams the rest from here. The client closing the stream cancels the call.
class GenerationRelay {
 public:
  GenerationRelay(InferenceService& service, GenerateRequest request) {
    request.cancelled = [this] { return closed_.load(); };
    thread_ = std::thread([this, &service, request = std::move(request)] {
      try {
        const GenerateResponse r = service.generate(request, [this](const GeneratedToken& t) {
          push(server_sent_event(nullptr, {{"index", t.index}, {"output_id", t.id}}), false);
        });
        push(server_sent_event("end", generate_answer(r)), true);
      } catch (const ServiceError& e) {
        fail(http_status_of(e.code()), e.what());
      } catch (const std::exception& e) {
        fail(500, e.what());
      }
    });
  }
  ~GenerationRelay() {
    closed_ = true;
    thread_.join();
  }
  GenerationRelay(const GenerationRelay&) = delete;
  GenerationRelay& operator=(const GenerationRelay&) = delete;

  // Waits for the first event: nullopt once there is one to stream, else the error's answer.
  std::optional<HttpAnswer> first() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !events_.empty() || finished_; });
    if (events_.empty() && error_status_ != 0) return error_answer(error_status_, error_);
    return std::nullopt;
  }
  // The next events (blocking until there are some); empty once the stream has ended.
  std::string next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !events_.empty() || finished_; });
    std::string out;
    for (const std::string& e : events_) out += e;
    events_.clear();
    if (out.empty() && error_status_ != 0 && !error_told_) {
      error_told_ = true;
      return server_sent_event("error", {{"error", error_}, {"status", error_status_}});
    }
    return out;
  }
  void close() { closed_ = true; }

 private:
  void push(std::string event, bool last) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
      finished_ = finished_ || last;
    }
    changed_.notify_all();
  }
  void fail(int status, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_status_ = status;
      error_ = message;
      finished_ = true;
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> events_;
  bool finished_ = false;
  int error_status_ = 0;
  std::string error_;
  bool error_told_ = false;
  std::atomic<bool> closed_{false};
  std::thread thread_;
};

nlohmann::json tensor_metadata(const std::vector<TensorSpec>& specs) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorSpec& t : specs) out.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  return out;
}

}  // namespace rest

RestInferRequest parse_rest_infer(std::string_view body, const std::optional<std::string>& header_length,
                                  const std::string& model, const std::string& version) {
  return rest::parse_infer(body, header_length, model, version);
}

GenerateRequest parse_rest_generate(std::string_view body, const std::string& model) {
  return rest::parse_generate(body, model);
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

struct HttpFrontEnd::Impl {
  InferenceService& service;
  httplib::Server server;
  std::thread thread;
  std::string url;

  explicit Impl(InferenceService& s) : service(s) {}

  // Runs a handler; every failure becomes the protocol's error body with its status.
  template <typename Body>
  void answer(httplib::Response& response, Body&& body) {
    send(response, guarded(body));
  }
  template <typename Body>
  static rest::HttpAnswer guarded(Body&& body) {
    try {
      return body();
    } catch (const ServiceError& e) {
      return rest::error_answer(http_status_of(e.code()), e.what());
    } catch (const std::exception& e) {
      return rest::error_answer(500, e.what());
    }
  }
  static void send(httplib::Response& response, rest::HttpAnswer out) {
    response.status = out.status;
    if (out.header_length) response.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
    response.set_content(std::move(out.body), out.content_type.c_str());
  }

  static rest::HttpAnswer ok(const nlohmann::json& body) { return {200, body.dump(), "application/json", std::nullopt}; }
  // Health and readiness: 200 when true, 400 when not (the protocol's HTTP binding).
  static rest::HttpAnswer truth(bool value) { return {value ? 200 : 400, "", "application/json", std::nullopt}; }

  void routes() {
    server.Get("/v2/health/live", [this](const httplib::Request&, httplib::Response& r) {
      answer(r, [&] { return truth(service.live()); });
    });
    server.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& r) {
      answer(r, [&] { return truth(service.ready()); });
    });
    server.Get("/v2", [this](const httplib::Request&, httplib::Response& r) {
      answer(r, [&] { return ok({{"name", "psw"}, {"version", "0.1"}, {"extensions", nlohmann::json::array({"binary_tensor_data"})}}); });
    });
    // Note [Repository index] (model_lookup.hpp): the body, optional, is {"ready": true|false}.
    server.Post("/v2/repository/index", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        bool ready_only = false;
        if (!q.body.empty()) {
          const nlohmann::json body = nlohmann::json::parse(q.body, nullptr, /*allow_exceptions=*/false);
          if (!body.is_object() || (body.contains("ready") && !body["ready"].is_boolean())) {
            throw ServiceError(ServiceError::Code::InvalidArgument,
                               "the repository index takes no body, or a JSON object {\"ready\": true|false}");
          }
          ready_only = body.value("ready", false);
        }
        nlohmann::json index = nlohmann::json::array();
        for (const ModelIndexEntry& e : repository_index(service, "", ready_only)) {
          nlohmann::json entry = {{"name", e.name}, {"version", e.version}, {"state", e.state}};
          if (!e.reason.empty()) entry["reason"] = e.reason;
          index.push_back(std::move(entry));
        }
        return ok(index);
      });
    });
    // Note [Repository load] (controller.hpp): parse_rest_repository_body.
    server.Post(R"(/v2/repository/models/([^/]+)/(load|unload))", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        const bool load = q.matches[2] == "load";
        const std::string config = parse_rest_repository_body(q.body, load);
        if (load) {
          service.load_model(q.matches[1], config);
        } else {
          service.unload_model(q.matches[1]);
        }
        return ok(nlohmann::json::object());
      });
    });
    // NAME, then optionally /versions/V.
    const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
    server.Get(model, [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        const ModelInfo m = find_served_model(service, q.matches[1], q.matches[2]);
        return ok({{"name", m.name},
                   {"versions", m.versions},
                   {"platform", m.platform},
                   {"inputs", rest::tensor_metadata(m.inputs)},
                   {"outputs", rest::tensor_metadata(m.outputs)}});
      });
    });
    server.Get(model + "/ready", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] { return truth(find_served_model(service, q.matches[1], q.matches[2]).ready); });
    });
    server.Post(model + "/infer", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] { return rest::infer(service, q.matches[1], q.matches[2], q); });
    });
    // Note [Generate call]: the model's version is checked as infer's is.
    server.Post(model + "/generate", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        find_served_model(service, q.matches[1], q.matches[2]);
        const GenerateRequest request = parse_rest_generate(q.body, q.matches[1]);
        return ok(rest::generate_answer(service.generate(request, nullptr)));
      });
    });
    server.Post(model + "/generate_stream", [this](const httplib::Request& q, httplib::Response& r) {
      std::shared_ptr<rest::GenerationRelay> relay;
      const rest::HttpAnswer refused = guarded([&]() -> rest::HttpAnswer {
        find_served_model(service, q.matches[1], q.matches[2]);
        relay = std::make_shared<rest::GenerationRelay>(service, parse_rest_generate(q.body, q.matches[1]));
        if (std::optional<rest::HttpAnswer> error = relay->first()) return *error;
        return {0, "", "", std::nullopt};  // streaming
      });
      if (refused.status != 0) {
        relay.reset();
        send(r, refused);
        return;
      }
      r.set_chunked_content_provider(
          "text/event-stream",
          [relay](std::size_t, httplib::DataSink& sink) {
            const std::string events = relay->next();
            if (events.empty()) {
              sink.done();
              return true;
            }
            if (!sink.write(events.data(), events.size())) {
              relay->close();  // the client went away: the call is cancelled
              return false;
            }
            return true;
          },
          [relay](bool) { relay->close(); });
    });
    // Anything else: the protocol's error body, not the library's empty 404.
    server.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      const std::string what = r.status == 404   ? "no such endpoint: " + q.method + " " + q.path
                               : r.status == 413 ? "the request is larger than the server takes"
                                                 : "the request failed with HTTP status " + std::to_string(r.status);
      r.set_content(nlohmann::json{{"error", what}}.dump(), "application/json");
    });
  }
};

HttpFrontEnd::HttpFrontEnd(InferenceService& service, const std::string& address, std::int64_t max_body_bytes,
                           const AccessToken* token)
    : impl_(std::make_unique<Impl>(service)) {
  const HostPort where = parse_tcp_address(address);
  check_tcp_host(address, where);
  impl_->routes();
  if (token != nullptr) {
    // Note [Remote access]: before any route, and before the body is looked at.
    impl_->server.set_pre_routing_handler([token](const httplib::Request& q, httplib::Response& r) {
      if (token->admits(q.get_header_value("Authorization"))) return httplib::Server::HandlerResponse::Unhandled;
      r.status = 401;
      r.set_header("WWW-Authenticate", "Bearer");
      r.set_content(nlohmann::json{{"error", q.has_header("Authorization")
                                                 ? "the request's bearer token is not this server's"
                                                 : "this server takes requests with a bearer token only "
                                                   "(Authorization: Bearer TOKEN)"}}
                        .dump(),
                    "application/json");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  impl_->server.set_payload_max_length(static_cast<std::size_t>(max_body_bytes));
  // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, which would let a second server
  // share a port in use instead of failing (as for the gRPC front end).
  impl_->server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  int port = where.port;
  if (port == 0) {
    port = impl_->server.bind_to_any_port(where.host);
    if (port < 0) throw InputError("--http-listen " + address + ": cannot listen (the address is not one of this host's)");
  } else if (!impl_->server.bind_to_port(where.host, port)) {
    throw InputError("--http-listen " + address + ": the port is in use or the address is not one of this host's");
  }
  impl_->url = "http://" + (where.bracketed ? "[" + where.host + "]" : where.host) + ":" + std::to_string(port);
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  // Running before the constructor returns: a stop() before the loop starts would be lost and
  // the loop would then run for ever.
  for (int i = 0; i < 5000 && !impl_->server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

HttpFrontEnd::~HttpFrontEnd() { shutdown(); }

std::string HttpFrontEnd::url() const { return impl_->url; }

void HttpFrontEnd::shutdown() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace psw::runtime
