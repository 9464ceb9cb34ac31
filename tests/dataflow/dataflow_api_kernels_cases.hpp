#pragma once
// Dataflow cases of what kernels see, written from SYCL 2020's semantics: the item / nd_item /
// group / sub_group queries, chained subscripts, atomic_ref on global and local memory, group
// algorithms and sub-group shuffles. Written once like dataflow_cases.hpp (nvcc in a cuda build,
// the host compiler otherwise); every case runs on every backend.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backend_param.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test::dataflow_api_cases {

namespace df = sluice::dataflow;
using df::access_mode;

/// SYCL 2020 §4.9.1.4-4.9.1.8: every query of a work-item, recorded per work-item and compared
/// with the values the specification defines for them.
inline void nd_item_queries(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const df::range<2> global(6, 40), local(3, 20);
  const std::size_t n = global.size();
  constexpr int kFields = 16;
  auto* out = df::malloc_shared<std::size_t>(n * kFields, q);
  q.parallel_for(df::nd_range<2>(global, local), [=] SLUICE_KERNEL(df::nd_item<2> it) {
     const std::size_t g = it.get_global_linear_id();
     std::size_t* o = out + g * kFields;
     const df::group<2> grp = it.get_group();
     const df::sub_group sg = it.get_sub_group();
     o[0] = it.get_global_id(0);
     o[1] = it.get_global_id(1);
     o[2] = it.get_local_id(0) * 100 + it.get_local_id(1);
     o[3] = it.get_group(0) * 100 + it.get_group(1);
     o[4] = it.get_group_linear_id();
     o[5] = it.get_local_linear_id();
     o[6] = it.get_global_range(0) * 1000 + it.get_global_range(1);
     o[7] = it.get_group_range(0) * 1000 + it.get_group_range(1);
     o[8] = it.get_local_range(0) * 1000 + it.get_local_range(1);
     o[9] = grp.get_local_linear_id() * 1000 + grp.get_group_linear_id();
     o[10] = grp.get_group_linear_range() * 1000 + grp.get_local_linear_range();
     o[11] = grp.leader() ? 1 : 0;
     o[12] = sg.get_local_linear_id() * 1000 + sg.get_group_linear_id();
     o[13] = sg.get_local_linear_range() * 1000 + sg.get_group_linear_range();
     o[14] = sg.get_max_local_range()[0];
     o[15] = it.get_offset()[0] + it.get_offset()[1] + it.get_nd_range().get_local_range()[1];
   }).wait();
  std::size_t seen = 0;
  for (std::size_t g0 = 0; g0 < 6; ++g0) {
    for (std::size_t g1 = 0; g1 < 40; ++g1) {
      const std::size_t g = g0 * 40 + g1;  // row-major: dimension 1 varies fastest
      const std::size_t* o = out + g * kFields;
      const std::size_t l0 = g0 % 3, l1 = g1 % 20, w0 = g0 / 3, w1 = g1 / 20;
      const std::size_t lin = l0 * 20 + l1, grp = w0 * 2 + w1;
      SCOPED_TRACE(::testing::Message() << "work-item " << g0 << "," << g1);
      EXPECT_EQ(o[0], g0);
      EXPECT_EQ(o[1], g1);
      EXPECT_EQ(o[2], l0 * 100 + l1);
      EXPECT_EQ(o[3], w0 * 100 + w1);
      EXPECT_EQ(o[4], grp);
      EXPECT_EQ(o[5], lin);
      EXPECT_EQ(o[6], 6u * 1000 + 40);
      EXPECT_EQ(o[7], 2u * 1000 + 2);
      EXPECT_EQ(o[8], 3u * 1000 + 20);
      EXPECT_EQ(o[9], lin * 1000 + grp);
      EXPECT_EQ(o[10], 4u * 1000 + 60);
      EXPECT_EQ(o[11], lin == 0 ? 1u : 0u);
      // 60 work-items per group: sub-groups of 32 and 28 by local linear id.
      EXPECT_EQ(o[12], (lin % 32) * 1000 + lin / 32);
      EXPECT_EQ(o[13], (lin < 32 ? 32u : 28u) * 1000 + 2);
      EXPECT_EQ(o[14], 32u);
      EXPECT_EQ(o[15], 20u);
      ++seen;
    }
  }
  EXPECT_EQ(seen, n);
  df::free(out, q);
}

