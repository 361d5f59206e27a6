// The gRPC front end of `psw serve`: endpoint safety (socket directory, stale sockets, modes,
// wildcard addresses), protocol validation, and the translation between protobuf messages and
// the plain structs of service.hpp.
#include "psw/runtime/server/grpc_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "psw/common/error.hpp"
#include "model_lookup.hpp"
#include "tcp_address.hpp"
#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"
#include "psw/runtime/ipc/tensor_bytes.hpp"
#include "psw_control.grpc.pb.h"

namespace psw::runtime {

namespace {

namespace fs = std::filesystem;

std::string errno_text(int error) { return std::strerror(error); }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// --- endpoints -------------------------------------------------------------------------------

bool is_private_directory_of(const char* path, uid_t uid) {
  struct stat info {};
  return ::stat(path, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == uid &&
         ::access(path, W_OK | X_OK) == 0;
}

// Creates `dir` (one level) with mode 0700 unless it exists; the mode of an existing one is
// judged by check_socket_directory.
void make_private_directory(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw InputError("cannot create the socket directory " + dir.string() + ": " + errno_text(errno));
  }
}

// A socket in a directory that someone else can write can be unlinked and replaced by theirs,
// and clients would then send their tensors to an impostor: refuse such directories.
void check_socket_directory(const fs::path& dir) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    throw InputError("socket directory " + dir.string() + ": " + errno_text(errno));
  }
  if (!S_ISDIR(info.st_mode)) {
    throw InputError("socket directory " + dir.string() + " is not a directory");
  }
  const uid_t uid = ::geteuid();
  if (info.st_uid != uid) {
    throw InputError("socket directory " + dir.string() + " is owned by uid " +
                     std::to_string(info.st_uid) + ", not by the current user (uid " +
                     std::to_string(uid) +
                     "): its owner could replace the socket; use a directory of your own with "
                     "mode 0700");
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw InputError("socket directory " + dir.string() + " has mode " + octal_mode(info.st_mode) +
                     ", writable by group or others, who could replace the socket; use a "
                     "directory with mode 0700");
  }
}

enum class SocketProbe { Absent, Stale, Listening };

// Whether a server answers on the socket file at `path`. A non-blocking connect, so that a
// server whose accept backlog is full counts as listening instead of blocking the probe.
SocketProbe probe_socket(const fs::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return SocketProbe::Absent;
    throw InputError("cannot inspect " + path.string() + ": " + errno_text(errno));
  }
  if (!S_ISSOCK(info.st_mode)) {
    throw InputError(path.string() + " exists and is not a socket; refusing to replace it");
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw Error("cannot create a Unix socket: " + errno_text(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.string().size() + 1);
  const int result = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  ::close(fd);
  if (result == 0 || error == EAGAIN || error == EINPROGRESS) return SocketProbe::Listening;
  if (error == ECONNREFUSED) return SocketProbe::Stale;
  if (error == ENOENT) return SocketProbe::Absent;  // removed between lstat and connect
  throw InputError("cannot probe the socket " + path.string() + ": " + errno_text(error));
}

fs::path prepare_unix_socket(const std::string& requested) {
  if (requested.empty()) throw InputError("the Unix socket path is empty");
  const fs::path path = fs::absolute(requested).lexically_normal();
  constexpr std::size_t max_length = sizeof(sockaddr_un::sun_path) - 1;
  if (path.string().size() > max_length) {
    throw InputError("socket path " + path.string() + " is " + std::to_string(path.string().size()) +
                     " bytes long; a Unix socket path has at most " + std::to_string(max_length));
  }
  const fs::path dir = path.parent_path();
  make_private_directory(dir);
  check_socket_directory(dir);
  switch (probe_socket(path)) {
    case SocketProbe::Listening:
      throw InputError("another server is already listening on " + path.string());
    case SocketProbe::Stale:
      // Left behind by a server that died without cleaning up: nobody answers on it.
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        throw InputError("cannot remove the stale socket " + path.string() + ": " + errno_text(errno));
      }
      break;
    case SocketProbe::Absent:
      break;
  }
  return path;
}

// Sets the process's umask for its lifetime. The umask is process-wide: a file another thread
// creates meanwhile gets a narrower mode than it asked for, which errs on the safe side.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(previous_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t previous_;
};

// --- errors ------------------------------------------------------------------------------------

grpc::StatusCode to_grpc_code(ServiceError::Code code) {
  switch (code) {
    case ServiceError::Code::InvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ServiceError::Code::NotFound: return grpc::StatusCode::NOT_FOUND;
    case ServiceError::Code::Unavailable: return grpc::StatusCode::UNAVAILABLE;
    case ServiceError::Code::ResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ServiceError::Code::DeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ServiceError::Code::Internal: return grpc::StatusCode::INTERNAL;
    case ServiceError::Code::AlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case ServiceError::Code::Cancelled: return grpc::StatusCode::CANCELLED;
    case ServiceError::Code::FailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
  }
  return grpc::StatusCode::INTERNAL;
}

