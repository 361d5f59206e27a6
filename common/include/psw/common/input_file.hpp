#pragma once
// Reading the small files a command takes as input (reports, summaries, tables): the bytes
// whole, and a JSON object from them. Here in the core, not beside the comparisons that first
// needed them, because every layer above reads such files (psw load its own recorded summary,
// psw validate and psw calibrate theirs).

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace psw {

// The whole of a small regular file (at most 64 MiB; a FIFO, a device or a folder is refused),
// and a JSON object read from one; InputError naming the file (and the line and column of bad
// JSON) and `expected`, what it should have been.
std::string read_input(const std::filesystem::path& path, const char* expected);
nlohmann::json parse_json_object(const std::string& text, const std::filesystem::path& path, const char* expected);
nlohmann::json read_json_object(const std::filesystem::path& path, const char* expected);

}  // namespace psw
