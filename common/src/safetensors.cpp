// Safetensors: the header's checks (Note [Safetensors checks] in safetensors.hpp), the reads
// of a header and of one tensor from a file, and the writer.
#include "psw/common/safetensors.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <ios>
#include <limits>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<TensorDtype, std::string_view>, 10> kDtypeNames{{
    {TensorDtype::F64, "F64"},
    {TensorDtype::F32, "F32"},
    {TensorDtype::F16, "F16"},
    {TensorDtype::BF16, "BF16"},
    {TensorDtype::I64, "I64"},
    {TensorDtype::I32, "I32"},
    {TensorDtype::I16, "I16"},
    {TensorDtype::I8, "I8"},
    {TensorDtype::U8, "U8"},
    {TensorDtype::Bool, "BOOL"},
}};

std::optional<TensorDtype> dtype_of(std::string_view text) {
  for (const auto& [dtype, name] : kDtypeNames) {
    if (name == text) return dtype;
  }
  return std::nullopt;
}

std::string dtype_choices() {
  std::string out;
  for (const auto& [dtype, name] : kDtypeNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// A name quoted as JSON: names may hold quotes, newlines or control characters.
std::string json_quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// What a JSON value is, for messages ("a string", "the number 1.5"); never its whole dump.
std::string kind_of(const json& value) {
  if (value.is_number_float()) return "the number " + value.dump();
  if (value.is_number()) return "the integer " + value.dump();
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  if (value.is_boolean()) return "a boolean";
  return "null";
}

// The value of a non-negative JSON integer. nlohmann reads non-negative integers as unsigned
// and negative ones (and "-0") as signed; numbers with a fraction or exponent, or too large
// for 64 bits, are floats and rejected here.
std::uint64_t non_negative_integer(const json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {
    const auto signed_value = value.get<std::int64_t>();
    if (signed_value < 0) throw InputError(where + " is negative (" + value.dump() + ")");
    return static_cast<std::uint64_t>(signed_value);
  }
  throw InputError(where + " must be a non-negative integer, not " + kind_of(value));
}

// Parses the header text. A parser callback keeps a set of the keys of each open object, so
// that a duplicate key at any depth is reported: nlohmann would silently keep the last value,
// and two readers of the file could then disagree on a tensor's offsets or dtype.
json parse_header_json(std::string_view text, const std::string& origin) {
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  const json::parser_callback_t callback = [&](int /*depth*/, json::parse_event_t event,
                                               json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty()) {
          std::string key = parsed.get<std::string>();
          if (!open_objects.back().insert(key).second && !duplicate) duplicate = std::move(key);
        }
        break;
      default:
        break;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number like 1e999.
    throw InputError(origin + ": the header is not valid JSON: " + e.what());
  }
  if (duplicate) {
    throw InputError(origin + ": the header has the key " + json_quoted(*duplicate) +
                     " twice in one object");
  }
  return header;
}

// product(shape) * dtype size, checked for overflow.
std::uint64_t tensor_bytes(const std::vector<std::int64_t>& shape, TensorDtype dtype,
                           const std::string& where) {
  std::uint64_t count = 1;
  for (const std::int64_t dim : shape) {
    if (dim < 0) {
      throw InputError(where + ": shape has a negative dimension " + std::to_string(dim));
    }
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count)) {
      throw InputError(where + ": the product of the shape's dimensions overflows 64 bits");
    }
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dtype_bytes(dtype)), &bytes)) {
    throw InputError(where + ": the tensor's byte size overflows 64 bits");
  }
  return bytes;
}


