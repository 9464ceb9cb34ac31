#include "scalar/host_interpreter.hpp"

#include <cmath>
#include <complex>
#include <cstring>

#include "scalar/interpreter_math.hpp"

namespace sluice::detail {
namespace {

// The host's rounding (see scalar/interpreter_math.hpp): C++'s operators and std:: functions on
// float, double and std::complex, exactly as a C++ program computes `z * 2.0` or `std::sqrt(z)`.
struct HostMath {
  using c32 = std::complex<float>;
  using c64 = std::complex<double>;

  template <class A, class B>
  static auto add(const A& a, const B& b) {
    return a + b;
  }
  template <class A, class B>
  static auto sub(const A& a, const B& b) {
    return a - b;
  }
  template <class A, class B>
  static auto mul(const A& a, const B& b) {
    return a * b;
  }
  template <class A, class B>
  static auto div(const A& a, const B& b) {
    return a / b;
  }
  template <class A, class B>
  static auto pow(const A& a, const B& b) {
    return std::pow(a, b);
  }
  template <class T>
  static auto abs(const T& x) {
    return std::abs(x);
  }
  template <class T>
  static auto sqrt(const T& x) {
    return std::sqrt(x);
  }
  template <class T>
  static auto exp(const T& x) {
    return std::exp(x);
  }
  template <class T>
  static auto log(const T& x) {
    return std::log(x);
  }
  template <class T>
  static auto sin(const T& x) {
    return std::sin(x);
  }
  template <class T>
  static auto cos(const T& x) {
    return std::cos(x);
  }
  template <class T>
  static auto tan(const T& x) {
    return std::tan(x);
  }
};

}  // namespace

ScalarValue scalar_apply(const ScalarInstr& in, const ScalarValue& a,
                         const ScalarValue& b) noexcept {
  return scalar_math::apply<HostMath>(in, a, b);
}

void scalar_interpret(const ScalarInstr* code, std::uint32_t size, const ScalarValue* constants,
                      void* const* inputs, void* output) noexcept {
  ScalarValue regs[kScalarMaxInstructions];
  for (std::uint32_t i = 0; i < size; ++i) {
    const ScalarInstr& in = code[i];
    switch (in.op) {
      case ScalarOp::load:
        regs[i] = ScalarValue{};
        std::memcpy(regs[i].bytes, inputs[in.a], scalar_kind_size(in.kind));
        break;
      case ScalarOp::constant:
        regs[i] = constants[in.a];
        break;
      default:
        regs[i] = scalar_apply(in, regs[in.a], regs[in.b]);
        break;
    }
  }
  if (size > 0) std::memcpy(output, regs[size - 1].bytes, scalar_kind_size(code[size - 1].kind));
}

}  // namespace sluice::detail
