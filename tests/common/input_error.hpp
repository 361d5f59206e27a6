#pragma once
// The test suites' one way to catch a psw::InputError and look at its message.

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "psw/common/error.hpp"

namespace psw::test_support {

// The message of the InputError that `work` throws, or "" (and a test failure) when it throws
// nothing or something else.
template <typename Work>
std::string input_error_of(Work&& work) {
  try {
    work();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected an InputError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an InputError, nothing was thrown";
  return "";
}

}  // namespace psw::test_support
