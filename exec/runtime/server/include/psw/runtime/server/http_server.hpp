#pragma once
// Note [REST front end]
// ~~~~~~~~~~~~~~~~~~~~~
// The open inference protocol's HTTP/REST binding (KServe v2, as Triton and KServe serve it)
// beside gRPC, on the same service: `curl` can ask the server anything the gRPC clients can.
//
//   GET  /v2/health/live, /v2/health/ready           200 when true, 400 when not
//   GET  /v2                                         server metadata
//   GET  /v2/models/NAME[/versions/V]                model metadata
//   GET  /v2/models/NAME[/versions/V]/ready          200 when ready, 400 when not
//   POST /v2/models/NAME[/versions/V]/infer          inference
//   POST /v2/models/NAME[/versions/V]/generate       a decoder generates (Note [Generate call])
//   POST /v2/models/NAME[/versions/V]/generate_stream  the same, as server-sent events
//
// An inference request is JSON: `inputs` (name, shape, datatype and `data`, a flat or nested
// list of numbers, or true/false for BOOL), optional `id` (echoed), `outputs` (by name; default
// every output) and `parameters`. The binary tensor extension: with the header
// Inference-Header-Content-Length N, the body's first N bytes are the JSON and the rest the raw
// little-endian bytes of the inputs whose parameters give `binary_data_size`, in order; an
// output whose parameters ask `binary_data: true` (or every output, with the request's
// parameter `binary_data_output: true`) is answered the same way. FP16 and BF16 tensors travel
// as binary data only (JSON has no such numbers). Errors are `{"error": "..."}` with the HTTP
// status of the gRPC code: INVALID_ARGUMENT 400, NOT_FOUND 404, RESOURCE_EXHAUSTED 429,
// UNAVAILABLE 503, DEADLINE_EXCEEDED 504, ALREADY_EXISTS 409, CANCELLED 499, INTERNAL 500.
//
// A generate call's body is `{"input_ids": [ids], "parameters": {"max_tokens": N}}` with an
// optional `id`; the answer `{"model_name", "id", "output_ids", "prompt_bucket", "switched",
// "ttft_ms", "tpot_ms"}`. Its streaming form answers `text/event-stream`: one event per token,
// `data: {"index": i, "output_id": id}`, then `event: end` with the whole answer as its data. An
// error before the first token is an HTTP error as above; one after it (the server stopping, a
// worker lost) ends the stream with `event: error` and `{"error": ..., "status": HTTP status}`.
// A client that closes the stream cancels the call (Note [Deadlines]).
//
// TCP only (`psw serve --http-listen 127.0.0.1:PORT`; a wildcard address is refused, as for
// --listen, and one other hosts can reach needs --allow-remote and a token: Note [Remote access]
// in access_token.hpp): the library (cpp-httplib 0.11, Debian 12's) listens on TCP, not on a Unix
// socket. The system shared memory extension is not offered over HTTP.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

class HttpFrontEnd {
 public:
  // Listens on `address` (HOST:PORT, port 0 picks a free one) at once; InputError for an
  // address that cannot be used (malformed, a wildcard, a port in use). Requests larger than
  // `max_body_bytes` are refused (413).
  // Note [Remote access]: with `token`, every request must carry `Authorization: Bearer TOKEN`
  // (else 401); it must outlive the front end.
  HttpFrontEnd(InferenceService& service, const std::string& address, std::int64_t max_body_bytes,
               const AccessToken* token = nullptr);
  ~HttpFrontEnd();  // shutdown()
  HttpFrontEnd(const HttpFrontEnd&) = delete;
  HttpFrontEnd& operator=(const HttpFrontEnd&) = delete;

  std::string url() const;  // http://HOST:PORT
  void shutdown();          // stops listening; calls in progress finish

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
RestInferRequest parse_rest_infer(std::string_view body, const std::optional<std::string>& header_length,
                                  const std::string& model, const std::string& version);

// A generate call's body, parsed (Note [REST front end]); ServiceError(InvalidArgument) naming
// what is wrong: not JSON, no input_ids or ids that are not integers, no max_tokens or one that is
// not a positive integer, an unknown key.
GenerateRequest parse_rest_generate(std::string_view body, const std::string& model);

// A repository load's or unload's body (Note [Repository load] in controller.hpp), both
// optional, as Triton takes them: the load's {"parameters": {"config": "<the model's entry, YAML
// or JSON>"}}, the unload's {"parameters": {}}. Returns the load's config (empty: none given);
// ServiceError(InvalidArgument) naming what is wrong otherwise.
std::string parse_rest_repository_body(std::string_view body, bool load);

}  // namespace psw::runtime
