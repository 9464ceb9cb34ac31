#pragma once
// Helpers of the scalar tests: bitwise comparison (NaNs equal to each other), values the compiler
// cannot see through, and a fixture.

#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "backend_param.hpp"
#include "sluice/scalar.hpp"

namespace sluice::test {

template <class T>
struct is_complex : std::false_type {};
template <class R>
struct is_complex<std::complex<R>> : std::true_type {};

/// Bitwise equality, except that any two NaNs are equal (payloads differ between CPUs and GPUs).
template <class T>
bool same_value(const T& a, const T& b) {
  if constexpr (is_complex<T>::value) {
    return same_value(a.real(), b.real()) && same_value(a.imag(), b.imag());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b)) return true;
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else {
    return a == b;
  }
}

template <class T>
std::string show(const T& x) {
  std::ostringstream s;
  s.precision(17);
  if constexpr (is_complex<T>::value) {
    s << "(" << show(x.real()) << ", " << show(x.imag()) << ")";
  } else if constexpr (std::is_floating_point_v<T>) {
    if (x == 0 && std::signbit(x)) {
      s << "-0";
    } else {
      s << x;
    }
  } else {
    s << x;
  }
  return s.str();
}

/// `x`, through a volatile, so that the compiler cannot fold the reference computation at compile
/// time (GCC folds libm calls on constants with correctly rounded MPFR results, which need not
/// equal what the library computes at run time).
template <class T>
T opaque(T x) {
  if constexpr (is_complex<T>::value) {
    using R = typename T::value_type;
    return T(opaque<R>(x.real()), opaque<R>(x.imag()));
  } else {
    volatile T v = x;
    return v;
  }
}

template <class A, class E>
::testing::AssertionResult SameValue(const char* actual_text, const char* expected_text,
                                     const A& actual, const E& expected) {
  const A e = static_cast<A>(expected);
  if (same_value(actual, e)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual_text << " = " << show(actual) << ", expected "
                                       << expected_text << " = " << show(e);
}

/// Bitwise equality (any two NaNs equal); accepts `<< message` like other EXPECT macros.
#define EXPECT_SAME(actual, expected) \
  EXPECT_PRED_FORMAT2(::sluice::test::SameValue, actual, expected)

class ScalarTest : public BackendTest {
 protected:
  /// A host task that blocks its context until `open` is set.
  static void gate(const Context& c, std::atomic<bool>& open) {
    c.host_task([&open] {
      while (!open) std::this_thread::yield();
    });
  }
};

}  // namespace sluice::test
