#pragma once
// Errors. Two kinds, because a user must be able to tell them apart:
//  - InputError: the user's input is wrong (a config, a trace, a CLI argument). The
//    message names the file, the line and the key; `psw` exits with code 2.
//    RangeError, a kind of InputError, is a magnitude that overflows the integer units.
//  - Error: anything else that went wrong (an internal invariant, an I/O failure);
//    `psw` exits with code 1.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace psw {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

// An input whose magnitude puts a result outside the integer units (Note [Checked units] in
// units.hpp): a link of a few bytes per second, a petabyte model, an arrival near the int64
// limit. An input error (exit 2); callers that know the inputs add them to the message.
class RangeError : public InputError {
 public:
  using InputError::InputError;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

// Runs `work`; a RangeError it throws comes out again with `context` (the inputs it was working
// on, e.g. "bert_base.yaml on slow-link.yaml") in front, so the message names the input.
template <typename Work>
decltype(auto) with_range_context(const std::string& context, Work&& work) {
  try {
    return std::forward<Work>(work)();
  } catch (const RangeError& e) {
    throw RangeError(context + ": " + e.what());
  }
}

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
