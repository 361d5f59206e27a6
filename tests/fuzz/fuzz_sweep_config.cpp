// libFuzzer target: sweep configs (parse_sweep_config), as if in configs/experiments/; every
// point of an accepted grid is a loaded experiment config.
#include "fuzz_common.hpp"
#include "psw/common/experiment_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  static const std::filesystem::path origin = fuzz::source_dir() / "configs/experiments/fuzz-sweep.yaml";
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const SweepConfig sweep = parse_sweep_config(text, origin);
    fuzz::check_json_string(sweep.name);
    for (const auto& key : sweep.keys) fuzz::check_json_string(key);
  });
  return 0;
}
