#include "psw/common/serve_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/profile_paths.hpp"
#include "yaml_reader.hpp"

namespace psw {

using namespace yaml_detail;

namespace {

std::filesystem::path resolve_against(const std::filesystem::path& config, const std::string& relative) {
  const std::filesystem::path p(relative);
  return p.is_absolute() ? p : (config.parent_path() / p).lexically_normal();
}

// One of a few names (`choices`, in the order the message lists them), or `fallback` when the
// key is absent.
template <typename T>
T optional_choice(MapReader& r, const std::string& key, const std::vector<std::pair<std::string, T>>& choices,
                  T fallback) {
  r.mark_seen(key);
  if (!r.has(key)) return fallback;
  const std::string value = r.string(key);
  std::string names;
  for (const auto& [name, choice] : choices) {
    if (value == name) return choice;
    names += (names.empty() ? "" : " or ") + name;
  }
  r.fail_key(key, r.get(key), "expected " + names + ", got '" + value + "'");
}

// Note [Prompt buckets] (exec/decoder.hpp): ascending lengths in [1, longest] ending at the
// longest prompt; by default the powers of two from 16 below `longest`, then `longest`.
std::vector<std::int64_t> read_prompt_buckets(MapReader& m, std::int64_t longest) {
  std::vector<std::int64_t> buckets;
  if (!m.has("prompt_buckets")) {
    for (std::int64_t b = 16; b < longest; b *= 2) buckets.push_back(b);
    buckets.push_back(longest);
    return buckets;
  }
  const YAML::Node list = m.sequence("prompt_buckets");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = detail::concat("prompt_buckets[", i, "]");
    const std::int64_t b = m.to_integer(key, list[i], 1, longest);
    if (!buckets.empty() && b <= buckets.back()) {
      m.fail_key(key, list[i], detail::concat("the buckets must ascend: ", b, " follows ", buckets.back()));
    }
    buckets.push_back(b);
  }
  if (buckets.back() != longest) {
    m.fail_key("prompt_buckets", list,
               detail::concat("the last bucket must be the longest prompt the decoder serves, ", longest,
                              " (its max_positions less one), not ", buckets.back()));
  }
  return buckets;
}

// One entry of `models:` (or a repository load's model config, Note [Repository load] in the
// server): `where` names it in messages ("models[2]"), paths resolve against `config_path`'s folder.
ServedModelConfig parse_served_model(const YAML::Node& node, const std::filesystem::path& config_path,
                                     const std::string& origin, const std::string& where) {
  MapReader m(node, origin, where);
  ServedModelConfig model;
  model.name = m.string("name");
  model.batch = static_cast<int>(m.optional_integer("batch", 1, 4096).value_or(8));
  if (m.has("plan")) {
    const std::string plan = m.string("plan");
    try {
      model.strategy = parse_strategy(plan);
      if (model.strategy == Strategy::Fixed) {
        m.fail_key("plan", m.get("plan"), "give the plan file (psw plan --out) instead of 'fixed'");
      }
    } catch (const InputError&) {
      if (plan.size() < 5 || (plan.substr(plan.size() - 5) != ".yaml" && plan.substr(plan.size() - 4) != ".yml")) {
        m.fail_key("plan", m.get("plan"),
                   "expected single, per-layer, pipeswitch, optimal or a plan file (.yaml), got '" + plan + "'");
      }
      model.plan_file = resolve_against(config_path, plan);
      model.strategy = Strategy::Fixed;
    }
  }
  m.mark_seen("plan");
  model.dtype = optional_choice<std::string>(m, "dtype", {{"fp32", "fp32"}, {"bf16", "bf16"}, {"fp16", "fp16"}}, "fp32");
  if (m.has("decoder")) {
    model.decoder_file = resolve_against(config_path, m.string("decoder"));
    try {
      model.decoder = load_decoder_config(model.decoder_file);
    } catch (const InputError& e) {
      m.fail_key("decoder", m.get("decoder"), e.what());
    }
    if (model.decoder->name != model.name) {
      m.fail_key("decoder", m.get("decoder"),
                 "the decoder in " + model.decoder_file.string() + " is named '" + model.decoder->name +
                     "', not '" + model.name + "' (the name its profile and plans go by)");
    }
    // A prompt and its first generated token fit the decoder's positions; by default the
    // zoo's example prompt (128 tokens, as BERT's inputs).
    const std::int64_t longest = model.decoder->max_positions - 1;
    model.prompt_tokens =
        m.optional_integer("prompt_tokens", 1, longest).value_or(std::min<std::int64_t>(128, longest));
    model.prompt_buckets = read_prompt_buckets(m, longest);
  } else {
    for (const char* key : {"prompt_tokens", "prompt_buckets"}) {
      if (m.has(key)) {
        m.fail_key(key, m.get(key),
                   std::string(key) + " is for decoders (give decoder: its config file); '" + model.name +
                       "' takes inputs of a fixed size");
      }
    }
  }
  if (m.has("torchscript")) {
    if (model.decoder) m.fail_key("torchscript", m.get("torchscript"), "give decoder or torchscript, not both");
    model.torchscript_file = resolve_against(config_path, m.string("torchscript"));
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model.torchscript_file, ec)) {
      m.fail_key("torchscript", m.get("torchscript"), "no such file: " + model.torchscript_file.string());
    }
    if (model.torchscript_file.stem().string() != model.name) {
      m.fail_key("torchscript", m.get("torchscript"),
                 "the file's stem '" + model.torchscript_file.stem().string() + "' is not the model's name '" +
                     model.name + "' (its profile, NAME.yaml, goes by the stem)");
    }
    model.allow_uncaptured = m.boolean("allow_uncaptured", false);
    const std::vector<std::pair<std::string, std::string>> dtypes = {
        {"fp32", "fp32"}, {"bf16", "bf16"}, {"fp16", "fp16"}, {"int64", "int64"}};
    const auto read_id_bound = [](MapReader& reader, const std::string& key, const std::string& dtype) {
      if (!reader.has(key)) return std::int64_t{0};
      if (dtype != "int64") reader.fail_key(key, reader.get(key), "an id bound is for int64 inputs, not " + dtype);
      return reader.integer(key, 1, std::int64_t{1} << 40);
    };
    const auto read_shape = [](MapReader& reader, const std::string& key) {
      const YAML::Node shape = reader.sequence(key);
      std::vector<std::int64_t> out;
      for (std::size_t d = 0; d < shape.size(); ++d)
        out.push_back(reader.to_integer(detail::concat(key, "[", d, "]"), shape[d], 1, std::int64_t{1} << 30));
      return out;
    };
    if (m.has("inputs")) {
      for (const char* key : {"input_shape", "input_dtype", "input_id_bound"}) {
        if (m.has(key)) m.fail_key(key, m.get(key), std::string("give inputs or ") + key + ", not both");
      }
      const YAML::Node listed = m.sequence("inputs");  // never empty
      for (std::size_t k = 0; k < listed.size(); ++k) {
        MapReader in(listed[k], origin, detail::concat(where, ".inputs[", k, "]"));
        TorchScriptInput input{in.string("name"), read_shape(in, "shape"),
                               optional_choice<std::string>(in, "dtype", dtypes, "fp32")};
        input.id_bound = read_id_bound(in, "id_bound", input.dtype);
        in.finish();
        for (const auto& other : model.inputs) {
          if (other.name == input.name) in.fail_key("name", in.get("name"), "input '" + input.name + "' is listed twice");
        }
        model.inputs.push_back(std::move(input));
      }
    } else {
      model.inputs.push_back({"input", read_shape(m, "input_shape"), optional_choice<std::string>(m, "input_dtype", dtypes, "fp32")});
      model.inputs.back().id_bound = read_id_bound(m, "input_id_bound", model.inputs.back().dtype);
    }
    if (m.has("output_shape")) model.output_shape = read_shape(m, "output_shape");
  } else {
    for (const char* key : {"input_shape", "input_dtype", "inputs", "input_id_bound", "allow_uncaptured", "output_shape"}) {
      if (m.has(key)) {
        m.fail_key(key, m.get(key), std::string(key) + " is for TorchScript models (torchscript: FILE.pt)");
      }
    }
  }
  if (m.has("weights")) {
    if (!model.torchscript_file.empty())
      m.fail_key("weights", m.get("weights"), "a TorchScript file holds its own weights");
    model.weights = resolve_against(config_path, m.string("weights"));
    std::error_code ec;
    if (!std::filesystem::exists(model.weights, ec)) {
      m.fail_key("weights", m.get("weights"),
                 "no such file or folder: " + model.weights.string() +
                     " (a safetensors file, or a Hugging Face folder with model.safetensors or its sharded index)");
    }
  }
  m.mark_seen("weights");
  m.mark_seen("torchscript");
  m.mark_seen("input_shape");
  m.mark_seen("input_dtype");
  m.mark_seen("inputs");
  m.mark_seen("input_id_bound");
  m.mark_seen("allow_uncaptured");
  m.mark_seen("output_shape");
  m.mark_seen("decoder");
  m.mark_seen("prompt_tokens");
  m.mark_seen("prompt_buckets");
  m.finish();
  return model;
}

}  // namespace

