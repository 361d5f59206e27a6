// libFuzzer target: REST request bodies (Note [REST front end]): inference (parse_rest_infer),
// with and without the binary tensor extension's header; the repository's load and unload
// (parse_rest_repository_body); generate (parse_rest_generate). Bad input must end in the
// service's INVALID_ARGUMENT (the front end's 400), never in another exception, a crash or a leak.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz_common.hpp"
#include "psw/runtime/ipc/rest_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  if (size == 0) return 0;
  // The first byte picks the body's kind: an inference request with Inference-Header-Content-Length
  // none, half the body, or the end of its JSON (after its last '}', so that what follows is the
  // binary tail); a repository load; an unload; a generate call.
  const int kind = data[0] % 6;
  const std::string body = fuzz::text_of(data + 1, size - 1);
  try {
    if (kind == 3 || kind == 4) {
      const std::string config = runtime::parse_rest_repository_body(body, /*load=*/kind == 3);
      if (kind == 4 && !config.empty()) {
        std::fprintf(stderr, "fuzz: an unload's body gave a config\n");
        std::abort();
      }
      return 0;
    }
    if (kind == 5) {
      const runtime::GenerateRequest generate = runtime::parse_rest_generate(body, "m");
      if (generate.max_tokens < 1) {
        std::fprintf(stderr, "fuzz: a generate call parsed without a positive max_tokens\n");
        std::abort();
      }
      return 0;
    }
    std::optional<std::string> header;
    if (kind == 1) header = std::to_string(body.size() / 2);
    if (kind == 2) {
      const std::size_t end = body.rfind('}');
      header = std::to_string(end == std::string::npos ? body.size() : end + 1);
    }
    const runtime::RestInferRequest parsed = runtime::parse_rest_infer(body, header, "m", "");
    for (const auto& input : parsed.request.inputs) fuzz::check_json_string(input.name);
  } catch (const runtime::ServiceError& e) {
    if (e.code() != runtime::ServiceError::Code::InvalidArgument) {
      std::fprintf(stderr, "fuzz: a ServiceError other than INVALID_ARGUMENT: %s\n", e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than INVALID_ARGUMENT: %s\n", e.what());
    std::abort();
  }
  return 0;
}
