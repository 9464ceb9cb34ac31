#pragma once
// The host's arithmetic for scalar programs: the host backend's interpreter and the constant
// folder both use it, so that a folded constant equals what the host backend would compute.

#include "sluice/ext/scalar_kernels.hpp"

namespace sluice::detail {

/// The result of instruction `in` (not load or constant) applied to operand values `a` and `b`
/// (`b` is ignored by unary operations).
[[nodiscard]] ScalarValue scalar_apply(const ScalarInstr& in, const ScalarValue& a,
                                       const ScalarValue& b) noexcept;

/// Runs a whole program on the host: reads the inputs, writes the result to `program.output`.
void scalar_interpret(const ScalarInstr* code, std::uint32_t size, const ScalarValue* constants,
                      void* const* inputs, void* output) noexcept;

}  // namespace sluice::detail
