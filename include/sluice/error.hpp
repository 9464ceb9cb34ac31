#pragma once
/// @file
/// The one exception type of sluice and the codes it carries.

#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>

namespace sluice {

/// What went wrong, coarsely; the message says the rest.
enum class Errc : std::uint8_t {
  invalid_argument,  ///< a bad size, handle, mode or option from the caller
  out_of_memory,     ///< an allocation failed
  unsupported,       ///< the backend or device cannot do what was asked
  no_device,         ///< no device matches, or the backend has none
  backend_failure,   ///< the vendor runtime reported an error
  work_failed,       ///< queued work failed; reported at the next wait on it
  invalid_state,     ///< a call made at the wrong time (after destroy, during capture, ...)
};

/// Human-readable name of an error code.
[[nodiscard]] const char* to_string(Errc code) noexcept;

/// Every failure that sluice reports is a sluice::Error (or derives from it).
///
/// The message says what was wrong and, where possible, what to do about it.
/// `where()` is the call site that issued the failing call or the failing work.
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message,
        std::source_location where = std::source_location::current());

  [[nodiscard]] Errc code() const noexcept { return code_; }
  [[nodiscard]] const std::source_location& where() const noexcept { return where_; }

 private:
  Errc code_;
  std::source_location where_;
};

/// An allocation failed; `requested()` bytes could not be provided.
class OutOfMemory : public Error {
 public:
  OutOfMemory(std::size_t requested, const std::string& message,
              std::source_location where = std::source_location::current());
  [[nodiscard]] std::size_t requested() const noexcept { return requested_; }

 private:
  std::size_t requested_;
};

/// Queued work failed. Thrown once, by the first call that waits on the failed work.
class WorkFailed : public Error {
 public:
  WorkFailed(std::string operation, std::source_location issued_at, std::string cause,
             std::uint64_t skipped);

  /// Name of the operation that failed (as given when it was issued).
  [[nodiscard]] const std::string& operation() const noexcept { return operation_; }
  /// Source location of the call that issued the failed operation.
  [[nodiscard]] const std::source_location& issued_at() const noexcept { return where(); }
  /// What the failing operation reported.
  [[nodiscard]] const std::string& cause() const noexcept { return cause_; }
  /// Operations that were not run because they came after the failure.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipped_; }

 private:
  std::string operation_;
  std::string cause_;
  std::uint64_t skipped_;
};

}  // namespace sluice
