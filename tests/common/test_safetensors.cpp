// Safetensors (common/src/safetensors.cpp): write -> parse -> read round trips, every rule of
// Note [Safetensors checks] as an InputError naming the file and the tensor or field, and
// reads from files on disk (the seed files in tests/data/safetensors/ among them).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/common/safetensors.hpp"
#include "input_error.hpp"

namespace psw {
namespace {

namespace fs = std::filesystem;

using test_support::input_error_of;

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "message: " << message
                                                     << "\nlacks: " << part;
  }
}

std::string le64(std::uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return out;
}

// A file of the given header text and data buffer, as written by hand (no padding).
std::string file_of(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::string parse_error(const std::string& bytes) {
  return input_error_of([&] { parse_safetensors_header(bytes, bytes.size(), "t.safetensors"); });
}

std::string bytes_of_floats(const std::vector<float>& values) {
  std::string out(values.size() * sizeof(float), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<SafetensorsTensor> sample_tensors() {
  return {
      {"encoder.weight", TensorDtype::F32, {2, 3}, bytes_of_floats({1, 2, 3, 4, 5, -6.5f})},
      {"encoder.bias", TensorDtype::BF16, {2}, std::string("\x80\x3f\x00\x40", 4)},
      {"positions", TensorDtype::I64, {1}, std::string(8, '\x07')},
      {"step", TensorDtype::F64, {}, std::string(8, '\x01')},  // a scalar: one element
      {"empty", TensorDtype::U8, {0}, std::string()},
      {"mask", TensorDtype::Bool, {3}, std::string("\x01\x00\x01", 3)},
  };
}

TEST(Safetensors, DtypeSizesAndNames) {
  const std::vector<std::tuple<TensorDtype, std::size_t, std::string>> table{
      {TensorDtype::F64, 8, "F64"}, {TensorDtype::F32, 4, "F32"}, {TensorDtype::F16, 2, "F16"},
      {TensorDtype::BF16, 2, "BF16"}, {TensorDtype::I64, 8, "I64"}, {TensorDtype::I32, 4, "I32"},
      {TensorDtype::I16, 2, "I16"}, {TensorDtype::I8, 1, "I8"}, {TensorDtype::U8, 1, "U8"},
      {TensorDtype::Bool, 1, "BOOL"}};
  for (const auto& [dtype, bytes, name] : table) {
    EXPECT_EQ(dtype_bytes(dtype), bytes) << name;
    EXPECT_EQ(to_string(dtype), name);
  }
}

TEST(Safetensors, RoundTripWriteParseRead) {
  const auto tensors = sample_tensors();
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "a \"quoted\"\n"}};
  const std::string file = write_safetensors(tensors, metadata);
  const SafetensorsHeader header = parse_safetensors_header(file, file.size(), "rt.safetensors");

  EXPECT_EQ(header.data_offset % 8, 0u) << "the header is padded to a multiple of 8";
  EXPECT_EQ(header.data_offset + header.data_bytes, file.size());
  EXPECT_EQ(header.metadata, metadata);
  ASSERT_EQ(header.tensors.size(), tensors.size());
  for (std::size_t i = 1; i < header.tensors.size(); ++i) {
    EXPECT_LE(header.tensors[i - 1].begin, header.tensors[i].begin) << "sorted by begin";
  }
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    const SafetensorsEntry* entry = header.find(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_EQ(entry->name, name);
    EXPECT_EQ(entry->dtype, dtype) << name;
    EXPECT_EQ(entry->shape, shape) << name;
    EXPECT_EQ(entry->bytes(), bytes.size()) << name;
    EXPECT_EQ(file.substr(header.data_offset + entry->begin, entry->bytes()), bytes) << name;
  }
  EXPECT_EQ(header.find("no such tensor"), nullptr);
  // The given order is the order of the data.
  EXPECT_EQ(header.find("encoder.weight")->begin, 0u);
  EXPECT_EQ(header.find("encoder.bias")->begin, 24u);
  EXPECT_EQ(header.find("mask")->end, header.data_bytes);

  // The scalar's and the empty tensor's sizes.
  EXPECT_EQ(header.find("step")->bytes(), 8u);
  EXPECT_EQ(header.find("empty")->bytes(), 0u);
}

TEST(Safetensors, EmptyFilesAndZeroLengthTensorsSharingAnOffset) {
  const std::string empty = write_safetensors({});
  const SafetensorsHeader none = parse_safetensors_header(empty, empty.size(), "e.safetensors");
  EXPECT_TRUE(none.tensors.empty());
  EXPECT_EQ(none.data_bytes, 0u);

  // Two empty tensors at offset 4, between two others: legal (nothing overlaps).
  const std::string file = file_of(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
      R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},)"
      R"("y":{"dtype":"I8","shape":[-0],"data_offsets":[4,4]},)"
      R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
      "abcdef");
  const SafetensorsHeader header = parse_safetensors_header(file, file.size(), "z.safetensors");
  ASSERT_EQ(header.tensors.size(), 4u);
  EXPECT_EQ(header.tensors[0].name, "a");
  EXPECT_EQ(header.tensors[1].name, "y");
  EXPECT_EQ(header.tensors[2].name, "z");
  EXPECT_EQ(header.tensors[3].name, "b");
}

