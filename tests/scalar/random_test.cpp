// Randomized expression trees, evaluated by sluice and, in parallel, by plain C++ on the host in
// the same precision and operation order. Comparison is bitwise (any two NaNs count as equal).
//
// Two families of operations:
// - exact: integer arithmetic; +, -, *, /, sqrt, abs, min, max, comparisons and conversions of
//   real values; complex +, -, negation, conj, real, imag, and complex with real operands
//   (component-wise). These are correctly rounded (or exact) on every backend, so the results
//   must agree bit for bit on a GPU too.
// - libm: exp, log, sin, cos, tan, pow, complex products, quotients, sqrt and abs. On the host
//   backend the interpreter calls the same functions as the reference, so they agree bit for bit.
//   A device's math library differs from the host's by a few ulp, and random trees amplify that
//   without bound (cancellation, poles of tan), so on devices these functions are checked one at
//   a time against a tolerance instead (DeviceMathIsClose).

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "scalar_test_util.hpp"

namespace sluice::test {
namespace {

template <class T>
struct real_of {
  using type = T;
};
template <class R>
struct real_of<std::complex<R>> {
  using type = R;
};
template <class T>
using real_t = typename real_of<T>::type;

template <class T>
constexpr bool is_int = std::is_integral_v<T>;

// sluice's integer semantics: wrap around, x / 0 = 0, MIN / -1 = MIN.
template <class T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <class T>
T int_div(T a, T b) {
  if (b == 0) return 0;
  if (a == std::numeric_limits<T>::min() && b == -1) return a;
  return a / b;
}

/// A random expression and its reference: a host function computing the same value from the
/// current host copies of the inputs.
template <class T>
struct Tree {
  AnyExpr<T> expr;
  std::function<T()> ref;
};

template <class T>
class Generator {
 public:
  using R = real_t<T>;

  Generator(std::uint64_t seed, bool exact_only) : rng_(seed), exact_only_(exact_only) {}

  void make_inputs(const Context& ctx, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      values_.push_back(std::make_shared<T>(random_value()));
      inputs_.emplace_back(*values_.back(), ctx);
    }
  }
  /// New random values for the same inputs.
  void reassign(const Context& ctx) {
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      *values_[i] = random_value();
      inputs_[i].assign(*values_[i], ctx);
    }
  }
  Tree<T> make(int depth) {
    pool_.clear();
    return node(depth);
  }

 private:
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

  R random_real() {
    if constexpr (is_int<T>) {
      static const T specials[] = {0, 1, -1, std::numeric_limits<T>::min(),
                                   std::numeric_limits<T>::max()};
      if (pick(10) < 3) return specials[pick(5)];
      return static_cast<T>(static_cast<int>(pick(201)) - 100);
    } else {
      static const R specials[] = {R(0),
                                   -R(0),
                                   R(1),
                                   R(-1),
                                   std::numeric_limits<R>::infinity(),
                                   -std::numeric_limits<R>::infinity(),
                                   std::numeric_limits<R>::quiet_NaN(),
                                   std::numeric_limits<R>::denorm_min(),
                                   std::numeric_limits<R>::max(),
                                   R(0.1)};
      if (pick(10) < 2) return specials[pick(10)];
      return std::uniform_real_distribution<R>(R(-4), R(4))(rng_);
    }
  }
  T random_value() {
    if constexpr (is_complex<T>::value) {
      return T(random_real(), random_real());
    } else {
      return random_real();
    }
  }

  Tree<T> leaf() {
    if (pick(4) == 0) {
      const T c = random_value();
      return {AnyExpr<T>(c), [c] { return c; }};
    }
    const std::size_t i = pick(inputs_.size());
    return {AnyExpr<T>(inputs_[i]), [v = values_[i]] { return *v; }};
  }

  Tree<T> node(int depth) {
    if (depth == 0 || pick(5) == 0) return leaf();
    if (!pool_.empty() && pick(6) == 0) return pool_[pick(pool_.size())];  // a shared subtree
    Tree<T> t = operation(depth);
    pool_.push_back(t);
    return t;
  }

  /// A real view of a tree, for ordering comparisons.
  std::pair<AnyExpr<R>, std::function<R()>> real_view(const Tree<T>& t) {
    if constexpr (is_complex<T>::value) {
      return {real(t.expr), [f = t.ref] { return f().real(); }};
    } else {
      return {t.expr, t.ref};
    }
  }

