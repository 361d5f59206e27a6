#pragma once
// Safetensors files: a strict reader of the header and of single tensors, and a writer.
//
// Note [Safetensors checks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A file is 8 bytes of little-endian N, N bytes of a JSON header, then the data buffer. The
// header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (bytes of
// the data buffer, end exclusive), plus an optional "__metadata__" object of strings. Weights
// feed a GPU copy byte for byte, so anything the format forbids is an InputError naming the
// file and the tensor or field, never a guess:
//  - N fits the file and is at most kMaxSafetensorsHeaderBytes; the header is a JSON object
//    with no duplicate keys at any depth (a JSON parser would keep one of them silently);
//  - each entry has exactly the three keys, a known dtype, non-negative dims whose product
//    (times the dtype's size) does not overflow, and end - begin equal to that size;
//  - the byte ranges, sorted, tile the data buffer from 0 to its end: no overlap, no hole,
//    and the buffer is exactly as long as the last end (no truncation, no trailing bytes).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace psw {

// The header's length is bounded before anything is allocated for it (the reference
// implementation's bound too): a real header is kilobytes to a few megabytes.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

enum class TensorDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

std::size_t dtype_bytes(TensorDtype dtype);
std::string to_string(TensorDtype dtype);  // as the header spells it: "F32", "BOOL", ...

// A shape as messages write it: "[3, 224, 224]" ("[]" for a scalar).
std::string shape_text(const std::vector<std::int64_t>& shape);

struct SafetensorsEntry {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<std::int64_t> shape;  // empty: a scalar (one element)
  std::uint64_t begin = 0, end = 0;  // byte range in the data buffer, end exclusive
  std::uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // sorted by begin (then end, then name)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;  // 8 + N: where the data buffer starts in the file
  std::uint64_t data_bytes = 0;   // the data buffer's length

  const SafetensorsEntry* find(const std::string& name) const;  // nullptr when absent
};

// Parses the header from the file's first bytes (at least 8 + N of them: fewer is an error
// saying the prefix is truncated) and checks it against the file's total size.
// `origin` names the file in messages.
SafetensorsHeader parse_safetensors_header(std::string_view file_prefix, std::uint64_t file_size,
                                           const std::string& origin);

// Reads and parses the header of a regular file; never reads the data buffer.
SafetensorsHeader read_safetensors_header(const std::filesystem::path& path);

// Reads exactly entry.bytes() bytes of `entry`'s data into `destination`.
void read_safetensors_tensor(const std::filesystem::path& path, const SafetensorsHeader& header,
                             const SafetensorsEntry& entry, void* destination);

// A tensor to write: name, dtype, shape, and its bytes (product(shape) * dtype size of them).
using SafetensorsTensor =
    std::tuple<std::string, TensorDtype, std::vector<std::int64_t>, std::string>;

// The bytes of a file holding `tensors` in the given order (header and data), the header
// padded with spaces so that the data buffer starts at a multiple of 8. Throws InputError on
// a duplicate or reserved name, a bad shape or a byte count that does not match the shape.
std::string write_safetensors(const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace psw