/// §4.9.1.5: an item knows its id, range and linear id (row-major); a range kernel visits every
/// id of its range exactly once.
inline void item_queries(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const df::range<3> r(3, 4, 5);
  auto* out = df::malloc_shared<std::size_t>(r.size() * 2, q);
  q.parallel_for(r, [=] SLUICE_KERNEL(df::item<3> it) {
     const std::size_t l = it.get_linear_id();
     out[2 * l] = it.get_id(0) * 10000 + it.get_id(1) * 100 + it.get_id(2);
     out[2 * l + 1] =
         it.get_range(0) * 100 + it.get_range(1) * 10 + it.get_range(2) + it.get_offset()[2];
   }).wait();
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 4; ++j) {
      for (std::size_t k = 0; k < 5; ++k) {
        const std::size_t l = (i * 4 + j) * 5 + k;
        EXPECT_EQ(out[2 * l], i * 10000 + j * 100 + k);
        EXPECT_EQ(out[2 * l + 1], 345u);
      }
    }
  }
  df::free(out, q);
}

/// §4.7.6.9: `acc[i][j]` is `acc[id(i, j)]`, on device accessors (ranged too), local accessors
/// and host accessors.
inline void chained_subscripts(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  std::vector<int> host(4 * 6 * 5, -1);
  {
    df::Buffer<int, 3> b(host.data(), df::range<3>(4, 6, 5));
    q.submit([&](df::Handler& h) {
      auto a = b.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range<3>(4, 6, 5), [=] SLUICE_KERNEL(df::id<3> i) {
        a[i[0]][i[1]][i[2]] = static_cast<int>(i[0] * 100 + i[1] * 10 + i[2]);
      });
    });
    // A ranged 2D view: indices relative to its offset.
    df::Buffer<int, 2> m{df::range<2>(8, 8)};
    q.submit([&](df::Handler& h) {
      auto a = m.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range<2>(8, 8), [=] SLUICE_KERNEL(df::id<2> i) { a[i] = 0; });
    });
    q.submit([&](df::Handler& h) {
      auto a = m.get_access<access_mode::read_write>(h, df::range<2>(3, 4), df::id<2>(2, 3));
      h.parallel_for(df::range<2>(3, 4), [=] SLUICE_KERNEL(df::id<2> i) {
        a[i[0]][i[1]] = static_cast<int>(10 * i[0] + i[1] + 1);
      });
    });
    // Local memory indexed [i][j] within an nd_range group.
    auto* out = df::malloc_shared<int>(16, q);
    q.submit([&](df::Handler& h) {
       df::local_accessor<int, 2> tile(df::range<2>(4, 4), h);
       h.parallel_for(df::nd_range<2>(df::range<2>(4, 4), df::range<2>(4, 4)),
                      [=] SLUICE_KERNEL(df::nd_item<2> it) {
                        const std::size_t i = it.get_local_id(0), j = it.get_local_id(1);
                        tile[i][j] = static_cast<int>(i * 4 + j);
                        df::group_barrier(it.get_group());
                        out[i * 4 + j] = tile[j][i];  // the transpose
                      });
     }).wait();
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) EXPECT_EQ(out[i * 4 + j], j * 4 + i);
    }
    df::free(out, q);
    df::HostAccessor<int, 2, access_mode::read> hm(m);
    for (std::size_t i = 0; i < 8; ++i) {
      for (std::size_t j = 0; j < 8; ++j) {
        const bool in = i >= 2 && i < 5 && j >= 3 && j < 7;
        EXPECT_EQ(hm[i][j], in ? static_cast<int>(10 * (i - 2) + (j - 3) + 1) : 0) << i << "," << j;
      }
    }
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) {
      for (int k = 0; k < 5; ++k) EXPECT_EQ(host[(i * 6 + j) * 5 + k], i * 100 + j * 10 + k);
    }
  }
}

