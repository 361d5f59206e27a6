// The only file of the project that includes yaml-cpp (DESIGN.md §3): every YAML the
// project reads or writes goes through here, so every error looks the same.
#include "psw/common/config.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "psw/common/error.hpp"

namespace psw {

namespace {

// Limits that catch absurd numbers (a typo of a few orders of magnitude) without
// limiting any real machine.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;           // 1 PiB
constexpr std::int64_t kMaxFlops = std::int64_t{1} << 62;
constexpr std::int64_t kMaxDurationNs = std::int64_t{86'400} * 1'000'000'000;  // one day
constexpr std::int64_t kMaxBandwidth = std::int64_t{100} * 1'000'000'000'000;  // 100 TB/s
constexpr std::int64_t kMaxFlopsRate = std::int64_t{1} << 62;

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw InputError(path.string() + ": no such file");
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(path.string() + ": is a directory, expected a YAML file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

YAML::Node parse_document(const std::string& text, const std::string& origin) {
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsDefined() || root.IsNull()) throw InputError(origin + ": the file is empty");
    if (!root.IsMap()) {
      throw InputError(detail::concat(origin, ":", root.Mark().line + 1,
                                      ": expected a mapping of keys at the top level"));
    }
    return root;
  } catch (const YAML::Exception& e) {
    throw InputError(detail::concat(origin, ":", e.mark.line + 1, ": malformed YAML: ", e.msg));
  }
}

// Reads one YAML mapping strictly: every key read is remembered, and finish() rejects
// the keys nobody asked for. Messages carry origin, line and the dotted key path.
class MapReader {
 public:
  MapReader(YAML::Node node, std::string origin, std::string path)
      : node_(std::move(node)), origin_(std::move(origin)), path_(std::move(path)) {
    if (!node_.IsMap()) fail(node_, "expected a mapping");
    // yaml-cpp keeps the first of two equal keys; a silently ignored value is lost data.
    std::set<std::string> keys;
    for (const auto& entry : node_) {
      if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
        throw InputError(detail::concat(origin_, ":", entry.first.Mark().line + 1, ": key '",
                                        path_, "': keys must be plain names"));
      }
      if (!keys.insert(entry.first.Scalar()).second) {
        throw InputError(detail::concat(origin_, ":", entry.first.Mark().line + 1, ": key '",
                                        child_path(entry.first.Scalar()), "' is given twice"));
      }
    }
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const {
    const int line = at.IsDefined() ? at.Mark().line + 1 : node_.Mark().line + 1;
    throw InputError(detail::concat(origin_, ":", line, ": key '", path_, "': ", message));
  }
  [[noreturn]] void fail_key(const std::string& key, const YAML::Node& at,
                             const std::string& message) const {
    const int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1
                                                           : node_.Mark().line + 1;
    throw InputError(detail::concat(origin_, ":", line, ": key '", child_path(key), "': ", message));
  }

  std::string child_path(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const std::string& origin() const { return origin_; }

  bool has(const std::string& key) const { return node_[key].IsDefined(); }

  YAML::Node get(const std::string& key) {
    seen_.insert(key);
    YAML::Node value = node_[key];
    if (!value.IsDefined()) {
      throw InputError(detail::concat(origin_, ":", node_.Mark().line + 1, ": key '",
                                      child_path(key), "' is missing"));
    }
    return value;
  }

  std::string string(const std::string& key) {
    YAML::Node value = get(key);
    if (!value.IsScalar()) fail_key(key, value, "expected a string");
    if (value.Scalar().empty()) fail_key(key, value, "must not be empty");
    return value.Scalar();
  }
  std::string optional_string(const std::string& key) {
    if (!has(key)) {
      seen_.insert(key);
      return {};
    }
    YAML::Node value = get(key);
    if (!value.IsScalar()) fail_key(key, value, "expected a string");
    return value.Scalar();
  }

  std::int64_t integer(const std::string& key, std::int64_t min, std::int64_t max) {
    YAML::Node value = get(key);
    return to_integer(key, value, min, max);
  }
  std::optional<std::int64_t> optional_integer(const std::string& key, std::int64_t min,
                                               std::int64_t max) {
    seen_.insert(key);
    if (!has(key)) return std::nullopt;
    return integer(key, min, max);
  }

  std::int64_t to_integer(const std::string& key, const YAML::Node& value, std::int64_t min,
                          std::int64_t max) const {
    if (!value.IsScalar()) fail_key(key, value, "expected an integer");
    const std::string& text = value.Scalar();
    std::int64_t result = 0;
    const char* begin = text.data();
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, result);
    if (ec == std::errc::result_out_of_range) {
      fail_key(key, value, "the number '" + text + "' is too large");
    }
    if (ec != std::errc() || ptr != end) {
      fail_key(key, value, "expected an integer, got '" + text + "'");
    }
    if (result < min || result > max) {
      if (result < 0 && min >= 0) {
        fail_key(key, value, "must not be negative, got " + text);
      }
      fail_key(key, value, detail::concat("must be between ", min, " and ", max, ", got ", text));
    }
    return result;
  }

  bool boolean(const std::string& key, bool fallback) {
    seen_.insert(key);
    if (!has(key)) return fallback;
    YAML::Node value = get(key);
    if (value.IsScalar()) {
      const std::string& text = value.Scalar();
      if (text == "true") return true;
      if (text == "false") return false;
    }
    fail_key(key, value, "expected true or false");
  }

  MapReader map(const std::string& key) {
    YAML::Node value = get(key);
    if (!value.IsMap()) fail_key(key, value, "expected a mapping");
    return MapReader(value, origin_, child_path(key));
  }

