// libFuzzer target: the trace readers (trace.hpp). The first byte picks the format (project
// CSV, Azure Functions 2019 with uniform or Poisson spread, 2021, Azure LLM 2023); the rest is
// the file, written to a temporary file that the reader streams. At most kMaxRequests requests
// are drawn from a source that opens.
#include <unistd.h>

#include <fstream>
#include <memory>

#include "fuzz_common.hpp"
#include "psw/common/trace.hpp"

namespace {

constexpr int kMaxRequests = 20'000;

const std::filesystem::path& temp_path() {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("psw-fuzz-trace-" + std::to_string(::getpid()) + ".csv");
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  if (size == 0) return 0;
  const int format = data[0] % 5;
  {
    std::ofstream out(temp_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  fuzz::expect_only_input_errors([&] {
    TraceMapping mapping;
    mapping.function_model = {{"f0", 0}, {"f1", 1}};
    mapping.default_model = 0;
    std::unique_ptr<RequestSource> source;
    switch (format) {
      case 0: source = open_project_csv(temp_path(), {{"resnet152", 0}, {"bert_base", 1}}); break;
      case 1: source = open_azure_functions_2019(temp_path(), mapping, SpreadKind::Uniform, 1); break;
      case 2: source = open_azure_functions_2019(temp_path(), mapping, SpreadKind::Poisson, 1, 2, 3); break;
      case 3: source = open_azure_functions_2021(temp_path(), mapping); break;
      default: source = open_azure_llm_2023(temp_path(), {{100, 0}, {std::int64_t{1} << 40, 1}}, 8, Duration::zero());
    }
    Duration last = Duration::zero();
    for (int i = 0; i < kMaxRequests; ++i) {
      const std::optional<Request> r = source->next();
      if (!r) break;
      if (r->arrival < last) {
        std::fprintf(stderr, "fuzz: a trace source yields arrivals out of order\n");
        std::abort();
      }
      last = r->arrival;
    }
  });
  return 0;
}