/// §4.15.3: atomic_ref on global memory (USM and buffers) from a range kernel whose work-items
/// run on several threads (host) or many blocks (cuda): every type, every operation.
template <class T>
void atomics_global_one(df::Queue& q, std::size_t n) {
  // [0] sum, [1] min, [2] max, [3] exchange target, [4] CAS counter
  auto* v = df::malloc_shared<T>(5, q);
  auto* got = df::malloc_shared<int>(n + 1, q);  // exchange hands out 0, 1, ..., n
  for (std::size_t i = 0; i <= n; ++i) got[i] = 0;
  v[0] = T(0);
  v[1] = T(1000000);
  v[2] = T(0);
  v[3] = T(0);
  v[4] = T(0);
  q.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) {
     const T x = static_cast<T>(i[0] % 97 + 1);
     df::atomic_ref<T, df::memory_order::relaxed, df::memory_scope::device> sum(v[0]);
     sum.fetch_add(x);
     df::atomic_ref<T, df::memory_order::acq_rel, df::memory_scope::device> mn(v[1]);
     mn.fetch_min(x + T(3));
     df::atomic_ref<T, df::memory_order::seq_cst, df::memory_scope::system> mx(v[2]);
     mx.fetch_max(x, df::memory_order::relaxed);
     df::atomic_ref<T, df::memory_order::relaxed, df::memory_scope::device> ex(v[3]);
     // Every value handed out once: exchange returns each previous value exactly once.
     const T prev = ex.exchange(static_cast<T>(i[0] + 1));
     got[static_cast<std::size_t>(prev)] = 1;
     df::atomic_ref<T, df::memory_order::relaxed, df::memory_scope::device> cas(v[4]);
     T seen = cas.load();
     while (!cas.compare_exchange_weak(seen, seen + T(2))) {
     }
   }).wait();
  T expected_sum = 0;
  for (std::size_t i = 0; i < n; ++i) expected_sum += static_cast<T>(i % 97 + 1);
  EXPECT_EQ(v[0], expected_sum);
  EXPECT_EQ(v[1], T(4));
  EXPECT_EQ(v[2], T(97));
  EXPECT_EQ(v[4], static_cast<T>(2 * n));
  // The value left is one of 1..n; every other one of 0..n was returned by one exchange.
  std::size_t returned = 0;
  for (std::size_t i = 0; i <= n; ++i) returned += got[i] == 1 ? 1 : 0;
  EXPECT_EQ(returned, n);
  EXPECT_EQ(got[static_cast<std::size_t>(v[3])], 0);
  df::free(v, q);
  df::free(got, q);
}

inline void atomics_global(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 4096;  // exact in float: every partial sum stays below 2^24
  atomics_global_one<int>(q, n);
  atomics_global_one<unsigned int>(q, n);
  atomics_global_one<long long>(q, n);
  atomics_global_one<unsigned long long>(q, n);
  atomics_global_one<float>(q, n);
  atomics_global_one<double>(q, n);
  // Integer-only operations and operators.
  auto* bits = df::malloc_shared<unsigned>(4, q);
  bits[0] = 0;
  bits[1] = ~0u;
  bits[2] = 0;
  bits[3] = 0;
  q.parallel_for(df::range<1>(32), [=] SLUICE_KERNEL(df::id<1> i) {
     df::atomic_ref<unsigned, df::memory_order::relaxed, df::memory_scope::device> o(bits[0]),
         a(bits[1]), x(bits[2]), c(bits[3]);
     o |= 1u << i[0];
     a.fetch_and(~(1u << i[0]));
     x ^= 3u;  // xors commute with each other, not with ++ and --: those go to another word
     ++c;
     c--;
   }).wait();
  EXPECT_EQ(bits[0], ~0u);
  EXPECT_EQ(bits[1], 0u);
  EXPECT_EQ(bits[2], 0u);  // 32 xors of 3 cancel
  EXPECT_EQ(bits[3], 0u);  // ++ and -- cancel
  df::free(bits, q);
  // A buffer element, through an accessor.
  df::Buffer<long long> counter{df::range<1>(1)};
  q.submit([&](df::Handler& h) {
    auto c = counter.get_access<access_mode::write>(h, df::no_init);
    h.single_task([=] SLUICE_KERNEL() { c[0] = 0; });
  });
  q.submit([&](df::Handler& h) {
    auto c = counter.get_access<access_mode::read_write>(h);
    h.parallel_for(df::range<1>(1000), [=] SLUICE_KERNEL(df::id<1> i) {
      df::atomic_ref<long long, df::memory_order::relaxed, df::memory_scope::device> r(c[0]);
      r += static_cast<long long>(i[0]);
    });
  });
  df::HostAccessor<long long, 1, access_mode::read> hc(counter);
  EXPECT_EQ(hc[0], 999LL * 1000 / 2);
}