  Tree<T> arithmetic(std::size_t op, int depth) {
    Tree<T> a = node(depth - 1);
    auto fa = a.ref;
    auto apply = [op](T x, T y) -> T {
      if constexpr (is_int<T>) {
        switch (op) {
          case 0:
            return wrap_add(x, y);
          case 1:
            return wrap_sub(x, y);
          case 2:
            return wrap_mul(x, y);
          default:
            return int_div(x, y);
        }
      } else {
        switch (op) {
          case 0:
            return x + y;
          case 1:
            return x - y;
          case 2:
            return x * y;
          default:
            return x / y;
        }
      }
    };
    auto make = [op](const auto& x, const auto& y) -> AnyExpr<T> {
      switch (op) {
        case 0:
          return x + y;
        case 1:
          return x - y;
        case 2:
          return x * y;
        default:
          return x / y;
      }
    };
    if (pick(4) == 0) {  // with a host constant, on either side
      const T c = random_value();
      if (pick(2) == 0) return {make(a.expr, c), [=] { return apply(fa(), c); }};
      return {make(c, a.expr), [=] { return apply(c, fa()); }};
    }
    Tree<T> b = node(depth - 1);
    auto fb = b.ref;
    return {make(a.expr, b.expr), [=] { return apply(fa(), fb()); }};
  }

  Tree<T> operation(int depth) {
    for (;;) {
      const std::size_t op = pick(17);
      if (op < 4) {
        if (is_complex<T>::value && op >= 2 && exact_only_) continue;  // full complex * and /
        return arithmetic(op, depth);
      }
      if (op == 4) {
        Tree<T> a = node(depth - 1);
        if constexpr (is_int<T>) {
          return {-a.expr, [f = a.ref] { return wrap_sub(T(0), f()); }};
        } else {
          return {-a.expr, [f = a.ref] { return -f(); }};
        }
      }
      if (op == 5) {  // a flag times a value: comparisons, and int32 converted to T
        Tree<T> x = node(depth - 1), a = node(depth - 1), b = node(depth - 1);
        auto [ea, ra] = real_view(a);
        auto [eb, rb] = real_view(b);
        AnyExpr<std::int32_t> flag = 0;
        std::function<bool()> ref;
        switch (pick(6)) {
          case 0:
            flag = ea < eb;
            ref = [ra, rb] { return ra() < rb(); };
            break;
          case 1:
            flag = ea <= eb;
            ref = [ra, rb] { return ra() <= rb(); };
            break;
          case 2:
            flag = ea > eb;
            ref = [ra, rb] { return ra() > rb(); };
            break;
          case 3:
            flag = ea >= eb;
            ref = [ra, rb] { return ra() >= rb(); };
            break;
          case 4:
            flag = a.expr == b.expr;
            ref = [fa = a.ref, fb = b.ref] { return fa() == fb(); };
            break;
          default:
            flag = a.expr != b.expr;
            ref = [fa = a.ref, fb = b.ref] { return fa() != fb(); };
            break;
        }
        auto fx = x.ref;
        if constexpr (is_int<T>) {
          return {x.expr * flag, [=] { return wrap_mul(fx(), static_cast<T>(ref())); }};
        } else {
          return {x.expr * flag,
                  [=] { return fx() * static_cast<R>(static_cast<std::int32_t>(ref())); }};
        }
      }
      if constexpr (!is_complex<T>::value) {
        if (op == 6 || op == 7) {
          Tree<T> a = node(depth - 1), b = node(depth - 1);
          auto fa = a.ref, fb = b.ref;
          if (op == 6) {
            return {min(a.expr, b.expr), [=] {
                      const T x = fa(), y = fb();
                      return y < x ? y : x;
                    }};
          }
          return {max(a.expr, b.expr), [=] {
                    const T x = fa(), y = fb();
                    return x < y ? y : x;
                  }};
        }
        if (op == 8) {
          Tree<T> a = node(depth - 1);
          if constexpr (is_int<T>) {
            return {abs(a.expr), [f = a.ref] {
                      const T x = f();
                      return x < 0 ? wrap_sub(T(0), x) : x;
                    }};
          } else {
            return {abs(a.expr), [f = a.ref] { return std::abs(f()); }};
          }
        }
        if constexpr (!is_int<T>) {
          if (op == 9) {
            Tree<T> a = node(depth - 1);
            return {sqrt(a.expr), [f = a.ref] { return std::sqrt(f()); }};
          }
        }
      } else {
        if (op == 6) {
          Tree<T> a = node(depth - 1);
          return {conj(a.expr), [f = a.ref] { return std::conj(f()); }};
        }
        if (op == 7) {  // complex with a real operand: z + re(w), im(w) - z, z * re(w), ...
          Tree<T> z = node(depth - 1), w = node(depth - 1);
          const bool use_real = pick(2) == 0;
          AnyExpr<R> q = use_real ? AnyExpr<R>(real(w.expr)) : AnyExpr<R>(imag(w.expr));
          auto fz = z.ref;
          auto fq = [fw = w.ref, use_real] { return use_real ? fw().real() : fw().imag(); };
          switch (pick(4)) {
            case 0:
              return {z.expr + q, [=] { return fz() + fq(); }};
            case 1:
              return {q - z.expr, [=] { return fq() - fz(); }};
            case 2:
              return {z.expr * q, [=] { return fz() * fq(); }};
            default:
              return {z.expr / q, [=] { return fz() / fq(); }};
          }
        }
        if (op == 8 && !exact_only_) {
          Tree<T> z = node(depth - 1), w = node(depth - 1);
          return {z.expr * abs(w.expr), [fz = z.ref, fw = w.ref] { return fz() * std::abs(fw()); }};
        }
        if (op == 9 && !exact_only_) {
          Tree<T> a = node(depth - 1);
          return {sqrt(a.expr), [f = a.ref] { return std::sqrt(f()); }};
        }
      }
      if constexpr (!is_int<T>) {
        if (op >= 10 && !exact_only_) {
          Tree<T> a = node(depth - 1);
          auto f = a.ref;
          switch (op) {
            case 10:
              return {exp(a.expr), [f] { return std::exp(f()); }};
            case 11:
              return {log(a.expr), [f] { return std::log(f()); }};
            case 12:
              return {sin(a.expr), [f] { return std::sin(f()); }};
            case 13:
              return {cos(a.expr), [f] { return std::cos(f()); }};
            case 14:
              return {tan(a.expr), [f] { return std::tan(f()); }};
            default: {
              Tree<T> b = node(depth - 1);
              return {pow(a.expr, b.expr), [f, g = b.ref] { return std::pow(f(), g()); }};
            }
          }
        }
      }
    }
  }

