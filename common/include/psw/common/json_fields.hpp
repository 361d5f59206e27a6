#pragma once
// Note [Checked JSON fields]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The readers of the project's JSON records (psw sim's and psw load's summaries) take each key
// through these: a missing key or a value of another type is one InputError naming where the
// record came from and the key ("run/summary.json.latency: no 'p99_ms'"), never a crash or a
// silent default.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace psw::json_fields {

// The value of `key` in the object `j`; InputError when `j` is not an object or lacks it.
const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where);
double number(const nlohmann::json& j, const char* key, const std::string& where);
std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& where);
std::string text(const nlohmann::json& j, const char* key, const std::string& where);
// Absent: nullopt; present, it must be an integer.
std::optional<std::int64_t> optional_integer(const nlohmann::json& j, const char* key, const std::string& where);

}  // namespace psw::json_fields
