// Dataflow vocabulary checked on the host compiler: id/range arithmetic (SYCL 2020 §4.9.1.1,
// §4.9.1.3), the function objects and their known identities (§4.17.2, §4.9.2.2), and misuse
// that only the host backend can report instead of hanging (a group function reached by part of
// a group).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace df = sluice::dataflow;

namespace {

TEST(DataflowIndex, ArithmeticIsElementWise) {
  const df::id<2> a(6, 9), b(2, 3);
  EXPECT_EQ(a + b, df::id<2>(8, 12));
  EXPECT_EQ(a - b, df::id<2>(4, 6));
  EXPECT_EQ(a * b, df::id<2>(12, 27));
  EXPECT_EQ(a / b, df::id<2>(3, 3));
  EXPECT_EQ(a % b, df::id<2>(0, 0));
  EXPECT_EQ(a << b, df::id<2>(24, 72));
  EXPECT_EQ(a >> 1, df::id<2>(3, 4));
  EXPECT_EQ((a & b), df::id<2>(2, 1));
  EXPECT_EQ((a | b), df::id<2>(6, 11));
  EXPECT_EQ((a ^ b), df::id<2>(4, 10));
  EXPECT_EQ(a + 1, df::id<2>(7, 10));
  EXPECT_EQ(10 - b, df::id<2>(8, 7));
  EXPECT_EQ(2 * a, df::id<2>(12, 18));
  // Comparisons other than == and != are element-wise, giving 0s and 1s.
  EXPECT_EQ(a < df::id<2>(7, 9), df::id<2>(1, 0));
  EXPECT_EQ(a >= df::id<2>(7, 9), df::id<2>(0, 1));
  EXPECT_EQ((a && df::id<2>(0, 5)), df::id<2>(0, 1));
  EXPECT_TRUE(a != b);
  df::id<2> c = a;
  c += b;
  c *= 2;
  c -= df::id<2>(1, 1);
  EXPECT_EQ(c, df::id<2>(15, 23));
  EXPECT_EQ(c++, df::id<2>(15, 23));
  EXPECT_EQ(c, df::id<2>(16, 24));
  EXPECT_EQ(--c, df::id<2>(15, 23));
  EXPECT_EQ(-df::id<1>(0), df::id<1>(0));
  const df::range<3> r(2, 3, 4);
  EXPECT_EQ(r * 2, df::range<3>(4, 6, 8));
  EXPECT_EQ((r * 2).size(), 192u);
  EXPECT_EQ(df::id<3>(r), df::id<3>(2, 3, 4));
  // A one-dimensional id stays a number where a number is wanted (and a double stays a double).
  const df::id<1> i(5);
  const double twice = 2.5 * i;
  EXPECT_EQ(twice, 12.5);
  const std::size_t next = i + 1;
  EXPECT_EQ(next, 6u);
  static_assert(std::is_same_v<decltype(i + 1), df::id<1>>);
}

TEST(DataflowIndex, ItemAndNdRangeQueries) {
  const df::item<2> it(df::id<2>(1, 2), df::range<2>(3, 4));
  EXPECT_EQ(it.get_linear_id(), 6u);
  EXPECT_EQ(it.get_range(1), 4u);
  EXPECT_EQ(it.get_offset(), df::id<2>(0, 0));
  const df::id<2> back = it;
  EXPECT_EQ(back, df::id<2>(1, 2));
  const df::nd_range<2> nr(df::range<2>(8, 6), df::range<2>(4, 3));
  EXPECT_EQ(nr.get_group_range(), df::range<2>(2, 2));
  EXPECT_EQ(nr.get_offset(), df::id<2>(0, 0));
  const df::sub_group sg(70, 80);
  EXPECT_EQ(sg.get_group_linear_id(), 2u);
  EXPECT_EQ(sg.get_local_linear_id(), 6u);
  EXPECT_EQ(sg.get_local_linear_range(), 16u);
  EXPECT_EQ(sg.get_group_linear_range(), 3u);
  EXPECT_EQ(sg.get_max_local_range()[0], 32u);
}

TEST(DataflowFunctional, KnownIdentitiesFollowTheSpecification) {
  EXPECT_EQ((df::known_identity_v<df::plus<int>, int>), 0);
  EXPECT_EQ((df::known_identity_v<df::plus<>, double>), 0.0);
  EXPECT_EQ((df::known_identity_v<df::multiplies<float>, float>), 1.0f);
  EXPECT_EQ((df::known_identity_v<df::bit_and<unsigned>, unsigned>), ~0u);
  EXPECT_EQ((df::known_identity_v<df::bit_or<>, long>), 0L);
  EXPECT_EQ((df::known_identity_v<df::bit_xor<int>, int>), 0);
  EXPECT_EQ((df::known_identity_v<df::logical_and<bool>, bool>), true);
  EXPECT_EQ((df::known_identity_v<df::logical_or<>, bool>), false);
  EXPECT_EQ((df::known_identity_v<df::minimum<int>, int>), std::numeric_limits<int>::max());
  EXPECT_EQ((df::known_identity_v<df::maximum<int>, int>), std::numeric_limits<int>::lowest());
  EXPECT_TRUE(std::isinf(df::known_identity_v<df::minimum<double>, double>));
  EXPECT_GT((df::known_identity_v<df::minimum<double>, double>), 0);
  EXPECT_EQ((df::known_identity_v<df::maximum<float>, float>),
            -std::numeric_limits<float>::infinity());
  static_assert(!df::has_known_identity_v<df::bit_and<float>, float>);
  static_assert(!df::has_known_identity_v<std::plus<int>, int>);
  static_assert(df::has_known_identity_v<df::maximum<>, unsigned char>);
  EXPECT_EQ(df::minimum<int>()(3, 2), 2);
  EXPECT_EQ(df::maximum<>()(3, 2.5), 3.0);
  EXPECT_EQ(df::logical_or<int>()(0, 5), 1);
  EXPECT_EQ(df::bit_xor<>()(6u, 3u), 5u);
}

TEST(DataflowGroupMisuse, DivergentGroupFunctionIsAnErrorOnTheHost) {
  df::Queue q(df::QueueOptions{.device = sluice::Device{"host", 0}});
  EXPECT_THROW(q.parallel_for(df::nd_range<1>(df::range<1>(64), df::range<1>(64)),
                              [=](df::nd_item<1> it) {
                                if (it.get_local_id(0) < 40) {
                                  (void)df::reduce_over_group(it.get_group(), 1, df::plus<int>());
                                }
                              })
                   .wait(),
               sluice::WorkFailed);
  // Sub-group 0 at a sub-group function while sub-group 1 waits at a group barrier: the barrier
  // never completes, and the scheduler says so.
  EXPECT_THROW(
      q.parallel_for(df::nd_range<1>(df::range<1>(64), df::range<1>(64)),
                     [=](df::nd_item<1> it) {
                       if (it.get_sub_group().get_group_linear_id() == 0) {
                         (void)df::reduce_over_group(it.get_sub_group(), 1, df::plus<int>());
                         (void)df::reduce_over_group(it.get_sub_group(), 1, df::plus<int>());
                       } else {
                         df::group_barrier(it.get_group());
                       }
                     })
          .wait(),
      sluice::WorkFailed);
  // Sub-groups at different sub-group functions meet separately; this is fine.
  int* out = df::malloc_shared<int>(64, q);
  q.parallel_for(df::nd_range<1>(df::range<1>(64), df::range<1>(64)), [=](df::nd_item<1> it) {
     const auto sg = it.get_sub_group();
     out[it.get_global_id(0)] = sg.get_group_linear_id() == 0
                                    ? df::reduce_over_group(sg, 1, df::plus<int>())
                                    : df::inclusive_scan_over_group(sg, 2, df::plus<int>());
   }).wait();
  EXPECT_EQ(out[5], 32);
  EXPECT_EQ(out[32 + 5], 12);
  // Group functions outside an nd_range kernel: an Error, not a crash.
  EXPECT_THROW(
      q.parallel_for(df::range<1>(4), [=](df::id<1>) { df::group_barrier(df::sub_group(0, 4)); })
          .wait(),
      sluice::WorkFailed);
  df::free(out, q);
}

TEST(DataflowCommandMisuse, CopiesOfDifferentSizesAreAnError) {
  df::Queue q(df::QueueOptions{.device = sluice::Device{"host", 0}});
  df::Buffer<int> a{df::range<1>(10)}, b{df::range<1>(8)};
  EXPECT_THROW(q.submit([&](df::Handler& h) {
    auto x = a.get_access<df::access_mode::read>(h);
    auto y = b.get_access<df::access_mode::write>(h, df::no_init);
    h.copy(x, y);
  }),
               sluice::Error);
  // The failed group left nothing behind: the buffers still work.
  q.submit([&](df::Handler& h) {
    auto y = b.get_access(h, df::write_only, df::no_init);
    h.fill(y, 3);
  });
  df::HostAccessor<int, 1, df::access_mode::read> hb(b);
  EXPECT_EQ(hb[7], 3);
}

}  // namespace
