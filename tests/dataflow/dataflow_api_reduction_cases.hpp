#pragma once
// Dataflow reductions from SYCL 2020 §4.9.2: every operator with a known identity (typed and
// transparent), user-defined operators with an identity, several reductions in one kernel,
// reductions in nd_range kernels, buffer and USM destinations, initialize_to_identity. Written
// once like dataflow_cases.hpp; every case runs on every backend.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "backend_param.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test::dataflow_reduction_cases {

namespace df = sluice::dataflow;
using df::access_mode;

/// A value and where it was: the classic user-defined reduction (argmin).
struct MinLoc {
  double value;
  long long index;
};
struct MinLocOp {
  SLUICE_HD MinLoc operator()(const MinLoc& a, const MinLoc& b) const {
    return b.value < a.value || (b.value == a.value && b.index < a.index) ? b : a;
  }
};

/// The input of the range reductions: values in [1, 9], so sums and products of a few stay exact.
SLUICE_HD inline int value_at(std::size_t i) {
  return static_cast<int>((i * 7919) % 9) + 1;
}

/// Every known-identity operator on ints with initialize_to_identity (the result is the
/// operator over the inputs alone), in four kernels of four reductions each.
inline void every_operator_int(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 100003;  // many blocks, a ragged end
  auto* r = df::malloc_shared<int>(12, q);
  for (int k = 0; k < 12; ++k) r[k] = -12345;  // ignored: every reduction starts at its identity
  const df::property::reduction::initialize_to_identity init;
  q.parallel_for(df::range<1>(n), df::reduction(r + 0, df::plus<int>(), init),
                 df::reduction(r + 1, df::minimum<int>(), init),
                 df::reduction(r + 2, df::maximum<int>(), init),
                 df::reduction(r + 3, df::bit_or<int>(), init),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<int, df::plus<int>> & sum,
                                   df::Reducer<int, df::minimum<int>> & mn,
                                   df::Reducer<int, df::maximum<int>> & mx,
                                   df::Reducer<int, df::bit_or<int>> & bor) {
                   const int v = value_at(i);
                   sum += v;
                   mn.combine(v + 10);
                   mx.combine(v * 3);
                   bor |= 1 << v;
                 });
  q.parallel_for(df::range<1>(n), df::reduction(r + 4, df::bit_and<int>(), init),
                 df::reduction(r + 5, df::bit_xor<int>(), init),
                 df::reduction(r + 6, df::logical_and<int>(), init),
                 df::reduction(r + 7, df::logical_or<int>(), init),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<int, df::bit_and<int>> & band,
                                   df::Reducer<int, df::bit_xor<int>> & bxor,
                                   df::Reducer<int, df::logical_and<int>> & land,
                                   df::Reducer<int, df::logical_or<int>> & lor) {
                   const int v = value_at(i);
                   band &= ~(1 << (v + 10));
                   bxor ^= v;
                   land.combine(v > 0 ? 1 : 0);
                   lor.combine(v == 9 ? 1 : 0);
                 });
  // Multiplies: a product of a few small values (exact).
  q.parallel_for(df::range<1>(10), df::reduction(r + 8, df::multiplies<int>(), init),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<int, df::multiplies<int>> & p) {
                   p *= static_cast<int>(i[0] % 3) + 1;
                 });
  // Transparent operators: the identity of plus<> and maximum<> for the destination's type.
  q.parallel_for(df::range<1>(n), df::reduction(r + 9, df::plus<>(), init),
                 df::reduction(r + 10, df::maximum<>(), init),
                 df::reduction(r + 11, df::minimum<>(), init),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<int, df::plus<>> & sum,
                                   df::Reducer<int, df::maximum<>> & mx,
                                   df::Reducer<int, df::minimum<>> & mn) {
                   ++sum;
                   mx.combine(-value_at(i));
                   mn.combine(value_at(i));
                 });
  q.wait();  // USM orders nothing by itself: the four kernels may run at once
  long long sum = 0;
  int mn = std::numeric_limits<int>::max(), mx = std::numeric_limits<int>::lowest(), bor = 0;
  int band = ~0, bxor = 0, land = 1, lor = 0, mx2 = std::numeric_limits<int>::lowest(),
      mn2 = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < n; ++i) {
    const int v = value_at(i);
    sum += v;
    mn = std::min(mn, v + 10);
    mx = std::max(mx, v * 3);
    bor |= 1 << v;
    band &= ~(1 << (v + 10));
    bxor ^= v;
    land = land && v > 0;
    lor = lor || v == 9;
    mx2 = std::max(mx2, -v);
    mn2 = std::min(mn2, v);
  }
  int prod = 1;
  for (int i = 0; i < 10; ++i) prod *= i % 3 + 1;
  EXPECT_EQ(r[0], sum);
  EXPECT_EQ(r[1], mn);
  EXPECT_EQ(r[2], mx);
  EXPECT_EQ(r[3], bor);
  EXPECT_EQ(r[4], band);
  EXPECT_EQ(r[5], bxor);
  EXPECT_EQ(r[6], land);
  EXPECT_EQ(r[7], lor);
  EXPECT_EQ(r[8], prod);
  EXPECT_EQ(r[9], static_cast<int>(n));
  EXPECT_EQ(r[10], mx2);
  EXPECT_EQ(r[11], mn2);
  df::free(r, q);
}

