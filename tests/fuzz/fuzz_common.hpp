#pragma once
// Shared by the libFuzzer targets (tests/fuzz/): the one rule every target checks. Bad input
// must end in psw::InputError (psw exits 2 with a message); any other exception is a finding:
// the target aborts, and libFuzzer reports the input. Crashes, leaks, hangs and undefined
// behaviour are findings of libFuzzer, ASan and UBSan themselves.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw::fuzz {

template <typename F>
void expect_only_input_errors(F&& body) {
  try {
    body();
  } catch (const InputError&) {
    // The expected answer to bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than psw::InputError: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: an exception other than psw::InputError (not a std::exception)\n");
    std::abort();
  }
}

// Where the shipped configs are: relative paths inside fuzzed configs resolve against them.
inline std::filesystem::path source_dir() { return PSW_SOURCE_DIR; }

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// What psw writes in its JSON outputs must serialize (nlohmann throws on invalid UTF-8).
inline void check_json_string(const std::string& s) { (void)nlohmann::json(s).dump(); }

}  // namespace psw::fuzz