/// Acquire/release through a read-modify-write chain: each work-item writes its slot and
/// increments a counter with acq_rel; the one that sees the last count reads every slot (the
/// classic last-block pattern), without waiting for anyone.
inline void atomics_release_acquire(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 2048;
  auto* slot = df::malloc_shared<int>(n, q);
  auto* state = df::malloc_shared<long long>(2, q);
  state[0] = 0;
  state[1] = -1;
  q.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) {
     slot[i] = static_cast<int>(i[0]) + 1;
     df::atomic_ref<long long, df::memory_order::acq_rel, df::memory_scope::device> c(state[0]);
     if (c.fetch_add(1) == static_cast<long long>(n) - 1) {
       long long sum = 0;
       for (std::size_t k = 0; k < n; ++k) sum += slot[k];
       state[1] = sum;
     }
   }).wait();
  EXPECT_EQ(state[1], static_cast<long long>(n) * (n + 1) / 2);
  df::free(slot, q);
  df::free(state, q);
}

/// atomic_ref on local memory with work-group scope: per-group histograms, then one global
/// add per group.
inline void atomics_local(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  constexpr std::size_t groups = 6, items = 96, bins = 8;
  auto* hist = df::malloc_shared<unsigned>(groups * bins, q);
  auto* fsum = df::malloc_shared<float>(1, q);
  *fsum = 0;
  q.submit([&](df::Handler& h) {
     df::local_accessor<unsigned, 1> local(df::range<1>(bins), h);
     df::local_accessor<float, 1> lsum(df::range<1>(1), h);
     h.parallel_for(
         df::nd_range<1>(df::range<1>(groups * items), df::range<1>(items)),
         [=] SLUICE_KERNEL(df::nd_item<1> it) {
           const std::size_t l = it.get_local_id(0);
           if (l < bins) local[l] = 0;
           if (l == 0) lsum[0] = 0;
           df::group_barrier(it.get_group());
           df::atomic_ref<unsigned, df::memory_order::relaxed, df::memory_scope::work_group,
                          df::access::address_space::local_space>
               bin(local[(it.get_global_id(0) * 7) % bins]);
           bin.fetch_add(1u);
           df::atomic_ref<float, df::memory_order::relaxed, df::memory_scope::work_group> s(
               lsum[0]);
           s.fetch_add(1.0f);
           df::group_barrier(it.get_group());
           if (l < bins) hist[it.get_group(0) * bins + l] = local[l];
           if (l == 0) {
             df::atomic_ref<float, df::memory_order::relaxed, df::memory_scope::device>(*fsum)
                 .fetch_add(lsum[0]);
           }
         });
   }).wait();
  for (std::size_t g = 0; g < groups; ++g) {
    std::vector<unsigned> want(bins, 0);
    for (std::size_t l = 0; l < items; ++l) ++want[((g * items + l) * 7) % bins];
    for (std::size_t b = 0; b < bins; ++b) EXPECT_EQ(hist[g * bins + b], want[b]) << g << "," << b;
  }
  EXPECT_EQ(*fsum, static_cast<float>(groups * items));
  df::free(hist, q);
  df::free(fsum, q);
}