// Runs one handler body. An exception escaping a gRPC handler would terminate the server, so
// every one ends here as a status.
template <typename Body>
grpc::Status answer(Body&& body) {
  try {
    body();
    return grpc::Status::OK;
  } catch (const ServiceError& e) {
    return {to_grpc_code(e.code()), e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  } catch (...) {
    return {grpc::StatusCode::INTERNAL, "unknown error"};
  }
}

[[noreturn]] void invalid(const std::string& message) {
  throw ServiceError(ServiceError::Code::InvalidArgument, message);
}

std::string in_quotes(const std::string& name) { return "'" + name + "'"; }

std::string describe(const std::string& datatype, const std::vector<std::int64_t>& shape) {
  std::string text = datatype + " [";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// --- inference ---------------------------------------------------------------------------------

void fill_tensor_metadata(const TensorSpec& spec, inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(spec.name);
  out->set_datatype(spec.datatype);
  for (const std::int64_t dim : spec.shape) out->add_shape(dim);
}

// --- system shared memory ------------------------------------------------------------------------

// The parameters by which a tensor names a range of a registered region (the extension's
// "shared_memory_region", "shared_memory_offset", "shared_memory_byte_size").
struct SharedMemoryParameters {
  bool present = false;
  std::string region;
  std::int64_t offset = 0;
  std::int64_t byte_size = 0;
};

std::int64_t int64_parameter(const inference::InferParameter& value, const char* key, const std::string& what) {
  std::int64_t number = 0;
  if (value.parameter_choice_case() == inference::InferParameter::kInt64Param) {
    number = value.int64_param();
  } else if (value.parameter_choice_case() == inference::InferParameter::kUint64Param &&
             value.uint64_param() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    number = static_cast<std::int64_t>(value.uint64_param());
  } else {
    invalid(what + ": parameter " + in_quotes(key) + " must be an int64_param");
  }
  if (number < 0) invalid(what + ": parameter " + in_quotes(key) + " is " + std::to_string(number) + ", negative");
  return number;
}

template <typename Tensor>
SharedMemoryParameters shared_memory_parameters(const Tensor& tensor, const std::string& what) {
  const auto& parameters = tensor.parameters();
  const auto region = parameters.find("shared_memory_region");
  const auto offset = parameters.find("shared_memory_offset");
  const auto byte_size = parameters.find("shared_memory_byte_size");
  SharedMemoryParameters result;
  if (region == parameters.end()) {
    if (offset != parameters.end() || byte_size != parameters.end()) {
      invalid(what + ": shared_memory_offset or shared_memory_byte_size given without shared_memory_region");
    }
    return result;
  }
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam ||
      region->second.string_param().empty()) {
    invalid(what + ": parameter 'shared_memory_region' must be a non-empty string_param");
  }
  if (byte_size == parameters.end()) {
    invalid(what + ": shared_memory_region " + in_quotes(region->second.string_param()) +
            " given without shared_memory_byte_size");
  }
  result.present = true;
  result.region = region->second.string_param();
  result.byte_size = int64_parameter(byte_size->second, "shared_memory_byte_size", what);
  if (offset != parameters.end()) result.offset = int64_parameter(offset->second, "shared_memory_offset", what);
  return result;
}

// Over TCP the extension does not exist (shared_memory.hpp: Security).
[[noreturn]] void no_shared_memory_here(const std::string& what) {
  invalid(what + " names a shared memory region, but this server offers system shared memory only on its "
          "Unix socket, not over TCP");
}

// Note [Typed contents]
// ~~~~~~~~~~~~~~~~~~~~~
// The protocol lets a client send a tensor's values typed (InferTensorContents) instead of as
// raw bytes, and common clients do. Each datatype has one field: BOOL bool_contents; INT8,
// INT16, INT32 int_contents; INT64 int64_contents; UINT8, UINT16, UINT32 uint_contents;
// UINT64 uint64_contents; FP32 fp32_contents; FP64 fp64_contents. FP16 and BF16 have none (raw
// only). The front end turns typed values into the raw little-endian bytes the service takes,
// once, so that the service and the workers see one form. The field must hold exactly the
// shape's element count, no other field may be set, and a value must fit its datatype (300 in
// an INT8 tensor is refused, not wrapped); a request carries its tensors either typed or in
// raw_input_contents, never both (the protocol's rule). Each is INVALID_ARGUMENT naming the input.
namespace typed_contents {

template <typename Out, typename Values>
void append(std::string& raw, const Values& values, const std::string& what, const char* datatype) {
  for (const auto value : values) {
    if constexpr (!std::is_same_v<Out, float> && !std::is_same_v<Out, double> && !std::is_same_v<Out, bool>) {
      using In = std::decay_t<decltype(value)>;
      if (!std::in_range<Out>(static_cast<In>(value))) {
        invalid(what + ": the value " + std::to_string(value) + " does not fit " + datatype);
      }
    }
    const Out converted = static_cast<Out>(value);
    raw.append(reinterpret_cast<const char*>(&converted), sizeof converted);
  }
}

// The field the protocol gives `datatype`, and its element count in `contents`.
struct Field {
  const char* name;
  int size;
};

std::string as_raw(const inference::InferTensorContents& contents, const std::string& datatype, std::int64_t count,
                   const std::string& what) {
  const Field fields[] = {
      {"bool_contents", contents.bool_contents_size()},     {"int_contents", contents.int_contents_size()},
      {"int64_contents", contents.int64_contents_size()},   {"uint_contents", contents.uint_contents_size()},
      {"uint64_contents", contents.uint64_contents_size()}, {"fp32_contents", contents.fp32_contents_size()},
      {"fp64_contents", contents.fp64_contents_size()},     {"bytes_contents", contents.bytes_contents_size()},
  };
  const char* wanted = nullptr;
  if (datatype == "BOOL") wanted = "bool_contents";
  if (datatype == "INT8" || datatype == "INT16" || datatype == "INT32") wanted = "int_contents";
  if (datatype == "INT64") wanted = "int64_contents";
  if (datatype == "UINT8" || datatype == "UINT16" || datatype == "UINT32") wanted = "uint_contents";
  if (datatype == "UINT64") wanted = "uint64_contents";
  if (datatype == "FP32") wanted = "fp32_contents";
  if (datatype == "FP64") wanted = "fp64_contents";
  if (wanted == nullptr) {
    invalid(what + ": the protocol has no typed contents for " + datatype + "; send its bytes in raw_input_contents");
  }
  for (const Field& field : fields) {
    if (field.size == 0) continue;
    if (std::string_view(field.name) != wanted) {
      invalid(what + " is " + datatype + " but carries " + field.name + "; its values go in " + wanted);
    }
    if (field.size != count) {
      invalid(what + ": " + std::to_string(field.size) + " values in " + wanted + ", but its shape holds " +
              std::to_string(count));
    }
  }
  std::string raw;
  raw.reserve(static_cast<std::size_t>(count) * static_cast<std::size_t>(*datatype_element_bytes(datatype)));
  const char* type = datatype.c_str();
  if (datatype == "BOOL") append<bool>(raw, contents.bool_contents(), what, type);
  if (datatype == "INT8") append<std::int8_t>(raw, contents.int_contents(), what, type);
  if (datatype == "INT16") append<std::int16_t>(raw, contents.int_contents(), what, type);
  if (datatype == "INT32") append<std::int32_t>(raw, contents.int_contents(), what, type);
  if (datatype == "INT64") append<std::int64_t>(raw, contents.int64_contents(), what, type);
  if (datatype == "UINT8") append<std::uint8_t>(raw, contents.uint_contents(), what, type);
  if (datatype == "UINT16") append<std::uint16_t>(raw, contents.uint_contents(), what, type);
  if (datatype == "UINT32") append<std::uint32_t>(raw, contents.uint_contents(), what, type);
  if (datatype == "UINT64") append<std::uint64_t>(raw, contents.uint64_contents(), what, type);
  if (datatype == "FP32") append<float>(raw, contents.fp32_contents(), what, type);
  if (datatype == "FP64") append<double>(raw, contents.fp64_contents(), what, type);
  return raw;
}

}  // namespace typed_contents

// Note [Raw inputs received in place]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A raw input arrives inside the ModelInfer message (raw_input_contents, field 7), which gRPC
// hands over in the slices it read from the socket. Parsed as a whole by protobuf (what the
// generated handler does), every input was copied into the message's string, and the controller
// copied it again into the worker's io segment: two copies of ResNet-152's 4.8 MB input on the
// host before the device copy (input_copy, 0.4-0.8 ms of the request on the H200's host). So the
// handler takes the message as bytes (gRPC's streamed-unary form of the method, still one
// request and one response on the wire) and splits it: every field but the raw contents is parsed
// by protobuf as usual, and each raw entry is located by its key and length and copied once,
// straight from the slices into a slot of the front end's input staging (InputStaging: one
// sealed memfd the service maps like a client's registered region). The service then reads the
// input in place as it reads a client's shared memory (Note [Inputs read in place] in
// controller.hpp): on cuda the worker's copy engine reads the page-locked slot. When every slot
// is taken (more raw requests in flight than slots) or an input is larger than a slot, the bytes
// are copied out of the slices into the tensor's own string, as the parse did. A slot is held
// until the handler returns, and by the controller until the worker has answered: a caller who
// gives up while its worker reads (a deadline that passed mid-run) does not free the slot under
// that read.
constexpr int kModelInferMethodIndex = 5;  // its place in grpc_service.proto's service

struct ReceivedInfer {
  struct Range {
    std::size_t offset = 0;  // in the message
    std::size_t size = 0;
  };
  inference::ModelInferRequest header;  // every field but raw_input_contents
  std::vector<grpc::Slice> slices;      // the message as received, in order
  std::vector<Range> raw;               // each raw_input_contents entry, in order
};

// Calls `piece(data, size)` for each part of [range.offset, range.offset + range.size) of the
// message, in order.
template <typename Piece>
void for_each_piece(const std::vector<grpc::Slice>& slices, ReceivedInfer::Range range, Piece&& piece) {
  std::size_t start = 0;  // of the current slice in the message
  for (const grpc::Slice& slice : slices) {
    if (range.size == 0) return;
    const std::size_t end = start + slice.size();
    if (range.offset < end) {
      const std::size_t at = range.offset - start;
      const std::size_t take = std::min(range.size, slice.size() - at);
      piece(reinterpret_cast<const char*>(slice.begin()) + at, take);
      range.offset += take;
      range.size -= take;
    }
    start = end;
  }
}

[[noreturn]] void malformed(const std::string& why) {
  invalid("the ModelInfer request is not a valid message: " + why);
}

// Splits a received ModelInfer message (Note [Raw inputs received in place]).
ReceivedInfer split_received(grpc::ByteBuffer& message) {
  ReceivedInfer received;
  if (!message.Dump(&received.slices).ok()) malformed("its bytes could not be read");
  std::vector<ReceivedInfer::Range> fields;  // every other field, key included
  {
    grpc::ProtoBufferReader reader(&message);
    google::protobuf::io::CodedInputStream in(&reader);
    in.SetTotalBytesLimit(INT_MAX);
    constexpr int kRawField = inference::ModelInferRequest::kRawInputContentsFieldNumber;
    for (;;) {
      const auto start = static_cast<std::size_t>(in.CurrentPosition());
      const std::uint32_t key = in.ReadTag();
      if (key == 0) {
        if (!in.ConsumedEntireMessage()) malformed("a field key is truncated or zero");
        break;
      }
      const int field = static_cast<int>(key >> 3);
      const std::uint32_t wire_type = key & 7;
      bool ok = true;
      if (wire_type == 2) {  // length-delimited: bytes, strings, messages
        std::uint32_t length = 0;
        ok = in.ReadVarint32(&length) && length <= INT_MAX;
        if (ok && field == kRawField) {
          received.raw.push_back({static_cast<std::size_t>(in.CurrentPosition()), length});
          if (!in.Skip(static_cast<int>(length))) {
            malformed("raw_input_contents entry " + std::to_string(received.raw.size() - 1) + " is truncated");
          }
          continue;
        }
        ok = ok && in.Skip(static_cast<int>(length));
      } else if (wire_type == 0) {
        std::uint64_t value = 0;
        ok = in.ReadVarint64(&value);
      } else if (wire_type == 1 || wire_type == 5) {
        ok = in.Skip(wire_type == 1 ? 8 : 4);
      } else {
        ok = false;  // groups (3, 4) are not in this message; 6 and 7 do not exist
      }
      if (!ok) malformed("field " + std::to_string(field) + " is truncated or of an unknown wire type");
      fields.push_back({start, static_cast<std::size_t>(in.CurrentPosition()) - start});
    }
  }
  std::string header;
  for (const ReceivedInfer::Range& range : fields) {
    for_each_piece(received.slices, range, [&header](const char* data, std::size_t size) { header.append(data, size); });
  }
  if (!received.header.ParseFromString(header)) malformed("protobuf cannot parse its fields");
  return received;
}

// Raw entry `range`'s bytes into `tensor`: a staging slot when one is free and large enough,
// else the tensor's own string.
void place_raw(const ReceivedInfer& received, ReceivedInfer::Range range, InputStaging* staging, TensorData& tensor) {
  if (staging != nullptr && range.size > 0) {
    if (std::optional<BorrowedBytes> slot = staging->acquire(range.size)) {
      char* to = slot->data;
      for_each_piece(received.slices, range, [&to](const char* data, std::size_t size) {
        std::memcpy(to, data, size);
        to += size;
      });
      tensor.borrowed = std::move(*slot);
      return;
    }
  }
  tensor.bytes.reserve(range.size);
  for_each_piece(received.slices, range, [&tensor](const char* data, std::size_t size) { tensor.bytes.append(data, size); });
}

// A request in the service's terms, and where each of the request's `outputs` goes: a range of a
// region, or (no owner) back in the response.
struct ConvertedRequest {
  InferRequest request;
  std::vector<BorrowedBytes> output_targets;
};

// Checks what the protocol fixes (the service never sees a malformed tensor) and places the raw
// bytes (Note [Raw inputs received in place]; `staging` may be null). Inputs in shared memory
// become borrowed ranges of their regions, mapped, never copied here. `registry` is null where
// the extension is not offered.
ConvertedRequest to_infer_request(const ReceivedInfer& received, const SharedMemoryRegistry* registry,
                                  InputStaging* staging) {
  const inference::ModelInferRequest& request = received.header;
  const int raw_count = static_cast<int>(received.raw.size());
  if (request.model_name().empty()) invalid("the request names no model (model_name is empty)");
  if (request.inputs_size() == 0) invalid("the request has no inputs");
  // The protocol: raw_input_contents has one entry for each input that is not in shared memory,
  // in the order of `inputs`.
  std::vector<SharedMemoryParameters> placed(static_cast<std::size_t>(request.inputs_size()));
  std::vector<bool> typed(static_cast<std::size_t>(request.inputs_size()), false);
  int raw_wanted = 0;
  int first_placed = -1;
  int first_typed = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    const std::string what = "input " + in_quotes(input.name());
    SharedMemoryParameters& where = placed[static_cast<std::size_t>(i)];
    where = shared_memory_parameters(input, what);
    const bool has_typed = input.has_contents() && input.contents().ByteSizeLong() > 0;
    if (where.present) {
      if (registry == nullptr) no_shared_memory_here(what);
      if (has_typed) {
        invalid(what + " is in shared memory region " + in_quotes(where.region) +
                " and also carries typed `contents`; give a tensor's bytes one way only");
      }
      if (first_placed < 0) first_placed = i;
      continue;
    }
    if (has_typed) {  // Note [Typed contents]
      typed[static_cast<std::size_t>(i)] = true;
      if (first_typed < 0) first_typed = i;
      continue;
    }
    ++raw_wanted;
  }
  if (first_typed >= 0) {
    const std::string what = "input " + in_quotes(request.inputs(first_typed).name());
    if (raw_count > 0) {
      invalid(what + " carries typed `contents` and the request has raw_input_contents: the protocol takes a "
              "request's tensors either typed or raw, not both");
    }
    for (int i = 0; i < request.inputs_size(); ++i) {
      if (!typed[static_cast<std::size_t>(i)] && !placed[static_cast<std::size_t>(i)].present) {
        invalid("input " + in_quotes(request.inputs(i).name()) + " has no values: " + what +
                " is sent typed, so every input not in shared memory carries its values in `contents`");
      }
    }
  } else if (raw_count != raw_wanted) {
    if (first_placed < 0) {
      invalid("the request has " + std::to_string(request.inputs_size()) + " inputs but " +
              std::to_string(raw_count) +
              " raw_input_contents entries; send one entry per input, in the order of `inputs`");
    }
    const auto& input = request.inputs(first_placed);
    if (raw_count > raw_wanted) {
      invalid("input " + in_quotes(input.name()) + " is in shared memory region " +
              in_quotes(placed[static_cast<std::size_t>(first_placed)].region) + ", yet raw_input_contents has " +
              std::to_string(raw_count) + " entries for the " + std::to_string(raw_wanted) +
              " inputs not in shared memory; raw_input_contents carries only those: send a tensor's bytes "
              "either in a region or raw, not both");
    }
    invalid("the request has " + std::to_string(raw_wanted) + " inputs not in shared memory but " +
            std::to_string(raw_count) +
            " raw_input_contents entries; send one entry for each of them, in the order of `inputs`");
  }
  ConvertedRequest converted;
  converted.request.model = request.model_name();
  converted.request.version = request.model_version();
  converted.request.id = request.id();
  converted.request.inputs.reserve(static_cast<std::size_t>(request.inputs_size()));
  int raw_index = 0;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    const std::string what = "input " + in_quotes(input.name());
    if (input.name().empty()) invalid("input " + std::to_string(i) + " has no name");
    for (int j = 0; j < i; ++j) {
      if (request.inputs(j).name() == input.name()) invalid(what + " is given twice");
    }
    const std::vector<std::int64_t> shape(input.shape().begin(), input.shape().end());
    const std::int64_t expected = tensor_byte_count(what, input.datatype(), shape);
    const SharedMemoryParameters& where = placed[static_cast<std::size_t>(i)];
    if (where.present) {
      if (where.byte_size != expected) {
        invalid(what + ": shared_memory_byte_size is " + std::to_string(where.byte_size) + ", but " +
                describe(input.datatype(), shape) + " needs " + std::to_string(expected));
      }
      TensorData tensor{input.name(), input.datatype(), shape, {}};
      tensor.borrowed = registry->range(where.region, where.offset, where.byte_size, what);
      converted.request.inputs.push_back(std::move(tensor));
      continue;
    }
    if (typed[static_cast<std::size_t>(i)]) {
      const std::int64_t count = expected / *datatype_element_bytes(input.datatype());
      converted.request.inputs.push_back(TensorData{
          input.name(), input.datatype(), shape, typed_contents::as_raw(input.contents(), input.datatype(), count, what)});
      continue;
    }
    const ReceivedInfer::Range range = received.raw[static_cast<std::size_t>(raw_index++)];
    if (static_cast<std::int64_t>(range.size) != expected) {
      invalid(what + ": " + std::to_string(range.size) + " bytes of raw contents, but " +
              describe(input.datatype(), shape) + " needs " + std::to_string(expected));
    }
    TensorData tensor{input.name(), input.datatype(), shape, {}};
    place_raw(received, range, staging, tensor);
    converted.request.inputs.push_back(std::move(tensor));
  }
  // Outputs wanted in shared memory: their ranges are looked up now, so that a wrong region fails
  // the request before the model runs, and held until the answer is written.
  converted.output_targets.resize(static_cast<std::size_t>(request.outputs_size()));
  for (int k = 0; k < request.outputs_size(); ++k) {
    const auto& wanted = request.outputs(k);
    const std::string what = "output " + in_quotes(wanted.name());
    const SharedMemoryParameters where = shared_memory_parameters(wanted, what);
    if (!where.present) continue;
    if (registry == nullptr) no_shared_memory_here(what);
    BorrowedBytes target = registry->range(where.region, where.offset, where.byte_size, what);
    if (converted.request.output_destination(wanted.name()) == nullptr) {
      converted.request.output_destinations.push_back({wanted.name(), target});
    }
    converted.output_targets[static_cast<std::size_t>(k)] = std::move(target);
  }
  return converted;
}

