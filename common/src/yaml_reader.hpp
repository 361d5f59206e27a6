#pragma once
// Internal to common/: the strict YAML reader shared by the config parsers. Not installed,
// not included outside common/src (only common/ parses YAML, DESIGN.md §3).

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/common/hardware_profile.hpp"
#include "psw/common/units.hpp"

namespace psw::yaml_detail {

// Limits that catch absurd numbers (a typo of a few orders of magnitude) without
// limiting any real machine.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;           // 1 PiB
constexpr std::int64_t kMaxFlops = std::int64_t{1} << 62;
constexpr std::int64_t kMaxDurationNs = std::int64_t{86'400} * 1'000'000'000;  // one day
constexpr std::int64_t kMaxBandwidth = std::int64_t{100} * 1'000'000'000'000;  // 100 TB/s
constexpr std::int64_t kMaxFlopsRate = std::int64_t{1} << 62;
constexpr std::int64_t kMaxPromptTokens = std::int64_t{1} << 22;  // as a decoder's max_positions

// The largest YAML file psw reads (profiles, hardware, plans, experiment, sweep and serve
// configs). The largest shipped file is a few hundred KiB; a synthetic profile of the most
// layers `psw synth` writes is about 20 MiB. Anything bigger is not a config.
constexpr std::int64_t kMaxYamlFileBytes = std::int64_t{64} << 20;  // 64 MiB

// Reads a whole YAML file. Only regular files: a FIFO would block, /dev/zero never ends, a
// directory is not a file; the size is bounded by kMaxYamlFileBytes (also while reading, for
// files whose size the file system does not tell, like those of /proc).
inline std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    throw InputError(path.string() + ": no such file");
  }
  if (std::filesystem::is_directory(status)) {
    throw InputError(path.string() + ": is a directory, expected a YAML file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError(path.string() +
                     ": is not a regular file (a device, FIFO or socket), expected a YAML file");
  }
  const auto too_large = [&path] {
    return InputError(detail::concat(path.string(), ": the file is larger than ",
                                     kMaxYamlFileBytes >> 20,
                                     " MiB, the most psw reads as a YAML file"));
  };
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<std::uintmax_t>(kMaxYamlFileBytes)) throw too_large();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for reading");
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > static_cast<std::size_t>(kMaxYamlFileBytes)) throw too_large();
  }
  if (in.bad()) throw InputError(path.string() + ": read error");
  return text;
}

// The length of the valid UTF-8 sequence at `s[i]`, or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF are invalid, as in RFC 3629).
inline std::size_t utf8_sequence(const std::string& s, std::size_t i) {
  const auto byte = [&s](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) { n = 3; lo = 0xA0; }
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) { n = 3; hi = 0x9F; }
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) { n = 4; lo = 0x90; }
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) { n = 4; hi = 0x8F; }
  else return 0;
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

inline bool is_valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// A file must be valid UTF-8 text without control characters: names end up in JSON outputs and messages, where invalid bytes
// cannot be written. Checked on the text (linear; a walk of the parsed tree would visit an
// aliased node once per alias, exponentially often); the message names the line, the column
// and, where one stands before the byte on its line, the key.
inline void check_utf8(const std::string& text, const std::string& origin) {
  std::size_t line_start = 0;
  int line = 1;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    // YAML text has no control characters but tab and line breaks (YAML 1.2 c-printable);
    // yaml-cpp takes a NUL or 0x04 for the end of the stream, and LoadAll then returns empty
    // documents without end.
    const bool control = (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
    if (n == 0 || control) {
      // The key: the name before the last ':' ahead of the bad byte on its line.
      const std::string_view before(text.data() + line_start, i - line_start);
      std::string key;
      const std::size_t colon = before.rfind(':');
      if (colon != std::string_view::npos) {
        std::string_view name = before.substr(0, colon);
        const std::size_t sep = name.find_last_of(",{[");
        if (sep != std::string_view::npos) name.remove_prefix(sep + 1);
        while (!name.empty() && (name.front() == ' ' || name.front() == '-')) name.remove_prefix(1);
        while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
        key = std::string(name);
      }
      const bool key_ok = !key.empty() && is_valid_utf8(key) &&
                          key.find_first_of("\"'[]{},#: ") == std::string::npos;
      const char* hex = "0123456789abcdef";
      const auto byte = static_cast<unsigned char>(text[i]);
      throw InputError(detail::concat(origin, ":", line, ": ", key_ok ? "key '" + key + "': " : std::string(),
                                      control ? "a control character" : "not valid UTF-8", " (byte 0x",
                                      hex[byte >> 4], hex[byte & 15], " at column ", i - line_start + 1, ")"));
    }
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
    i += n;
  }
}

