// libFuzzer target: serving profiles (parse_serving_profile, Note [Request path]), round-tripped
// through to_yaml.
#include "fuzz_common.hpp"
#include "psw/common/serving_profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const ServingProfile profile = parse_serving_profile(text, "fuzz-serving.yaml");
    fuzz::check_json_string(profile.name);
    const ServingProfile again = parse_serving_profile(to_yaml(profile), "fuzz-serving-again.yaml");
    if (again.name != profile.name || again.request_path.size() != profile.request_path.size() ||
        again.training.size() != profile.training.size()) {
      std::fprintf(stderr, "fuzz: a serving profile does not round-trip through to_yaml\n");
      std::abort();
    }
  });
  return 0;
}
