#pragma once
// A compiled scalar program: what ExecutableExpression holds.

#include <vector>

#include "sluice/ext/scalar_kernels.hpp"
#include "sluice/scalar.hpp"

namespace sluice::detail {

struct CompiledScalar {
  std::vector<ScalarInstr> code;  // the result is the last instruction's
  std::vector<ScalarValue> constants;
  std::vector<CellPtr> inputs;  // read by the load instructions, in input order
  std::vector<ScalarKind> input_kinds;
  ExpressionInfo info;
};

/// "double", "std::complex<float>", ...
[[nodiscard]] const char* scalar_type_name(ScalarKind kind) noexcept;

}  // namespace sluice::detail