// Counts documents without building them: a handler that ignores every event, and remembers
// where the last document started.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  YAML::Mark start;
};

// Note [One document]: a second document in a file would be ignored by YAML::Load, so it is
// refused. Not with YAML::LoadAll: yaml-cpp 0.7 (Debian 12) loops for ever, allocating, when a
// top-level flow collection is followed by stray text (`{} ,`; found by fuzz_model_profile),
// because each call finds an empty "document" there without consuming it. Two bounded calls of
// the parser instead: the first reads the document, the second says whether anything follows.
inline YAML::Node parse_document(const std::string& text, const std::string& origin) {
  check_utf8(text, origin);
  try {
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      DocumentCounter counter;
      if (parser.HandleNextDocument(counter) && parser.HandleNextDocument(counter)) {
        const int line = counter.start.line;
        throw InputError(detail::concat(origin, line >= 0 ? detail::concat(":", line + 1) : "",
                                        ": a second YAML document (after '---'), or stray text after the "
                                        "first; a file holds exactly one"));
      }
    }
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

// Note [Overridden keys in messages]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Overrides (`psw sim --set KEY=VALUE`, a sweep's grid) are set on the parsed tree before it
// is read; their nodes have no line in the file (yaml-cpp gives a loaded value line 0 and a
// key it creates line -1), so a message naming "<file>:<line>" would point at the file's first
// line or at line 0. While a file is parsed with overrides, an OverrideScope lists them, and
// a MapReader of that file names the override instead of a line for every key at or under an
// overridden key: "--set workload.rate_per_s=-1: key 'workload.rate_per_s': ...".
struct OverrideList {
  std::string origin;  // the file the overrides were applied to
  std::string from;    // how messages name them: "--set", "grid value"
  const std::vector<std::pair<std::string, std::string>>* overrides = nullptr;
};
inline const OverrideList*& current_overrides() {
  thread_local const OverrideList* list = nullptr;
  return list;
}
class OverrideScope {
 public:
  explicit OverrideScope(const OverrideList& list) : previous_(current_overrides()) { current_overrides() = &list; }
  ~OverrideScope() { current_overrides() = previous_; }
  OverrideScope(const OverrideScope&) = delete;
  OverrideScope& operator=(const OverrideScope&) = delete;

 private:
  const OverrideList* previous_;
};

// Sets `key` (dotted path) on `root` to the YAML `value` (null: removes it). Messages name the override
// ("--set KEY=VALUE: ..."), which is what the user typed; the file has no line for it.
inline void apply_override(YAML::Node& root, const std::string& key, const std::string& value, const std::string& from) {
  const std::string what = from + " " + key + "=" + value;
  YAML::Node cursor;
  cursor.reset(root);
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw InputError(what + ": the key '" + key + "' has an empty part");
    if (dot == std::string::npos) {
      check_utf8(value, what);
      YAML::Node loaded;
      try {
        loaded = YAML::Load(value);
      } catch (const YAML::Exception& e) {
        throw InputError(what + ": malformed YAML value: " + e.msg);
      }
      // KEY=null takes the key out, as if the file had not written it (a config's optional
      // section or path: `serving=null` simulates without a serving profile).
      if (loaded.IsNull()) {
        cursor.remove(part);
      } else {
        cursor[part] = loaded;
      }
      return;
    }
    YAML::Node next = cursor[part];
    const std::string section = key.substr(0, dot);
    if (!next.IsDefined() || next.IsNull()) {
      // A key inside an absent section is refused for every section alike: the section's other
      // keys (a training job's model, a workload's kind) would be missing, and a guess at them
      // would be a silent default.
      throw InputError(what + ": the config has no '" + section + "' section to set '" + key.substr(dot + 1) +
                       "' in; set the whole section instead (" + from + " '" + section + "={...}')");
    }
    if (!next.IsMap()) {
      throw InputError(what + ": '" + section + "' is not a mapping in the config, so it has no key '" +
                       key.substr(dot + 1) + "'");
    }
    cursor.reset(next);
    start = dot + 1;
  }
}

