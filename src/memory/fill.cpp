// Typed fills (sluice::fill, the dataflow layer's fill): checks, tracking, and the built-in Fill
// extensions.

#include <cstring>
#include <string>

#include "deps/issue.hpp"
#include "memory/fill_impl.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"
#include "sluice/memory.hpp"

namespace sluice {

void Fill::register_builtins() {
  // The cuda fill comes with the cuda module (memory/cuda/register.cpp).
  register_extension<Fill>("host", {std::shared_ptr<void>(), &detail::host::memory_fill()});
}

namespace detail {

void check_fill_target(const Context& ctx, const void* dst, std::source_location loc) {
  const auto found = find_memory(dst);
  const Device& here = ctx.device();
  if (found && found->attributes.type == MemoryType::device && found->attributes.device &&
      *found->attributes.device != here) {
    throw Error(Errc::invalid_argument,
                "fill: the destination is device memory of " +
                    found->attributes.device->to_string() + ", which a context of " +
                    here.to_string() + " does not write; fill on a context of that device",
                loc);
  }
  const bool pageable = !found || found->attributes.type == MemoryType::host;
  if (pageable && here.backend != "host") {
    throw Error(Errc::invalid_argument,
                "fill: the destination is pageable host memory, which " + here.to_string() +
                    " cannot write; use a PinnedBuffer, or fill it on a host context",
                loc);
  }
}

void fill_bytes(const Context& ctx, void* dst, const void* pattern, std::size_t elem,
                std::size_t count, std::source_location loc) {
  if (count == 0) return;
  if (dst == nullptr) throw Error(Errc::invalid_argument, "fill: null pointer", loc);
  if (elem == 0 || elem > FillArgs::kMaxPattern) {
    throw Error(Errc::invalid_argument,
                "fill: elements of " + std::to_string(elem) + " bytes; at most " +
                    std::to_string(FillArgs::kMaxPattern) + " are supported (fill a struct " +
                    "of arrays, or write the elements with a kernel)",
                loc);
  }
  check_fill_target(ctx, dst, loc);
  FillArgs args;
  args.dst = dst;
  args.elem = elem;
  args.count[0] = count;
  std::memcpy(args.pattern, pattern, elem);
  const std::size_t bytes = checked_bytes(count, elem, loc);
  auto& impl = extension<Fill>(ctx, loc);
  AccessList accesses;
  accesses.raw(dst, bytes, Access::write);
  issue_tracked(ctx.impl(), accesses, "fill", loc,
                [&](Stream& s, const OpInfo& op) { impl.fill(s, args, op); });
}

}  // namespace detail
}  // namespace sluice