/// §4.17.4: reduce, scans, broadcast and votes over work-groups of several shapes (sizes that are
/// and are not multiples of the sub-group size, 2D groups), checked against sequential values.
/// Values are small integers (in int and in double: every order gives the same result).
template <class T>
void group_algorithms_for(df::Queue& q, df::range<2> global, df::range<2> local) {
  const std::size_t n = global.size();
  const std::size_t group_items = local.size();
  constexpr int kFields = 10;
  auto* in = df::malloc_shared<T>(n, q);
  auto* out = df::malloc_shared<T>(n * kFields, q);
  std::mt19937 rng(static_cast<unsigned>(n + group_items));
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<T>(rng() % 9 + 1);
  q.parallel_for(df::nd_range<2>(global, local), [=] SLUICE_KERNEL(df::nd_item<2> it) {
     const df::group<2> g = it.get_group();
     const std::size_t gi = it.get_global_linear_id();
     const T x = in[gi];
     T* o = out + gi * kFields;
     o[0] = df::reduce_over_group(g, x, df::plus<T>());
     o[1] = df::reduce_over_group(g, x, T(100), df::plus<>());
     o[2] = df::inclusive_scan_over_group(g, x, df::plus<T>());
     o[3] = df::exclusive_scan_over_group(g, x, df::plus<T>());
     o[4] = df::exclusive_scan_over_group(g, x, T(7), df::maximum<T>());
     o[5] = df::inclusive_scan_over_group(g, x, df::minimum<T>(), T(5));
     o[6] = df::group_broadcast(g, x);
     o[7] = df::group_broadcast(g, x, g.get_local_linear_range() - 1);
     o[8] = df::reduce_over_group(g, x, df::maximum<>());
     const bool big = x > T(8);
     o[9] = static_cast<T>((df::any_of_group(g, big) ? 1 : 0) +
                           (df::all_of_group(g, x, [](T v) { return v > T(0); }) ? 2 : 0) +
                           (df::none_of_group(g, x > T(100)) ? 4 : 0) +
                           (df::all_of_group(g, big) ? 8 : 0));
   }).wait();
  // Work-items of one group in local linear order, as the specification orders scans.
  const std::size_t gr0 = global[0] / local[0], gr1 = global[1] / local[1];
  for (std::size_t w0 = 0; w0 < gr0; ++w0) {
    for (std::size_t w1 = 0; w1 < gr1; ++w1) {
      std::vector<std::size_t> members;
      for (std::size_t l0 = 0; l0 < local[0]; ++l0) {
        for (std::size_t l1 = 0; l1 < local[1]; ++l1) {
          members.push_back((w0 * local[0] + l0) * global[1] + w1 * local[1] + l1);
        }
      }
      T sum = 0, mx = 0;
      bool any_big = false, all_big = true;
      for (std::size_t m : members) {
        sum += in[m];
        mx = std::max(mx, in[m]);
        any_big = any_big || in[m] > T(8);
        all_big = all_big && in[m] > T(8);
      }
      T incl = 0, emax = 7, imin = 5;
      for (std::size_t k = 0; k < members.size(); ++k) {
        const std::size_t m = members[k];
        const T* o = out + m * kFields;
        SCOPED_TRACE(::testing::Message() << "group " << w0 << "," << w1 << " item " << k);
        EXPECT_EQ(o[0], sum);
        EXPECT_EQ(o[1], sum + T(100));
        incl += in[m];
        EXPECT_EQ(o[2], incl);
        EXPECT_EQ(o[3], incl - in[m]);
        EXPECT_EQ(o[4], emax);
        emax = std::max(emax, in[m]);
        imin = std::min(imin, in[m]);
        EXPECT_EQ(o[5], imin);
        EXPECT_EQ(o[6], in[members.front()]);
        EXPECT_EQ(o[7], in[members.back()]);
        EXPECT_EQ(o[8], mx);
        EXPECT_EQ(o[9], static_cast<T>((any_big ? 1 : 0) + 2 + 4 + (all_big ? 8 : 0)));
      }
    }
  }
  df::free(in, q);
  df::free(out, q);
}

inline void group_algorithms(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  group_algorithms_for<int>(q, df::range<2>(2, 256), df::range<2>(1, 128));
  group_algorithms_for<int>(q, df::range<2>(4, 96), df::range<2>(2, 48));      // 96: 32 + 32 + 32
  group_algorithms_for<double>(q, df::range<2>(3, 100), df::range<2>(3, 20));  // 60: 32 + 28
  group_algorithms_for<long long>(q, df::range<2>(1, 7), df::range<2>(1, 7));
  group_algorithms_for<int>(q, df::range<2>(1, 1024), df::range<2>(1, 1024));
}

