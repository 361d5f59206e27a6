#include "psw/runtime/ipc/access_token.hpp"

#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "psw/common/error.hpp"

namespace psw::runtime {

AccessToken AccessToken::from_file(const std::filesystem::path& file) {
  const std::string origin = "token file " + file.string() + ": ";
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) throw InputError(origin + "no such file");
  if (!S_ISREG(info.st_mode)) throw InputError(origin + "not a regular file");
  if ((info.st_mode & 077) != 0) {
    throw InputError(origin + "group or others may read or write it (chmod 600 " + file.string() + ")");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(origin + "cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  for (const char c : text) {
    if (c < 0x21 || c > 0x7e) throw InputError(origin + "the token must be printable ASCII without spaces, on one line");
  }
  if (text.size() < kMinLength) {
    throw InputError(origin + "the token has " + std::to_string(text.size()) + " characters; at least " +
                     std::to_string(kMinLength) + " are needed (e.g. `openssl rand -hex 32`)");
  }
  return AccessToken(std::move(text));
}

bool AccessToken::admits(std::string_view authorization) const {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() != kScheme.size() + value_.size()) return false;
  // Constant time over the presented value: no early exit on the first differing byte.
  unsigned char differ = 0;
  for (std::size_t i = 0; i < kScheme.size(); ++i) differ |= static_cast<unsigned char>(authorization[i] ^ kScheme[i]);
  for (std::size_t i = 0; i < value_.size(); ++i) {
    differ |= static_cast<unsigned char>(authorization[kScheme.size() + i] ^ value_[i]);
  }
  return differ == 0;
}

}  // namespace psw::runtime
