// libFuzzer target: experiment configs (parse_experiment_config), as if the file were in
// configs/experiments/ so that its relative paths find the shipped profiles; accepted configs
// must give their resolved YAML (written beside every run).
#include "fuzz_common.hpp"
#include "psw/common/experiment_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  static const std::filesystem::path origin = fuzz::source_dir() / "configs/experiments/fuzz.yaml";
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const ExperimentConfig config = parse_experiment_config(text, origin);
    fuzz::check_json_string(config.name);
    (void)resolved_yaml(config);
  });
  return 0;
}
