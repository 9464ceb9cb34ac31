// The host's CSR products (src/la/host/csr.hpp): the direct form (input x itself, epilogue and
// left scaling fixed at compile time) and CG's formed-input product (its input formed in a pass
// first) against the general row-by-row form: the same bits in y, x_out and the sums, for every
// epilogue, left and right scaling and row range (one chunk), on random matrices with empty rows,
// randomized.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "la/host/csr.hpp"

namespace sluice::test {
namespace {

namespace h = detail::host;
namespace m = detail::la_math;
using detail::LaEpilogue;
using detail::LaMatvecArgs;

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
  }
  return true;
}

struct Problem {
  std::vector<std::int32_t> row_ptr{0}, col;
  std::vector<double> val, x, x2, z, y, left, right, x_out;
};

TEST(HostCsrRows, EveryFormGivesTheBitsOfTheGeneralRows) {
  std::mt19937_64 rng(29);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  const LaEpilogue epilogues[] = {LaEpilogue::store, LaEpilogue::add, LaEpilogue::sub,
                                  LaEpilogue::store_dot, LaEpilogue::residual};
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + pick(trial % 7 == 0 ? 3000 : 70);
    Problem p;
    for (int i = 0; i < n; ++i) {
      const int entries = pick(4) == 0 ? 0 : pick(9);  // empty rows too
      for (int k = 0; k < entries; ++k) {
        p.col.push_back(pick(n));
        p.val.push_back(value(rng));
      }
      p.row_ptr.push_back(static_cast<std::int32_t>(p.col.size()));
    }
    auto fill = [&](std::vector<double>& v) {
      v.resize(static_cast<std::size_t>(n));
      for (auto& e : v) e = value(rng);
    };
    fill(p.x), fill(p.x2), fill(p.z), fill(p.y), fill(p.left), fill(p.right);
    p.x_out.assign(static_cast<std::size_t>(n), 0.0);

    LaMatvecArgs a;
    a.A.csr = {n,
               n,
               static_cast<std::int64_t>(p.col.size()),
               p.row_ptr.data(),
               p.col.data(),
               p.val.data(),
               nullptr};
    a.epilogue = epilogues[pick(5)];
    a.left.v = pick(3) == 0 ? p.left.data() : nullptr;
    a.left.c = pick(2) == 0 ? 1.0 : value(rng);
    a.right.c = pick(2) == 0 ? 1.0 : value(rng);
    a.z = p.z.data();
    const int form = pick(3);  // 0: x itself; 1: x_scale x + s x2 into x_out (CG); 2: scaled x
    a.x = p.x.data();
    if (form == 1) {
      a.x2 = p.x2.data();
      a.x2_scale = detail::LaScalar{value(rng)};
      a.x_scale = pick(2) == 0 ? 1.0 : value(rng);
    } else if (form == 2) {
      a.x_scale = value(rng);
    }
    const double scalar = value(rng);
    const auto lo = static_cast<std::size_t>(pick(n));
    const auto hi = lo + static_cast<std::size_t>(pick(n - static_cast<int>(lo)) + 1);

    // The general rows, x_out stored row by row where the form asks for it.
    Problem ref = p;
    LaMatvecArgs g = a;
    g.A.csr.row_ptr = ref.row_ptr.data();
    g.y = ref.y.data();
    g.z = a.epilogue == LaEpilogue::residual ? nullptr : ref.z.data();
    if (form == 1) g.x_out = ref.x_out.data();
    const double want = h::csr_rows(g, m::input_of(g), scalar, lo, hi);

    // The fast forms.
    Problem got = p;
    LaMatvecArgs f = a;
    f.y = got.y.data();
    f.z = a.epilogue == LaEpilogue::residual ? nullptr : got.z.data();
    double sum = 0;
    if (form == 1) {
      f.x_out = got.x_out.data();
      ASSERT_TRUE(h::csr_forms_input_first(f));
      h::csr_form_input(f, m::input_of(f), 0, static_cast<std::size_t>(n));
      sum = h::csr_rows_direct(h::csr_after_forming(f), f.right.c, scalar, lo, hi);
      // The pass formed every row's input; the general rows stored only [lo, hi).
      for (std::size_t i = 0; i < got.x_out.size(); ++i) {
        if (i < lo || i >= hi) got.x_out[i] = 0.0;
      }
    } else if (form == 0) {
      ASSERT_TRUE(h::csr_input_is_direct(f));
      sum = h::csr_rows_direct(f, f.right.c, scalar, lo, hi);
    } else {
      ASSERT_FALSE(h::csr_input_is_direct(f));
      sum = h::csr_rows(f, m::input_of(f), scalar, lo, hi);
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + ", form " + std::to_string(form) +
                 ", epilogue " + std::to_string(static_cast<int>(a.epilogue)));
    EXPECT_TRUE(same_bits(got.y, ref.y));
    EXPECT_TRUE(same_bits(got.x_out, ref.x_out));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(sum), std::bit_cast<std::uint64_t>(want));
  }
}

/// A product whose right scaling is a vector, or that stores no x_out, keeps the general form.
TEST(HostCsrRows, OnlyProductsThatStoreTheirInputFormItFirst) {
  std::vector<std::int32_t> rp{0, 1}, col{0};
  std::vector<double> val{2.0}, x{1.0}, x2{1.0}, out{0.0}, rv{1.0};
  LaMatvecArgs a;
  a.A.csr = {1, 1, 1, rp.data(), col.data(), val.data(), nullptr};
  a.x = x.data();
  a.x2 = x2.data();
  EXPECT_FALSE(h::csr_forms_input_first(a)) << "no x_out";
  a.x_out = out.data();
  EXPECT_TRUE(h::csr_forms_input_first(a));
  a.right.v = rv.data();
  EXPECT_FALSE(h::csr_forms_input_first(a)) << "a vector right scaling";
  a.right.v = nullptr;
  a.A.csr.cols = 2;
  EXPECT_FALSE(h::csr_forms_input_first(a)) << "not square: x_out is shorter than the input";
}

}  // namespace
}  // namespace sluice::test
