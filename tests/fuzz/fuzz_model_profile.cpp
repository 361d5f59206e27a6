// libFuzzer target: model profiles (parse_model_profile). Accepted profiles must round-trip
// through to_yaml and serialize their names as JSON (psw plan --format json).
#include "fuzz_common.hpp"
#include "psw/common/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const ModelProfile model = parse_model_profile(text, "fuzz-model.yaml");
    fuzz::check_json_string(model.name);
    for (const auto& layer : model.layers) {
      fuzz::check_json_string(layer.name);
      fuzz::check_json_string(layer.kind);
    }
    const ModelProfile again = parse_model_profile(to_yaml(model), "fuzz-model-again.yaml");
    if (again.layers.size() != model.layers.size() || again.name != model.name) {
      std::fprintf(stderr, "fuzz: a model profile does not round-trip through to_yaml\n");
      std::abort();
    }
  });
  return 0;
}