/// Floating point and bool; combining with the destination's value (no initialize_to_identity);
/// an empty range leaves the destination combined with the identity, i.e. unchanged.
inline void floats_bools_and_combining(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 50000;
  auto* f = df::malloc_shared<float>(3, q);
  auto* x = df::malloc_shared<double>(2, q);
  auto* b = df::malloc_shared<bool>(2, q);
  f[0] = 0.5f;   // combined: 0.5 + sum
  f[1] = -1.0f;  // combined with the minimum
  f[2] = 7.0f;   // an empty range below: stays
  x[0] = 2.0;
  x[1] = 1.0;
  b[0] = true;
  b[1] = false;
  q.parallel_for(df::range<1>(n), df::reduction(f, df::plus<float>()),
                 df::reduction(f + 1, df::minimum<float>()),
                 df::reduction(x, df::maximum<double>()), df::reduction(x + 1, df::multiplies<>()),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<float, df::plus<float>> & s,
                                   df::Reducer<float, df::minimum<float>> & mn,
                                   df::Reducer<double, df::maximum<double>> & mx,
                                   df::Reducer<double, df::multiplies<>> & p) {
                   s += 1.0f;  // exact: every partial sum is an integer below 2^24
                   mn.combine(static_cast<float>(value_at(i)));
                   mx.combine(static_cast<double>(value_at(i)) / 4);
                   if (i[0] < 3) p *= 2.0;
                 });
  q.parallel_for(df::range<1>(n), df::reduction(b, df::logical_and<bool>()),
                 df::reduction(b + 1, df::logical_or<>()),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<bool, df::logical_and<bool>> & all,
                                   df::Reducer<bool, df::logical_or<>> & any) {
                   all.combine(value_at(i) < 10);
                   any.combine(i[0] == n - 1);
                 });
  q.parallel_for(
      df::range<1>(0), df::reduction(f + 2, df::plus<float>()),
      [=] SLUICE_KERNEL(df::id<1>, df::Reducer<float, df::plus<float>> & s) { s += 1.0f; });
  q.wait();
  EXPECT_EQ(f[0], 0.5f + static_cast<float>(n));
  EXPECT_EQ(f[1], -1.0f);
  EXPECT_EQ(f[2], 7.0f);
  EXPECT_EQ(x[0], 9.0 / 4);
  EXPECT_EQ(x[1], 8.0);
  EXPECT_TRUE(b[0]);
  EXPECT_TRUE(b[1]);
  df::free(f, q);
  df::free(x, q);
  df::free(b, q);
}