  YAML::Node sequence(const std::string& key) {
    YAML::Node value = get(key);
    if (!value.IsSequence()) fail_key(key, value, "expected a list");
    if (value.size() == 0) fail_key(key, value, "the list is empty");
    return value;
  }

  // Rejects keys that no reader asked for: a typo must never become a silent default.
  void finish() const {
    for (const auto& entry : node_) {
      const std::string key = entry.first.Scalar();
      if (seen_.count(key) == 0) {
        throw InputError(detail::concat(origin_, ":", entry.first.Mark().line + 1,
                                        ": unknown key '", child_path(key), "'"));
      }
    }
  }

 private:
  YAML::Node node_;
  std::string origin_;
  std::string path_;
  std::set<std::string> seen_;
};

Duration read_duration(MapReader& r, const std::string& key) {
  return nanoseconds(r.integer(key, 0, kMaxDurationNs));
}

Bandwidth read_bandwidth(MapReader& r, const std::string& key) {
  return Bandwidth::bytes_per_second(r.integer(key, 1, kMaxBandwidth));
}

SourceInfo read_source(MapReader& r) {
  MapReader s = r.map("source");
  SourceInfo source;
  const std::string kind = s.string("kind");
  if (kind == "analytic") {
    source.kind = ProfileSource::Analytic;
  } else if (kind == "measured") {
    source.kind = ProfileSource::Measured;
  } else {
    s.fail_key("kind", s.get("kind"), "expected analytic or measured, got '" + kind + "'");
  }
  source.note = s.optional_string("note");
  source.device = s.optional_string("device");
  source.date = s.optional_string("date");
  source.versions = s.optional_string("versions");
  if (source.kind == ProfileSource::Measured && source.device.empty()) {
    s.fail_key("device", s.has("device") ? s.get("device") : YAML::Node(),
               "a measured profile must name the device it was measured on");
  }
  s.finish();
  return source;
}

LinkCost read_link(MapReader& r, const std::string& key) {
  MapReader l = r.map(key);
  LinkCost link;
  link.copy_fixed = read_duration(l, "copy_fixed_ns");
  link.bandwidth = read_bandwidth(l, "bandwidth_bytes_per_s");
  l.finish();
  return link;
}

}  // namespace

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
    l.finish();
  }
  hw.group_sync = read_duration(r, "group_sync_ns");
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
    s.finish();
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
    m.finish();
  }
  {
    MapReader u = r.map("unified_memory");
    hw.unified_memory.page_bytes = u.integer("page_bytes", 1, kMaxBytes);
    hw.unified_memory.page_fault = read_duration(u, "page_fault_ns");
    hw.unified_memory.migration_bandwidth = read_bandwidth(u, "migration_bandwidth_bytes_per_s");
    u.finish();
  }
  r.finish();
  return hw;
}

ModelProfile load_model_profile(const std::filesystem::path& path) {
  return parse_model_profile(read_file(path), path.string());
}

HardwareProfile load_hardware_profile(const std::filesystem::path& path) {
  return parse_hardware_profile(read_file(path), path.string());
}

Grouping load_fixed_groups(const std::filesystem::path& path, const ModelProfile& model) {
  const std::string origin = path.string();
  YAML::Node root = parse_document(read_file(path), origin);
  MapReader r(root, origin, "");
  const std::string named = r.optional_string("model");
  if (!named.empty() && named != model.name) {
    r.fail_key("model", r.get("model"),
               "the groups are for model '" + named + "' but the model is '" + model.name + "'");
  }
  YAML::Node list = r.sequence("groups");
  Grouping groups;
  std::size_t next = 0;
  for (std::size_t g = 0; g < list.size(); ++g) {
    const YAML::Node entry = list[g];
    const std::string key = detail::concat("groups[", g, "]");
    if (!entry.IsSequence() || entry.size() != 2) {
      r.fail_key(key, entry, "expected a pair [first, last] of layer indices");
    }
    const auto max_index = static_cast<std::int64_t>(model.layers.size()) - 1;
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
  if (next != model.layers.size()) {
    r.fail_key("groups", list, detail::concat("the groups cover layers 0..", next - 1,
                                              " but the model has ", model.layers.size(),
                                              " layers"));
  }
  r.finish();
  validate_grouping(groups, model.layers.size(), origin);
  return groups;
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
  emit_source(out, model.source);
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
  out << YAML::EndMap;
  out << YAML::Key << "group_sync_ns" << YAML::Value << hw.group_sync.ns();
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
  out << YAML::EndMap;
  out << YAML::Key << "memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cuda_malloc_ns" << YAML::Value << hw.cuda_malloc.ns();
  out << YAML::Key << "cuda_free_ns" << YAML::Value << hw.cuda_free.ns();
  out << YAML::Key << "ipc_handle_open_ns" << YAML::Value << hw.ipc_handle_open.ns();
  out << YAML::EndMap;
  out << YAML::Key << "mps" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "inference_slowdown_percent" << YAML::Value << hw.mps.inference_slowdown_percent;
  out << YAML::Key << "training_slowdown_percent" << YAML::Value << hw.mps.training_slowdown_percent;
  out << YAML::EndMap;
  out << YAML::Key << "unified_memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "page_bytes" << YAML::Value << hw.unified_memory.page_bytes;
  out << YAML::Key << "page_fault_ns" << YAML::Value << hw.unified_memory.page_fault.ns();
  out << YAML::Key << "migration_bandwidth_bytes_per_s" << YAML::Value
      << hw.unified_memory.migration_bandwidth.bytes_per_second();
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void save_text(const std::filesystem::path& path, const std::string& text) {
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path.string() + ": cannot open for writing");
  out << text;
  if (!out) throw Error(path.string() + ": write failed");
}

}  // namespace psw
