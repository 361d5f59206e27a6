// Experiment and sweep configs (see experiment_config.hpp for the format).
#include "psw/common/experiment_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/common/switch_costs.hpp"
#include "yaml_reader.hpp"

namespace psw {

using namespace yaml_detail;

std::uint32_t ExperimentConfig::model_index(const std::string& model_name) const {
  for (std::size_t i = 0; i < models.size(); ++i) {
    if (models[i].name == model_name) return static_cast<std::uint32_t>(i);
  }
  std::string known;
  for (const auto& m : models) known += (known.empty() ? "" : ", ") + m.name;
  throw InputError("unknown model '" + model_name + "' (the config's models are: " + known + ")");
}

namespace {

std::filesystem::path resolve(const std::filesystem::path& config, const std::string& relative) {
  const std::filesystem::path p(relative);
  return p.is_absolute() ? p : (config.parent_path() / p).lexically_normal();
}

// Model names in a list, resolved against the config's models with the key in errors.
std::uint32_t model_ref(MapReader& r, const ExperimentConfig& config, const std::string& key,
                        const YAML::Node& node) {
  if (!node.IsScalar()) r.fail_key(key, node, "expected a model name");
  try {
    return config.model_index(node.Scalar());
  } catch (const InputError& e) {
    r.fail_key(key, node, e.what());
  }
}

std::vector<double> model_weights(MapReader& w, const ExperimentConfig& config, const std::string& key) {
  YAML::Node node = w.get(key);
  std::vector<double> weights(config.models.size(), 0.0);
  if (node.IsSequence()) {  // equal weights
    if (node.size() == 0) w.fail_key(key, node, "the list is empty");
    for (std::size_t i = 0; i < node.size(); ++i) weights[model_ref(w, config, key, node[i])] += 1.0;
    return weights;
  }
  if (!node.IsMap()) w.fail_key(key, node, "expected a list of models or a mapping model: weight");
  MapReader m(node, w.origin(), w.child_path(key));
  for (const auto& entry : node) {
    const std::string name = entry.first.Scalar();
    const std::uint32_t index = model_ref(w, config, key, entry.first);
    weights[index] = m.real(name, 0.0, 1e12);
  }
  m.finish();
  if (std::all_of(weights.begin(), weights.end(), [](double v) { return v == 0.0; })) {
    w.fail_key(key, node, "every weight is zero");
  }
  return weights;
}

// A duration that must be positive (a rate's period, a mean, a length of time).
Duration positive_duration(MapReader& w, const std::string& key) {
  const Duration d = w.duration(key);
  if (d <= Duration::zero()) w.fail_key(key, w.get(key), "must be positive");
  return d;
}

// The simulated time a workload spans is at most a year (as every duration of a config):
// `per_unit` times `units` must stay below it, which also keeps the arrival times (ns in
// 64 bits) from overflowing.
void check_span(MapReader& w, const std::string& key, Duration per_unit, std::int64_t units,
                const char* what) {
  constexpr std::int64_t kMaxSpanNs = std::int64_t{86'400} * 365 * 1'000'000'000;
  if (per_unit.ns() > 0 && units > kMaxSpanNs / per_unit.ns()) {
    w.fail_key(key, w.get(key), detail::concat(what, " span more than a year of simulated time"));
  }
}

WorkloadSpec parse_workload(MapReader& r, const ExperimentConfig& config) {
  MapReader w = r.map("workload");
  WorkloadSpec spec;
  const std::string kind = w.string("kind");
  const std::string origin = w.origin();
  spec.slo = w.has("slo_ms") ? w.duration("slo_ms") : Duration::zero();
  w.mark_seen("slo_ms");
  if (kind == "periodic") {
    spec.kind = WorkloadKind::Periodic;
    spec.interval = w.duration("interval_ms");
    spec.count = w.integer("count", 1, std::int64_t{1} << 40);
    check_span(w, "count", spec.interval, spec.count, "count requests, one every interval_ms,");
    YAML::Node list = w.sequence("models");
    for (std::size_t i = 0; i < list.size(); ++i) spec.models.push_back(model_ref(w, config, "models", list[i]));
  } else if (kind == "cycles") {
    spec.kind = WorkloadKind::Cycles;
    spec.cycle = positive_duration(w, "cycle_ms");
    spec.rounds = w.integer("rounds", 1, 1'000'000);
    check_span(w, "rounds", spec.cycle * 2, spec.rounds, "rounds of two cycles of cycle_ms");
    spec.cycle_model = model_ref(w, config, "model", w.get("model"));
    if (!config.training_model) {
      w.fail_key("kind", w.get("kind"), "a cycles workload needs a training job (key 'training')");
    }
  } else if (kind == "poisson") {
    spec.kind = WorkloadKind::Poisson;
    spec.poisson.rate_per_second = w.real("rate_per_s", 1e-9, 1e9);
    spec.poisson.duration = positive_duration(w, "duration_s");
    spec.poisson.model_weights = model_weights(w, config, "models");
    spec.poisson.slo = spec.slo;
    spec.poisson.seed = config.seed;
  } else if (kind == "bursty") {
    spec.kind = WorkloadKind::Bursty;
    spec.bursty.high_rate_per_second = w.real("high_rate_per_s", 1e-9, 1e9);
    spec.bursty.low_rate_per_second = w.real("low_rate_per_s", 1e-9, 1e9);
    spec.bursty.mean_high = positive_duration(w, "mean_high_ms");
    spec.bursty.mean_low = positive_duration(w, "mean_low_ms");
    spec.bursty.duration = positive_duration(w, "duration_s");
    spec.bursty.model_weights = model_weights(w, config, "models");
    spec.bursty.slo = spec.slo;
    spec.bursty.seed = config.seed;
  } else if (kind == "trace") {
    spec.kind = WorkloadKind::Trace;
    const std::string format = w.string("format");
    if (format == "csv") spec.format = TraceFormat::ProjectCsv;
    else if (format == "azure-functions-2019") spec.format = TraceFormat::AzureFunctions2019;
    else if (format == "azure-functions-2021") spec.format = TraceFormat::AzureFunctions2021;
    else if (format == "azure-llm-2023") spec.format = TraceFormat::AzureLlm2023;
    else {
      w.fail_key("format", w.get("format"),
                 "expected csv, azure-functions-2019, azure-functions-2021 or azure-llm-2023, got '" +
                     format + "'");
    }
    spec.trace_path = resolve(config.source, w.string("path"));
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(spec.trace_path, ec);
    if (!std::filesystem::exists(status)) {
      w.fail_key("path", w.get("path"), spec.trace_path.string() + ": no such trace file");
    }
    if (!std::filesystem::is_regular_file(status)) {
      w.fail_key("path", w.get("path"),
                 spec.trace_path.string() + ": not a regular file (a directory, device, FIFO or socket)");
    }
    spec.mapping.slo = spec.slo;
    if (w.has("functions")) {
      MapReader f = w.map("functions");
      for (const auto& entry : f.node()) {
        f.mark_seen(entry.first.Scalar());
        spec.mapping.function_model[entry.first.Scalar()] =
            model_ref(f, config, entry.first.Scalar(), entry.second);
      }
    }
    w.mark_seen("functions");
    if (w.has("default_model")) spec.mapping.default_model = model_ref(w, config, "default_model", w.get("default_model"));
    w.mark_seen("default_model");
    if (w.has("spread")) {
      try {
        spec.spread = parse_spread(w.string("spread"));
      } catch (const InputError& e) {
        w.fail_key("spread", w.get("spread"), e.what());
      }
    }
    w.mark_seen("spread");
    spec.first_minute = static_cast<int>(w.optional_integer("first_minute", 1, 1440).value_or(1));
    spec.minutes = static_cast<int>(w.optional_integer("minutes", 1, 1440).value_or(1440 - spec.first_minute + 1));
    if (w.has("buckets")) {
      YAML::Node list = w.sequence("buckets");
      for (std::size_t i = 0; i < list.size(); ++i) {
        MapReader b(list[i], origin, detail::concat("workload.buckets[", i, "]"));
        TokenBucket bucket;
        bucket.max_context_tokens = b.integer("max_context_tokens", 1, std::int64_t{1} << 40);
        bucket.model = model_ref(b, config, "model", b.get("model"));
        b.finish();
        spec.buckets.push_back(bucket);
      }
    }
    w.mark_seen("buckets");
    // Note [Trace window and sample] in common/src/workload_source.cpp.
    if (w.has("window_start_s")) spec.window_start = w.duration("window_start_s");
    if (w.has("window_s")) {
      spec.window = w.duration("window_s");
      if (spec.window <= Duration::zero()) w.fail_key("window_s", w.get("window_s"), "an empty window keeps no request");
    }
    if (w.has("sample")) {
      spec.sample = w.real("sample", 0.0, 1.0);
      if (spec.sample <= 0.0) w.fail_key("sample", w.get("sample"), "a sample of 0 keeps no request: expected (0, 1]");
    }
    if (spec.format == TraceFormat::AzureLlm2023 && spec.buckets.empty()) {
      w.fail_key("format", w.get("format"), "an azure-llm-2023 trace needs 'buckets' mapping context tokens to models");
    }
    spec.decode = w.boolean("decode", false);
    if (spec.decode && spec.format != TraceFormat::AzureLlm2023) {
      w.fail_key("decode", w.get("decode"), "only an azure-llm-2023 trace says how many tokens its requests generate");
    }
    if (spec.decode) {
      // Note [Decode in the simulator]: every decoder the requests go to is priced per step.
      for (const TokenBucket& b : spec.buckets) {
        if (!config.models[b.model].decode_step) {
          w.fail_key("decode", w.get("decode"),
                     config.model_paths[b.model].string() + ": the profile of '" + config.models[b.model].name +
                         "' has no decode_step_ns (psw profile --decode-tokens N measures it), so its requests' "
                         "decoding cannot be priced");
        }
      }
    }
    if ((spec.format == TraceFormat::AzureFunctions2019 || spec.format == TraceFormat::AzureFunctions2021) &&
        spec.mapping.function_model.empty() && !spec.mapping.default_model) {
      w.fail_key("format", w.get("format"), "an Azure Functions trace needs 'functions' or 'default_model'");
    }
  } else {
    w.fail_key("kind", w.get("kind"),
               "expected periodic, cycles, poisson, bursty or trace, got '" + kind + "'");
  }
  w.finish();
  return spec;
}

ExperimentConfig parse_experiment(const YAML::Node& root, const std::filesystem::path& path) {
  const std::string origin = path.string();
  MapReader r(root, origin, "");
  ExperimentConfig config;
  config.source = std::filesystem::absolute(path);
  config.name = r.string("name");
  try {
    config.hardware_path = resolve(config.source, r.string("hardware"));
    config.hardware = load_hardware_profile(config.hardware_path);
  } catch (const InputError& e) {
    r.fail_key("hardware", r.get("hardware"), e.what());
  }
  YAML::Node models = r.sequence("models");
  for (std::size_t i = 0; i < models.size(); ++i) {
    MapReader m(models[i], origin, detail::concat("models[", i, "]"));
    const std::string name = m.string("name");
    ModelProfile profile;
    std::filesystem::path profile_path;
    try {
      profile_path = resolve(config.source, m.string("profile"));
      profile = load_model_profile(profile_path);
    } catch (const InputError& e) {
      m.fail_key("profile", m.get("profile"), e.what());
    }
    if (profile.name != name) {
      m.fail_key("name", m.get("name"), "the profile is of model '" + profile.name + "', not '" + name + "'");
    }
    for (const auto& other : config.models) {
      if (other.name == name) m.fail_key("name", m.get("name"), "model '" + name + "' is listed twice");
    }
    m.finish();
    config.models.push_back(std::move(profile));
    config.model_paths.push_back(std::move(profile_path));
  }
  try {
    config.mechanism = parse_mechanism(r.string("mechanism"));
  } catch (const InputError& e) {
    r.fail_key("mechanism", r.get("mechanism"), e.what());
  }
  if (config.mechanism == Mechanism::TimeSliced && !config.hardware.time_slicing) {
    r.fail_key("mechanism", r.get("mechanism"),
               "time-sliced needs the hardware's time_slicing (context_switch_ns, inference_share_percent: Note [Time slicing]), and " +
                   config.hardware_path.string() + " has none");
  }
  if (r.has("planner")) {
    try {
      config.planner = parse_strategy(r.string("planner"));
    } catch (const InputError& e) {
      r.fail_key("planner", r.get("planner"), e.what());
    }
    if (config.planner == Strategy::Fixed) {
      r.fail_key("planner", r.get("planner"), "the simulator plans with single, per-layer, pipeswitch or optimal");
    }
  }
  r.mark_seen("planner");
  if (r.has("placement")) {
    try {
      config.placement = parse_placement(r.string("placement"));
    } catch (const InputError& e) {
      r.fail_key("placement", r.get("placement"), e.what());
    }
    if (config.placement == Placement::Auto && !config.hardware.mapped) {
      r.fail_key("placement", r.get("placement"),
                 "placement auto needs the hardware's link.mapped (the cost of reading host memory in place), and " +
                     config.hardware_path.string() + " has none");
    }
  }
  r.mark_seen("placement");
  config.standby_workers = static_cast<int>(r.optional_integer("standby_workers", 1, 64).value_or(1));
  {
    // ParallelSpec: the GPUs of the hardware's multi_gpu section (Note [Parallel paths]).
    const int host_gpus = config.hardware.multi_gpu ? config.hardware.multi_gpu->gpus : 1;
    config.parallel.gpus = host_gpus;
    if (r.has("parallel")) {
      MapReader p = r.map("parallel");
      if (p.has("gpus")) {
        config.parallel.gpus = static_cast<int>(p.integer("gpus", 1, 64));
        if (config.parallel.gpus > host_gpus) {
          p.fail_key("gpus", p.get("gpus"),
                     detail::concat("the hardware profile ", config.hardware_path.string(), " has ", host_gpus, " GPU",
                                    host_gpus == 1 ? " (no multi_gpu section)" : "s", ", not ", config.parallel.gpus));
        }
      }
      p.mark_seen("gpus");
      if (p.has("helpers")) {
        const std::string helpers = p.string("helpers");
        if (helpers != "idle" && helpers != "training") {
          p.fail_key("helpers", p.get("helpers"), "expected idle or training, got '" + helpers + "'");
        }
        config.parallel.helpers_training = helpers == "training";
      }
      p.mark_seen("helpers");
      p.finish();
    }
    r.mark_seen("parallel");
  }
  config.seed = static_cast<std::uint64_t>(r.optional_integer("seed", 0, std::int64_t{1} << 62).value_or(1));
  if (r.has("training")) {
    MapReader t = r.map("training");
    config.training_model = model_ref(t, config, "model", t.get("model"));
    if (!has_training_times(config.models[*config.training_model])) {
      // Named by file: two profiles may share a model's name.
      t.fail_key("model", t.get("model"),
                 config.model_paths[*config.training_model].string() + ": the profile of '" +
                     config.models[*config.training_model].name +
                     "' has no measured backward times (an inference profile): it cannot run as the training job");
    }
    config.training_batch = static_cast<int>(
        t.optional_integer("batch", 1, 1 << 20).value_or(config.models[*config.training_model].batch));
    t.finish();
  }
  r.mark_seen("training");
  if (r.has("serving")) {  // Note [Request path] (serving_profile.hpp)
    // The key's own errors name it once; the profile's are wrapped with the key below.
    config.serving_path = resolve(config.source, r.string("serving"));
    try {
      config.serving = load_serving_profile(config.serving_path);
    } catch (const InputError& e) {
      r.fail_key("serving", r.get("serving"), e.what());
    }
  }
  r.mark_seen("serving");
  // The training job's step: the serving profile's, which must be at the job's batch, else the
  // model profile's layers, which are at the profile's batch only.
  if (config.training_model) {
    const ModelProfile& trained = config.models[*config.training_model];
    const TrainingStepCost* step = config.serving ? config.serving->training_of(trained.name) : nullptr;
    if (step != nullptr && step->batch != config.training_batch) {
      r.fail_key("serving", r.get("serving"),
                 detail::concat("the serving profile's training step of ", trained.name, " is for batch ", step->batch,
                                ", the training job's for batch ", config.training_batch,
                                " (training.batch; the model profile's is ", trained.batch, ")"));
    }
    if (step == nullptr && config.training_batch != trained.batch) {
      r.fail_key("training", r.get("training"),
                 detail::concat("a training job at batch ", config.training_batch, " needs a serving profile with its step",
                                " at that batch (key 'serving'): the model profile of ", trained.name, " is for batch ",
                                trained.batch));
    }
  }
  config.workload = parse_workload(r, config);
  if (r.has("outputs")) {
    MapReader o = r.map("outputs");
    config.requests_csv = o.boolean("requests_csv", true);
    o.finish();
  }
  r.mark_seen("outputs");
  r.finish();
  return config;
}

}  // namespace

ExperimentConfig load_experiment_config(const std::filesystem::path& path) {
  return load_experiment_config(path, {});
}

ExperimentConfig load_experiment_config(const std::filesystem::path& path,
                                        const std::vector<std::pair<std::string, std::string>>& overrides,
                                        const std::string& overrides_from) {
  return parse_experiment_config(read_file(path), path, overrides, overrides_from);
}

ExperimentConfig parse_experiment_config(const std::string& text, const std::filesystem::path& path,
                                         const std::vector<std::pair<std::string, std::string>>& overrides,
                                         const std::string& overrides_from) {
  YAML::Node root = parse_document(text, path.string());
  for (const auto& [key, value] : overrides) apply_override(root, key, value, overrides_from);
  // Note [Overridden keys in messages]
  const OverrideList list{path.string(), overrides_from, &overrides};
  const OverrideScope scope(list);
  return parse_experiment(root, path);
}

namespace {

// A path as the resolved config records it (Note [Resolved configs]): relative to `base` (the
// folder the file is written to), else absolute.
std::string recorded_path(const std::filesystem::path& path, const std::filesystem::path& base) {
  if (path.empty()) return {};
  if (base.empty()) return std::filesystem::absolute(path).lexically_normal().string();
  return path_relative_to(path, base);
}

// `d` in units of `unit_ns` as exact decimal text: 1500000 ns in ms is "1.5".
std::string duration_text(Duration d, std::int64_t unit_ns) {
  const std::int64_t ns = d.ns();
  PSW_CHECK(ns >= 0, "a negative duration in a config: ", ns, " ns");
  std::string text = std::to_string(ns / unit_ns);
  std::int64_t rest = ns % unit_ns;
  if (rest == 0) return text;
  std::string digits;
  for (std::int64_t scale = unit_ns / 10; scale > 0; scale /= 10) {
    digits += static_cast<char>('0' + rest / scale);
    rest %= scale;
  }
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return text + "." + digits;
}

// The shortest text that reads back as `value` (as the parser's std::from_chars reads it).
std::string number_text(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// A file's path in a one-line comment: no line breaks or other control characters.
std::string comment_text(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

}  // namespace

std::string resolved_yaml(const ExperimentConfig& config, const std::filesystem::path& written_to) {
  const std::filesystem::path base =
      written_to.empty() ? std::filesystem::path() : std::filesystem::absolute(written_to).parent_path();
  const auto path_of = [&base](const std::filesystem::path& p, const std::string& fallback) {
    return p.empty() ? fallback : recorded_path(p, base);
  };
  const auto model_name = [&config](std::uint32_t m) { return config.models[m].name; };
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << config.name;
  out << YAML::Key << "hardware" << YAML::Value << path_of(config.hardware_path, config.hardware.name);
  out << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
  for (std::size_t i = 0; i < config.models.size(); ++i) {
    const std::filesystem::path profile = i < config.model_paths.size() ? config.model_paths[i] : std::filesystem::path();
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << config.models[i].name << YAML::Key
        << "profile" << YAML::Value << path_of(profile, config.models[i].name) << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "mechanism" << YAML::Value << to_string(config.mechanism);
  out << YAML::Key << "planner" << YAML::Value << to_string(config.planner);
  out << YAML::Key << "placement" << YAML::Value << to_string(config.placement);
  out << YAML::Key << "standby_workers" << YAML::Value << config.standby_workers;
  if (traits(config.mechanism).peer_paths) {
    out << YAML::Key << "parallel" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "gpus" << YAML::Value << config.parallel.gpus;
    out << YAML::Key << "helpers" << YAML::Value << (config.parallel.helpers_training ? "training" : "idle");
    out << YAML::EndMap;
  }
  out << YAML::Key << "seed" << YAML::Value << config.seed;
  if (config.training_model) {
    out << YAML::Key << "training" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "model"
        << YAML::Value << model_name(*config.training_model) << YAML::Key << "batch" << YAML::Value
        << config.training_batch << YAML::EndMap;
  }
  if (config.serving) {
    out << YAML::Key << "serving" << YAML::Value << path_of(config.serving_path, config.serving->name);
  }
  const auto& w = config.workload;
  constexpr std::int64_t kMs = 1'000'000;
  constexpr std::int64_t kS = 1'000'000'000;
  const auto weights = [&](const std::vector<double>& v) {
    out << YAML::Flow << YAML::BeginMap;
    for (std::size_t m = 0; m < v.size(); ++m) {
      if (v[m] != 0.0) out << YAML::Key << config.models[m].name << YAML::Value << number_text(v[m]);
    }
    out << YAML::EndMap;
  };
  out << YAML::Key << "workload" << YAML::Value << YAML::BeginMap;
  const char* kinds[] = {"periodic", "cycles", "poisson", "bursty", "trace"};
  out << YAML::Key << "kind" << YAML::Value << kinds[static_cast<int>(w.kind)];
  out << YAML::Key << "slo_ms" << YAML::Value << duration_text(w.slo, kMs);
  switch (w.kind) {
    case WorkloadKind::Periodic:
      out << YAML::Key << "interval_ms" << YAML::Value << duration_text(w.interval, kMs);
      out << YAML::Key << "count" << YAML::Value << w.count;
      out << YAML::Key << "models" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (auto m : w.models) out << model_name(m);
      out << YAML::EndSeq;
      break;
    case WorkloadKind::Cycles:
      out << YAML::Key << "cycle_ms" << YAML::Value << duration_text(w.cycle, kMs);
      out << YAML::Key << "rounds" << YAML::Value << w.rounds;
      out << YAML::Key << "model" << YAML::Value << model_name(w.cycle_model);
      break;
    case WorkloadKind::Poisson:
      out << YAML::Key << "rate_per_s" << YAML::Value << number_text(w.poisson.rate_per_second);
      out << YAML::Key << "duration_s" << YAML::Value << duration_text(w.poisson.duration, kS);
      out << YAML::Key << "models" << YAML::Value;
      weights(w.poisson.model_weights);
      break;
    case WorkloadKind::Bursty:
      out << YAML::Key << "high_rate_per_s" << YAML::Value << number_text(w.bursty.high_rate_per_second);
      out << YAML::Key << "low_rate_per_s" << YAML::Value << number_text(w.bursty.low_rate_per_second);
      out << YAML::Key << "mean_high_ms" << YAML::Value << duration_text(w.bursty.mean_high, kMs);
      out << YAML::Key << "mean_low_ms" << YAML::Value << duration_text(w.bursty.mean_low, kMs);
      out << YAML::Key << "duration_s" << YAML::Value << duration_text(w.bursty.duration, kS);
      out << YAML::Key << "models" << YAML::Value;
      weights(w.bursty.model_weights);
      break;
    case WorkloadKind::Trace: {
      const char* formats[] = {"csv", "azure-functions-2019", "azure-functions-2021", "azure-llm-2023"};
      out << YAML::Key << "format" << YAML::Value << formats[static_cast<int>(w.format)];
      out << YAML::Key << "path" << YAML::Value << recorded_path(w.trace_path, base);
      out << YAML::Key << "spread" << YAML::Value << (w.spread == SpreadKind::Uniform ? "uniform" : "poisson");
      out << YAML::Key << "first_minute" << YAML::Value << w.first_minute;
      out << YAML::Key << "minutes" << YAML::Value << w.minutes;
      out << YAML::Key << "window_start_s" << YAML::Value << duration_text(w.window_start, kS);
      if (w.window > Duration::zero()) out << YAML::Key << "window_s" << YAML::Value << duration_text(w.window, kS);
      out << YAML::Key << "sample" << YAML::Value << number_text(w.sample);
      if (!w.mapping.function_model.empty()) {
        out << YAML::Key << "functions" << YAML::Value << YAML::BeginMap;
        for (const auto& [f, m] : w.mapping.function_model) out << YAML::Key << f << YAML::Value << model_name(m);
        out << YAML::EndMap;
      }
      if (w.mapping.default_model) {
        out << YAML::Key << "default_model" << YAML::Value << model_name(*w.mapping.default_model);
      }
      if (w.decode) out << YAML::Key << "decode" << YAML::Value << true;
      if (!w.buckets.empty()) {
        out << YAML::Key << "buckets" << YAML::Value << YAML::BeginSeq;
        for (const auto& b : w.buckets) {
          out << YAML::Flow << YAML::BeginMap << YAML::Key << "max_context_tokens" << YAML::Value
              << b.max_context_tokens << YAML::Key << "model" << YAML::Value << model_name(b.model) << YAML::EndMap;
        }
        out << YAML::EndSeq;
      }
      break;
    }
  }
  out << YAML::EndMap;
  out << YAML::Key << "outputs" << YAML::Value << YAML::BeginMap << YAML::Key << "requests_csv"
      << YAML::Value << config.requests_csv << YAML::EndMap;
  out << YAML::EndMap;
  std::string header = "# The resolved config of a run (Note [Resolved configs]): psw sim --config <this file> reruns it.\n";
  if (!config.source.empty()) header += "# source: " + comment_text(recorded_path(config.source, base)) + "\n";
  return header + std::string(out.c_str()) + "\n";
}

SweepConfig load_sweep_config(const std::filesystem::path& path) {
  return parse_sweep_config(read_file(path), path);
}

SweepConfig parse_sweep_config(const std::string& text, const std::filesystem::path& path) {
  const std::string origin = path.string();
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  SweepConfig sweep;
  sweep.name = r.string("name");
  const std::filesystem::path base = resolve(std::filesystem::absolute(path), r.string("base"));
  MapReader grid = r.map("grid");
  std::vector<std::vector<std::string>> values;
  for (const auto& entry : grid.node()) {
    const std::string key = entry.first.Scalar();
    grid.mark_seen(key);
    if (!entry.second.IsSequence() || entry.second.size() == 0) {
      grid.fail_key(key, entry.second, "expected a non-empty list of values");
    }
    sweep.keys.push_back(key);
    std::vector<std::string> texts;
    for (const auto& v : entry.second) {
      YAML::Emitter e;
      e << YAML::Flow << v;
      texts.emplace_back(e.c_str());
    }
    values.push_back(std::move(texts));
  }
  if (sweep.keys.empty()) grid.fail(grid.node(), "the grid has no keys");
  std::vector<std::uint64_t> seeds{1};
  if (r.has("seeds")) {
    YAML::Node list = r.sequence("seeds");
    seeds.clear();
    for (std::size_t i = 0; i < list.size(); ++i) {
      seeds.push_back(static_cast<std::uint64_t>(
          r.to_integer(detail::concat("seeds[", i, "]"), list[i], 0, std::int64_t{1} << 62)));
    }
  }
  r.mark_seen("seeds");
  r.finish();
  // Every point is loaded (and checked) here; a grid of more points would run for days.
  constexpr std::size_t kMaxPoints = 100'000;
  std::size_t total = seeds.size();
  for (const auto& v : values) {
    total = total > kMaxPoints ? total : total * v.size();
  }
  if (total > kMaxPoints) {
    grid.fail(grid.node(), detail::concat("the grid and seeds make more than ", kMaxPoints, " points"));
  }
  // Cartesian product, last key varying fastest, then seeds.
  std::vector<std::size_t> index(values.size(), 0);
  while (true) {
    for (const std::uint64_t seed : seeds) {
      SweepPoint point;
      for (std::size_t k = 0; k < values.size(); ++k) point.overrides.emplace_back(sweep.keys[k], values[k][index[k]]);
      point.seed = seed;
      auto overrides = point.overrides;
      overrides.emplace_back("seed", std::to_string(seed));
      try {
        point.config = load_experiment_config(base, overrides, "grid value");
      } catch (const InputError& e) {
        std::string where;
        for (const auto& [k, v] : point.overrides) where += " " + k + "=" + v;
        throw InputError(origin + ": grid point" + where + ": " + e.what());
      }
      sweep.points.push_back(std::move(point));
    }
    std::size_t k = values.size();
    while (k > 0) {
      --k;
      if (++index[k] < values[k].size()) break;
      index[k] = 0;
      if (k == 0) return sweep;
    }
    if (values.empty()) return sweep;
  }
}

}  // namespace psw
