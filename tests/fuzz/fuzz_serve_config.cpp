// libFuzzer target: serve configs (parse_serve_config), as if in configs/serve/.
#include "fuzz_common.hpp"
#include "psw/common/serve_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  static const std::filesystem::path origin = fuzz::source_dir() / "configs/serve/fuzz.yaml";
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const ServeConfig config = parse_serve_config(text, origin);
    for (const auto& model : config.models) fuzz::check_json_string(model.name);
    if (config.training) fuzz::check_json_string(config.training->model);
  });
  return 0;
}
