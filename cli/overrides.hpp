#pragma once
// `--set KEY=VALUE`: dotted keys set on a config's document before it is read (psw sim,
// psw validate, psw serve and its processes, psw config-json); the config's reader checks them
// and names the override in its messages (Note [Overridden keys in messages]).

#include <string>
#include <utility>
#include <vector>

#include "psw/common/error.hpp"

namespace psw::cli {

inline std::vector<std::pair<std::string, std::string>> parse_sets(const std::vector<std::string>& sets) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--set '" + s + "': expected KEY=VALUE");
    out.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  return out;
}

}  // namespace psw::cli
