// Profiles and fixed groupings in YAML. Only common/ includes yaml-cpp (DESIGN.md §3), and
// every reader goes through yaml_reader.hpp, so every error looks the same.
#include "psw/common/config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <set>

#include "psw/common/error.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/serving_profile.hpp"
#include "yaml_reader.hpp"

namespace psw {

using namespace yaml_detail;

ModelProfile parse_model_profile(const std::string& text, const std::string& origin) {
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  ModelProfile model;
  model.name = r.string("name");
  model.batch = static_cast<int>(r.integer("batch", 1, 1 << 20));
  model.dtype = r.string("dtype");
  if (model.dtype != "fp32" && model.dtype != "fp16" && model.dtype != "bf16") {
    r.fail_key("dtype", r.get("dtype"), "expected fp32, fp16 or bf16, got '" + model.dtype + "'");
  }
  model.source = read_source(r);
  YAML::Node layers = r.sequence("layers");
  std::set<std::string> names;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    MapReader l(layers[i], origin, detail::concat("layers[", i, "]"));
    LayerProfile layer;
    layer.name = l.string("name");
    if (!names.insert(layer.name).second) {
      l.fail_key("name", l.get("name"), "duplicate layer name '" + layer.name + "'");
    }
    layer.kind = l.string("kind");
    layer.param_bytes = l.integer("param_bytes", 0, kMaxBytes);
    layer.activation_bytes = l.optional_integer("activation_bytes", 0, kMaxBytes).value_or(0);
    layer.training_only = l.boolean("training_only", false);
    layer.host_read_bytes = l.optional_integer("host_read_bytes", 0, kMaxBytes).value_or(0);
    const auto fwd_flops = l.optional_integer("forward_flops", 0, kMaxFlops);
    const auto fwd_mem = l.optional_integer("forward_memory_bytes", 0, kMaxBytes);
    const auto bwd_flops = l.optional_integer("backward_flops", 0, kMaxFlops);
    const auto bwd_mem = l.optional_integer("backward_memory_bytes", 0, kMaxBytes);
    const auto fwd_ns = l.optional_integer("forward_ns", 0, kMaxDurationNs);
    const auto bwd_ns = l.optional_integer("backward_ns", 0, kMaxDurationNs);
    if (model.source.kind == ProfileSource::Analytic) {
      if (!fwd_flops) {
        throw InputError(detail::concat(origin, ":", layers[i].Mark().line + 1, ": key 'layers[",
                                        i, "].forward_flops' is missing (an analytic profile "
                                        "gives FLOPs per layer)"));
      }
      if (fwd_ns || bwd_ns) {
        l.fail_key(fwd_ns ? "forward_ns" : "backward_ns", l.get(fwd_ns ? "forward_ns" : "backward_ns"),
                   "an analytic profile gives FLOPs, not times (set source.kind: measured)");
      }
    } else {
      if (!fwd_ns) {
        throw InputError(detail::concat(origin, ":", layers[i].Mark().line + 1, ": key 'layers[",
                                        i, "].forward_ns' is missing (a measured profile gives "
                                        "times per layer)"));
      }
      layer.forward_time = nanoseconds(*fwd_ns);
      if (bwd_ns) layer.backward_time = nanoseconds(*bwd_ns);
    }
    layer.forward_flops = fwd_flops.value_or(0);
    layer.forward_memory_bytes = fwd_mem.value_or(0);
    layer.backward_flops = bwd_flops.value_or(0);
    layer.backward_memory_bytes = bwd_mem.value_or(0);
    l.finish();
    model.layers.push_back(std::move(layer));
  }
  // Note [Prefill curve] (model_profile.hpp).
  model.prompt_tokens = r.optional_integer("prompt_tokens", 1, kMaxPromptTokens).value_or(0);
  if (r.has("prefill_curve")) {
    if (model.prompt_tokens == 0) {
      r.fail_key("prefill_curve", r.get("prefill_curve"),
                 "a prefill curve needs prompt_tokens (the prompt length the layers' forward times are for)");
    }
    YAML::Node curve = r.sequence("prefill_curve");
    bool has_own_prompt = false;
    for (std::size_t i = 0; i < curve.size(); ++i) {
      MapReader c(curve[i], origin, detail::concat("prefill_curve[", i, "]"));
      PrefillPoint point;
      point.tokens = c.integer("tokens", 1, kMaxPromptTokens);
      point.forward = nanoseconds(c.integer("forward_ns", 1, kMaxDurationNs));
      if (!model.prefill_curve.empty() && point.tokens <= model.prefill_curve.back().tokens) {
        c.fail_key("tokens", c.get("tokens"), "the curve's prompt lengths must increase");
      }
      c.finish();
      has_own_prompt = has_own_prompt || point.tokens == model.prompt_tokens;
      model.prefill_curve.push_back(point);
    }
    if (model.prefill_curve.size() < 2 || !has_own_prompt) {
      r.fail_key("prefill_curve", r.get("prefill_curve"),
                 detail::concat("a prefill curve needs at least two points, one of them at prompt_tokens (",
                                model.prompt_tokens, ")"));
    }
  }
  r.mark_seen("prefill_curve");
  if (r.has("decode_step_ns")) {
    if (model.prompt_tokens == 0) {
      r.fail_key("decode_step_ns", r.get("decode_step_ns"), "a decode step is a decoder's: it needs prompt_tokens");
    }
    model.decode_step = nanoseconds(r.integer("decode_step_ns", 1, kMaxDurationNs));
  }
  r.finish();
  return model;
}