  std::mt19937_64 rng_;
  bool exact_only_;
  std::vector<Managed<T>> inputs_;
  std::vector<std::shared_ptr<T>> values_;
  std::vector<Tree<T>> pool_;
};

class RandomTreeTest : public ScalarTest {
 protected:
  template <class T>
  void check(bool exact_only, std::uint64_t seed, int trees) {
    auto ctx = make_context();
    auto other = make_context();
    Generator<T> gen(seed, exact_only);
    gen.make_inputs(ctx, 4);
    std::size_t merged = 0, instructions = 0, nodes = 0;
    for (int i = 0; i < trees; ++i) {
      Tree<T> t = gen.make(1 + i % 4);
      auto program = compile(t.expr);
      merged += program.info().merged;
      nodes += program.info().nodes;
      instructions += program.info().instructions;
      // Evaluated where the inputs were written, and on another context (tracked ordering).
      Managed<T> r1 = program(ctx);
      Managed<T> r2 = eval(t.expr, other);
      const T expected = t.ref();
      const T got1 = r1.value(), got2 = r2.value();
      ASSERT_TRUE(same_value(got1, expected)) << "seed " << seed << " tree " << i << ": "
                                              << show(got1) << " != " << show(expected) << "\n"
                                              << program.disassemble();
      ASSERT_TRUE(same_value(got2, expected)) << "seed " << seed << " tree " << i;
      if (i % 8 == 0) {  // the same program again, after new input values
        gen.reassign(ctx);
        Managed<T> r3;
        program.run(r3, other);
        const T again = t.ref();
        ASSERT_TRUE(same_value(r3.value(), again))
            << "seed " << seed << " tree " << i << " (rerun): " << show(r3.value())
            << " != " << show(again);
      }
    }
    EXPECT_GT(merged, 0u) << "no common subexpressions: the generator does not test merging";
    EXPECT_LT(instructions, nodes);
  }
};