// Which of the service's outputs go back, in which order: the requested ones, else all.
std::vector<std::size_t> selected_outputs(const inference::ModelInferRequest& request,
                                          const InferResponse& answer) {
  std::vector<std::size_t> order;
  if (request.outputs_size() == 0) {
    for (std::size_t i = 0; i < answer.outputs.size(); ++i) order.push_back(i);
    return order;
  }
  for (const auto& wanted : request.outputs()) {
    std::size_t found = answer.outputs.size();
    for (std::size_t i = 0; i < answer.outputs.size(); ++i) {
      if (answer.outputs[i].name == wanted.name()) found = i;
    }
    if (found == answer.outputs.size()) {
      invalid("model " + in_quotes(request.model_name()) + " has no output " + in_quotes(wanted.name()));
    }
    order.push_back(found);
  }
  return order;
}

// Note [Remote access] (access_token.hpp): on a listener with a token, a call must present it
// before anything else is looked at.
class Admission {
 public:
  explicit Admission(const AccessToken* token) : token_(token) {}
  grpc::Status operator()(const grpc::ServerContext* context) const {
    if (token_ == nullptr) return grpc::Status::OK;
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    if (it != metadata.end() && token_->admits(std::string_view(it->second.data(), it->second.size()))) {
      return grpc::Status::OK;
    }
    return {grpc::StatusCode::UNAUTHENTICATED,
            it == metadata.end() ? "this server takes calls with a bearer token only (metadata authorization: Bearer TOKEN)"
                                 : "the call's bearer token is not this server's"};
  }

