// libFuzzer target: safetensors headers (parse_safetensors_header), re-written by
// write_safetensors with zero-filled data and parsed again.
#include <vector>

#include "fuzz_common.hpp"
#include "psw/common/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw;
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_only_input_errors([&] {
    const SafetensorsHeader header =
        parse_safetensors_header(text, text.size(), "fuzz.safetensors");
    for (const auto& [key, value] : header.metadata) {
      fuzz::check_json_string(key);
      fuzz::check_json_string(value);
    }
    // The data buffer holds every tensor's bytes, so the zero-filled copies are at most
    // `size` bytes in all.
    std::vector<SafetensorsTensor> tensors;
    for (const SafetensorsEntry& entry : header.tensors) {
      fuzz::check_json_string(entry.name);
      tensors.emplace_back(entry.name, entry.dtype, entry.shape,
                           std::string(static_cast<std::size_t>(entry.bytes()), '\0'));
    }
    const std::string again = write_safetensors(tensors, header.metadata);
    const SafetensorsHeader reparsed =
        parse_safetensors_header(again, again.size(), "fuzz-again.safetensors");
    if (reparsed.tensors.size() != header.tensors.size() || reparsed.metadata != header.metadata ||
        reparsed.data_bytes != header.data_bytes) {
      std::fprintf(stderr, "fuzz: a safetensors header does not round-trip through "
                           "write_safetensors\n");
      std::abort();
    }
  });
  return 0;
}