HardwareProfile parse_hardware_profile(const std::string& text, const std::string& origin) {
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  HardwareProfile hw;
  hw.name = r.string("name");
  hw.source = read_source(r);
  {
    MapReader g = r.map("gpu");
    hw.gpu_name = g.string("name");
    hw.gpu_memory_bytes = g.integer("memory_bytes", 1, kMaxBytes);
    g.finish();
  }
  {
    MapReader l = r.map("link");
    hw.pinned = read_link(l, "pinned");
    hw.pageable = read_link(l, "pageable");
    if (l.has("mapped")) hw.mapped = read_link(l, "mapped");
    l.finish();
  }
  hw.group_sync = read_duration(r, "group_sync_ns");
  if (r.has("training_abort_ns")) hw.training_abort = read_duration(r, "training_abort_ns");  // Note [Training abort]
  {
    MapReader c = r.map("compute");
    hw.compute.flops_per_second = c.integer("flops_per_s", 1, kMaxFlopsRate);
    hw.compute.conv_flops_per_second = c.integer("conv_flops_per_s", 1, kMaxFlopsRate);
    hw.compute.memory_bandwidth = read_bandwidth(c, "memory_bandwidth_bytes_per_s");
    hw.compute.kernel_overhead = read_duration(c, "kernel_overhead_ns");
    c.finish();
  }
  {
    MapReader s = r.map("startup");
    hw.cuda_context_create = read_duration(s, "cuda_context_ns");
    hw.process_start = read_duration(s, "process_start_ns");
    hw.framework_start = read_duration(s, "framework_start_ns");
    hw.worker_cleanup = read_duration(s, "worker_cleanup_ns");
    if (s.has("process_kill_ns")) hw.process_kill = read_duration(s, "process_kill_ns");  // Note [Worker kill]
    if (s.has("first_forward")) {  // Note [First forward in a fresh process]
      const YAML::Node entries = s.sequence("first_forward");
      for (std::size_t i = 0; i < entries.size(); ++i) {
        MapReader e(entries[i], origin, detail::concat("startup.first_forward[", i, "]"));
        const std::string model = e.string("model");
        if (hw.first_forward.contains(model)) e.fail_key("model", e.get("model"), "a second entry of " + model);
        hw.first_forward[model] = read_duration(e, "first_forward_ns");
        e.finish();
      }
    }
    s.finish();
  }
  if (r.has("eager_switch")) {  // Note [Eager switch in the simulator]
    const YAML::Node entries = r.sequence("eager_switch");
    for (std::size_t i = 0; i < entries.size(); ++i) {
      MapReader e(entries[i], origin, detail::concat("eager_switch[", i, "]"));
      const std::string model = e.string("model");
      const std::string name = e.string("mechanism");
      Mechanism mechanism{};
      try {
        mechanism = parse_mechanism(name);
      } catch (const InputError& bad) {
        e.fail_key("mechanism", e.get("mechanism"), bad.what());
      }
      if (!has_eager_host_times(mechanism)) {
        e.fail_key("mechanism", e.get("mechanism"),
                   "the host times of an eager switch are for PipeSwitch's variants the server runs eagerly "
                   "(no-memory-management, no-ipc-optimization, no-pinned-memory) and one-process");
      }
      const std::pair<std::string, std::string> key{model, to_string(mechanism)};
      if (hw.eager_switch.contains(key)) {
        e.fail_key("model", e.get("model"), "a second entry of " + model + " under " + key.second);
      }
      hw.eager_switch[key] = {read_duration(e, "prepare_ns"), read_duration(e, "forward_ns")};
      e.finish();
    }
  }
  {
    MapReader m = r.map("memory");
    hw.cuda_malloc = read_duration(m, "cuda_malloc_ns");
    hw.cuda_free = read_duration(m, "cuda_free_ns");
    hw.ipc_handle_open = read_duration(m, "ipc_handle_open_ns");
    m.finish();
  }
  {
    MapReader m = r.map("mps");
    hw.mps.inference_slowdown_percent = static_cast<int>(m.integer("inference_slowdown_percent", 100, 100'000));
    hw.mps.training_slowdown_percent = static_cast<int>(m.integer("training_slowdown_percent", 100, 100'000));
    if (m.has("contention")) {  // Note [MPS contention]
      const YAML::Node points = m.sequence("contention");
      for (std::size_t i = 0; i < points.size(); ++i) {
        MapReader p(points[i], origin, detail::concat("mps.contention[", i, "]"));
        MpsContentionPoint point;
        point.inference_model = p.string("inference_model");
        point.training_model = p.string("training_model");
        point.training_batch = static_cast<int>(p.integer("training_batch", 1, 1 << 20));
        point.inference_slowdown_percent = static_cast<int>(p.integer("inference_slowdown_percent", 100, 100'000));
        for (const MpsContentionPoint& earlier : hw.mps.contention) {
          if (earlier.inference_model == point.inference_model && earlier.training_model == point.training_model &&
              earlier.training_batch == point.training_batch) {
            p.fail_key("training_batch", p.get("training_batch"),
                       detail::concat("a second point of ", point.inference_model, " beside ", point.training_model,
                                      " at training batch ", point.training_batch));
          }
        }
        p.finish();
        hw.mps.contention.push_back(std::move(point));
      }
    }
    m.finish();
  }
  {
    MapReader u = r.map("unified_memory");
    hw.unified_memory.page_bytes = u.integer("page_bytes", 1, kMaxBytes);
    hw.unified_memory.page_fault = read_duration(u, "page_fault_ns");
    hw.unified_memory.migration_bandwidth = read_bandwidth(u, "migration_bandwidth_bytes_per_s");
    u.finish();
  }
  if (r.has("time_slicing")) {  // Note [Time slicing]
    MapReader t = r.map("time_slicing");
    if (t.has("slice_ns")) {
      t.fail_key("slice_ns", t.get("slice_ns"),
                 "the time-slicing model has no slice since the H200 measured a share (Note [Time slicing]): "
                 "give inference_share_percent (1-100) instead");
    }
    TimeSlicingModel ts;
    ts.context_switch = read_duration(t, "context_switch_ns");
    ts.inference_share_percent = static_cast<int>(t.integer("inference_share_percent", 1, 100));
    t.finish();
    hw.time_slicing = ts;
  }
  if (r.has("multi_gpu")) {  // Note [Parallel paths]
    MapReader m = r.map("multi_gpu");
    MultiGpuModel multi;
    multi.gpus = static_cast<int>(m.integer("gpus", 1, 64));
    multi.peer_link = read_link(m, "peer_link");
    if (const auto ingress = m.optional_integer("peer_ingress_bandwidth_bytes_per_s", 1, kMaxBandwidth)) {
      multi.peer_ingress = Bandwidth::bytes_per_second(*ingress);
    }
    multi.chunk_bytes = m.integer("chunk_bytes", 4096, kMaxBytes);
    multi.helper_busy_share_percent = static_cast<int>(m.integer("helper_busy_share_percent", 1, 100));
    if (m.has("helper_links")) {
      YAML::Node links = m.sequence("helper_links");
      if (links.size() != static_cast<std::size_t>(multi.gpus - 1)) {
        m.fail_key("helper_links", links,
                   detail::concat("expected one host link per helper (gpus - 1 = ", multi.gpus - 1, "), got ",
                                  links.size()));
      }
      for (std::size_t h = 0; h < links.size(); ++h) {
        MapReader l(links[h], origin, detail::concat("multi_gpu.helper_links[", h, "]"));
        LinkCost link;
        link.copy_fixed = read_duration(l, "copy_fixed_ns");
        link.bandwidth = read_bandwidth(l, "bandwidth_bytes_per_s");
        l.finish();
        multi.helper_links.push_back(link);
      }
    } else {
      // Default: every helper is a GPU like the target, on a link like its pinned one.
      multi.helper_links.assign(static_cast<std::size_t>(multi.gpus - 1), hw.pinned);
    }
    m.finish();
    hw.multi_gpu = multi;
  }
  r.finish();
  return hw;
}

// Note [Config files as JSON] -------------------------------------------------------------

// Named, not anonymous: the unity build compiles this file with the rest of psw_core.
namespace yaml_as_json {

nlohmann::json scalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: a string as written
  if (text == "true" || text == "false") return text == "true";
  if (text.empty() || text == "null" || text == "~") return nullptr;
  std::int64_t integer = 0;
  if (const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), integer);
      ec == std::errc() && end == text.data() + text.size()) {
    return integer;
  }
  double number = 0;
  if (const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
      ec == std::errc() && end == text.data() + text.size() && std::isfinite(number)) {
    return number;
  }
  return text;
}

nlohmann::json convert(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& entry : node) out[entry.first.Scalar()] = convert(entry.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(convert(item));
      return out;
    }
    case YAML::NodeType::Scalar: return scalar(node);
    default: return nullptr;
  }
}

}  // namespace yaml_as_json

nlohmann::json yaml_file_as_json(const std::filesystem::path& path,
                                 const std::vector<std::pair<std::string, std::string>>& overrides) {
  YAML::Node root = parse_document(read_file(path), path.string());
  for (const auto& [key, value] : overrides) apply_override(root, key, value, "--set");
  return yaml_as_json::convert(root);
}

ModelProfile load_model_profile(const std::filesystem::path& path) {
  return parse_model_profile(read_file(path), path.string());
}

double mps_inference_slowdown_percent(const MpsModel& mps, const std::string& inference_model,
                                      const std::string& training_model, int training_batch) {
  // The pair's points, by training batch (Note [MPS contention]).
  std::vector<const MpsContentionPoint*> points;
  for (const MpsContentionPoint& p : mps.contention) {
    if (p.inference_model == inference_model && p.training_model == training_model) points.push_back(&p);
  }
  if (points.empty()) return mps.inference_slowdown_percent;
  std::sort(points.begin(), points.end(), [](auto* a, auto* b) { return a->training_batch < b->training_batch; });
  if (training_batch <= points.front()->training_batch) return points.front()->inference_slowdown_percent;
  if (training_batch >= points.back()->training_batch) return points.back()->inference_slowdown_percent;
  std::size_t above = 1;
  while (points[above]->training_batch < training_batch) ++above;
  const MpsContentionPoint& lo = *points[above - 1];
  const MpsContentionPoint& hi = *points[above];
  const double t = static_cast<double>(training_batch - lo.training_batch) / (hi.training_batch - lo.training_batch);
  return lo.inference_slowdown_percent + t * (hi.inference_slowdown_percent - lo.inference_slowdown_percent);
}

HardwareProfile load_hardware_profile(const std::filesystem::path& path) {
  return parse_hardware_profile(read_file(path), path.string());
}

namespace {

// `groups: [[first, last], ...]` of a model of `num_layers` layers, consecutive and covering
// every layer once; errors name the entry.
Grouping read_groups(MapReader& r, std::size_t num_layers) {
  YAML::Node list = r.sequence("groups");
  Grouping groups;
  std::size_t next = 0;
  for (std::size_t g = 0; g < list.size(); ++g) {
    const YAML::Node entry = list[g];
    const std::string key = detail::concat("groups[", g, "]");
    if (!entry.IsSequence() || entry.size() != 2) {
      r.fail_key(key, entry, "expected a pair [first, last] of layer indices");
    }
    const auto max_index = static_cast<std::int64_t>(num_layers) - 1;
    const auto first = r.to_integer(key + "[0]", entry[0], 0, max_index);
    const auto last = r.to_integer(key + "[1]", entry[1], 0, max_index);
    if (last < first) {
      r.fail_key(key, entry, detail::concat("ends at layer ", last, " before it starts at ", first));
    }
    if (static_cast<std::size_t>(first) != next) {
      r.fail_key(key, entry, detail::concat("starts at layer ", first, " but layer ", next,
                                            " is next (groups must be consecutive and cover "
                                            "every layer once)"));
    }
    next = static_cast<std::size_t>(last) + 1;
    groups.push_back({static_cast<std::size_t>(first), static_cast<std::size_t>(last)});
  }
  if (next != num_layers) {
    r.fail_key("groups", list, detail::concat("the groups cover layers 0..", next - 1,
                                              " but the model has ", num_layers,
                                              " layers"));
  }
  return groups;
}

}  // namespace

Grouping load_fixed_groups(const std::filesystem::path& path, const ModelProfile& model) {
  return parse_fixed_groups(read_file(path), path.string(), model);
}

namespace {

// Whether layer `layer` belongs to module `module`: its name is the module's, or lies under it.
bool layer_in_module(const std::string& layer, const std::string& module) {
  return layer == module || (layer.size() > module.size() && layer.compare(0, module.size(), module) == 0 &&
                             layer[module.size()] == '.');
}

// `modules: [[name, ...], ...]`: each group is the layers whose names are one of its module
// names or lie under one (`layer1.0` takes `layer1.0.conv1`). Every layer must fall in exactly
// one group and each group must be a non-empty run of consecutive layers, in order. Errors name
// the group entry, or the layer that no group or two groups take.
Grouping read_module_groups(MapReader& r, const ModelProfile& model) {
  YAML::Node list = r.sequence("modules");
  std::vector<std::vector<std::string>> modules(list.size());
  for (std::size_t g = 0; g < list.size(); ++g) {
    const YAML::Node entry = list[g];
    const std::string key = detail::concat("modules[", g, "]");
    if (!entry.IsSequence() || entry.size() == 0) {
      r.fail_key(key, entry, "expected a non-empty list of module names, such as [layer1.0] or [conv1, bn1]");
    }
    for (std::size_t m = 0; m < entry.size(); ++m) {
      if (!entry[m].IsScalar() || entry[m].Scalar().empty()) {
        r.fail_key(detail::concat(key, "[", m, "]"), entry[m], "expected a module name");
      }
      modules[g].push_back(entry[m].Scalar());
    }
  }
  std::vector<std::size_t> owner(model.layers.size());
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const std::string& name = model.layers[i].name;
    std::vector<std::size_t> hits;
    for (std::size_t g = 0; g < modules.size(); ++g) {
      for (const std::string& module : modules[g]) {
        if (layer_in_module(name, module)) {
          hits.push_back(g);
          break;
        }
      }
    }
    if (hits.empty()) {
      r.fail_key("modules", list, detail::concat("layer ", i, " '", name, "' of model '", model.name,
                                                 "' is in no group's modules"));
    }
    if (hits.size() > 1) {
      r.fail_key(detail::concat("modules[", hits[1], "]"), list[hits[1]],
                 detail::concat("layer ", i, " '", name, "' is in this group and in modules[", hits[0], "]"));
    }
    owner[i] = hits.front();
  }
  Grouping groups;
  std::size_t i = 0;
  for (std::size_t g = 0; g < modules.size(); ++g) {
    const std::string key = detail::concat("modules[", g, "]");
    if (std::find(owner.begin(), owner.end(), g) == owner.end()) {
      r.fail_key(key, list[g], detail::concat("takes no layer of model '", model.name, "'"));
    }
    if (owner[i] != g) {
      r.fail_key(key, list[g], detail::concat("layer ", i, " '", model.layers[i].name, "' is next but is in modules[",
                                              owner[i], "] (groups must take consecutive layers, in layer order)"));
    }
    const std::size_t first = i;
    while (i < owner.size() && owner[i] == g) ++i;
    groups.push_back({first, i - 1});
  }
  if (i != owner.size()) {
    r.fail_key(detail::concat("modules[", owner[i], "]"), list[owner[i]],
               detail::concat("its layers are not consecutive: layer ", i, " '", model.layers[i].name,
                              "' comes after layers of other groups"));
  }
  return groups;
}

}  // namespace

