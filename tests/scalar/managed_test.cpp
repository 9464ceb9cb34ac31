// Managed<T>: values on the device, evaluation on contexts, ordering across contexts, lifetime,
// misuse. The examples of reference 000 (Listings 9 to 11) run as written.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "scalar_test_util.hpp"

namespace sluice::test {
namespace {

using namespace std::complex_literals;

class ManagedTest : public ScalarTest {
 protected:
  /// Results of libm functions: bit-exact on the host backend (the same libm computes both);
  /// the device's libm differs from the host's by a few ulp.
  void expect_libm(double actual, double expected) const {
    if (is_host()) {
      EXPECT_SAME(actual, expected);
    } else {
      EXPECT_NEAR(actual, expected, 1e-14 * std::max(1.0, std::abs(expected)));
    }
  }
};

TEST_P(ManagedTest, HostValueRoundTripsForEveryType) {
  auto ctx = make_context();
  Managed<float> f(1.5f, ctx);
  Managed<double> d(-2.25, ctx);
  Managed<std::complex<float>> cf(std::complex<float>(1.0f, -2.0f), ctx);
  Managed<std::complex<double>> cd(std::complex<double>(3.0, 4.0), ctx);
  Managed<std::int32_t> i(-7, ctx);
  Managed<std::int64_t> l(std::int64_t{1} << 40, ctx);
  EXPECT_EQ(f.value(), 1.5f);
  EXPECT_EQ(d.value(), -2.25);
  EXPECT_EQ(cf.value(), std::complex<float>(1.0f, -2.0f));
  EXPECT_EQ(cd.value(), std::complex<double>(3.0, 4.0));
  EXPECT_EQ(i.value(), -7);
  EXPECT_EQ(l.value(), std::int64_t{1} << 40);
  EXPECT_EQ(d.device(), ctx.device());
  EXPECT_TRUE(d.assigned());
  EXPECT_NE(d.device_ptr(), nullptr);
  EXPECT_NE(d.object_id(), 0u);
}

TEST_P(ManagedTest, EvaluationIsOneLaunchWhateverTheSize) {
  auto ctx = make_context();
  Managed<double> a(1.0, ctx), b(2.0, ctx), c(3.0, ctx);
  auto small = 1.0 / a;
  auto big = sqrt(abs((a * b + c) / (c - 0.5) - a * c) + 1.0) * (b - c) + min(a, b) * max(b, c) -
             (a + b) * (a - b) / (c * c + 1.0) + abs(-a) * 2.0;
  const auto before = scalar::stats().launches;
  auto r1 = eval(small, ctx);
  const auto mid = scalar::stats().launches;
  auto r2 = eval(big, ctx);
  const auto after = scalar::stats().launches;
  EXPECT_EQ(mid - before, 1u);
  EXPECT_EQ(after - mid, 1u);
  EXPECT_GT(compile(big).info().instructions, 20u);
  const double ha = 1.0, hb = 2.0, hc = 3.0;
  EXPECT_SAME(r1.value(), 1.0 / ha);
  EXPECT_SAME(r2.value(),
              std::sqrt(std::abs((ha * hb + hc) / (hc - 0.5) - ha * hc) + 1.0) * (hb - hc) +
                  std::min(ha, hb) * std::max(hb, hc) - (ha + hb) * (ha - hb) / (hc * hc + 1.0) +
                  std::abs(-ha) * 2.0);
}

// Reference 000, Listing 9.
TEST_P(ManagedTest, ManualConstructionAndExecution) {
  auto ctx = make_context();
  const double hx = opaque(0.75), hy = opaque(1.5), hz = opaque(3.0);
  Managed<double> x(hx, ctx), y(hy, ctx), z(hz, ctx), w;
  auto expr1 = (x + y) / z;
  auto expr2 = sin(expr1 * z) + 15;
  auto evaluated = compile(expr2);
  evaluated.run(w, ctx);
  evaluated.run(x, ctx);  // any number of times, any target
  const double expected = std::sin(((hx + hy) / hz) * hz) + 15;
  expect_libm(w.value(), expected);
  expect_libm(x.value(), expected);
  // x changed: a third run reads the new x.
  Managed<double> v;
  evaluated.run(v, ctx);
  expect_libm(v.value(), std::sin(((expected + hy) / hz) * hz) + 15);
}

// Reference 000, Listing 10: evaluation forms that all compute the same value.
TEST_P(ManagedTest, OptionalEvalForms) {
  Context blocking = make_context(StreamKind::blocking);
  Context async = make_context();
  Managed<double> y(1.25, async), z(2.5, async);
  Managed<double> x;
  x = eval(y + z, blocking);
  EXPECT_EQ(x.value(), 3.75);
  x = eval(y + z);
  EXPECT_EQ(x.value(), 3.75);
  x = y + z;
  EXPECT_EQ(x.value(), 3.75);
  Managed<double> w1{y + z, blocking};
  Managed<double> w2{y + z};
  Managed<double> w3 = y * z;
  EXPECT_EQ(w1.value(), 3.75);
  EXPECT_EQ(w2.value(), 3.75);
  EXPECT_EQ(w3.value(), 3.125);
  EXPECT_EQ(w2.device(), y.device());  // the blocking context of the inputs' device
}

// Reference 000, Listing 11: the reciprocal of a norm, computed and used on the device.
TEST_P(ManagedTest, NormalizationKeepsTheScalarOnTheDevice) {
  auto ctx = make_context();
  Managed<double> alpha(ctx);  // storage for an operation that writes it ("VecNormAsync")
  std::vector<double> norm{opaque(4.0)};
  copy(ctx, std::span(alpha.write_ptr(ctx), 1), norm);  // tracked: a write of alpha on ctx
  alpha = eval(1.0 / alpha, ctx);
  Managed<double> scaled = eval(alpha * 8.0, ctx);  // "VecScaleAsync" consuming alpha
  const auto reads_before = scalar::stats().host_reads;
  EXPECT_EQ(scaled.value(), 2.0);
  EXPECT_EQ(scalar::stats().host_reads - reads_before, 1u);
}

TEST_P(ManagedTest, WriteThenReadAcrossContextsNeedsNoManualWait) {
  auto a = make_context();
  auto b = make_context();
  Managed<double> x(1.0, a);
  a.synchronize();
  Gate open(device());
  open.block(a);
  x.assign(x + 41.0, a);      // held back on a
  auto y = eval(x * 2.0, b);  // on b: must wait for a's write
  open.open();
  EXPECT_EQ(y.value(), 84.0);
}

TEST_P(ManagedTest, ReadThenWriteAcrossContextsIsOrdered) {
  auto a = make_context();
  auto b = make_context();
  Managed<double> x(3.0, a);
  a.synchronize();
  Gate open(device());
  open.block(b);
  auto y = eval(x * 2.0, b);  // a read of x, held back on b
  x.assign(100.0, a);         // a write of x on a: must not overtake the read
  open.open();
  EXPECT_EQ(y.value(), 6.0);
  EXPECT_EQ(x.value(), 100.0);
}

TEST_P(ManagedTest, ValueWaitsOnlyForItsProducer) {
  auto a = make_context();
  auto b = make_context();
  Managed<double> x(2.0, a);
  Managed<double> y(3.0, b);
  a.synchronize();
  b.synchronize();
  Gate open(device());
  open.block(b);
  y.assign(y + 1.0, b);  // b is stuck
  auto z = eval(x * x, a);
  EXPECT_EQ(z.value(), 4.0);  // returns although b has not run
  EXPECT_FALSE(b.idle());
  open.open();
  EXPECT_EQ(y.value(), 4.0);
}

TEST_P(ManagedTest, ProgramsReadTheCurrentValueOfTheirInputs) {
  auto ctx = make_context();
  Managed<double> x(1.0, ctx);
  auto p = compile(x + 1.0);
  Managed<double> r;
  p.run(r, ctx);
  EXPECT_EQ(r.value(), 2.0);
  x.assign(10.0, ctx);
  p.run(r, ctx);
  EXPECT_EQ(r.value(), 11.0);
  x = eval(x * 3.0, ctx);  // new storage moved into x: the program follows x
  p.run(r, ctx);
  EXPECT_EQ(r.value(), 31.0);
  auto fresh = p(ctx);
  EXPECT_EQ(fresh.value(), 31.0);
}

TEST_P(ManagedTest, AssignInPlaceReusesStorage) {
  auto ctx = make_context();
  Managed<double> x(1.0, ctx);
  const void* storage = x.device_ptr();
  for (int i = 0; i < 10; ++i) x.assign(x * 2.0, ctx);
  EXPECT_EQ(x.device_ptr(), storage);
  EXPECT_EQ(x.value(), 1024.0);
  x = x + 1.0;  // blocking, also in place
  EXPECT_EQ(x.device_ptr(), storage);
  EXPECT_EQ(x.value(), 1025.0);
}

TEST_P(ManagedTest, CopiesAreDeepAndMovesAreCheap) {
  auto ctx = make_context();
  Managed<double> x(5.0, ctx);
  Managed<double> y = x;  // a device-side copy
  EXPECT_NE(y.device_ptr(), x.device_ptr());
  x.assign(6.0, ctx);
  EXPECT_EQ(y.value(), 5.0);
  Managed<double> z = std::move(x);
  EXPECT_EQ(z.value(), 6.0);
  Managed<double> u;
  Managed<double> copy_of_unassigned = u;
  EXPECT_FALSE(copy_of_unassigned.assigned());
  y = z;
  EXPECT_EQ(y.value(), 6.0);
  std::vector<Managed<double>> many(3);
  many[1] = eval(z + 1.0, ctx);
  many.emplace_back(eval(z + 2.0, ctx));
  EXPECT_EQ(many[1].value(), 7.0);
  EXPECT_EQ(many[3].value(), 8.0);
}

TEST_P(ManagedTest, DestroyingWithWorkPendingIsSafe) {
  auto a = make_context();
  auto b = make_context();
  Gate open(device());
  Managed<double> out;
  {
    Managed<double> x(2.0, a);
    Managed<double> tmp;
    open.block(b);
    tmp = eval(x * 3.0, b);    // queued behind the gate
    out.assign(tmp + 1.0, b);  // reads tmp later
    auto p = compile(x * tmp);
    x = eval(x + 1.0, a);  // replaces x's storage while b still reads the old one
  }                        // x, tmp and the program go away with b's work pending
  // Allocation pressure: released storage reused too early would be overwritten here.
  std::vector<Managed<double>> noise;
  for (int i = 0; i < 64; ++i) noise.push_back(eval(constant(-1.0) * i, a));
  open.open();
  EXPECT_EQ(out.value(), 7.0);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(noise[static_cast<std::size_t>(i)].value(), -1.0 * i);
}

TEST_P(ManagedTest, ProgramKeepsItsInputsAlive) {
  auto ctx = make_context();
  ExecutableExpression<double> p;
  {
    Managed<double> x(4.0, ctx);
    p = compile(sqrt(x));
  }
  Managed<double> r;
  p.run(r, ctx);
  EXPECT_EQ(r.value(), 2.0);
}

TEST_P(ManagedTest, AnyExprBuildsTreesAtRunTime) {
  auto ctx = make_context();
  std::vector<Managed<double>> xs;
  double expected = 0.0;
  for (int i = 1; i <= 8; ++i) {
    xs.emplace_back(static_cast<double>(i), ctx);
    expected = expected + static_cast<double>(i) * static_cast<double>(i);
  }
  AnyExpr<double> sum = 0.0;
  for (const auto& x : xs) sum = sum + x * x;
  auto norm2 = eval(sum, ctx);
  EXPECT_EQ(norm2.value(), expected);

  // A shared subtree is compiled once: 2^40 tree nodes, 41 instructions.
  Managed<double> one(1.0, ctx);
  AnyExpr<double> e = one;
  for (int i = 0; i < 40; ++i) e = e * e;
  auto p = compile(e);
  EXPECT_EQ(p.info().instructions, 41u);
  EXPECT_EQ(p(ctx).value(), 1.0);
}

TEST_P(ManagedTest, ComplexArithmetic) {
  auto ctx = make_context();
  using C = std::complex<double>;
  const C hz = opaque(C(1.5, -2.0)), hw = opaque(C(-0.5, 0.25));
  Managed<C> z(hz, ctx), w(hw, ctx);
  EXPECT_SAME(eval(z + w, ctx).value(), hz + hw);
  EXPECT_SAME(eval(z - w, ctx).value(), hz - hw);
  EXPECT_SAME(eval(z * 2.0, ctx).value(), hz * 2.0);  // component-wise, as in C++
  EXPECT_SAME(eval(2 * z, ctx).value(), 2.0 * hz);
  EXPECT_SAME(eval(z / 4.0, ctx).value(), hz / 4.0);
  EXPECT_SAME(eval(conj(z), ctx).value(), std::conj(hz));
  EXPECT_SAME(eval(-z, ctx).value(), -hz);
  EXPECT_SAME(eval(real(z), ctx).value(), hz.real());
  EXPECT_SAME(eval(imag(z), ctx).value(), hz.imag());
  EXPECT_EQ(eval(z == w, ctx).value(), 0);
  EXPECT_EQ(eval(z != w, ctx).value(), 1);
  EXPECT_EQ(eval(z == z, ctx).value(), 1);
  EXPECT_EQ(eval(real(z) == 1.5, ctx).value(), 1);
  // Full complex products and libm functions: exact on the host, close on a device.
  const C prod = eval(z * w, ctx).value(), quot = eval(z / w, ctx).value();
  const double modulus = eval(abs(z), ctx).value();
  const C root = eval(sqrt(z), ctx).value(), ex = eval(exp(z) + log(w), ctx).value();
  const C pw = eval(pow(z, w), ctx).value(), pr = eval(pow(z, 2.0), ctx).value();
  auto close = [&](C a, C b) {
    if (is_host()) {
      EXPECT_SAME(a, b);
    } else {
      EXPECT_NEAR(std::abs(a - b), 0.0, 1e-13 * std::max(1.0, std::abs(b)));
    }
  };
  close(prod, hz * hw);
  close(quot, hz / hw);
  close(root, std::sqrt(hz));
  close(ex, std::exp(hz) + std::log(hw));
  close(pw, std::pow(hz, hw));
  close(pr, std::pow(hz, 2.0));
  expect_libm(modulus, std::abs(hz));
  // Single precision complex, mixed with float constants.
  Managed<std::complex<float>> f(std::complex<float>(1.0f, 1.0f), ctx);
  EXPECT_SAME(eval(f * 0.5f + 1, ctx).value(), std::complex<float>(1.0f, 1.0f) * 0.5f + 1.0f);
}

TEST_P(ManagedTest, IntegerArithmeticWrapsAndDivisionByZeroIsZero) {
  auto ctx = make_context();
  constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
  Managed<std::int32_t> big(kMax, ctx), small(kMin, ctx), zero(0, ctx), seven(7, ctx);
  EXPECT_EQ(eval(big + 1, ctx).value(), kMin);
  EXPECT_EQ(eval(small - 1, ctx).value(), kMax);
  EXPECT_EQ(eval(big * 2, ctx).value(), -2);
  EXPECT_EQ(eval(seven / zero, ctx).value(), 0);
  EXPECT_EQ(eval(small / -1, ctx).value(), kMin);
  EXPECT_EQ(eval(-small, ctx).value(), kMin);
  EXPECT_EQ(eval(abs(small), ctx).value(), kMin);
  EXPECT_EQ(eval(-seven / 2, ctx).value(), -3);  // truncation, as in C++
  EXPECT_EQ(eval(min(seven, zero) + max(seven, zero), ctx).value(), 7);
  EXPECT_EQ(eval(seven < 8, ctx).value(), 1);
  EXPECT_EQ(eval(seven >= 8, ctx).value(), 0);
  // Mixed widths promote to 64 bits; integers promote to floating-point.
  Managed<std::int64_t> wide(std::int64_t{1} << 40, ctx);
  Managed<std::int64_t> sum = eval(wide + seven, ctx);
  EXPECT_EQ(sum.value(), (std::int64_t{1} << 40) + 7);
  Managed<double> half(0.5, ctx);
  EXPECT_EQ(eval(seven * half, ctx).value(), 3.5);
  Managed<double> widened = seven;  // implicit conversion int32 -> double
  EXPECT_EQ(widened.value(), 7.0);
  EXPECT_EQ(eval(cast<float>(seven) / 2.0f, ctx).value(), 3.5f);
}

TEST_P(ManagedTest, ComparisonsGiveIntegerFlags) {
  auto ctx = make_context();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Managed<double> a(1.0, ctx), b(2.0, ctx), n(nan, ctx);
  Managed<std::int32_t> lt = eval(a < b, ctx);
  EXPECT_EQ(lt.value(), 1);
  EXPECT_EQ(eval(a > b, ctx).value(), 0);
  EXPECT_EQ(eval(a <= 1.0, ctx).value(), 1);
  EXPECT_EQ(eval(a >= b, ctx).value(), 0);
  EXPECT_EQ(eval(n == n, ctx).value(), 0);
  EXPECT_EQ(eval(n != n, ctx).value(), 1);
  // A flag mixes with floating-point values: x * (x > 0) is max(x, 0) without a branch.
  EXPECT_EQ(eval(b * (b > 1.5), ctx).value(), 2.0);
  EXPECT_EQ(eval(b * (b > 2.5), ctx).value(), 0.0);
}

TEST_P(ManagedTest, WritePtrAndReadPtrForAsyncOperations) {
  auto a = make_context();
  auto b = make_context();
  Managed<double> m;
  double* p = m.write_ptr(a);
  EXPECT_TRUE(m.assigned());
  std::vector<double> host{opaque(41.0)};
  copy(a, std::span(p, 1), host);  // a tracked write on a
  auto r = eval(m + 1.0, b);       // ordered after it without a wait
  EXPECT_EQ(r.value(), 42.0);
  const double* q = r.read_ptr(b);
  EXPECT_EQ(q, r.device_ptr());
  std::vector<double> back(1);
  copy(b, back, std::span(q, 1));
  b.synchronize();
  EXPECT_EQ(back[0], 42.0);
}

TEST_P(ManagedTest, FailureOfTheProducerIsReportedByValue) {
  auto ctx = make_context();
  Managed<double> x(1.0, ctx);
  ctx.host_task([] { throw std::runtime_error("producer failed"); }, "failing producer");
  x.assign(x + 1.0, ctx);
  try {
    (void)x.value();
    FAIL() << "value() did not report the failed work";
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.operation(), "failing producer");
  }
  ctx.synchronize();  // reported once: nothing more to throw
}

// ---- misuse --------------------------------------------------------------------------------

TEST_P(ManagedTest, UnassignedInputIsAnError) {
  auto ctx = make_context();
  Managed<double> never, target;
  try {
    target = eval(never + 1.0, ctx);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state);
    EXPECT_NE(std::string(e.what()).find("never assigned"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(target.assigned());
  EXPECT_THROW((void)never.value(), Error);
  Managed<double> storage_only(ctx);
  EXPECT_FALSE(storage_only.assigned());
  EXPECT_THROW((void)eval(storage_only * 2.0, ctx), Error);
  EXPECT_THROW((void)storage_only.read_ptr(ctx), Error);
}

TEST_P(ManagedTest, MovedFromManagedIsAnError) {
  auto ctx = make_context();
  Managed<double> x(1.0, ctx);
  Managed<double> y = std::move(x);
  EXPECT_THROW((void)eval(x + 1.0, ctx), Error);  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW((void)x.value(), Error);           // NOLINT(bugprone-use-after-move)
  x.assign(2.0, ctx);                             // a moved-from Managed can be assigned again
  EXPECT_EQ(x.value(), 2.0);
  EXPECT_EQ(y.value(), 1.0);
}

TEST_P(ManagedTest, EmptyProgramIsAnError) {
  auto ctx = make_context();
  ExecutableExpression<double> p;
  Managed<double> r;
  EXPECT_THROW(p.run(r, ctx), Error);
}

TEST_P(ManagedTest, ExpressionTooLargeIsAnError) {
  auto ctx = make_context();
  Managed<double> x(1.0, ctx);
  AnyExpr<double> e = x;
  for (int i = 0; i < 200; ++i) e = e + static_cast<double>(i) * x;  // distinct constants
  try {
    (void)compile(e);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), Errc::unsupported);
  }
}

// A Managed of one device used on another device's context: needs two devices (host and cuda).
TEST(ManagedDevices, ManagedOfAnotherDeviceIsAnError) {
  std::vector<Device> devs;
  for (const auto& d : devices()) devs.push_back(d.device);
  if (devs.size() < 2) GTEST_SKIP() << "needs two devices (e.g. host and cuda:0)";
  Context on_a(devs[0]), on_b(devs[1]);
  Managed<double> x(1.0, on_a);
  try {
    (void)eval(x + 1.0, on_b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(devs[0].to_string()), std::string::npos) << e.what();
  }
  Managed<double> target(2.0, on_b);
  EXPECT_THROW(compile(constant(1.0)).run(target, on_a), Error);
  EXPECT_EQ(target.value(), 2.0);  // nothing half-done
  EXPECT_THROW((void)x.read_ptr(on_b), Error);
  EXPECT_THROW((void)target.write_ptr(on_a), Error);
}

SLUICE_INSTANTIATE_BACKENDS(ManagedTest);

}  // namespace
}  // namespace sluice::test
