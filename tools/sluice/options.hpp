#pragma once
// Validators for the numeric options of the `sluice` subcommands, with short messages: CLI11's
// own ranges print their bounds in full (a double's maximum has over 300 digits).

#include <cstdint>

namespace CLI {
class Validator;
}

namespace sluice::cli {

/// A whole number in [lo, hi]; anything else is rejected as "must be a whole number from lo to
/// hi, got 'text'".
[[nodiscard]] CLI::Validator whole_number(std::int64_t lo, std::int64_t hi);

/// A finite real number above 0 (`or_zero`: at least 0).
[[nodiscard]] CLI::Validator positive_real(bool or_zero = false);

}  // namespace sluice::cli
