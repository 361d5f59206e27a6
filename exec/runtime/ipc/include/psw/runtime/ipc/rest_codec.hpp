#pragma once
// The open inference protocol's HTTP/REST binding as bytes (Note [REST front end] in
// psw/runtime/server/http_server.hpp says what it carries): request bodies parsed into the
// service's requests, and the service's answers written in the binding's form. No HTTP here: the
// front end (psw_server, cpp-httplib) moves the bytes, and the fuzz target
// (tests/fuzz/fuzz_rest_request.cpp) reads bodies through these functions without a server.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/runtime/ipc/service.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"  // InputStaging

namespace psw::runtime {

// The HTTP status of a service error's code (Note [REST front end]).
int http_status_of(ServiceError::Code code);

// An inference request's body as the REST binding gives it, parsed: the service's request (its
// inputs' bytes from JSON `data` or from the binary tail) and the outputs asked for (empty:
// every output, binary when `all_binary`). `header_length` is Inference-Header-Content-Length's
// value where the request has the header. ServiceError(InvalidArgument) naming what is wrong for
// any malformed body (fuzzed: tests/fuzz/fuzz_rest_request.cpp).
struct RestOutput {
  std::string name;
  bool binary = false;
};
struct RestInferRequest {
  InferRequest request;
  std::vector<RestOutput> outputs;
  bool all_binary = false;
};
// With `staging`, an input's binary data goes into a free slot of it, read there by the
// service (Note [Raw inputs received in place] in grpc_server.cpp), else into the tensor's string.
RestInferRequest parse_rest_infer(std::string_view body, const std::optional<std::string>& header_length,
                                  const std::string& model, const std::string& version,
                                  InputStaging* staging = nullptr);

// The answer to `parsed` in the binding's form: the JSON (model, version, the request's id, the
// server's times as parameters, the outputs asked for, every output where none was) and after
// it the bytes of the outputs answered as binary data, in order; `header_length` is the JSON's
// length where such bytes follow (Inference-Header-Content-Length). ServiceError(InvalidArgument)
// for an output asked for that the answer lacks.
struct RestInferAnswer {
  std::string body;
  std::optional<std::size_t> header_length;
};
RestInferAnswer encode_rest_infer(const RestInferRequest& parsed, const InferResponse& result);

// A generate call's body, parsed (Note [REST front end]); ServiceError(InvalidArgument) naming
// what is wrong: not JSON, no input_ids or ids that are not integers, no max_tokens or one that is
// not a positive integer, an unknown key.
GenerateRequest parse_rest_generate(std::string_view body, const std::string& model);

// A generate call's answer: {"model_name", "id" (where given), "output_ids", "prompt_bucket",
// "switched", "ttft_ms", "tpot_ms"}.
nlohmann::json rest_generate_answer(const GenerateResponse& response);

// A model's inputs or outputs as model metadata lists them: [{"name", "datatype", "shape"}].
nlohmann::json rest_tensor_metadata(const std::vector<TensorSpec>& specs);

// A repository load's or unload's body (Note [Repository load] in controller.hpp), both
// optional, as Triton takes them: the load's {"parameters": {"config": "<the model's entry, YAML
// or JSON>"}}, the unload's {"parameters": {}}. Returns the load's config (empty: none given);
// ServiceError(InvalidArgument) naming what is wrong otherwise.
std::string parse_rest_repository_body(std::string_view body, bool load);

}  // namespace psw::runtime