std::int64_t prompt_bucket(const std::vector<std::int64_t>& buckets, std::int64_t length) {
  for (const std::int64_t bucket : buckets) {
    if (bucket >= length) return bucket;
  }
  throw InputError(detail::concat("a prompt of ", length, " tokens is longer than the largest prompt bucket (",
                                  buckets.empty() ? 0 : buckets.back(), ")"));
}

std::filesystem::path ServeConfig::profile_path(const ServedModelConfig& model) const {
  return profile_path_in(profiles, model.name, model.dtype);
}

int ServeConfig::model_index(const std::string& name) const {
  for (std::size_t i = 0; i < models.size(); ++i) {
    if (models[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string to_string(TrainingOptimizer optimizer) {
  return optimizer == TrainingOptimizer::Adam ? "adam" : "sgd";
}

ServeConfig parse_serve_config(const std::string& text, const std::filesystem::path& origin_path,
                               const std::vector<std::pair<std::string, std::string>>& overrides) {
  const std::string origin = origin_path.string();
  YAML::Node root = parse_document(text, origin);
  for (const auto& [key, value] : overrides) apply_override(root, key, value, "--set");
  // Note [Overridden keys in messages]
  const OverrideList list{origin, "--set", &overrides};
  const OverrideScope scope(list);
  MapReader r(root, origin, "");
  ServeConfig config;
  config.path = std::filesystem::absolute(origin_path);
  config.overrides = overrides;
  if (r.has("mechanism")) {
    try {
      config.mechanism = parse_mechanism(r.string("mechanism"));
    } catch (const InputError& e) {
      r.fail_key("mechanism", r.get("mechanism"), e.what());
    }
  }
  r.mark_seen("mechanism");
  config.workers = static_cast<int>(r.optional_integer("workers", 1, 16).value_or(2));
  config.hardware = resolve_against(config.path, r.string("hardware"));
  config.profiles = resolve_against(config.path, r.string("profiles"));
  config.cache = optional_choice(r, "cache", {{"off", CachePolicy::Off}, {"lru", CachePolicy::Lru}, {"active", CachePolicy::Active}}, CachePolicy::Off);
  config.cache_bytes = r.optional_integer("cache_bytes", 0, kMaxBytes).value_or(0);
  if (config.cache == CachePolicy::Lru && config.cache_bytes == 0) {
    r.fail_key("cache", r.get("cache"), "cache: lru needs cache_bytes (the parameters kept resident at most)");
  }
  config.max_tensor_bytes = r.optional_integer("max_tensor_bytes", 1024, std::int64_t{1} << 32).value_or(64 << 20);
  config.device_memory_bytes = r.optional_integer("device_memory_bytes", 0, kMaxBytes).value_or(0);
  config.request_timeout =
      milliseconds(r.optional_integer("request_timeout_ms", 10, 3'600'000).value_or(10'000));
  config.max_queue = static_cast<int>(r.optional_integer("max_queue", 1, 100'000).value_or(256));
  config.input_staging_slots = static_cast<int>(r.optional_integer("input_staging_slots", 0, 64).value_or(4));
  if (const auto latency = r.optional_integer("cpu_wakeup_latency_us", 0, 1'000'000)) {
    config.cpu_wakeup_latency_us = static_cast<std::int32_t>(*latency);
  }
  config.dispatch = optional_choice(
      r, "dispatch", {{"overlap", DispatchPolicy::Overlap}, {"after-stop", DispatchPolicy::AfterStop}},
      DispatchPolicy::Overlap);
  config.placement = optional_choice(r, "placement", {{"copy", Placement::Copy}, {"auto", Placement::Auto}}, Placement::Copy);
  {
    // Reading in place needs the parameters in pinned host memory, mapped once, and a device
    // region that the switch fills by groups: the pipelined switch of the standby workers.
    const MechanismTraits& t = traits(config.mechanism);
    const bool pipelined = t.host_memory == HostMemory::Pinned && t.allocation == Allocation::Preallocated &&
                           t.process != ProcessModel::FreshProcess && !t.ipc_handle_per_group;
    if (config.placement == Placement::Auto && !pipelined) {
      r.fail_key("placement", r.get("placement"),
                 "placement: auto reads layers in place from pinned host memory, which mechanism '" +
                     to_string(config.mechanism) + "' does not have: use placement: copy");
    }
  }
  YAML::Node models = r.sequence("models");
  for (std::size_t i = 0; i < models.size(); ++i) {
    ServedModelConfig model = parse_served_model(models[i], config.path, origin, detail::concat("models[", i, "]"));
    if (config.model_index(model.name) >= 0) {
      MapReader m(models[i], origin, detail::concat("models[", i, "]"));
      m.fail_key("name", m.get("name"), "model '" + model.name + "' is listed twice");
    }
    config.models.push_back(std::move(model));
  }
  if (r.has("training")) {
    MapReader t = r.map("training");
    TrainingJobConfig job;
    job.model = t.string("model");
    job.batch = static_cast<int>(t.optional_integer("batch", 1, 4096).value_or(8));
    job.input_size = static_cast<int>(t.optional_integer("input_size", 1, 4096).value_or(224));
    // Note [TorchScript training]: a TorchScript entry of models: by its name.
    if (const int served = config.model_index(job.model);
        served >= 0 && !config.models[static_cast<std::size_t>(served)].torchscript_file.empty()) {
      const ServedModelConfig& entry = config.models[static_cast<std::size_t>(served)];
      job.torchscript_file = entry.torchscript_file;
      job.inputs = entry.inputs;
      for (const char* key : {"input_size", "weights"}) {
        if (t.has(key)) {
          t.fail_key(key, t.get(key),
                     detail::concat("'", job.model, "' is a TorchScript model: its samples are its models: entry's shape, ",
                                    "and its file holds its weights; ", key, " is for the zoo's models"));
        }
      }
    }
    const std::string optimizer = t.has("optimizer") ? t.string("optimizer") : "sgd";
    t.mark_seen("optimizer");
    if (optimizer == "sgd") {
      job.optimizer = TrainingOptimizer::Sgd;
    } else if (optimizer == "adam") {
      job.optimizer = TrainingOptimizer::Adam;
    } else {
      t.fail_key("optimizer", t.get("optimizer"), "expected sgd or adam");
    }
    const bool adam = job.optimizer == TrainingOptimizer::Adam;
    job.learning_rate = t.has("learning_rate") ? t.real("learning_rate", 0.0, 10.0) : (adam ? 0.001 : 0.01);
    t.mark_seen("learning_rate");
    if (adam && t.has("momentum")) {
      t.fail_key("momentum", t.get("momentum"), "momentum is sgd's; adam uses its betas (0.9, 0.999)");
    }
    job.momentum = t.has("momentum") ? t.real("momentum", 0.0, 1.0) : 0.9;
    t.mark_seen("momentum");
    job.seed = static_cast<std::uint64_t>(t.optional_integer("seed", 0, std::int64_t{1} << 53).value_or(1));
    job.autostart = t.boolean("autostart", true);
    job.lookahead = static_cast<int>(t.optional_integer("lookahead", 1, 32).value_or(4));
    job.update_piece_mib = t.optional_integer("update_piece_mib", 0, 65536).value_or(16);
    job.rehearse = t.boolean("rehearse", true);
    // Note [Training checkpoint]: paths against the config's folder, checked now rather than at
    // the first SIGTERM.
    if (t.has("checkpoint")) {
      job.checkpoint = resolve_against(config.path, t.string("checkpoint"));
      std::error_code ec;
      if (!std::filesystem::is_directory(job.checkpoint.parent_path(), ec)) {
        t.fail_key("checkpoint", t.get("checkpoint"),
                   "its folder " + job.checkpoint.parent_path().string() + " does not exist");
      }
    }
    if (t.has("resume_from")) {
      job.resume_from = resolve_against(config.path, t.string("resume_from"));
      std::error_code ec;
      if (!std::filesystem::is_regular_file(job.resume_from, ec)) {
        t.fail_key("resume_from", t.get("resume_from"), "no such file: " + job.resume_from.string());
      }
    }
    if (t.has("dataset")) {
      job.dataset = resolve_against(config.path, t.string("dataset"));
      std::error_code ec;
      if (!std::filesystem::is_regular_file(job.dataset, ec)) {
        t.fail_key("dataset", t.get("dataset"), "no such file: " + job.dataset.string());
      }
    }
    if (t.has("weights")) {
      if (!job.resume_from.empty()) {
        t.fail_key("weights", t.get("weights"), "give weights or resume_from, not both: a checkpoint holds the weights");
      }
      job.weights = resolve_against(config.path, t.string("weights"));
      std::error_code ec;
      if (!std::filesystem::is_regular_file(job.weights, ec)) {
        t.fail_key("weights", t.get("weights"), "no such file: " + job.weights.string());
      }
    }
    t.finish();
    config.training = job;
  }
  r.mark_seen("training");
  r.finish();
  return config;
}

ServedModelConfig parse_served_model_entry(const ServeConfig& config, const std::string& text, const std::string& origin) {
  return parse_served_model(parse_document(text, origin), config.path, origin, "model");
}

std::string repository_load_refusal(Mechanism mechanism) {
  const MechanismTraits& t = traits(mechanism);
  if (t.ipc_handle_per_group || t.allocation == Allocation::Managed) {
    return "mechanism '" + to_string(mechanism) +
           "' gives a model no region of its own (per-group handles or managed memory), which a model loaded while "
           "the server runs is placed in: list the model in the serve config, or serve another mechanism";
  }
  return {};
}

ServeConfig load_serve_config(const std::filesystem::path& path,
                              const std::vector<std::pair<std::string, std::string>>& overrides) {
  return parse_serve_config(read_file(path), path, overrides);
}

}  // namespace psw