/// A user-defined operator with its identity: the minimum and its first index (argmin), in a
/// range kernel and in an nd_range kernel beside a plain sum.
inline void user_defined_operator(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 20000;
  auto* data = df::malloc_shared<double>(n, q);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<double>((i * 7907) % 10007);
  data[12345] = -3.0;
  data[17000] = -3.0;  // the same minimum later: the first index wins
  auto* loc = df::malloc_shared<MinLoc>(2, q);
  auto* sum = df::malloc_shared<double>(1, q);
  *sum = 0;
  const MinLoc identity{std::numeric_limits<double>::infinity(), -1};
  q.parallel_for(df::range<1>(n),
                 df::reduction(loc, identity, MinLocOp(),
                               df::ReductionOptions{.initialize_to_identity = true}),
                 [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<MinLoc, MinLocOp> & r) {
                   r.combine(MinLoc{data[i], static_cast<long long>(i[0])});
                 });
  q.parallel_for(df::nd_range<1>(df::range<1>(n), df::range<1>(100)),
                 df::reduction(loc + 1, identity, MinLocOp(),
                               df::property::reduction::initialize_to_identity{}),
                 df::reduction(sum, df::plus<double>()),
                 [=] SLUICE_KERNEL(df::nd_item<1> it, df::Reducer<MinLoc, MinLocOp> & r,
                                   df::Reducer<double, df::plus<double>> & s) {
                   const std::size_t i = it.get_global_id(0);
                   r.combine(MinLoc{data[i], static_cast<long long>(i)});
                   s += 1.0;
                   // The identity a reducer reports is the one given.
                   if (i == 0 && r.identity().index != -1) s += 1e9;
                 });
  q.wait();
  EXPECT_EQ(loc[0].value, -3.0);
  EXPECT_EQ(loc[0].index, 12345);
  EXPECT_EQ(loc[1].value, -3.0);
  EXPECT_EQ(loc[1].index, 12345);
  EXPECT_EQ(*sum, static_cast<double>(n));
  df::free(data, q);
  df::free(loc, q);
  df::free(sum, q);
}

/// nd_range reductions with local memory and group algorithms in the same kernel, into buffers
/// (reduction(buffer, handler, ...)) and USM, groups not a multiple of the sub-group size.
inline void nd_range_with_group_algorithms(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t groups = 37, items = 72;
  std::vector<long long> host_sum{5};
  std::vector<int> host_max{0};
  auto* count = df::malloc_shared<unsigned>(1, q);
  *count = 0;
  {
    df::Buffer<long long> bsum(host_sum.data(), df::range<1>(1));
    df::Buffer<int> bmax(host_max.data(), df::range<1>(1));
    q.submit([&](df::Handler& h) {
      auto rs = df::reduction(bsum, h, df::plus<long long>());
      auto rm = df::reduction(bmax, h, df::maximum<int>(),
                              df::property::reduction::initialize_to_identity{});
      auto rc = df::reduction(count, df::plus<unsigned>());
      df::local_accessor<int, 1> scratch(df::range<1>(items), h);
      h.parallel_for(
          df::nd_range<1>(df::range<1>(groups * items), df::range<1>(items)), rs, rm, rc,
          [=] SLUICE_KERNEL(df::nd_item<1> it, decltype(rs)::reducer_type & s,
                            decltype(rm)::reducer_type & m, decltype(rc)::reducer_type & c) {
            const std::size_t l = it.get_local_id(0);
            scratch[l] = static_cast<int>(it.get_global_id(0) % 13);
            df::group_barrier(it.get_group());
            const int left = scratch[(l + 1) % items];
            const int total = df::reduce_over_group(it.get_group(), left, df::plus<>());
            s += left;
            m.combine(total);
            if (it.get_group().leader()) c += 1u;
          });
    });
  }
  long long want = 5;
  int best = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    int total = 0;
    for (std::size_t l = 0; l < items; ++l) total += static_cast<int>((g * items + l) % 13);
    want += total;
    best = std::max(best, total);
  }
  EXPECT_EQ(host_sum[0], want);
  EXPECT_EQ(host_max[0], best);
  EXPECT_EQ(*count, groups);
  df::free(count, q);
}

}  // namespace sluice::test::dataflow_reduction_cases

namespace sluice::test {

class DataflowReductions : public BackendTest {};

TEST_P(DataflowReductions, EveryKnownIdentityOperator) {
  dataflow_reduction_cases::every_operator_int(device());
}
TEST_P(DataflowReductions, FloatsBoolsAndCombiningWithTheDestination) {
  dataflow_reduction_cases::floats_bools_and_combining(device());
}
TEST_P(DataflowReductions, UserDefinedOperatorWithIdentity) {
  dataflow_reduction_cases::user_defined_operator(device());
}
TEST_P(DataflowReductions, NdRangeWithGroupAlgorithmsBufferAndUsm) {
  dataflow_reduction_cases::nd_range_with_group_algorithms(device());
}

SLUICE_INSTANTIATE_BACKENDS(DataflowReductions);

}  // namespace sluice::test