SafetensorsEntry parse_entry(const std::string& name, const json& value,
                             const std::string& origin) {
  const std::string where = origin + ": tensor " + json_quoted(name);
  if (!value.is_object()) {
    throw InputError(where + " must be an object with dtype, shape and data_offsets, not " +
                     kind_of(value));
  }
  for (const auto& [key, field] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      throw InputError(where + ": unknown key " + json_quoted(key) +
                       " (expected dtype, shape and data_offsets)");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) throw InputError(where + ": the key " + key + " is missing");
  }

  SafetensorsEntry entry;
  entry.name = name;

  const json& dtype = value.at("dtype");
  if (!dtype.is_string()) {
    throw InputError(where + ": dtype must be a string, not " + kind_of(dtype));
  }
  const std::optional<TensorDtype> known = dtype_of(dtype.get<std::string>());
  if (!known) {
    throw InputError(where + ": dtype " + json_quoted(dtype.get<std::string>()) +
                     " is not supported (supported: " + dtype_choices() + ")");
  }
  entry.dtype = *known;

  const json& shape = value.at("shape");
  if (!shape.is_array()) {
    throw InputError(where + ": shape must be an array, not " + kind_of(shape));
  }
  entry.shape.reserve(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::string dim_where = where + ": shape[" + std::to_string(i) + "]";
    const std::uint64_t dim = non_negative_integer(shape[i], dim_where);
    if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw InputError(dim_where + " is too large (" + std::to_string(dim) + ")");
    }
    entry.shape.push_back(static_cast<std::int64_t>(dim));
  }
  const std::uint64_t needed = tensor_bytes(entry.shape, entry.dtype, where);

  const json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    throw InputError(where + ": data_offsets must be an array [begin, end], not " +
                     (offsets.is_array() ? "an array of " + std::to_string(offsets.size()) +
                                               " values"
                                         : kind_of(offsets)));
  }
  entry.begin = non_negative_integer(offsets[0], where + ": data_offsets begin");
  entry.end = non_negative_integer(offsets[1], where + ": data_offsets end");
  if (entry.begin > entry.end) {
    throw InputError(where + ": data_offsets begin " + std::to_string(entry.begin) +
                     " is after end " + std::to_string(entry.end));
  }
  if (entry.bytes() != needed) {
    throw InputError(where + ": data_offsets cover " + std::to_string(entry.bytes()) +
                     " bytes but shape " + shape_text(entry.shape) + " of " +
                     to_string(entry.dtype) + " needs " + std::to_string(needed));
  }
  return entry;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& origin) {
  const std::string where = origin + ": __metadata__";
  if (!value.is_object()) throw InputError(where + " must be an object, not " + kind_of(value));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, field] : value.items()) {
    if (!field.is_string()) {
      throw InputError(where + ": the value of " + json_quoted(key) + " must be a string, not " +
                       kind_of(field));
    }
    metadata.emplace(key, field.get<std::string>());
  }
  return metadata;
}

// Note [Safetensors checks]: the sorted ranges must tile [0, data_bytes). Zero-length tensors
// sort before a tensor that starts where they are, so they sit between two ranges legally.
void check_coverage(const std::vector<SafetensorsEntry>& sorted, std::uint64_t data_bytes,
                    const std::string& origin) {
  std::uint64_t position = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& entry : sorted) {
    if (entry.begin < position) {
      throw InputError(origin + ": tensor " + json_quoted(entry.name) + ": data_offsets [" +
                       std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                       ") overlap those of tensor " + json_quoted(previous->name) +
                       " (which end at " +
                       std::to_string(position) + ")");
    }
    if (entry.begin > position) {
      throw InputError(origin + ": tensor " + json_quoted(entry.name) + ": data_offsets begin " +
                       std::to_string(entry.begin) + " leaves a hole of " +
                       std::to_string(entry.begin - position) + " bytes after " +
                       (previous ? "tensor " + json_quoted(previous->name)
                                 : std::string("the start of the data buffer")));
    }
    position = entry.end;
    previous = &entry;
  }
  if (data_bytes < position) {
    throw InputError(origin + ": the data buffer is truncated: the tensors need " +
                     std::to_string(position) + " bytes but the file has " +
                     std::to_string(data_bytes) + " after the header");
  }
  if (data_bytes > position) {
    throw InputError(origin + ": the data buffer has " + std::to_string(data_bytes - position) +
                     " bytes after the last tensor's end (" + std::to_string(position) +
                     "): the header does not describe them");
  }
}

