// libFuzzer target: hardware profiles (parse_hardware_profile), round-tripped through to_yaml.
#include "fuzz_common.hpp"
#include "psw/common/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const HardwareProfile hw = parse_hardware_profile(text, "fuzz-hardware.yaml");
    fuzz::check_json_string(hw.name);
    fuzz::check_json_string(hw.gpu_name);
    const HardwareProfile again = parse_hardware_profile(to_yaml(hw), "fuzz-hardware-again.yaml");
    if (again.name != hw.name) {
      std::fprintf(stderr, "fuzz: a hardware profile does not round-trip through to_yaml\n");
      std::abort();
    }
  });
  return 0;
}
