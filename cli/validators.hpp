#pragma once
// Checks of numeric options beyond CLI11's own: CLI::Range lets NaN through (every comparison
// with NaN is false) and takes "inf", so real-valued options use finite_range.

#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>
#include <string>

namespace psw::cli {

inline CLI::Validator finite_range(double min, double max) {
  std::ostringstream description;
  description << "NUMBER in [" << min << " - " << max << "]";
  return CLI::Validator(
      [min, max](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value) || !std::isfinite(value) || value < min || value > max) {
          std::ostringstream message;
          message << "Value " << input << " not in range [" << min << " - " << max << "]";
          return message.str();
        }
        return {};
      },
      description.str(), "FINITE_RANGE");
}

// An unsigned integer given without a sign: CLI11 reads "-5" into an unsigned option as
// 2^64 - 5.
inline CLI::Validator no_minus_sign() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        const auto first = input.find_first_not_of(" \t");
        if (first != std::string::npos && input[first] == '-') return "Value " + input + " is negative";
        return {};
      },
      "", "NO_MINUS_SIGN");
}

}  // namespace psw::cli
