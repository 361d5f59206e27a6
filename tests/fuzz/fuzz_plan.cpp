// libFuzzer target: switch plans (parse_switch_plan, round-tripped through to_yaml) and fixed
// groupings (parse_fixed_groups, against the shipped Inception v3 profile).
#include "fuzz_common.hpp"
#include "psw/common/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  static const ModelProfile model = load_model_profile(fuzz::source_dir() / "configs/models/inception_v3.yaml");
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const SwitchPlan plan = parse_switch_plan(text, "fuzz-plan.yaml");
    fuzz::check_json_string(plan.model);
    const SwitchPlan again = parse_switch_plan(to_yaml(plan), "fuzz-plan-again.yaml");
    if (again.groups.size() != plan.groups.size()) {
      std::fprintf(stderr, "fuzz: a switch plan does not round-trip through to_yaml\n");
      std::abort();
    }
  });
  fuzz::expect_only_input_errors([&] { (void)parse_fixed_groups(text, "fuzz-groups.yaml", model); });
  return 0;
}
