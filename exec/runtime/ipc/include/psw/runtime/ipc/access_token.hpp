#pragma once
// Note [Remote access]
// ~~~~~~~~~~~~~~~~~~~~
// By default the server answers on a Unix socket with mode 0600 (its user only) and, when asked,
// on loopback TCP. An address other hosts can reach is refused at start unless the server is
// given `--allow-remote` and a bearer token (`--token-file FILE`), because anyone who reaches it
// could run models, read their outputs and stop or checkpoint the training job. With a token,
// every call on a TCP listener (gRPC, REST, metrics) must carry it: gRPC metadata
// `authorization: Bearer TOKEN`, the HTTP header `Authorization: Bearer TOKEN`; a call without it,
// or with another, is UNAUTHENTICATED (HTTP 401) and never reaches the service. The token comes
// from a file only its owner can read (never the command line, which other users see in `ps`),
// at least 16 characters of printable ASCII, and is compared in constant time. TLS is not offered:
// a token on a network others can read travels in the clear, so remote use is for a network the
// operator trusts (or a tunnel).

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace psw::runtime {

class AccessToken {
 public:
  // The token in `file` (one line; a final newline is not part of it). InputError naming the
  // file for one that is missing, not a regular file, readable or writable by group or others,
  // shorter than kMinLength or holding other than printable ASCII.
  static AccessToken from_file(const std::filesystem::path& file);
  static constexpr std::size_t kMinLength = 16;

  // Whether an HTTP Authorization header's value (or gRPC's authorization metadata) presents this
  // token as "Bearer TOKEN". Takes the same time for every presented value of a given length.
  bool admits(std::string_view authorization) const;
  const std::string& value() const { return value_; }

 private:
  explicit AccessToken(std::string value) : value_(std::move(value)) {}
  std::string value_;
};

// "Bearer TOKEN" for `token`: what a client sends.
inline std::string bearer(const std::string& token) { return "Bearer " + token; }

}  // namespace psw::runtime
