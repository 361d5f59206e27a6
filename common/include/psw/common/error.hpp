#pragma once
// Errors. Two kinds, because a user must be able to tell them apart:
//  - InputError: the user's input is wrong (a config, a trace, a CLI argument). The
//    message names the file, the line and the key; `psw` exits with code 2.
//  - Error: anything else that went wrong (an internal invariant, an I/O failure);
//    `psw` exits with code 1.

#include <sstream>
#include <stdexcept>
#include <string>

namespace psw {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace psw

// Throws psw::Error naming the source location; for broken invariants, not user input.
#define PSW_CHECK(cond, ...)                                                             \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      throw ::psw::Error(::psw::detail::concat("internal error at ", __FILE__, ":",     \
                                               __LINE__, ": check `", #cond,             \
                                               "` failed: ", __VA_ARGS__));              \
    }                                                                                    \
  } while (false)