std::uint64_t little_endian_u64(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return value;
}

void check_regular_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    throw InputError(path.string() + ": the safetensors file does not exist");
  }
  if (std::filesystem::is_directory(status)) {
    throw InputError(path.string() + ": the safetensors path is a directory, not a file");
  }
  // A FIFO would block and a device may never end.
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError(path.string() +
                     ": the safetensors path is not a regular file (a device, FIFO or socket)");
  }
}

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::size_t dtype_bytes(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::F64:
    case TensorDtype::I64:
      return 8;
    case TensorDtype::F32:
    case TensorDtype::I32:
      return 4;
    case TensorDtype::F16:
    case TensorDtype::BF16:
    case TensorDtype::I16:
      return 2;
    case TensorDtype::I8:
    case TensorDtype::U8:
    case TensorDtype::Bool:
      return 1;
  }
  throw Error(detail::concat("internal error: unknown TensorDtype ", static_cast<int>(dtype)));
}

std::string to_string(TensorDtype dtype) {
  for (const auto& [known, name] : kDtypeNames) {
    if (known == dtype) return std::string(name);
  }
  throw Error(detail::concat("internal error: unknown TensorDtype ", static_cast<int>(dtype)));
}

const SafetensorsEntry* SafetensorsHeader::find(const std::string& name) const {
  // Linear: a model has at most a few thousand tensors, and lookups are per load.
  for (const SafetensorsEntry& entry : tensors) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(std::string_view file_prefix, std::uint64_t file_size,
                                           const std::string& origin) {
  PSW_CHECK(file_prefix.size() <= file_size, "a prefix of ", file_prefix.size(),
            " bytes of a file of ", file_size);
  if (file_size < 8) {
    throw InputError(origin + ": the file has " + std::to_string(file_size) +
                     " bytes, fewer than the 8 of the header length");
  }
  if (file_prefix.size() < 8) {
    throw InputError(origin + ": truncated: " + std::to_string(file_prefix.size()) +
                     " bytes read, fewer than the 8 of the header length");
  }
  const std::uint64_t header_bytes = little_endian_u64(file_prefix);
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    throw InputError(origin + ": the header length " + std::to_string(header_bytes) +
                     " is over the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) +
                     " bytes");
  }
  if (header_bytes > file_size - 8) {
    throw InputError(origin + ": the header length " + std::to_string(header_bytes) +
                     " is more than the " + std::to_string(file_size - 8) +
                     " bytes after it in the file");
  }
  if (file_prefix.size() - 8 < header_bytes) {
    throw InputError(origin + ": truncated: the header needs " + std::to_string(header_bytes) +
                     " bytes, only " + std::to_string(file_prefix.size() - 8) + " were read");
  }

  const json document = parse_header_json(file_prefix.substr(8, header_bytes), origin);
  if (!document.is_object()) {
    throw InputError(origin + ": the header must be a JSON object, not " + kind_of(document));
  }

  SafetensorsHeader header;
  header.data_offset = 8 + header_bytes;
  header.data_bytes = file_size - header.data_offset;
  for (const auto& [name, value] : document.items()) {
    if (name == "__metadata__") {
      header.metadata = parse_metadata(value, origin);
    } else {
      header.tensors.push_back(parse_entry(name, value, origin));
    }
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
            });
  check_coverage(header.tensors, header.data_bytes, origin);
  return header;
}

