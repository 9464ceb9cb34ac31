#pragma once
/// @file
/// The flat program format of sluice's scalar interpreter. The scalar layer (sluice/scalar.hpp)
/// builds programs in it; each backend's interpreter (a host task, a one-thread CUDA kernel) runs
/// them. Internal: include sluice/scalar.hpp or sluice/ext/scalar_kernels.hpp
/// instead.
///
/// Plain C++17 with no dependency on the rest of sluice, so that nvcc compiles it in any mode.

// Private: only sluice's public headers include this file (they define
// SLUICE_IMPL_PUBLIC_INCLUDE around the include, as Kokkos does for its internals).
#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#error \
    "sluice/detail/scalar_format.hpp is internal to sluice and may change without notice: include <sluice/scalar.hpp>, or <sluice/ext/scalar_kernels.hpp> (backend authors) instead"
#endif

#include <cstddef>
#include <cstdint>

namespace sluice::detail {

/// The value types of the interpreter.
enum class ScalarKind : std::uint8_t {
  i32,  ///< std::int32_t
  i64,  ///< std::int64_t
  f32,  ///< float
  f64,  ///< double
  c32,  ///< std::complex<float>
  c64,  ///< std::complex<double>
};

/// Bytes of a value of kind `k`.
constexpr std::size_t scalar_kind_size(ScalarKind k) noexcept {
  switch (k) {
    case ScalarKind::i32:
    case ScalarKind::f32:
      return 4;
    case ScalarKind::i64:
    case ScalarKind::f64:
    case ScalarKind::c32:
      return 8;
    case ScalarKind::c64:
      return 16;
  }
  return 0;
}

/// Operations. Each instruction computes one value from at most two earlier ones.
///
/// Semantics are those of C++ on the operand types (std:: functions for floating-point and
/// complex), with these definitions where C++ leaves behaviour undefined: integer arithmetic wraps
/// (two's complement), integer division by zero gives 0, and INT_MIN / -1 gives INT_MIN.
/// `min(a, b)` is `b < a ? b : a` and `max(a, b)` is `a < b ? b : a` (std::min, std::max).
/// Comparisons give an i32 0 or 1.
enum class ScalarOp : std::uint8_t {
  load,      ///< the value at input pointer `a`
  constant,  ///< constant `a` of the program's constant table
  convert,   ///< operand `a` converted to `kind`
  neg,
  abs,
  sqrt,
  exp,
  log,
  sin,
  cos,
  tan,
  conj,
  real,
  imag,
  add,
  sub,
  mul,
  div,
  pow,
  min,
  max,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
};

/// One instruction. Its result is register i (i = its index in the program); `a` and `b` name
/// earlier registers (or, for load and constant, an input or constant index). `kind` is the
/// result's kind, `ka` and `kb` the operands' (they differ for conversions, comparisons, abs of
/// complex, and complex-with-real arithmetic such as `z * 2.0`).
struct ScalarInstr {
  ScalarOp op;
  ScalarKind kind;
  ScalarKind ka;
  ScalarKind kb;
  std::uint16_t a;
  std::uint16_t b;
};

/// Storage for one value of any kind (the bytes of the C++ object, zero-padded).
struct alignas(16) ScalarValue {
  unsigned char bytes[16];
};

/// Limits of one program: they keep it small enough to travel by value as a kernel parameter
/// (about 2.3 KB, under the 4 KB every CUDA architecture accepts), so that running it needs no
/// upload and a captured graph node holds the whole program.
inline constexpr std::uint32_t kScalarMaxInstructions = 128;
inline constexpr std::uint32_t kScalarMaxConstants = 64;
inline constexpr std::uint32_t kScalarMaxInputs = 32;

}  // namespace sluice::detail