 private:
  const AccessToken* token_;
};

class InferenceEndpoint final : public inference::GRPCInferenceService::Service {
 public:
  InferenceEndpoint(InferenceService& service, const AccessToken* token) : service_(service), admit_(token) {
    // Note [Raw inputs received in place]: ModelInfer takes its message as bytes.
    MarkMethodStreamed(kModelInferMethodIndex,
                       new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, inference::ModelInferResponse>(
                           [this](grpc::ServerContext* context,
                                  grpc::ServerUnaryStreamer<grpc::ByteBuffer, inference::ModelInferResponse>* stream) {
                             return model_infer(context, stream);
                           }));
  }

  // Set before the server starts: whether this endpoint offers system shared memory.
  void offer_shared_memory(bool offer) { shared_memory_offered_ = offer; }

  // Set before the server starts: raw inputs go through `staging`'s slots (Note [Raw inputs
  // received in place]), which the service is told of as a region, so that it maps it where it
  // reads inputs before the first request does.
  void stage_inputs(InputStaging* staging) {
    staging_ = staging;
    service_.shared_memory_registered(staging_->whole());
  }

  grpc::Status ServerLive(grpc::ServerContext* context, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] { response->set_live(service_.live()); });
  }

  grpc::Status ServerReady(grpc::ServerContext* context, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] { response->set_ready(service_.ready()); });
  }

  grpc::Status ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] { response->set_ready(find_served_model(service_, request->name(), request->version()).ready); });
  }

  grpc::Status ServerMetadata(grpc::ServerContext* context, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      response->set_name("psw");
      response->set_version("0.1");
      if (shared_memory_offered_) response->add_extensions("system_shared_memory");
    });
  }

  grpc::Status ModelMetadata(grpc::ServerContext* context, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      const ModelInfo model = find_served_model(service_, request->name(), request->version());
      response->set_name(model.name);
      response->set_platform(model.platform);
      for (const auto& version : model.versions) response->add_versions(version);
      for (const auto& input : model.inputs) fill_tensor_metadata(input, response->add_inputs());
      for (const auto& output : model.outputs) fill_tensor_metadata(output, response->add_outputs());
    });
  }

  // ModelInfer, its message as gRPC received it (Note [Raw inputs received in place]).
  grpc::Status model_infer(grpc::ServerContext* context,
                           grpc::ServerUnaryStreamer<grpc::ByteBuffer, inference::ModelInferResponse>* stream) {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    grpc::ByteBuffer message;
    if (!stream->Read(&message)) return {grpc::StatusCode::INVALID_ARGUMENT, "the ModelInfer call carried no request"};
    const std::int64_t received_ns = steady_now_ns();  // Note [Protocol split]
    inference::ModelInferResponse reply;
    inference::ModelInferResponse* response = &reply;
    grpc::Status status = answer([&] {
      const ReceivedInfer received = split_received(message);
      const inference::ModelInferRequest* request = &received.header;
      ConvertedRequest converted =
          to_infer_request(received, shared_memory_offered_ ? &registry_ : nullptr, staging_);
      // Note [Deadlines]: the client's deadline and its cancellation reach the service.
      const auto deadline = context->deadline();
      if (deadline != std::chrono::system_clock::time_point::max()) {
        converted.request.deadline = std::chrono::steady_clock::now() + (deadline - std::chrono::system_clock::now());
      }
      converted.request.cancelled = [context] { return context->IsCancelled(); };
      InferResponse result = service_.infer(converted.request);
      response->set_model_name(result.model.empty() ? request->model_name() : result.model);
      response->set_model_version(result.version);
      response->set_id(result.id.empty() ? request->id() : result.id);
      // Note [Request path] (psw/common/serving_profile.hpp): the server's own times, for a
      // client that splits its latency (psw profile --serving); other clients ignore them.
      if (result.server_ns > 0) (*response->mutable_parameters())["psw_server_ns"].set_int64_param(result.server_ns);
      if (result.engine_ns > 0) (*response->mutable_parameters())["psw_engine_ns"].set_int64_param(result.engine_ns);
      const std::vector<std::size_t> order = selected_outputs(*request, result);
      for (std::size_t k = 0; k < order.size(); ++k) {
        TensorData& output = result.outputs[order[k]];
        const std::string what = "output " + in_quotes(output.name);
        const std::string_view produced = output.contents();
        // A service that answers inconsistent bytes would make every client misread them.
        const std::int64_t expected = tensor_byte_count(what, output.datatype, output.shape);
        if (static_cast<std::int64_t>(produced.size()) != expected) {
          throw ServiceError(ServiceError::Code::Internal,
                             "the server produced " + std::to_string(produced.size()) + " bytes for " + what +
                                 " of " + describe(output.datatype, output.shape) + ", which needs " +
                                 std::to_string(expected));
        }
        auto* tensor = response->add_outputs();
        tensor->set_name(output.name);
        tensor->set_datatype(output.datatype);
        for (const std::int64_t dim : output.shape) tensor->add_shape(dim);
        const BorrowedBytes* target = k < converted.output_targets.size() && converted.output_targets[k].owner
                                          ? &converted.output_targets[k]
                                          : nullptr;
        if (target != nullptr) {
          if (produced.size() > target->size) {
            invalid(what + " has " + std::to_string(produced.size()) + " bytes (" +
                    describe(output.datatype, output.shape) + "), but its shared memory range holds only " +
                    std::to_string(target->size) + "; give a shared_memory_byte_size of at least " +
                    std::to_string(produced.size()));
          }
          // The service may have written it there already (the controller does, when it fits).
          if (produced.data() != target->data && !copy_guarded(target->data, produced.data(), produced.size())) {
            invalid(what + ": its shared memory region could not be written: the object shrank or /dev/shm is full");
          }
          // No bytes in the response, but an empty entry, as Triton sends: clients find an output's
          // raw contents by its position among the outputs.
          response->add_raw_output_contents();
          continue;
        }
        // Moved, unless the request asks for the same output again further on.
        const bool asked_again = std::find(order.begin() + static_cast<std::ptrdiff_t>(k) + 1,
                                           order.end(), order[k]) != order.end();
        if (asked_again || output.is_borrowed()) {
          response->add_raw_output_contents(produced.data(), produced.size());
        } else {
          response->add_raw_output_contents(std::move(output.bytes));
        }
      }
      // Note [Protocol split]: for a client on this host that splits its latency.
      (*response->mutable_parameters())["psw_received_ns"].set_int64_param(received_ns);
      (*response->mutable_parameters())["psw_replied_ns"].set_int64_param(steady_now_ns());
    });
    // As the last message: sent together with the status, as a unary handler's answer is.
    if (status.ok() && !stream->Write(reply, grpc::WriteOptions().set_last_message())) {
      return {grpc::StatusCode::CANCELLED, "the client went away before the answer"};
    }
    return status;
  }

  // Note [Repository index] (model_lookup.hpp).
  grpc::Status RepositoryIndex(grpc::ServerContext* context, const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      for (const ModelIndexEntry& entry : repository_index(service_, request->repository_name(), request->ready())) {
        auto* model = response->add_models();
        model->set_name(entry.name);
        model->set_version(entry.version);
        model->set_state(entry.state);
        model->set_reason(entry.reason);
      }
    });
  }

  // Note [Repository load] (controller.hpp).
  grpc::Status RepositoryModelLoad(grpc::ServerContext* context, const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse* /*response*/) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      check_repository_name(request->repository_name());
      std::string config;
      for (const auto& [key, value] : request->parameters()) {
        if (key != "config") {
          invalid("the load takes one parameter, 'config' (the model's entry, YAML or JSON), not '" + key + "'");
        }
        if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
          invalid("the load's 'config' must be a string parameter (the model's entry, YAML or JSON)");
        }
        config = value.string_param();
      }
      service_.load_model(request->model_name(), config);
    });
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* context, const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse* /*response*/) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      check_repository_name(request->repository_name());
      if (!request->parameters().empty()) {
        invalid("the unload takes no parameters, got '" + request->parameters().begin()->first + "'");
      }
      service_.unload_model(request->model_name());
    });
  }

  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext* context, const inference::SystemSharedMemoryStatusRequest* request,
                                        inference::SystemSharedMemoryStatusResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    if (!shared_memory_offered_) return no_shared_memory_status();
    return answer([&] {
      for (const SharedMemoryRegionInfo& info : registry_.status(request->name())) {
        auto& region = (*response->mutable_regions())[info.name];
        region.set_name(info.name);
        region.set_key(info.key);
        region.set_offset(info.offset);
        region.set_byte_size(info.byte_size);
      }
    });
  }

  grpc::Status SystemSharedMemoryRegister(grpc::ServerContext* context,
                                          const inference::SystemSharedMemoryRegisterRequest* request,
                                          inference::SystemSharedMemoryRegisterResponse*) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    if (!shared_memory_offered_) return no_shared_memory_status();
    return answer([&] {
      service_.shared_memory_registered(
          registry_.register_region(request->name(), request->key(), request->offset(), request->byte_size()));
    });
  }

  grpc::Status SystemSharedMemoryUnregister(grpc::ServerContext* context,
                                            const inference::SystemSharedMemoryUnregisterRequest* request,
                                            inference::SystemSharedMemoryUnregisterResponse*) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    if (!shared_memory_offered_) return no_shared_memory_status();
    return answer([&] { registry_.unregister(request->name()); });
  }

 private:
  // What a server without the extension answers: the calls do not exist here.
  static grpc::Status no_shared_memory_status() {
    return {grpc::StatusCode::UNIMPLEMENTED,
            "system shared memory is offered only on the server's Unix socket, not over TCP, where every local "
            "user who reaches the port could make the server read and write its user's shared memory"};
  }

  InferenceService& service_;
  Admission admit_;
  bool shared_memory_offered_ = false;
  SharedMemoryRegistry registry_;
  InputStaging* staging_ = nullptr;  // Note [Raw inputs received in place]; null: none
};

