#include "options.hpp"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

namespace sluice::cli {

CLI::Validator whole_number(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || ptr != end || v < lo || v > hi) {
          return fmt::format("must be a whole number from {} to {}, got '{}'", lo, hi, text);
        }
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator positive_real(bool or_zero) {
  return CLI::Validator(
      [or_zero](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || ptr != end || !std::isfinite(v) || v < 0 || (v == 0 && !or_zero)) {
          return fmt::format("must be a number {} 0, got '{}'", or_zero ? "of at least" : "above",
                             text);
        }
        return {};
      },
      or_zero ? "NUMBER >= 0" : "NUMBER > 0");
}

}  // namespace sluice::cli