TEST(Safetensors, BadLengthPrefixes) {
  expect_contains(parse_error(""), {"t.safetensors", "0 bytes", "fewer than the 8"});
  expect_contains(parse_error("abc"), {"t.safetensors", "3 bytes", "fewer than the 8"});
  expect_contains(parse_error(le64(100) + "{}"), {"t.safetensors", "header length 100",
                                                  "more than the 2 bytes"});
  expect_contains(parse_error(le64(~std::uint64_t{0}) + "{}"),
                  {"t.safetensors", "18446744073709551615", "over the limit"});
  // Over the limit even when the file is that long (only its prefix is at hand).
  const std::string big = le64(kMaxSafetensorsHeaderBytes + 1);
  expect_contains(input_error_of([&] {
                    parse_safetensors_header(big, kMaxSafetensorsHeaderBytes * 2, "big.st");
                  }),
                  {"big.st", "over the limit of 100000000"});
  // The file is long enough but the caller gave fewer bytes than the header.
  const std::string file = file_of("{}", "");
  expect_contains(input_error_of([&] {
                    parse_safetensors_header(std::string_view(file).substr(0, 9), file.size(),
                                             "p.st");
                  }),
                  {"p.st", "truncated", "needs 2 bytes, only 1"});
  expect_contains(input_error_of([&] {
                    parse_safetensors_header(std::string_view(file).substr(0, 5), file.size(),
                                             "p.st");
                  }),
                  {"p.st", "truncated", "5 bytes read"});
}

TEST(Safetensors, BadJsonHeaders) {
  expect_contains(parse_error(file_of("", "")), {"t.safetensors", "not valid JSON"});
  expect_contains(parse_error(file_of("{", "")), {"t.safetensors", "not valid JSON"});
  expect_contains(parse_error(file_of("{} {}", "")), {"t.safetensors", "not valid JSON"});
  expect_contains(parse_error(file_of("{\"a\xff\":1}", "")), {"t.safetensors", "not valid JSON"});
  expect_contains(parse_error(file_of(R"({"w":{"shape":[1e999]}})", "")),
                  {"t.safetensors", "not valid JSON"});
  expect_contains(parse_error(file_of("[]", "")), {"t.safetensors", "must be a JSON object",
                                                   "an array"});
  expect_contains(parse_error(file_of("\"x\"", "")), {"t.safetensors", "must be a JSON object"});
}

struct BadEntry {
  std::string header;
  std::string data;
  std::vector<std::string> parts;
};