// "<from> KEY=VALUE" when `path` (a dotted key path of `origin`) is at or under an override,
// else empty.
inline std::string override_at(const std::string& origin, const std::string& path) {
  const OverrideList* list = current_overrides();
  if (list == nullptr || list->overrides == nullptr || list->origin != origin) return {};
  // The last override of a key wins, as when they are applied.
  for (auto it = list->overrides->rbegin(); it != list->overrides->rend(); ++it) {
    const std::string& key = it->first;
    if (path.size() >= key.size() && path.compare(0, key.size(), key) == 0 &&
        (path.size() == key.size() || path[key.size()] == '.' || path[key.size()] == '[')) {
      return list->from + " " + key + "=" + it->second;
    }
  }
  return {};
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
        throw InputError(detail::concat(where(path_, entry.first.Mark().line + 1), "key '",
                                        path_, "': keys must be plain names"));
      }
      if (!keys.insert(entry.first.Scalar()).second) {
        const std::string key = child_path(entry.first.Scalar());
        throw InputError(detail::concat(where(key, entry.first.Mark().line + 1), "key '", key, "' is given twice"));
      }
    }
  }

  // "<origin>:<line>: ", or "<override>: " for a key that an override set (Note [Overridden
  // keys in messages]).
  std::string where(const std::string& key_path, int line) const {
    const std::string from = override_at(origin_, key_path);
    if (!from.empty()) return from + ": ";
    return detail::concat(origin_, ":", line, ": ");
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const {
    const int line = at.IsDefined() ? at.Mark().line + 1 : node_.Mark().line + 1;
    throw InputError(detail::concat(where(path_, line), "key '", path_, "': ", message));
  }
  [[noreturn]] void fail_key(const std::string& key, const YAML::Node& at,
                             const std::string& message) const {
    const int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1
                                                           : node_.Mark().line + 1;
    throw InputError(detail::concat(where(child_path(key), line), "key '", child_path(key), "': ", message));
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
      throw InputError(detail::concat(where(path_, node_.Mark().line + 1), "key '", child_path(key), "' is missing"));
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

  double real(const std::string& key, double min, double max) {
    YAML::Node value = get(key);
    if (!value.IsScalar()) fail_key(key, value, "expected a number");
    const std::string& text = value.Scalar();
    double result = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), result);
    if (ec != std::errc() || ptr != text.data() + text.size() || !(result == result)) {
      fail_key(key, value, "expected a number, got '" + text + "'");
    }
    if (result < min || result > max) {
      fail_key(key, value, detail::concat("must be between ", min, " and ", max, ", got ", text));
    }
    return result;
  }

  // A duration given in a unit named by the key's suffix (`_ns`, `_us`, `_ms`, `_s`),
  // possibly fractional (`interval_ms: 2.5`), rounded to the nearest nanosecond.
  Duration duration(const std::string& key, double max_seconds = 86'400.0 * 365) {
    double scale = 0;
    auto ends_with = [&key](const char* suffix) {
      const std::string s(suffix);
      return key.size() > s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
    };
    if (ends_with("_ns")) scale = 1;
    else if (ends_with("_us")) scale = 1e3;
    else if (ends_with("_ms")) scale = 1e6;
    else if (ends_with("_s")) scale = 1e9;
    PSW_CHECK(scale > 0, "duration key without a unit suffix: ", key);
    const double value = real(key, 0.0, max_seconds * 1e9 / scale);
    return nanoseconds(static_cast<std::int64_t>(value * scale + 0.5));
  }

  const YAML::Node& node() const { return node_; }
  void mark_seen(const std::string& key) { seen_.insert(key); }

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
        throw InputError(detail::concat(where(child_path(key), entry.first.Mark().line + 1),
                                        "unknown key '", child_path(key), "'"));
      }
    }
  }

 private:
  YAML::Node node_;
  std::string origin_;
  std::string path_;
  std::set<std::string> seen_;
};

inline Duration read_duration(MapReader& r, const std::string& key) {
  return nanoseconds(r.integer(key, 0, kMaxDurationNs));
}

inline Bandwidth read_bandwidth(MapReader& r, const std::string& key) {
  return Bandwidth::bytes_per_second(r.integer(key, 1, kMaxBandwidth));
}

inline SourceInfo read_source(MapReader& r) {
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

inline LinkCost read_link(MapReader& r, const std::string& key) {
  MapReader l = r.map(key);
  LinkCost link;
  link.copy_fixed = read_duration(l, "copy_fixed_ns");
  link.bandwidth = read_bandwidth(l, "bandwidth_bytes_per_s");
  l.finish();
  return link;
}


}  // namespace psw::yaml_detail
