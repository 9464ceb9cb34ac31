#pragma once
// The built-in implementations of the Fill extension (sluice/ext/fill.hpp).

#include <source_location>

#include "sluice/context.hpp"
#include "sluice/ext/fill.hpp"

namespace sluice::detail {
namespace host {
[[nodiscard]] Fill& memory_fill();  // memory/host/fill.cpp
}
namespace cuda {
[[nodiscard]] Fill& memory_fill();  // memory/cuda/fill.cu
}
}  // namespace sluice::detail

namespace sluice::detail {
/// Throws Error(invalid_argument) unless a context of ctx's device can write `dst` (not device
/// memory of another device; not pageable memory on a device backend).
void check_fill_target(const Context& ctx, const void* dst, std::source_location loc);
}  // namespace sluice::detail