TEST(Safetensors, BadEntriesNameTheTensorAndTheField) {
  const std::vector<BadEntry> cases{
      {R"({"w":3})", "", {R"(tensor "w")", "must be an object", "the integer 3"}},
      {R"({"w":{"shape":[2],"data_offsets":[0,8]}})", "", {R"(tensor "w")", "dtype is missing"}},
      {R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", "", {R"(tensor "w")", "shape is missing"}},
      {R"({"w":{"dtype":"F32","shape":[2]}})", "", {R"(tensor "w")", "data_offsets is missing"}},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", std::string(8, 'x'),
       {R"(tensor "w")", R"(unknown key "extra")"}},
      {R"({"w":{"dtype":5,"shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "dtype must be a string", "the integer 5"}},
      {R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "xx",
       {R"(tensor "w")", R"(dtype "F8_E4M3" is not supported)", "BF16"}},
      {R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", R"(dtype "f32")"}},
      {R"({"w":{"dtype":"F32","shape":{},"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "shape must be an array", "an object"}},
      {R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "shape[0] must be a non-negative integer", "2.5"}},
      {R"({"w":{"dtype":"F32","shape":[2,"3"],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "shape[1]", "a string"}},
      {R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "shape[1] is negative (-3)"}},
      {R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8]}})",
       std::string(8, 'x'), {R"(tensor "w")", "shape[0] is too large"}},
      {R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       std::string(8, 'x'), {R"(tensor "w")", "product of the shape's dimensions overflows"}},
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})",
       std::string(8, 'x'), {R"(tensor "w")", "byte size overflows"}},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":8}})", std::string(8, 'x'),
       {R"(tensor "w")", "data_offsets must be an array [begin, end]", "the integer 8"}},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "data_offsets must be an array", "3 values"}},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "data_offsets begin is negative (-1)"}},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", std::string(8, 'x'),
       {R"(tensor "w")", "data_offsets end must be a non-negative integer", "a string"}},
      {R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", std::string(8, 'x'),
       {R"(tensor "w")", "data_offsets begin 8 is after end 0"}},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "data_offsets cover 8 bytes but shape [3] of F32 needs 12"}},
      {R"({"w":{"dtype":"F32","shape":[],"data_offsets":[0,8]}})", std::string(8, 'x'),
       {R"(tensor "w")", "shape [] of F32 needs 4"}},
      // Names with quotes or newlines come out escaped.
      {"{\"a\\\"b\\n\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}",
       std::string(8, 'x'), {R"(tensor "a\"b\n")", "needs 4"}},
  };
  for (const BadEntry& bad : cases) {
    SCOPED_TRACE(bad.header);
    const std::string message = parse_error(file_of(bad.header, bad.data));
    expect_contains(message, bad.parts);
    expect_contains(message, {"t.safetensors: "});
  }
}

