#pragma once
// Where a model's profile of a dtype lies in a folder of profiles: NAME.yaml at the top in
// fp32, DTYPE/NAME.yaml otherwise. `psw profile` writes them so, configs/models/ and
// configs/models/h200/ hold them so, and `psw run` and `psw serve` look them up so.

#include <filesystem>
#include <string>

namespace psw {

inline std::filesystem::path profile_path_in(const std::filesystem::path& folder, const std::string& model,
                                             const std::string& dtype) {
  return (dtype == "fp32" ? folder : folder / dtype) / (model + ".yaml");
}

}  // namespace psw
