#include "kernel/canned_common.hpp"

#include <limits>
#include <string>

#include "sluice/deps.hpp"

namespace sluice::detail::canned {

void check_devices(const Context& ctx, std::string_view what,
                   std::initializer_list<Operand> operands, std::source_location loc) {
  for (const auto& o : operands) {
    if (o.data == nullptr) continue;
    auto found = find_memory(o.data);
    if (!found || !found->attributes.device) continue;
    const Device& home = *found->attributes.device;
    if (home == ctx.device()) continue;
    throw Error(Errc::invalid_argument,
                std::string(what) + ": buffer " + std::string(o.name) + " belongs to " +
                    home.to_string() + " but the context '" + ctx.name() + "' is on " +
                    ctx.device().to_string() + "; issue it on a context of " + home.to_string() +
                    ", or copy the data to " + ctx.device().to_string() + " first",
                loc);
  }
}

void check_size(std::string_view what, const Operand& operand, std::size_t needed,
                std::string_view why, std::source_location loc) {
  if (operand.elements >= needed) return;
  throw Error(Errc::invalid_argument,
              std::string(what) + ": buffer " + std::string(operand.name) + " has " +
                  std::to_string(operand.elements) + " elements but " + std::string(why) +
                  " needs " + std::to_string(needed) + "; pass a larger buffer or smaller sizes",
              loc);
}

std::int64_t checked_int(std::string_view what, std::string_view name, std::size_t value,
                         std::source_location loc) {
  if (value > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": " + std::string(name) + " = " + std::to_string(value) +
                    " exceeds the 32-bit sizes of the BLAS and FFT libraries (at most " +
                    std::to_string(std::numeric_limits<int>::max()) + "); split the work",
                loc);
  }
  return static_cast<std::int64_t>(value);
}

std::size_t checked_mul(std::string_view what, std::size_t a, std::size_t b,
                        std::source_location loc) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": sizes " + std::to_string(a) + " x " + std::to_string(b) +
                    " overflow; pass smaller sizes",
                loc);
  }
  return a * b;
}

}  // namespace sluice::detail::canned