// --- control -----------------------------------------------------------------------------------

void fill_training_status(const TrainingStatus& status, psw::control::TrainingStatusResponse* out) {
  out->set_model(status.model);
  out->set_running(status.running);
  out->set_stopped(status.stopped);
  out->set_active(status.active);
  out->set_completed_steps(status.completed_steps);
  out->set_target_steps(status.target_steps);
  out->set_preemptions(status.preemptions);
  out->set_held_ns(status.held_ns);
  out->set_last_loss(status.last_loss);
}

class ControlEndpoint final : public psw::control::Control::Service {
 public:
  ControlEndpoint(InferenceService& service, const AccessToken* token) : service_(service), admit_(token) {}

  grpc::Status StartTraining(grpc::ServerContext* context, const psw::control::StartTrainingRequest* request,
                             psw::control::TrainingStatusResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      if (request->steps() < 0) {
        invalid("steps must be 0 (until stopped) or positive, not " + std::to_string(request->steps()));
      }
      fill_training_status(service_.start_training(request->model(), request->steps()), response);
    });
  }

  grpc::Status StopTraining(grpc::ServerContext* context, const psw::control::StopTrainingRequest* request,
                            psw::control::TrainingStatusResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] { fill_training_status(service_.stop_training(request->model()), response); });
  }

  grpc::Status TrainingStatus(grpc::ServerContext* context, const psw::control::TrainingStatusRequest* request,
                              psw::control::TrainingStatusResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] { fill_training_status(service_.training_status(request->model()), response); });
  }

  grpc::Status CheckpointTraining(grpc::ServerContext* context, const psw::control::CheckpointTrainingRequest* request,
                                  psw::control::CheckpointTrainingResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      const TrainingCheckpointStatus done = service_.checkpoint_training(request->model(), request->path());
      response->set_model(done.model);
      response->set_path(done.path);
      response->set_completed_steps(done.completed_steps);
      response->set_loss(done.loss);
      response->set_bytes(done.bytes);
    });
  }

  grpc::Status Metrics(grpc::ServerContext* context, const psw::control::MetricsRequest*,
                       psw::control::MetricsResponse* response) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] { response->set_text(service_.metrics_text()); });
  }

  grpc::Status Generate(grpc::ServerContext* context, const psw::control::GenerateRequest* request,
                        grpc::ServerWriter<psw::control::GenerateResponse>* writer) override {
    if (grpc::Status refused = admit_(context); !refused.ok()) return refused;
    return answer([&] {
      GenerateRequest call;
      call.model = request->model();
      call.id = request->id();
      call.input_ids.assign(request->input_ids().begin(), request->input_ids().end());
      call.max_tokens = request->max_tokens();
      // Note [Deadlines]: the client's deadline and its cancellation reach the service; a client
      // that stops reading is one that cancelled.
      const auto deadline = context->deadline();
      if (deadline != std::chrono::system_clock::time_point::max()) {
        call.deadline = std::chrono::steady_clock::now() + (deadline - std::chrono::system_clock::now());
      }
      bool writes_failed = false;
      call.cancelled = [context, &writes_failed] { return writes_failed || context->IsCancelled(); };
      const GenerateResponse done = service_.generate(call, [&](const GeneratedToken& token) {
        psw::control::GenerateResponse message;
        message.set_index(token.index);
        message.set_output_id(token.id);
        if (!writer->Write(message)) writes_failed = true;
      });
      psw::control::GenerateResponse last;
      last.set_done(true);
      last.set_model(done.model);
      last.set_id(done.id);
      for (const std::int64_t id : done.output_ids) last.add_output_ids(id);
      last.set_prompt_bucket(done.prompt_bucket);
      last.set_switched(done.switched);
      last.set_ttft_ns(done.ttft_ns);
      last.set_tpot_ns(done.tpot_ns);
      last.set_server_ns(done.server_ns);
      last.set_worker(done.worker);
      writer->Write(last);
    });
  }

 private:
  InferenceService& service_;
  Admission admit_;
};

}  // namespace