// A header of U8 tensors at the given ranges, e.g. {{"a", 0, 8}}. Built with append:
// GCC 12 warns (-Wrestrict, falsely) on chains of "literal" + std::string here.
struct Range {
  std::string name;
  int begin = 0, end = 0;
};
std::string u8_header(const std::vector<Range>& ranges) {
  std::string out = "{";
  for (const Range& r : ranges) {
    if (out.size() > 1) out.append(",");
    out.append("\"").append(r.name).append(R"(":{"dtype":"U8","shape":[)");
    out.append(std::to_string(r.end - r.begin)).append(R"(],"data_offsets":[)");
    out.append(std::to_string(r.begin)).append(",").append(std::to_string(r.end)).append("]}");
  }
  return out.append("}");
}

TEST(Safetensors, RangesMustTileTheDataBuffer) {
  expect_contains(
      parse_error(file_of(u8_header({{"a", 0, 8}, {"b", 4, 12}}), std::string(12, 'x'))),
      {"t.safetensors", R"(tensor "b")", "[4, 12) overlap those of tensor \"a\"", "end at 8"});
  expect_contains(parse_error(file_of(u8_header({{"a", 0, 8}, {"b", 0, 8}}), std::string(8, 'x'))),
                  {"t.safetensors", R"(tensor "b")", R"(overlap those of tensor "a")"});
  expect_contains(
      parse_error(file_of(u8_header({{"a", 0, 4}, {"b", 8, 12}}), std::string(12, 'x'))),
      {"t.safetensors", R"(tensor "b")", "hole of 4 bytes after tensor \"a\""});
  expect_contains(parse_error(file_of(u8_header({{"a", 4, 8}}), std::string(8, 'x'))),
                  {"t.safetensors", R"(tensor "a")",
                   "hole of 4 bytes after the start of the data buffer"});
  // A truncated data buffer, and bytes after the last tensor.
  expect_contains(parse_error(file_of(u8_header({{"a", 0, 8}}), std::string(5, 'x'))),
                  {"t.safetensors", "data buffer is truncated", "need 8 bytes", "has 5"});
  expect_contains(parse_error(file_of(u8_header({{"a", 0, 8}}), std::string(11, 'x'))),
                  {"t.safetensors", "3 bytes after the last tensor's end (8)"});
  expect_contains(parse_error(file_of("{}", "x")),
                  {"t.safetensors", "1 bytes after the last tensor's end (0)"});
}

TEST(Safetensors, Metadata) {
  const std::string w = R"("w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  const SafetensorsHeader header = [&] {
    const std::string file = file_of(R"({"__metadata__":{"a":"1","b":""},)" + w + "}", "x");
    return parse_safetensors_header(file, file.size(), "m.st");
  }();
  EXPECT_EQ(header.metadata, (std::map<std::string, std::string>{{"a", "1"}, {"b", ""}}));
  ASSERT_EQ(header.tensors.size(), 1u);

  expect_contains(parse_error(file_of(R"({"__metadata__":[],)" + w + "}", "x")),
                  {"t.safetensors", "__metadata__ must be an object", "an array"});
  expect_contains(parse_error(file_of(R"({"__metadata__":{"a":1},)" + w + "}", "x")),
                  {"t.safetensors", R"(__metadata__: the value of "a" must be a string)",
                   "the integer 1"});
  expect_contains(parse_error(file_of(R"({"__metadata__":{"a":{"b":"c"}},)" + w + "}", "x")),
                  {"t.safetensors", R"(the value of "a")", "an object"});

  // Round trip, including an empty map (no __metadata__ key written at all).
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"ünïcode", "✓"}};
  const std::string file = write_safetensors({{"x", TensorDtype::U8, {1}, "x"}}, metadata);
  EXPECT_EQ(parse_safetensors_header(file, file.size(), "m.st").metadata, metadata);
  const std::string plain = write_safetensors({{"x", TensorDtype::U8, {1}, "x"}});
  EXPECT_EQ(plain.find("__metadata__"), std::string::npos);
}

TEST(Safetensors, DuplicateKeysAtAnyDepth) {
  const std::string w = R"("w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  expect_contains(parse_error(file_of("{" + w + "," + w + "}", "x")),
                  {"t.safetensors", R"(the key "w" twice)"});
  expect_contains(
      parse_error(file_of(R"({"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})",
                          "x")),
      {"t.safetensors", R"(the key "dtype" twice)"});
  expect_contains(
      parse_error(file_of(R"({"__metadata__":{"k":"1","k":"2"},)" + w + "}", "x")),
      {"t.safetensors", R"(the key "k" twice)"});
  expect_contains(parse_error(file_of(R"({"__metadata__":{},"__metadata__":{},)" + w + "}", "x")),
                  {"t.safetensors", R"(the key "__metadata__" twice)"});
  // The same key in two different objects is fine.
  const std::string file =
      file_of("{" + w + R"(,"v":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "xy");
  EXPECT_EQ(parse_safetensors_header(file, file.size(), "d.st").tensors.size(), 2u);
}

TEST(Safetensors, WriterRejectsBadTensors) {
  expect_contains(input_error_of([] {
                    write_safetensors({{"a", TensorDtype::U8, {1}, "x"},
                                       {"a", TensorDtype::U8, {1}, "y"}});
                  }),
                  {R"(tensor "a")", "used twice"});
  expect_contains(
      input_error_of([] { write_safetensors({{"__metadata__", TensorDtype::U8, {1}, "x"}}); }),
      {R"(tensor "__metadata__")", "reserved"});
  expect_contains(
      input_error_of([] { write_safetensors({{"w", TensorDtype::F32, {2, 2}, "12345678"}}); }),
      {R"(tensor "w")", "8 bytes given but shape [2, 2] of F32 needs 16"});
  expect_contains(
      input_error_of([] { write_safetensors({{"w", TensorDtype::F32, {-1}, ""}}); }),
      {R"(tensor "w")", "negative dimension -1"});
  expect_contains(
      input_error_of([] { write_safetensors({{"bad\xff", TensorDtype::U8, {1}, "x"}}); }),
      {"not valid UTF-8"});
}

