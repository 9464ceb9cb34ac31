// Must NOT compile: each SLUICE_CASE is one type mistake with lazy arrays. tests/CMakeLists.txt
// compiles it once per case and expects the readable message.

#include "sluice/lazy.hpp"

namespace L = sluice::lazy;

void misuse() {
  auto f = L::placeholder<float>("f", {4});
  auto d = L::placeholder<double>("d", {4});
  auto i = L::placeholder<std::int32_t>("i", {4});
  auto b = f > 0.0f;
#if SLUICE_CASE == 1
  auto r = f + d;  // float with double
#elif SLUICE_CASE == 2
  auto r = i * 0.5;  // an integer array with a floating-point number
#elif SLUICE_CASE == 3
  auto r = b + b;  // arithmetic on bool
#elif SLUICE_CASE == 4
  auto r = L::sin(i);  // a float function of integers
#elif SLUICE_CASE == 5
  auto r = L::index_lambda<double>({4}, [&](std::span<const L::Index> k) { return f(k[0]) * d(k[0]); });
#elif SLUICE_CASE == 6
  auto r = L::where(b, f, d);  // branches of float and double
#else
  auto r = L::where(b, L::cast<double>(f), d) + L::cast<double>(i) * 0.5;  // the control compiles
#endif
  (void)r;
  (void)d;
  (void)i;
}
