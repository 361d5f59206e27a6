#include "psw/common/input_file.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <system_error>
#include <utility>

#include "psw/common/error.hpp"

namespace psw {

namespace fs = std::filesystem;

namespace {

// Reports and sweep tables are small; anything this large is not one.
constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{64} << 20;

// The 1-based line and column of byte offset `at` in `text`.
std::pair<std::size_t, std::size_t> line_and_column(const std::string& text, std::size_t at) {
  at = std::min(at, text.size());
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

std::string read_input(const fs::path& path, const char* expected) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw InputError(path.string() + ": no such file");
  if (!fs::is_regular_file(status)) {
    throw InputError(path.string() + ": is not a regular file (a directory, device, FIFO or socket), expected " +
                     expected);
  }
  const auto too_large = [&] {
    return InputError(path.string() + ": larger than " + std::to_string(kMaxInputBytes >> 20) + " MiB, not " +
                      expected);
  };
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxInputBytes) throw too_large();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for reading");
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) throw too_large();
  }
  if (in.bad()) throw InputError(path.string() + ": read error");
  return text;
}

nlohmann::json parse_json_object(const std::string& text, const fs::path& path, const char* expected) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the byte where the parser stopped.
    const auto [line, column] = line_and_column(text, e.byte > 0 ? e.byte - 1 : 0);
    throw InputError(path.string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ": not JSON (expected " +
                     expected + "): " + e.what());
  }
  if (!value.is_object()) throw InputError(path.string() + ": expected a JSON object (" + expected + ")");
  return value;
}

nlohmann::json read_json_object(const fs::path& path, const char* expected) {
  return parse_json_object(read_input(path, expected), path, expected);
}

}  // namespace psw
