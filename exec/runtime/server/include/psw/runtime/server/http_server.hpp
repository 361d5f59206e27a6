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
#include <string>

#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/ipc/rest_codec.hpp"  // the bodies parsed and written (no HTTP)
#include "psw/runtime/ipc/service.hpp"

namespace psw::runtime {

class HttpFrontEnd {
 public:
  // Listens on `address` (HOST:PORT, port 0 picks a free one) at once; InputError for an
  // address that cannot be used (malformed, a wildcard, a port in use). Requests larger than
  // `max_body_bytes` are refused (413).
  // Note [Remote access]: with `token`, every request must carry `Authorization: Bearer TOKEN`
  // (else 401); it must outlive the front end. With `staging` (which must outlive it too; the
  // service is told of it at once), binary input data is copied into its free slots, read there
  // in place (Note [Raw inputs received in place] in grpc_server.cpp).
  HttpFrontEnd(InferenceService& service, const std::string& address, std::int64_t max_body_bytes,
               const AccessToken* token = nullptr, InputStaging* staging = nullptr);
  ~HttpFrontEnd();  // shutdown()
  HttpFrontEnd(const HttpFrontEnd&) = delete;
  HttpFrontEnd& operator=(const HttpFrontEnd&) = delete;

  std::string url() const;  // http://HOST:PORT
  void shutdown();          // stops listening; calls in progress finish

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psw::runtime