SafetensorsHeader read_safetensors_header(const std::filesystem::path& path) {
  const std::string origin = path.string();
  check_regular_file(path);
  std::error_code ec;
  const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(origin + ": cannot read the file's size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(origin + ": cannot open the safetensors file");

  std::string prefix(static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, 8)), '\0');
  in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  prefix.resize(static_cast<std::size_t>(in.gcount()));
  if (prefix.size() == 8) {
    // Only the header: its length is checked (against the limit and the file) before the
    // allocation; parse_safetensors_header repeats the checks with messages.
    const std::uint64_t header_bytes = little_endian_u64(prefix);
    if (header_bytes <= kMaxSafetensorsHeaderBytes && header_bytes <= file_size - 8) {
      prefix.resize(8 + static_cast<std::size_t>(header_bytes));
      in.read(prefix.data() + 8, static_cast<std::streamsize>(header_bytes));
      prefix.resize(8 + static_cast<std::size_t>(in.gcount()));
    }
  }
  return parse_safetensors_header(prefix, file_size, origin);
}

void read_safetensors_tensor(const std::filesystem::path& path, const SafetensorsHeader& header,
                             const SafetensorsEntry& entry, void* destination) {
  const std::string origin = path.string();
  PSW_CHECK(entry.begin <= entry.end && entry.end <= header.data_bytes, "tensor ", entry.name,
            " [", entry.begin, ", ", entry.end, ") is outside the data buffer of ",
            header.data_bytes, " bytes");
  // The header's bounds keep both within the file size it was parsed with, and file sizes
  // fit std::streamoff.
  const std::uint64_t offset = header.data_offset + entry.begin;
  constexpr auto kMaxStream =
      static_cast<std::uint64_t>(std::numeric_limits<std::streamoff>::max());
  PSW_CHECK(offset <= kMaxStream && entry.bytes() <= kMaxStream, "offset ", offset);
  check_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(origin + ": cannot open the safetensors file");
  in.seekg(static_cast<std::streamoff>(offset));
  std::streamsize got = 0;
  if (in && entry.bytes() > 0) {
    in.read(static_cast<char*>(destination), static_cast<std::streamsize>(entry.bytes()));
    got = in.gcount();
  }
  if (static_cast<std::uint64_t>(got) != entry.bytes()) {
    throw InputError(origin + ": tensor " + json_quoted(entry.name) +
                     ": the file is shorter than its header says: " +
                     std::to_string(entry.bytes()) + " bytes at offset " +
                     std::to_string(offset) + " wanted, " + std::to_string(got) + " read");
  }
}

std::string write_safetensors(const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the tensors in the caller's order.
  nlohmann::ordered_json document = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    document["__metadata__"] = std::move(meta);
  }
  std::set<std::string> names;
  std::uint64_t position = 0;
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    const std::string where = "write_safetensors: tensor " + json_quoted(name);
    if (name == "__metadata__") throw InputError(where + ": the name is reserved for metadata");
    if (!names.insert(name).second) throw InputError(where + ": the name is used twice");
    const std::uint64_t needed = tensor_bytes(shape, dtype, where);
    if (bytes.size() != needed) {
      throw InputError(where + ": " + std::to_string(bytes.size()) + " bytes given but shape " +
                       shape_text(shape) + " of " + to_string(dtype) + " needs " +
                       std::to_string(needed));
    }
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = to_string(dtype);
    entry["shape"] = shape;
    entry["data_offsets"] = {position, position + needed};
    document[name] = std::move(entry);
    position += needed;  // no overflow: the sum of sizes of strings held in memory
  }
  std::string header;
  try {
    header = document.dump();
  } catch (const nlohmann::ordered_json::type_error& e) {
    throw InputError(std::string("write_safetensors: a tensor name or metadata string is not "
                                 "valid UTF-8: ") + e.what());
  }
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + header.size() + static_cast<std::size_t>(position));
  const std::uint64_t length = header.size();
  for (std::size_t i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  out += header;
  for (const auto& tensor : tensors) out += std::get<3>(tensor);
  return out;
}

}  // namespace psw