Grouping parse_fixed_groups(const std::string& text, const std::string& origin, const ModelProfile& model) {
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  const std::string named = r.optional_string("model");
  if (!named.empty() && named != model.name) {
    r.fail_key("model", r.get("model"),
               "the groups are for model '" + named + "' but the model is '" + model.name + "'");
  }
  if (r.has("groups") == r.has("modules")) {
    r.fail_key("groups", root, "expected exactly one of 'groups' (layer index ranges) and 'modules' (module names)");
  }
  Grouping groups = r.has("modules") ? read_module_groups(r, model) : read_groups(r, model.layers.size());
  r.finish();
  validate_grouping(groups, model.layers.size(), origin);
  return groups;
}

SwitchPlan parse_switch_plan(const std::string& text, const std::string& origin) {
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  SwitchPlan plan;
  plan.model = r.string("model");
  try {
    plan.strategy = parse_strategy(r.string("strategy"));
  } catch (const InputError& e) {
    r.fail_key("strategy", r.get("strategy"), e.what());
  }
  const std::string fingerprint = r.string("fingerprint");
  {
    std::uint64_t value = 0;
    const char* begin = fingerprint.data() + (fingerprint.rfind("0x", 0) == 0 ? 2 : 0);
    const char* end = fingerprint.data() + fingerprint.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value, 16);
    if (ec != std::errc() || ptr != end || begin == end) {
      r.fail_key("fingerprint", r.get("fingerprint"), "expected a hexadecimal fingerprint such as 0x0123456789abcdef");
    }
    plan.fingerprint = value;
  }
  plan.num_layers = static_cast<std::size_t>(r.integer("num_layers", 1, 10'000'000));
  plan.groups = read_groups(r, plan.num_layers);
  plan.host_mapped.assign(plan.num_layers, false);
  if (r.has("host_mapped")) {
    YAML::Node list = r.get("host_mapped");
    if (!list.IsSequence()) r.fail_key("host_mapped", list, "expected a list of layer indices");
    for (std::size_t k = 0; k < list.size(); ++k) {
      const auto index = r.to_integer(detail::concat("host_mapped[", k, "]"), list[k], 0,
                                      static_cast<std::int64_t>(plan.num_layers) - 1);
      plan.host_mapped[static_cast<std::size_t>(index)] = true;
    }
  }
  r.finish();
  return plan;
}