std::string default_socket_path() {
  const uid_t uid = ::geteuid();
  fs::path dir;
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  if (runtime_dir != nullptr && runtime_dir[0] == '/' && is_private_directory_of(runtime_dir, uid)) {
    dir = fs::path(runtime_dir) / "psw";
  } else {
    dir = fs::path("/tmp") / ("psw-" + std::to_string(uid));
  }
  make_private_directory(dir);
  return (dir / "psw.sock").string();
}

struct GrpcFrontEnd::Impl {
  Impl(InferenceService& service, const AccessToken* token) : inference(service, token), control(service, token) {}

  InferenceEndpoint inference;
  ControlEndpoint control;
  std::unique_ptr<grpc::Server> server;
  std::string target;
  fs::path socket_path;            // empty for TCP
  dev_t socket_device = 0;         // identify the socket file this server created, so that
  ino_t socket_inode = 0;          // shutdown never removes another server's
  std::mutex mutex;
  std::condition_variable stopped_changed;
  bool stopped = false;
};

GrpcFrontEnd::GrpcFrontEnd(InferenceService& service, const Endpoint& endpoint, std::int64_t max_message_bytes,
                           int max_threads, InputStaging* staging)
    : impl_(std::make_unique<Impl>(service, endpoint.token)) {
  if (endpoint.unix_path.empty() == endpoint.tcp_address.empty()) {
    throw InputError("a server endpoint needs exactly one of a Unix socket path and a TCP address");
  }
  if (max_message_bytes < 1 || max_message_bytes > INT_MAX) {
    throw InputError("max message size " + std::to_string(max_message_bytes) +
                     " bytes is outside [1, " + std::to_string(INT_MAX) + "] (gRPC's limit)");
  }
  std::string listen_uri;
  std::optional<HostPort> tcp;
  if (!endpoint.unix_path.empty()) {
    impl_->socket_path = prepare_unix_socket(endpoint.unix_path);
    listen_uri = "unix:" + impl_->socket_path.string();
  } else {
    tcp = parse_tcp_address(endpoint.tcp_address);
    check_tcp_host(endpoint.tcp_address, *tcp);
    listen_uri = endpoint.tcp_address;
  }

  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  // gRPC sets SO_REUSEPORT by default, which would let a second server share a port in use
  // instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Tensors of megabytes: large HTTP/2 frames and a stream window that does not throttle one
  // request to a few round trips of 64 KiB (the defaults), on a local socket with no loss.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
  if (max_threads > 0) {
    // Note [Backpressure]: calls beyond the bound are RESOURCE_EXHAUSTED by gRPC itself.
    grpc::ResourceQuota quota("psw-front-end");
    quota.SetMaxThreads(max_threads);
    builder.SetResourceQuota(quota);
  }
  int selected_port = 0;
  builder.AddListeningPort(listen_uri, grpc::InsecureServerCredentials(), &selected_port);
  impl_->inference.offer_shared_memory(!tcp.has_value());
  if (staging != nullptr) impl_->inference.stage_inputs(staging);
  builder.RegisterService(&impl_->inference);
  builder.RegisterService(&impl_->control);
  {
    // gRPC creates the socket file while it starts; with this umask it is 0600 from the start,
    // with no moment in which another user could connect.
    const ScopedUmask private_files(0177);
    impl_->server = builder.BuildAndStart();
  }
  if (!impl_->server || (tcp && selected_port == 0)) {
    impl_->server.reset();
    throw InputError("cannot listen on " + listen_uri +
                     (tcp ? ": the port is in use or the address is not one of this host's"
                          : ": gRPC could not bind the socket"));
  }
  if (tcp) {
    impl_->target = (tcp->bracketed ? "[" + tcp->host + "]" : tcp->host) + ":" + std::to_string(selected_port);
    return;
  }
  impl_->target = listen_uri;
  struct stat info {};
  if (::stat(impl_->socket_path.c_str(), &info) == 0) {
    impl_->socket_device = info.st_dev;
    impl_->socket_inode = info.st_ino;
  }
  // The umask already made it 0600; set it explicitly so the mode does not depend on how gRPC
  // creates the file.
  if (impl_->socket_inode == 0 || ::chmod(impl_->socket_path.c_str(), 0600) != 0) {
    const int error = errno;
    shutdown(0);
    throw Error("cannot restrict the socket " + impl_->socket_path.string() + " to mode 0600: " +
                errno_text(error));
  }
}

GrpcFrontEnd::~GrpcFrontEnd() {
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; shutdown only fails if gRPC does, and the process is ending
    // the server anyway.
  }
}

void GrpcFrontEnd::shutdown(std::int64_t grace_ms) {
  std::unique_lock lock(impl_->mutex);
  if (impl_->stopped) return;
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
    impl_->server->Wait();
  }
  if (!impl_->socket_path.empty()) {
    struct stat info {};
    if (::lstat(impl_->socket_path.c_str(), &info) == 0 && info.st_dev == impl_->socket_device &&
        info.st_ino == impl_->socket_inode) {
      ::unlink(impl_->socket_path.c_str());
    }
  }
  impl_->stopped = true;
  impl_->stopped_changed.notify_all();
}

void GrpcFrontEnd::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->stopped_changed.wait(lock, [this] { return impl_->stopped; });
}

std::string GrpcFrontEnd::target() const { return impl_->target; }

}  // namespace psw::runtime