/// §4.17.3-4.17.4 on sub-groups: the same algorithms over each sub-group of 32 (the last one of
/// a group smaller), and the shuffles for lanes whose source lies in the sub-group.
inline void sub_group_algorithms(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t groups = 3, items = 80;  // sub-groups of 32, 32 and 16
  const std::size_t n = groups * items;
  constexpr int kFields = 9;
  auto* in = df::malloc_shared<int>(n, q);
  auto* out = df::malloc_shared<int>(n * kFields, q);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<int>((i * 37) % 11) + 1;
  q.parallel_for(df::nd_range<1>(df::range<1>(n), df::range<1>(items)), [=] SLUICE_KERNEL(
                                                                            df::nd_item<1> it) {
     const df::sub_group sg = it.get_sub_group();
     const std::size_t i = it.get_global_id(0);
     const int x = in[i];
     int* o = out + i * kFields;
     const unsigned lane = sg.get_local_linear_id();
     const unsigned size = sg.get_local_linear_range();
     o[0] = df::reduce_over_group(sg, x, df::plus<int>());
     o[1] = df::inclusive_scan_over_group(sg, x, df::plus<int>());
     o[2] = df::exclusive_scan_over_group(sg, x, df::plus<>());
     o[3] = df::group_broadcast(sg, x, 3);
     o[4] = df::select_from_group(sg, x, df::id<1>(size - 1 - lane));
     o[5] = df::shift_group_left(sg, x, 2);
     o[6] = df::shift_group_right(sg, x, 1);
     o[7] = df::permute_group_by_xor(sg, x, 1);
     o[8] = (df::any_of_group(sg, x == 11) ? 1 : 0) + (df::all_of_group(sg, x > 0) ? 2 : 0);
     df::group_barrier(sg);
   }).wait();
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t s = 0; s * 32 < items; ++s) {
      const std::size_t first = g * items + s * 32;
      const std::size_t size = std::min<std::size_t>(32, items - s * 32);
      int sum = 0;
      bool any11 = false;
      for (std::size_t l = 0; l < size; ++l) {
        sum += in[first + l];
        any11 = any11 || in[first + l] == 11;
      }
      int incl = 0;
      for (std::size_t l = 0; l < size; ++l) {
        const int* o = out + (first + l) * kFields;
        SCOPED_TRACE(::testing::Message() << "group " << g << " sub-group " << s << " lane " << l);
        incl += in[first + l];
        EXPECT_EQ(o[0], sum);
        EXPECT_EQ(o[1], incl);
        EXPECT_EQ(o[2], incl - in[first + l]);
        EXPECT_EQ(o[3], in[first + 3]);
        EXPECT_EQ(o[4], in[first + size - 1 - l]);
        if (l + 2 < size) {
          EXPECT_EQ(o[5], in[first + l + 2]);
        }
        if (l >= 1) {
          EXPECT_EQ(o[6], in[first + l - 1]);
        }
        if ((l ^ 1) < size) {
          EXPECT_EQ(o[7], in[first + (l ^ 1)]);
        }
        EXPECT_EQ(o[8], (any11 ? 1 : 0) + 2);
      }
    }
  }
  df::free(in, q);
  df::free(out, q);
}

}  // namespace sluice::test::dataflow_api_cases

namespace sluice::test {

class DataflowKernelApi : public BackendTest {};

TEST_P(DataflowKernelApi, NdItemGroupAndSubGroupQueries) {
  dataflow_api_cases::nd_item_queries(device());
}
TEST_P(DataflowKernelApi, ItemQueries) {
  dataflow_api_cases::item_queries(device());
}
TEST_P(DataflowKernelApi, ChainedSubscripts) {
  dataflow_api_cases::chained_subscripts(device());
}
TEST_P(DataflowKernelApi, AtomicRefGlobalEveryTypeAndOperation) {
  dataflow_api_cases::atomics_global(device());
}
TEST_P(DataflowKernelApi, AtomicRefReleaseAcquire) {
  dataflow_api_cases::atomics_release_acquire(device());
}
TEST_P(DataflowKernelApi, AtomicRefLocalMemory) {
  dataflow_api_cases::atomics_local(device());
}
TEST_P(DataflowKernelApi, WorkGroupAlgorithms) {
  dataflow_api_cases::group_algorithms(device());
}
TEST_P(DataflowKernelApi, SubGroupAlgorithmsAndShuffles) {
  dataflow_api_cases::sub_group_algorithms(device());
}

SLUICE_INSTANTIATE_BACKENDS(DataflowKernelApi);

}  // namespace sluice::test