SwitchPlan load_switch_plan(const std::filesystem::path& path) {
  return parse_switch_plan(read_file(path), path.string());
}

std::string to_yaml(const SwitchPlan& plan) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << plan.model;
  out << YAML::Key << "strategy" << YAML::Value << to_string(plan.strategy);
  out << YAML::Key << "fingerprint" << YAML::Value << fingerprint_hex(plan.fingerprint);
  out << YAML::Key << "num_layers" << YAML::Value << plan.num_layers;
  out << YAML::Key << "groups" << YAML::Value << YAML::BeginSeq;
  for (const auto& g : plan.groups) out << YAML::Flow << YAML::BeginSeq << g.first << g.last << YAML::EndSeq;
  out << YAML::EndSeq;
  out << YAML::Key << "host_mapped" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (std::size_t i = 0; i < plan.host_mapped.size(); ++i) {
    if (plan.host_mapped[i]) out << i;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string("# A switch plan (psw plan --out): use with psw run --plan or a serve config.\n") + out.c_str() + "\n";
}

namespace {

void emit_source(YAML::Emitter& out, const SourceInfo& source) {
  out << YAML::Key << "source" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << to_string(source.kind);
  if (!source.note.empty()) out << YAML::Key << "note" << YAML::Value << source.note;
  if (!source.device.empty()) out << YAML::Key << "device" << YAML::Value << source.device;
  if (!source.date.empty()) out << YAML::Key << "date" << YAML::Value << source.date;
  if (!source.versions.empty()) out << YAML::Key << "versions" << YAML::Value << source.versions;
  out << YAML::EndMap;
}

}  // namespace

