#pragma once
// What the canned operations (blas.cpp, rng.cpp, fft.cpp) share: argument checks with clear
// messages, and issuing one tracked operation on a context.

#include <array>
#include <cstddef>
#include <initializer_list>
#include <source_location>
#include <string_view>

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/canned.hpp"

namespace sluice::detail::canned {

template <class T>
constexpr Precision precision_of() {
  return sizeof(T) == sizeof(float) ? Precision::f32 : Precision::f64;
}

/// One buffer an operation touches: what it is called in messages and how it is used.
struct Operand {
  std::string_view name;  // "A", "x", ...
  const void* data;
  std::size_t elements;
  ObjectId id;
  Access mode;
};

template <class B>
Operand operand(std::string_view name, const B& buffer, Access mode) {
  return {name, buffer.data(), buffer.size(), buffer.object_id(), mode};
}

/// Throws Error(invalid_argument) unless every non-empty operand belongs to ctx's device.
void check_devices(const Context& ctx, std::string_view what,
                   std::initializer_list<Operand> operands, std::source_location loc);
/// Throws Error(invalid_argument) unless `operand` holds at least `needed` elements.
void check_size(std::string_view what, const Operand& operand, std::size_t needed,
                std::string_view why, std::source_location loc);
/// Throws Error(invalid_argument) unless `value` fits the backends' 32-bit BLAS/FFT interfaces.
std::int64_t checked_int(std::string_view what, std::string_view name, std::size_t value,
                         std::source_location loc);
/// a * b (+ c) in elements; throws Error(invalid_argument) on overflow.
std::size_t checked_mul(std::string_view what, std::size_t a, std::size_t b,
                        std::source_location loc);

/// Issues `f(stream, op)` as one operation `what` on ctx, after the waits its operands need.
template <class F>
void issue(const Context& ctx, std::initializer_list<Operand> operands, std::string_view what,
           std::source_location loc, F&& f) {
  AccessList accesses;  // one buffer passed twice (in place) merges into one access
  for (const auto& o : operands) accesses.add(o.id, {}, o.mode);
  issue_tracked(ctx.impl(), accesses, what, loc, f);
}

}  // namespace sluice::detail::canned
