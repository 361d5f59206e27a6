#pragma once
// The date and versions a measured profile records (SourceInfo), for the commands of psw-exec
// that measure one (psw profile, psw run --graph).

#include <torch/version.h>

#include <ctime>
#include <string>

namespace psw::cli {

// Today's date in UTC, ISO (2026-12-05).
inline std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

inline std::string libtorch_version() { return std::string("LibTorch ") + TORCH_VERSION; }

}  // namespace psw::cli
