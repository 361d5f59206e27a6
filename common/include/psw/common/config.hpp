#pragma once
// Reading and writing the project's YAML files. This is the only part of the project
// that includes yaml-cpp (DESIGN.md §3).
//
// Every reader is strict: unknown keys, missing required keys, wrong types, negative or
// absurd numbers and empty lists are InputErrors whose message names the file, the line
// and the key, e.g.
//   configs/models/x.yaml:12: key 'layers[3].param_bytes': expected a non-negative integer, got '-5'

#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "psw/common/hardware_profile.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/output.hpp"  // save_text, for the writers of these files
#include "psw/common/plan.hpp"

namespace psw {

ModelProfile load_model_profile(const std::filesystem::path& path);
HardwareProfile load_hardware_profile(const std::filesystem::path& path);
// A fixed grouping: `groups: [[first, last], ...]`, optionally `model: NAME`, checked
// against `model` when given, and validated against `num_layers`.
Grouping load_fixed_groups(const std::filesystem::path& path, const ModelProfile& model);
Grouping parse_fixed_groups(const std::string& text, const std::string& origin, const ModelProfile& model);

// Files are read whole, only regular files (not a FIFO or a device), at most 64 MiB.
// Parse from text; `origin` stands for the file name in messages.
ModelProfile parse_model_profile(const std::string& text, const std::string& origin);
HardwareProfile parse_hardware_profile(const std::string& text, const std::string& origin);

// A SwitchPlan file (`psw plan --out`): model, strategy, fingerprint, num_layers, groups and
// the indices of host-mapped layers. load_switch_plan checks the file's own consistency; the
// user of the plan checks it against the model (check_plan_matches, Note [Layer fingerprint]).
SwitchPlan load_switch_plan(const std::filesystem::path& path);
SwitchPlan parse_switch_plan(const std::string& text, const std::string& origin);
std::string to_yaml(const SwitchPlan& plan);

std::string to_yaml(const ModelProfile& model);
std::string to_yaml(const HardwareProfile& hardware);

// Note [Config files as JSON]: a project YAML file's document as JSON, for the scripts that draw
// from it (psw config-json): mappings, sequences, and plain scalars as integers, numbers,
// true/false or null where they read as one (quoted ones stay strings). Comments dropped.
// InputError for a file that cannot be read or parsed; the caller checks it with its own
// strict reader first. `overrides` (dotted keys, YAML values: `--set`) are applied first.
nlohmann::json yaml_file_as_json(const std::filesystem::path& path,
                                 const std::vector<std::pair<std::string, std::string>>& overrides = {});

}  // namespace psw
