#include "sluice/error.hpp"

#include <string>
#include <string_view>

namespace sluice {

const char* to_string(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument:
      return "invalid argument";
    case Errc::out_of_memory:
      return "out of memory";
    case Errc::unsupported:
      return "unsupported";
    case Errc::no_device:
      return "no device";
    case Errc::backend_failure:
      return "backend failure";
    case Errc::work_failed:
      return "work failed";
    case Errc::invalid_state:
      return "invalid state";
  }
  return "unknown error";
}

namespace {
/// "sluice: " + message, once: a message that wraps another error's drops that one's prefix.
std::string prefixed(const std::string& message) {
  static constexpr std::string_view kPrefix = "sluice: ";
  std::string out(kPrefix);
  out.reserve(kPrefix.size() + message.size());
  for (std::size_t pos = 0; pos < message.size();) {
    const auto next = message.find(kPrefix, pos);
    out.append(message, pos, next == std::string::npos ? std::string::npos : next - pos);
    if (next == std::string::npos) break;
    pos = next + kPrefix.size();
  }
  return out;
}
}  // namespace

Error::Error(Errc code, const std::string& message, std::source_location where)
    : std::runtime_error(prefixed(message)), code_(code), where_(where) {}

OutOfMemory::OutOfMemory(std::size_t requested, const std::string& message,
                         std::source_location where)
    : Error(Errc::out_of_memory, message, where), requested_(requested) {}

namespace {
std::string work_failed_message(const std::string& op, const std::source_location& at,
                                const std::string& cause, std::uint64_t skipped) {
  std::string msg = "queued operation '" + op + "' issued at " + at.file_name() + ":" +
                    std::to_string(at.line()) + " failed: " + cause;
  if (skipped > 0) {
    msg += " (" + std::to_string(skipped) + " later operation" + (skipped == 1 ? "" : "s") +
           " depending on it did not run)";
  }
  return msg;
}
}  // namespace

WorkFailed::WorkFailed(std::string operation, std::source_location issued_at, std::string cause,
                       std::uint64_t skipped)
    : Error(Errc::work_failed, work_failed_message(operation, issued_at, cause, skipped),
            issued_at),
      operation_(std::move(operation)),
      cause_(std::move(cause)),
      skipped_(skipped) {}

}  // namespace sluice
