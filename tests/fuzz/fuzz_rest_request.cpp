// libFuzzer target: REST inference bodies (parse_rest_infer, Note [REST front end]), with and
// without the binary tensor extension's header. Bad input must end in the service's
// INVALID_ARGUMENT (the front end's 400), never in another exception, a crash or a leak.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz_common.hpp"
#include "psw/runtime/server/http_server.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  if (size == 0) return 0;
  // The first byte picks Inference-Header-Content-Length: none, half the body, or the end of
  // its JSON (after its last '}', so that what follows is the binary tail).
  const std::string body = fuzz::text_of(data + 1, size - 1);
  std::optional<std::string> header;
  if (data[0] % 3 == 1) header = std::to_string(body.size() / 2);
  if (data[0] % 3 == 2) {
    const std::size_t end = body.rfind('}');
    header = std::to_string(end == std::string::npos ? body.size() : end + 1);
  }
  try {
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