std::string to_yaml(const ModelProfile& model) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << model.name;
  out << YAML::Key << "batch" << YAML::Value << model.batch;
  out << YAML::Key << "dtype" << YAML::Value << model.dtype;
  if (model.prompt_tokens > 0) out << YAML::Key << "prompt_tokens" << YAML::Value << model.prompt_tokens;
  if (model.decode_step) out << YAML::Key << "decode_step_ns" << YAML::Value << model.decode_step->ns();
  emit_source(out, model.source);
  if (!model.prefill_curve.empty()) {
    out << YAML::Key << "prefill_curve" << YAML::Value << YAML::BeginSeq;
    for (const auto& point : model.prefill_curve) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "tokens" << YAML::Value << point.tokens << YAML::Key
          << "forward_ns" << YAML::Value << point.forward.ns() << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
  const bool measured = model.source.kind == ProfileSource::Measured;
  for (const auto& layer : model.layers) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << layer.name;
    out << YAML::Key << "kind" << YAML::Value << layer.kind;
    out << YAML::Key << "param_bytes" << YAML::Value << layer.param_bytes;
    if (measured) {
      out << YAML::Key << "forward_ns" << YAML::Value << layer.forward_time.value_or(Duration::zero()).ns();
      if (layer.backward_time) out << YAML::Key << "backward_ns" << YAML::Value << layer.backward_time->ns();
    } else {
      out << YAML::Key << "forward_flops" << YAML::Value << layer.forward_flops;
      out << YAML::Key << "forward_memory_bytes" << YAML::Value << layer.forward_memory_bytes;
      out << YAML::Key << "backward_flops" << YAML::Value << layer.backward_flops;
      out << YAML::Key << "backward_memory_bytes" << YAML::Value << layer.backward_memory_bytes;
    }
    out << YAML::Key << "activation_bytes" << YAML::Value << layer.activation_bytes;
    if (layer.training_only) out << YAML::Key << "training_only" << YAML::Value << true;
    if (layer.host_read_bytes > 0) out << YAML::Key << "host_read_bytes" << YAML::Value << layer.host_read_bytes;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string to_yaml(const HardwareProfile& hw) {
  YAML::Emitter out;
  auto link = [&out](const char* key, const LinkCost& l) {
    out << YAML::Key << key << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "copy_fixed_ns" << YAML::Value << l.copy_fixed.ns();
    out << YAML::Key << "bandwidth_bytes_per_s" << YAML::Value << l.bandwidth.bytes_per_second();
    out << YAML::EndMap;
  };
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << hw.name;
  emit_source(out, hw.source);
  out << YAML::Key << "gpu" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << hw.gpu_name;
  out << YAML::Key << "memory_bytes" << YAML::Value << hw.gpu_memory_bytes;
  out << YAML::EndMap;
  out << YAML::Key << "link" << YAML::Value << YAML::BeginMap;
  link("pinned", hw.pinned);
  link("pageable", hw.pageable);
  if (hw.mapped) link("mapped", *hw.mapped);
  out << YAML::EndMap;
  out << YAML::Key << "group_sync_ns" << YAML::Value << hw.group_sync.ns();
  if (hw.training_abort > Duration::zero()) {  // Note [Training abort]
    out << YAML::Key << "training_abort_ns" << YAML::Value << hw.training_abort.ns();
  }
  out << YAML::Key << "compute" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "flops_per_s" << YAML::Value << hw.compute.flops_per_second;
  out << YAML::Key << "conv_flops_per_s" << YAML::Value << hw.compute.conv_flops_per_second;
  out << YAML::Key << "memory_bandwidth_bytes_per_s" << YAML::Value
      << hw.compute.memory_bandwidth.bytes_per_second();
  out << YAML::Key << "kernel_overhead_ns" << YAML::Value << hw.compute.kernel_overhead.ns();
  out << YAML::EndMap;
  out << YAML::Key << "startup" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cuda_context_ns" << YAML::Value << hw.cuda_context_create.ns();
  out << YAML::Key << "process_start_ns" << YAML::Value << hw.process_start.ns();
  out << YAML::Key << "framework_start_ns" << YAML::Value << hw.framework_start.ns();
  out << YAML::Key << "worker_cleanup_ns" << YAML::Value << hw.worker_cleanup.ns();
  if (hw.process_kill > Duration::zero()) {  // Note [Worker kill]
    out << YAML::Key << "process_kill_ns" << YAML::Value << hw.process_kill.ns();
  }
  if (!hw.first_forward.empty()) {  // Note [First forward in a fresh process]
    out << YAML::Key << "first_forward" << YAML::Value << YAML::BeginSeq;
    for (const auto& [model, cost] : hw.first_forward) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "model" << YAML::Value << model;
      out << YAML::Key << "first_forward_ns" << YAML::Value << cost.ns();
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  if (!hw.eager_switch.empty()) {  // Note [Eager switch in the simulator]
    out << YAML::Key << "eager_switch" << YAML::Value << YAML::BeginSeq;
    for (const auto& [key, host] : hw.eager_switch) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "model" << YAML::Value << key.first;
      out << YAML::Key << "mechanism" << YAML::Value << key.second;
      out << YAML::Key << "prepare_ns" << YAML::Value << host.prepare.ns();
      out << YAML::Key << "forward_ns" << YAML::Value << host.forward.ns();
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::Key << "memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cuda_malloc_ns" << YAML::Value << hw.cuda_malloc.ns();
  out << YAML::Key << "cuda_free_ns" << YAML::Value << hw.cuda_free.ns();
  out << YAML::Key << "ipc_handle_open_ns" << YAML::Value << hw.ipc_handle_open.ns();
  out << YAML::EndMap;
  out << YAML::Key << "mps" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "inference_slowdown_percent" << YAML::Value << hw.mps.inference_slowdown_percent;
  out << YAML::Key << "training_slowdown_percent" << YAML::Value << hw.mps.training_slowdown_percent;
  if (!hw.mps.contention.empty()) {  // Note [MPS contention]
    out << YAML::Key << "contention" << YAML::Value << YAML::BeginSeq;
    for (const MpsContentionPoint& point : hw.mps.contention) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "inference_model" << YAML::Value << point.inference_model;
      out << YAML::Key << "training_model" << YAML::Value << point.training_model;
      out << YAML::Key << "training_batch" << YAML::Value << point.training_batch;
      out << YAML::Key << "inference_slowdown_percent" << YAML::Value << point.inference_slowdown_percent;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  out << YAML::Key << "unified_memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "page_bytes" << YAML::Value << hw.unified_memory.page_bytes;
  out << YAML::Key << "page_fault_ns" << YAML::Value << hw.unified_memory.page_fault.ns();
  out << YAML::Key << "migration_bandwidth_bytes_per_s" << YAML::Value
      << hw.unified_memory.migration_bandwidth.bytes_per_second();
  out << YAML::EndMap;
  if (hw.time_slicing) {
    out << YAML::Key << "time_slicing" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "context_switch_ns" << YAML::Value << hw.time_slicing->context_switch.ns();
    out << YAML::Key << "inference_share_percent" << YAML::Value << hw.time_slicing->inference_share_percent;
    out << YAML::EndMap;
  }
  if (hw.multi_gpu) {
    const MultiGpuModel& m = *hw.multi_gpu;
    out << YAML::Key << "multi_gpu" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "gpus" << YAML::Value << m.gpus;
    link("peer_link", m.peer_link);
    if (m.peer_ingress) {
      out << YAML::Key << "peer_ingress_bandwidth_bytes_per_s" << YAML::Value << m.peer_ingress->bytes_per_second();
    }
    out << YAML::Key << "chunk_bytes" << YAML::Value << m.chunk_bytes;
    out << YAML::Key << "helper_busy_share_percent" << YAML::Value << m.helper_busy_share_percent;
    if (!m.helper_links.empty()) {
      out << YAML::Key << "helper_links" << YAML::Value << YAML::BeginSeq;
      for (const LinkCost& l : m.helper_links) {
        out << YAML::BeginMap;
        out << YAML::Key << "copy_fixed_ns" << YAML::Value << l.copy_fixed.ns();
        out << YAML::Key << "bandwidth_bytes_per_s" << YAML::Value << l.bandwidth.bytes_per_second();
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<Duration> evenly_spaced_quantiles(std::vector<std::int64_t> values_ns, int count) {
  PSW_CHECK(!values_ns.empty() && count >= 2, "quantiles of ", values_ns.size(), " values, ", count, " of them");
  std::sort(values_ns.begin(), values_ns.end());
  std::vector<Duration> quantiles;
  const std::size_t last = values_ns.size() - 1;
  for (int k = 0; k < count; ++k) {
    const double rank = static_cast<double>(k) / static_cast<double>(count - 1) * static_cast<double>(last);
    quantiles.push_back(nanoseconds(values_ns[static_cast<std::size_t>(std::llround(rank))]));
  }
  return quantiles;
}

Duration quantile_at(const std::vector<Duration>& quantiles, double u) {
  PSW_CHECK(quantiles.size() >= 2 && u >= 0 && u < 1, "quantile_at(", quantiles.size(), " quantiles, ", u, ")");
  const double position = u * static_cast<double>(quantiles.size() - 1);
  const auto below = static_cast<std::size_t>(position);
  const double weight = position - static_cast<double>(below);
  const double low = static_cast<double>(quantiles[below].ns());
  const double high = static_cast<double>(quantiles[std::min(below + 1, quantiles.size() - 1)].ns());
  return nanoseconds(std::llround(low + weight * (high - low)));
}

const char* to_string(InputTransport inputs) {
  switch (inputs) {
    case InputTransport::Raw:
      return "raw";
    case InputTransport::SharedMemory:
      return "shared-memory";
  }
  return "?";
}

std::optional<InputTransport> input_transport_named(std::string_view word) {
  for (const InputTransport t : {InputTransport::Raw, InputTransport::SharedMemory}) {
    if (word == to_string(t)) return t;
  }
  return std::nullopt;
}

const RequestPathCost* ServingProfile::path_of(const std::string& model) const {
  for (const auto& p : request_path) {
    if (p.model == model) return &p;
  }
  return nullptr;
}

const TrainingStepCost* ServingProfile::training_of(const std::string& model) const {
  for (const auto& t : training) {
    if (t.model == model) return &t;
  }
  return nullptr;
}

ServingProfile parse_serving_profile(const std::string& text, const std::string& origin) {
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  ServingProfile profile;
  profile.name = r.string("name");
  profile.source = read_source(r);
  // Note [Inputs in shared memory]: the numbers hold for one way of sending inputs; the key says which.
  const std::string inputs = r.string("inputs");
  if (const std::optional<InputTransport> named = input_transport_named(inputs)) {
    profile.inputs = *named;
  } else {
    r.fail_key("inputs", r.get("inputs"),
               "expected raw (inputs in the messages) or shared-memory (in registered shared memory, psw load "
               "--shared-memory), got '" + inputs + "'");
  }
  std::set<std::string> models;
  YAML::Node paths = r.sequence("request_path");
  for (std::size_t i = 0; i < paths.size(); ++i) {
    MapReader p(paths[i], origin, detail::concat("request_path[", i, "]"));
    RequestPathCost cost;
    cost.model = p.string("model");
    if (!models.insert(cost.model).second) p.fail_key("model", p.get("model"), "model '" + cost.model + "' given twice");
    cost.protocol = read_duration(p, "protocol_ns");
    cost.server = read_duration(p, "server_ns");
    cost.requests = static_cast<int>(p.integer("requests", 1, 1'000'000'000));
    if (p.has("protocol_quantiles_ns")) {  // Note [Protocol spread]
      const YAML::Node list = p.sequence("protocol_quantiles_ns");
      if (list.size() < 2) p.fail_key("protocol_quantiles_ns", list, "expected at least two quantiles (0% and 100%)");
      for (std::size_t k = 0; k < list.size(); ++k) {
        const std::string key = detail::concat("protocol_quantiles_ns[", k, "]");
        const Duration q = nanoseconds(p.to_integer(key, list[k], 0, kMaxDurationNs));
        if (!cost.protocol_quantiles.empty() && q < cost.protocol_quantiles.back()) {
          p.fail_key(key, list[k], detail::concat("the quantiles must not decrease: ", q.ns(), " after ",
                                                  cost.protocol_quantiles.back().ns()));
        }
        cost.protocol_quantiles.push_back(q);
      }
    }
    if (p.has("protocol_per_in_flight_ns")) cost.protocol_per_in_flight = read_duration(p, "protocol_per_in_flight_ns");
    p.finish();
    profile.request_path.push_back(std::move(cost));
  }
  models.clear();
  if (r.has("training")) {
    YAML::Node steps = r.sequence("training");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      MapReader t(steps[i], origin, detail::concat("training[", i, "]"));
      TrainingStepCost cost;
      cost.model = t.string("model");
      if (!models.insert(cost.model).second) t.fail_key("model", t.get("model"), "model '" + cost.model + "' given twice");
      cost.batch = static_cast<int>(t.integer("batch", 1, 1 << 20));
      cost.step = nanoseconds(t.integer("step_ns", 1, kMaxDurationNs));
      t.finish();
      profile.training.push_back(std::move(cost));
    }
  }
  r.finish();
  return profile;
}

ServingProfile load_serving_profile(const std::filesystem::path& path) {
  return parse_serving_profile(read_file(path), path.string());
}

std::string to_yaml(const ServingProfile& profile) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << profile.name;
  emit_source(out, profile.source);
  out << YAML::Key << "inputs" << YAML::Value << to_string(profile.inputs);
  out << YAML::Key << "request_path" << YAML::Value << YAML::BeginSeq;
  for (const auto& p : profile.request_path) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "model" << YAML::Value << p.model;
    out << YAML::Key << "protocol_ns" << YAML::Value << p.protocol.ns();
    out << YAML::Key << "server_ns" << YAML::Value << p.server.ns();
    out << YAML::Key << "requests" << YAML::Value << p.requests;
    if (!p.protocol_quantiles.empty()) {
      out << YAML::Key << "protocol_quantiles_ns" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (Duration q : p.protocol_quantiles) out << q.ns();
      out << YAML::EndSeq;
    }
    if (p.protocol_per_in_flight > Duration::zero()) {  // Note [Protocol under load]
      out << YAML::Key << "protocol_per_in_flight_ns" << YAML::Value << p.protocol_per_in_flight.ns();
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!profile.training.empty()) {
    out << YAML::Key << "training" << YAML::Value << YAML::BeginSeq;
    for (const auto& t : profile.training) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "model" << YAML::Value << t.model;
      out << YAML::Key << "batch" << YAML::Value << t.batch;
      out << YAML::Key << "step_ns" << YAML::Value << t.step.ns();
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace psw