TEST_P(RandomTreeTest, ExactOperationsDouble) {
  check<double>(true, 1, 300);
}
TEST_P(RandomTreeTest, ExactOperationsFloat) {
  check<float>(true, 2, 300);
}
TEST_P(RandomTreeTest, ExactOperationsComplexDouble) {
  check<std::complex<double>>(true, 3, 300);
}
TEST_P(RandomTreeTest, ExactOperationsComplexFloat) {
  check<std::complex<float>>(true, 4, 300);
}
TEST_P(RandomTreeTest, ExactOperationsInt32) {
  check<std::int32_t>(true, 5, 300);
}
TEST_P(RandomTreeTest, ExactOperationsInt64) {
  check<std::int64_t>(true, 6, 300);
}

TEST_P(RandomTreeTest, LibmOperationsBitExactOnTheHost) {
  if (!is_host()) GTEST_SKIP() << "device libm differs from the host's; see DeviceMathIsClose";
  check<double>(false, 11, 300);
  check<float>(false, 12, 300);
  check<std::complex<double>>(false, 13, 300);
  check<std::complex<float>>(false, 14, 300);
}

// Each libm function alone, over a range of arguments: bit-exact on the host, within a few ulp
// (relative tolerance) on a device.
TEST_P(RandomTreeTest, DeviceMathIsClose) {
  auto ctx = make_context();
  Managed<double> x, y;
  Managed<std::complex<double>> z, w;
  struct Fn {
    ExecutableExpression<double> program;
    double (*reference)(double, double);
  };
  Fn real_fns[] = {
      {compile(exp(x)), [](double a, double) { return std::exp(a); }},
      {compile(log(abs(x))), [](double a, double) { return std::log(std::abs(a)); }},
      {compile(sin(x)), [](double a, double) { return std::sin(a); }},
      {compile(cos(x)), [](double a, double) { return std::cos(a); }},
      {compile(tan(x)), [](double a, double) { return std::tan(a); }},
      {compile(pow(abs(x), y)), [](double a, double b) { return std::pow(std::abs(a), b); }},
  };
  const double tol = is_host() ? 0.0 : 4 * std::numeric_limits<double>::epsilon();
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-3.0, 3.0);
  for (int i = 0; i < 50; ++i) {
    const double a = dist(rng), b = dist(rng);
    x.assign(a, ctx);
    y.assign(b, ctx);
    for (auto& f : real_fns) {
      const double got = f.program(ctx).value(), want = f.reference(opaque(a), opaque(b));
      if (tol == 0.0) {
        EXPECT_SAME(got, want) << f.program.disassemble();
      } else {
        EXPECT_NEAR(got, want, tol * std::max(1.0, std::abs(want))) << f.program.disassemble();
      }
    }
    using C = std::complex<double>;
    const C c(a, b), d(b, a);
    z.assign(c, ctx);
    w.assign(d, ctx);
    const C results[] = {eval(z * w, ctx).value(),   eval(z / w, ctx).value(),
                         eval(sqrt(z), ctx).value(), eval(exp(z), ctx).value(),
                         eval(log(z), ctx).value(),  eval(sin(z) + cos(w), ctx).value(),
                         eval(tan(z), ctx).value(),  eval(pow(z, w), ctx).value()};
    const C cc = opaque(c), dd = opaque(d);
    const C expected[] = {cc * dd,      cc / dd,         std::sqrt(cc),
                          std::exp(cc), std::log(cc),    std::sin(cc) + std::cos(dd),
                          std::tan(cc), std::pow(cc, dd)};
    for (std::size_t k = 0; k < std::size(results); ++k) {
      if (tol == 0.0) {
        EXPECT_SAME(results[k], expected[k]) << "complex function " << k;
      } else {
        EXPECT_NEAR(std::abs(results[k] - expected[k]), 0.0,
                    64 * tol * std::max(1.0, std::abs(expected[k])))
            << "complex function " << k << " at " << show(cc) << ", " << show(dd);
      }
    }
  }
}

SLUICE_INSTANTIATE_BACKENDS(RandomTreeTest);

}  // namespace
}  // namespace sluice::test
