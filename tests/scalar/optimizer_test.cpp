// The scalar compiler: common subexpressions, constant folding, and each rewrite rule. Every
// default rule is checked to be exact on special values (signed zeros, infinities, NaN,
// subnormals); the rules it deliberately leaves out are checked to be NOT exact, which is why.

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "scalar_test_util.hpp"

namespace sluice::test {
namespace {

using C = std::complex<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> special_doubles() {
  return {0.0,   -0.0, 1.0, -1.0, kInf, -kInf, kNaN, std::numeric_limits<double>::denorm_min(),
          1e308, 3.5};
}

std::vector<C> special_complex() {
  std::vector<C> out;
  for (double re : {0.0, -0.0, kInf, kNaN, 2.5}) {
    for (double im : {0.0, -0.0, -kInf, kNaN, -1.5}) out.emplace_back(re, im);
  }
  return out;
}

class OptimizerTest : public ScalarTest {
 protected:
  /// Runs `program` (one input, x) for each value and compares with `reference(value)`.
  template <class T, class P, class F>
  void expect_exact_for(const std::vector<T>& values, Managed<T>& x, const P& program,
                        F reference) {
    auto ctx = make_context();
    for (const T& v : values) {
      x.assign(v, ctx);
      Managed<T> r;
      program.run(r, ctx);
      EXPECT_SAME(r.value(), reference(opaque(v))) << " for x = " << show(v);
    }
  }
};

TEST_P(OptimizerTest, CommonSubexpressionsAreMerged) {
  auto ctx = make_context();
  Managed<double> x(3.0, ctx), y(4.0, ctx);
  auto p = compile(x * y + x * y);
  EXPECT_EQ(p.info().nodes, 7u);   // x, y, *, x, y, *, +
  EXPECT_EQ(p.info().merged, 3u);  // the second x, y and x * y
  EXPECT_EQ(p.info().instructions, 4u);
  EXPECT_EQ(p.info().loads, 2u);
  EXPECT_EQ(p(ctx).value(), 24.0);

  auto same_input = compile(x + x * x);
  EXPECT_EQ(same_input.info().loads, 1u);
  EXPECT_EQ(same_input.info().instructions, 3u);

  auto constants = compile(x * 2.0 + y * 2.0 + x * 0.0 + x * -0.0);
  EXPECT_EQ(constants.info().constants, 3u);  // 2.0 once; +0.0 and -0.0 are different values

  // Operand order matters by default (a + b and b + a may differ in the NaN they return).
  EXPECT_EQ(compile(x + y - (y + x)).info().instructions, 5u);
}

TEST_P(OptimizerTest, ConstantsAreFoldedOnlyWhenEveryInputIsConstant) {
  auto ctx = make_context();
  Managed<double> x(2.0, ctx);
  auto p = compile(x + constant(2.0) * 3.0);
  EXPECT_EQ(p.info().folded, 1u);
  EXPECT_EQ(p.info().instructions, 3u);  // x, 6.0, +
  EXPECT_EQ(p(ctx).value(), 8.0);

  auto all_constant = compile(constant(1.0) / 3.0 + 1);
  EXPECT_EQ(all_constant.info().folded, 2u);
  EXPECT_EQ(all_constant.info().instructions, 1u);
  EXPECT_SAME(all_constant(ctx).value(), opaque(1.0) / 3.0 + 1.0);

  EXPECT_EQ(compile(x * 3.0 + constant(2.0) * 3.0).info().folded, 1u);  // x * 3 stays
  EXPECT_EQ(compile(x * 3.0 * 2.0).info().folded, 0u);  // (x * 3) * 2: no reassociation

  // Folding computes with the host's arithmetic, libm included, on every backend.
  auto folded_sin = compile(sin(constant(0.5)) + constant(2.0) * 1.5);
  EXPECT_EQ(folded_sin.info().instructions, 1u);
  EXPECT_SAME(folded_sin(ctx).value(), std::sin(opaque(0.5)) + opaque(2.0) * 1.5);
  // And with sluice's integer semantics.
  EXPECT_EQ(compile(constant(7) / 0).info().instructions, 1u);
  EXPECT_EQ(compile(constant(7) / 0)(ctx).value(), 0);
}

// ---- the value-preserving rewrites, one test each --------------------------------------------

TEST_P(OptimizerTest, TimesOneIsExact) {
  Managed<double> x;
  auto right = compile(x * 1.0);
  auto left = compile(1 * x);
  EXPECT_EQ(right.info().rewritten, 1u);
  EXPECT_EQ(right.info().instructions, 1u);
  EXPECT_EQ(left.info().instructions, 1u);
  expect_exact_for(special_doubles(), x, right, [](double v) { return v * opaque(1.0); });
  expect_exact_for(special_doubles(), x, left, [](double v) { return opaque(1.0) * v; });
}

TEST_P(OptimizerTest, DivideByOneIsExact) {
  Managed<double> x;
  auto p = compile(x / 1.0);
  EXPECT_EQ(p.info().instructions, 1u);
  expect_exact_for(special_doubles(), x, p, [](double v) { return v / opaque(1.0); });
}

TEST_P(OptimizerTest, MinusPositiveZeroIsExact) {
  Managed<double> x;
  auto p = compile(x - 0.0);
  EXPECT_EQ(p.info().instructions, 1u);
  expect_exact_for(special_doubles(), x, p, [](double v) { return v - opaque(0.0); });
}

TEST_P(OptimizerTest, PlusNegativeZeroIsExact) {
  Managed<double> x;
  auto right = compile(x + -0.0);
  auto left = compile(-0.0 + x);
  EXPECT_EQ(right.info().instructions, 1u);
  EXPECT_EQ(left.info().instructions, 1u);
  expect_exact_for(special_doubles(), x, right, [](double v) { return v + opaque(-0.0); });
  expect_exact_for(special_doubles(), x, left, [](double v) { return opaque(-0.0) + v; });
}

TEST_P(OptimizerTest, DoubleNegationIsExact) {
  Managed<double> x;
  auto p = compile(-(-x));
  EXPECT_EQ(p.info().instructions, 1u);
  expect_exact_for(special_doubles(), x, p, [](double v) { return -(-v); });
}

TEST_P(OptimizerTest, MinAndMaxOfTheSameValueAreExact) {
  Managed<double> x;
  auto lo = compile(min(x, x));
  auto hi = compile(max(x, x));
  EXPECT_EQ(lo.info().instructions, 1u);
  EXPECT_EQ(hi.info().instructions, 1u);
  expect_exact_for(special_doubles(), x, lo, [](double v) { return std::min(v, v); });
  expect_exact_for(special_doubles(), x, hi, [](double v) { return std::max(v, v); });
}

TEST_P(OptimizerTest, ComplexRulesAreExact) {
  Managed<C> z;
  auto cc = compile(conj(conj(z)));
  auto by_real_one = compile(z * 1.0);  // component-wise in C++: exact
  auto div_real_one = compile(z / 1.0);
  auto minus_zero = compile(z - C(0.0, 0.0));
  auto plus_neg_zero = compile(z + C(-0.0, -0.0));
  for (auto* p : {&cc, &by_real_one, &div_real_one, &minus_zero, &plus_neg_zero}) {
    EXPECT_EQ(p->info().instructions, 1u) << p->disassemble();
  }
  expect_exact_for(special_complex(), z, cc, [](C v) { return std::conj(std::conj(v)); });
  expect_exact_for(special_complex(), z, by_real_one, [](C v) { return v * opaque(1.0); });
  expect_exact_for(special_complex(), z, div_real_one, [](C v) { return v / opaque(1.0); });
  expect_exact_for(special_complex(), z, minus_zero, [](C v) { return v - opaque(C(0.0, 0.0)); });
  expect_exact_for(special_complex(), z, plus_neg_zero,
                   [](C v) { return v + opaque(C(-0.0, -0.0)); });
}

TEST_P(OptimizerTest, ComplexTimesComplexOneIsNotRewritten) {
  // (inf + 1i) * (1 + 0i) is a full complex product: its imaginary part is inf * 0 + 1 * 1 = NaN.
  Managed<C> z;
  auto p = compile(z * C(1.0, 0.0));
  EXPECT_EQ(p.info().rewritten, 0u);
  EXPECT_EQ(p.info().instructions, 3u);
  if (is_host()) {  // a device's complex product differs in its NaN/inf recovery
    expect_exact_for(special_complex(), z, p, [](C v) { return v * opaque(C(1.0, 0.0)); });
  }
}

TEST_P(OptimizerTest, IntegerRulesAreExact) {
  Managed<std::int32_t> n;
  auto zero_sub = compile(n - n);
  auto zero_mul = compile(n * 0);
  auto plus_zero = compile(n + 0);
  EXPECT_EQ(zero_sub.info().instructions, 1u);
  EXPECT_EQ(zero_mul.info().instructions, 1u);
  EXPECT_EQ(plus_zero.info().instructions, 1u);
  const std::vector<std::int32_t> values{0, 1, -1, std::numeric_limits<std::int32_t>::min(),
                                         std::numeric_limits<std::int32_t>::max()};
  expect_exact_for(values, n, zero_sub, [](std::int32_t) { return 0; });
  expect_exact_for(values, n, zero_mul, [](std::int32_t) { return 0; });
  expect_exact_for(values, n, plus_zero, [](std::int32_t v) { return v; });
}

// ---- rewrites left out by default, and why -------------------------------------------------

TEST_P(OptimizerTest, InexactRewritesAreNotAppliedByDefault) {
  auto ctx = make_context();
  Managed<double> x;
  struct Case {
    ExecutableExpression<double> program;
    double input;
    double result;  // what C++ computes; the "simplified" form would give something else
  };
  Case cases[] = {
      {compile(x + 0.0), -0.0, 0.0},   // x + 0 -> x would keep -0
      {compile(x * 0.0), kInf, kNaN},  // x * 0 -> 0
      {compile(x - x), kInf, kNaN},    // x - x -> 0
      {compile(x / x), 0.0, kNaN},     // x / x -> 1
      {compile(x * -1.0), 2.0, -2.0},  // x * -1 -> -x: differs only in a NaN's sign bit
  };
  for (auto& c : cases) {
    EXPECT_EQ(c.program.info().rewritten, 0u) << c.program.disassemble();
    x.assign(c.input, ctx);
    EXPECT_SAME(c.program(ctx).value(), c.result);
  }
}

TEST_P(OptimizerTest, AlgebraicSimplificationIsOptIn) {
  auto ctx = make_context();
  const double hx = opaque(0.25), hy = opaque(0.5), hz = opaque(3.0);
  Managed<double> x(hx, ctx), y(hy, ctx), z(hz, ctx);
  auto expr = sin(((x + y) / z) * z) + 15;  // reference 000, Listing 9
  auto exact = compile(expr);
  auto algebraic = compile(expr, {.algebraic = true});
  EXPECT_EQ(exact.info().instructions, 9u) << exact.disassemble();
  EXPECT_EQ(algebraic.info().instructions, 6u) << algebraic.disassemble();  // sin(x + y) + 15
  EXPECT_EQ(algebraic.info().loads, 2u);                                    // z is not even read
  const double value = algebraic(ctx).value();
  if (is_host()) {
    EXPECT_SAME(value, std::sin(hx + hy) + 15);
  }
  EXPECT_NEAR(exact(ctx).value(), value, 1e-14);

  EXPECT_EQ(compile(x + y - (y + x), {.algebraic = true}).info().instructions, 1u);  // 0
  EXPECT_EQ(compile(x * 0.0, {.algebraic = true}).info().instructions, 1u);
  EXPECT_EQ(compile(x / x, {.algebraic = true}).info().instructions, 1u);
  EXPECT_EQ(compile((x * y) / y, {.algebraic = true}).info().instructions, 1u);
  EXPECT_EQ(compile((x + y) - y, {.algebraic = true}).info().instructions, 1u);
  EXPECT_EQ(compile(exp(log(x)), {.algebraic = true}).info().instructions, 1u);
  EXPECT_EQ(compile(sqrt(x) * sqrt(x), {.algebraic = true}).info().instructions, 1u);
  Managed<double> r = eval(x * 0.0 + 1.0, ctx, {.algebraic = true});
  EXPECT_EQ(r.value(), 1.0);
}

TEST_P(OptimizerTest, DisassemblyShowsTheProgram) {
  Managed<double> x;
  Managed<C> z;
  EXPECT_EQ(compile(1.0 / x).disassemble(),
            "%0 = const f64 #0\n%1 = load f64 in0\n%2 = div f64 %0, %1\n");
  EXPECT_EQ(compile(z * 2.0).disassemble(),
            "%0 = load c64 in0\n%1 = const f64 #0\n%2 = mul c64 %0, %1 (c64, f64)\n");
  EXPECT_EQ(compile(abs(z)).disassemble(), "%0 = load c64 in0\n%1 = abs f64 c64 %0\n");
}

SLUICE_INSTANTIATE_BACKENDS(OptimizerTest);

}  // namespace
}  // namespace sluice::test
