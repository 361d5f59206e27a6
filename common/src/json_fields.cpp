#include "psw/common/json_fields.hpp"

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw::json_fields {

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object()) throw InputError(where + ": expected an object");
  const auto it = j.find(key);
  if (it == j.end()) throw InputError(where + ": no '" + key + "'");
  return *it;
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = member(j, key, where);
  if (!v.is_number()) throw InputError(where + ": '" + key + "' must be a number");
  return v.get<double>();
}

std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = member(j, key, where);
  if (!v.is_number_integer()) throw InputError(where + ": '" + key + "' must be an integer");
  return v.get<std::int64_t>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = member(j, key, where);
  if (!v.is_string()) throw InputError(where + ": '" + key + "' must be a string");
  return v.get<std::string>();
}

std::optional<std::int64_t> optional_integer(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  return integer(j, key, where);
}

}  // namespace psw::json_fields