// A fresh folder per test, removed afterwards.
class SafetensorsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("psw-safetensors-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path write(const std::string& name, const std::string& bytes) const {
    const fs::path path = root_ / name;
    std::ofstream out(path, std::ios::binary);
    out << bytes;
    return path;
  }
  fs::path root_;
};

TEST_F(SafetensorsFiles, ReadHeaderAndTensorsFromDisk) {
  const auto tensors = sample_tensors();
  const fs::path path = write("model.safetensors", write_safetensors(tensors, {{"k", "v"}}));
  const SafetensorsHeader header = read_safetensors_header(path);
  EXPECT_EQ(header.metadata.at("k"), "v");
  ASSERT_EQ(header.tensors.size(), tensors.size());
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    const SafetensorsEntry* entry = header.find(name);
    ASSERT_NE(entry, nullptr) << name;
    std::string read(entry->bytes(), '\0');
    read_safetensors_tensor(path, header, *entry, read.data());
    EXPECT_EQ(read, bytes) << name;
  }
}

TEST_F(SafetensorsFiles, TruncatedFiles) {
  const std::string bytes = write_safetensors(sample_tensors());
  const fs::path path = write("cut.safetensors", bytes.substr(0, bytes.size() - 2));
  expect_contains(input_error_of([&] { read_safetensors_header(path); }),
                  {path.string(), "data buffer is truncated"});
  const fs::path header_cut = write("header-cut.safetensors", bytes.substr(0, 20));
  expect_contains(input_error_of([&] { read_safetensors_header(header_cut); }),
                  {header_cut.string(), "header length", "more than the 12 bytes"});

  // The file shrinks after its header was read: the tensor read says so.
  const fs::path shrinking = write("shrink.safetensors", bytes);
  const SafetensorsHeader header = read_safetensors_header(shrinking);
  fs::resize_file(shrinking, bytes.size() - 2);
  const SafetensorsEntry& last = header.tensors.back();
  std::string buffer(last.bytes(), '\0');
  expect_contains(input_error_of([&] {
                    read_safetensors_tensor(shrinking, header, last, buffer.data());
                  }),
                  {shrinking.string(), "tensor \"" + last.name + "\"",
                   "shorter than its header says", "1 read"});
}

TEST_F(SafetensorsFiles, OnlyRegularFiles) {
  const fs::path missing = root_ / "missing.safetensors";
  expect_contains(input_error_of([&] { read_safetensors_header(missing); }),
                  {missing.string(), "does not exist"});
  expect_contains(input_error_of([&] { read_safetensors_header(root_); }),
                  {root_.string(), "is a directory"});
  const fs::path fifo = root_ / "fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_contains(input_error_of([&] { read_safetensors_header(fifo); }),
                  {fifo.string(), "not a regular file"});
  const fs::path tiny = write("tiny.safetensors", "abc");
  expect_contains(input_error_of([&] { read_safetensors_header(tiny); }),
                  {tiny.string(), "3 bytes, fewer than the 8"});
}

TEST(Safetensors, SeedFilesAreValid) {
  const fs::path dir = fs::path(PSW_TEST_DATA_DIR) / "safetensors";
  const SafetensorsHeader two = read_safetensors_header(dir / "two_tensors.safetensors");
  EXPECT_EQ(two.metadata.at("format"), "pt");
  ASSERT_EQ(two.tensors.size(), 2u);
  const SafetensorsEntry* weight = two.find("layer.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->dtype, TensorDtype::F32);
  EXPECT_EQ(weight->shape, (std::vector<std::int64_t>{2, 2}));
  std::vector<float> values(4);
  read_safetensors_tensor(dir / "two_tensors.safetensors", two, *weight, values.data());
  EXPECT_EQ(values, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.25f}));

  const SafetensorsHeader scalar = read_safetensors_header(dir / "scalar.safetensors");
  ASSERT_EQ(scalar.tensors.size(), 2u);
  EXPECT_TRUE(scalar.find("step")->shape.empty());
  EXPECT_EQ(scalar.find("step")->dtype, TensorDtype::BF16);
  EXPECT_EQ(scalar.find("empty")->bytes(), 0u);
}

}  // namespace
}  // namespace psw
