#pragma once
// The dataflow conformance cases, written once: compiled by nvcc through
// <sluice/dataflow_cuda.cuh> in a cuda build (dataflow_test.cu, kernels run on both backends) and
// by the host compiler otherwise (dataflow_test.cpp). Kernels are SLUICE_KERNEL lambdas in free
// functions: nvcc allows extended lambdas only in functions whose address can be taken.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "backend_param.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test::dataflow_cases {

namespace df = sluice::dataflow;
using df::access_mode;

inline df::Queue make_queue(const Device& d, bool in_order) {
  return df::Queue(df::QueueOptions{.device = d, .in_order = in_order});
}

/// Announces party `me` in flags[0] and waits (bounded) until `parties` arrived; returns whether
/// they all did. Proves two kernels run at the same time without timing them.
SLUICE_HD inline bool rendezvous(int* flags, int parties) {
#if defined(__CUDA_ARCH__)
  atomicAdd(flags, 1);
  __threadfence();
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  volatile int* seen = flags;
  for (;;) {
    if (*seen >= parties) return true;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > 10'000'000'000ull) return false;
    __nanosleep(500);
  }
#else
  std::atomic_ref<int> a(*flags);
  a.fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a.load() < parties) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
#endif
}

SLUICE_HD inline int atomic_load(const int* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const volatile int*>(p);
#else
  return std::atomic_ref<const int>(*p).load();
#endif
}
SLUICE_HD inline void atomic_store(int* p, int v) {
#if defined(__CUDA_ARCH__)
  *static_cast<volatile int*>(p) = v;
  __threadfence_system();
#else
  std::atomic_ref<int>(*p).store(v);
#endif
}

// flags: [0] rendezvous count, [1] A met B, [2] B met A, [3] A done, [4] B saw A done.
// A and B overwrite their buffers (no_init): nothing is copied in, so no copy through a
// pageable staging buffer (which on cuda may synchronize the device) falls between them.
inline void y_pattern_buffers(const Device& d, bool in_order) {
  constexpr std::size_t n = 1024;
  auto q = make_queue(d, in_order);
  std::vector<double> a_host(n, 0.0), b_host(n, 0.0);
  int* flags = df::malloc_shared<int>(8, q);
  // Two passes of the same kernels: the first only loads them. Under CUDA's lazy loading, the
  // first launch of B loads it, and a load may wait for the device to go idle, which it never
  // does while A spins waiting for B (the deadlock the CUDA guide describes); the second pass
  // proves the overlap.
  for (int pass = 0; pass < 2; ++pass) {
    q.single_task([=] SLUICE_KERNEL() {
       for (int i = 0; i < 8; ++i) flags[i] = 0;
     }).wait();
    const bool overlap = !in_order && pass == 1;
    {
      df::Buffer<double> A(a_host.data(), df::range<1>(n)), B(b_host.data(), df::range<1>(n));
      q.submit([&](df::Handler& h) {  // task A
        auto a = A.get_access<access_mode::write>(h, df::no_init);
        h.single_task([=] SLUICE_KERNEL() {
          if (overlap) flags[1] = rendezvous(flags, 2) ? 1 : 0;
          for (std::size_t i = 0; i < n; ++i) a[i] = 1.0;
          atomic_store(flags + 3, 1);
        });
      });
      q.submit([&](df::Handler& h) {  // task B
        auto b = B.get_access<access_mode::write>(h, df::no_init);
        h.single_task([=] SLUICE_KERNEL() {
          flags[4] = atomic_load(flags + 3);
          if (overlap) flags[2] = rendezvous(flags, 2) ? 1 : 0;
          for (std::size_t i = 0; i < n; ++i) b[i] = 2.0;
        });
      });
      q.submit([&](df::Handler& h) {  // task C: after A and B
        auto a = A.get_access<access_mode::read_write>(h);
        auto b = B.get_access<access_mode::read>(h);
        h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] += b[i]; });
      });
      q.submit([&](df::Handler& h) {  // task D: after C
        auto a = A.get_access<access_mode::read_write>(h);
        h.single_task([=] SLUICE_KERNEL() {
          for (std::size_t i = 1; i < n; ++i) a[0] += a[i];
          a[0] /= 3;
        });
      });
    }  // write-back of A and B
    q.wait();
    EXPECT_EQ(a_host[0], double(n));
    for (std::size_t i = 1; i < n; ++i) ASSERT_EQ(a_host[i], 3.0) << i;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(b_host[i], 2.0) << i;
  }
  std::vector<int> f(8);
  q.single_task([=] SLUICE_KERNEL() { flags[5] = flags[1] + 10 * flags[2]; }).wait();
  std::copy(flags, flags + 8, f.begin());
  if (in_order) {
    EXPECT_EQ(f[4], 1) << "in-order: B must start after A finished";
  } else {
    EXPECT_EQ(f[1], 1) << "out-of-order: A never met B (serialized?)";
    EXPECT_EQ(f[2], 1) << "out-of-order: B never met A (serialized?)";
  }
  df::free(flags, q);
}

inline void y_pattern_usm(const Device& d, bool in_order) {
  constexpr std::size_t n = 4096;
  auto q = make_queue(d, in_order);
  double* a = df::malloc_shared<double>(n, q);
  double* b = df::malloc_shared<double>(n, q);
  auto e1 = q.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] = 1; });
  auto e2 = q.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { b[i] = 2; });
  auto e3 =
      q.parallel_for(df::range<1>(n), {e1, e2}, [=] SLUICE_KERNEL(df::id<1> i) { a[i] += b[i]; });
  auto e4 = q.single_task(e3, [=] SLUICE_KERNEL() {
    for (std::size_t i = 1; i < n; ++i) a[0] += a[i];
    a[0] /= 3;
  });
  e4.wait();
  EXPECT_TRUE(e4.complete());
  EXPECT_EQ(a[0], double(n));
  EXPECT_EQ(a[n - 1], 3.0);
  df::free(a, q);
  df::free(b, q);
}

/// Random command groups over a few buffers, against the same steps run sequentially on the host.
inline void random_dag(const Device& d, bool in_order, unsigned seed) {
  constexpr int kBuffers = 4;
  constexpr std::size_t n = 256;
  constexpr int kSteps = 60;
  std::mt19937 rng(seed);
  auto q = make_queue(d, in_order);
  std::vector<std::vector<int>> ref(kBuffers, std::vector<int>(n));
  std::vector<std::vector<int>> host(kBuffers, std::vector<int>(n));
  for (int b = 0; b < kBuffers; ++b) {
    for (std::size_t i = 0; i < n; ++i) ref[b][i] = host[b][i] = static_cast<int>(b * 1000 + i);
  }
  {
    std::vector<df::Buffer<int>> bufs;
    for (int b = 0; b < kBuffers; ++b) bufs.emplace_back(host[b].data(), df::range<1>(n));
    std::vector<df::Event> events;
    for (int step = 0; step < kSteps; ++step) {
      const int dst = static_cast<int>(rng() % kBuffers);
      const int src = static_cast<int>(rng() % kBuffers);
      const std::size_t lo = rng() % n, len = 1 + rng() % (n - lo);
      const int kind = static_cast<int>(rng() % 4);
      const int k = step + 1;
      auto& r = ref[dst];
      const auto s = ref[src];                       // the source as it was before this step
      if (kind == 0 || (kind == 1 && src == dst)) {  // dst[range] = 3 * dst + src + k
        for (std::size_t i = lo; i < lo + len; ++i) r[i] = 3 * r[i] + s[i] + k;
        events.push_back(q.submit([&](df::Handler& h) {
          auto o =
              bufs[dst].get_access<access_mode::read_write>(h, df::range<1>(len), df::id<1>(lo));
          if (src == dst) {
            h.parallel_for(df::range<1>(len),
                           [=] SLUICE_KERNEL(df::id<1> i) { o[i] = 3 * o[i] + o[i] + k; });
          } else {
            auto in = bufs[src].get_access<access_mode::read>(h, df::range<1>(len), df::id<1>(lo));
            h.parallel_for(df::range<1>(len),
                           [=] SLUICE_KERNEL(df::id<1> i) { o[i] = 3 * o[i] + in[i] + k; });
          }
        }));
      } else if (kind == 1) {  // discard the whole dst: dst = src ^ k
        for (std::size_t i = 0; i < n; ++i) r[i] = s[i] ^ k;
        events.push_back(q.submit([&](df::Handler& h) {
          auto o = bufs[dst].get_access<access_mode::write>(h, df::no_init);
          auto in = bufs[src].get_access<access_mode::read>(h);
          h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { o[i] = in[i] ^ k; });
        }));
      } else if (kind == 2) {  // write a range: dst[i] = k + i
        for (std::size_t i = lo; i < lo + len; ++i) r[i] = k + static_cast<int>(i);
        events.push_back(q.submit([&](df::Handler& h) {
          auto o = bufs[dst].get_access<access_mode::write>(h, df::range<1>(len), df::id<1>(lo));
          h.parallel_for(df::range<1>(len), [=] SLUICE_KERNEL(df::item<1> it) {
            o[it.get_id()] = k + static_cast<int>(lo + it.get_id(0));
          });
        }));
      } else {  // the host reads a buffer in the middle of the graph
        df::HostAccessor<int, 1, access_mode::read> h(bufs[src]);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], ref[src][i]) << "step " << step;
      }
      if (rng() % 8 == 0 && !events.empty()) events[rng() % events.size()].wait();
    }
    df::wait_all(events);
  }
  for (int b = 0; b < kBuffers; ++b) {
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(host[b][i], ref[b][i]) << "buffer " << b << " " << i;
  }
}

inline void write_back(const Device& d) {
  auto q = make_queue(d, false);
  constexpr std::size_t n = 100;
  std::vector<int> v(n, 1), c(n, 1), off(n, 1);
  {
    df::Buffer<int> b(v.data(), df::range<1>(n));
    df::Buffer<int> cb(static_cast<const int*>(c.data()), df::range<1>(n));
    df::Buffer<int> ob(off.data(), df::range<1>(n));
    ob.set_write_back(false);
    for (auto* buf : {&b, &cb, &ob}) {
      q.submit([&](df::Handler& h) {
        auto a = buf->get_access<access_mode::read_write>(h);
        h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] += int(i); });
      });
    }
    // Nothing waited: the destructors must wait for the kernels and copy back.
  }
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(v[i], 1 + int(i));
    ASSERT_EQ(c[i], 1) << "a buffer over const memory never writes back";
    ASSERT_EQ(off[i], 1) << "set_write_back(false)";
  }
  // A 2D buffer with a ranged accessor: only the block is touched.
  std::vector<float> m(6 * 8, 0.f);
  {
    df::Buffer<float, 2> b(m.data(), df::range<2>(6, 8));
    q.submit([&](df::Handler& h) {
      auto a = b.get_access<access_mode::write>(h, df::range<2>(2, 3), df::id<2>(1, 4));
      h.parallel_for(df::range<2>(2, 3),
                     [=] SLUICE_KERNEL(df::id<2> i) { a[i] = float(10 * i[0] + i[1] + 1); });
    });
  }
  for (std::size_t r = 0; r < 6; ++r) {
    for (std::size_t col = 0; col < 8; ++col) {
      const bool in = r >= 1 && r < 3 && col >= 4 && col < 7;
      EXPECT_EQ(m[r * 8 + col], in ? float(10 * (r - 1) + (col - 4) + 1) : 0.f) << r << "," << col;
    }
  }
}

/// Data moves only when the side that needs it is stale: counted through the tracker's marks (a
/// copy marks its source and destination, a kernel each accessor).
inline void moves_only_when_stale(const Device& d) {
  auto q = make_queue(d, true);
  constexpr std::size_t n = 64;
  std::vector<int> v(n, 3);
  int* out = df::malloc_shared<int>(1, q);
  df::Buffer<int> b(v.data(), df::range<1>(n));
  auto marks = [] { return sluice::deps::stats().marks; };
  auto read_kernel = [&] {
    q.submit([&](df::Handler& h) {
      auto a = b.get_access<access_mode::read>(h);
      h.single_task([=] SLUICE_KERNEL() { *out = a[5]; });
    });
  };
  auto m0 = marks();
  read_kernel();  // the first use copies the host data in
  EXPECT_EQ(marks() - m0, 3u);
  m0 = marks();
  read_kernel();  // still current on the device: no copy
  read_kernel();
  EXPECT_EQ(marks() - m0, 2u);
  q.submit([&](df::Handler& h) {
    auto a = b.get_access<access_mode::write>(h, df::no_init);  // nothing copied in
    h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] = int(i); });
  });
  m0 = marks();
  {
    df::HostAccessor<int, 1, access_mode::read> h(b);  // one copy back
    EXPECT_EQ(h[9], 9);
  }
  EXPECT_EQ(marks() - m0, 2u);
  m0 = marks();
  {
    df::HostAccessor<int, 1, access_mode::read> h(b);  // the host copy is current
    EXPECT_EQ(h[10], 10);
  }
  read_kernel();  // and so is the device's (the host only read)
  EXPECT_EQ(marks() - m0, 1u);
  q.wait();
  EXPECT_EQ(*out, 5);
  df::free(out, q);
}

inline void host_accessor_blocks(const Device& d) {
  auto q = make_queue(d, false);
  constexpr std::size_t n = 512;
  df::Buffer<int> b{df::range<1>(n)};
  q.submit([&](df::Handler& h) {
    auto a = b.get_access<access_mode::write>(h, df::no_init);
    h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] = int(i) * 2; });
  });
  df::Event later;
  int* out = df::malloc_shared<int>(1, q);
  {
    df::HostAccessor<int, 1, access_mode::read_write> h(b);  // waits for the kernel
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], int(i) * 2);
    later = q.submit([&](df::Handler& cg) {
      auto a = b.get_access<access_mode::read>(cg);
      cg.single_task([=] SLUICE_KERNEL() { *out = a[7]; });
    });
    // Held back while the host accessor lives, whatever the device does meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(later.complete());
    EXPECT_THROW(later.wait(), sluice::Error) << "waiting here would never return";
    EXPECT_THROW(q.wait(), sluice::Error);
    h[7] = -5;  // the kernel must see this: it starts after the accessor goes
  }
  later.wait();
  EXPECT_EQ(*out, -5);
  df::free(out, q);
}

/// Sum of each work-group's values by a tree in local memory, with barriers.
inline void nd_range_local_memory(const Device& d) {
  auto q = make_queue(d, false);
  constexpr std::size_t groups = 13, local = 64, n = groups * local;
  std::vector<int> in(n), sums(groups, -1);
  std::iota(in.begin(), in.end(), 0);
  {
    df::Buffer<int> bin(static_cast<const int*>(in.data()), df::range<1>(n));
    df::Buffer<int> bsum(sums.data(), df::range<1>(groups));
    q.submit([&](df::Handler& h) {
      auto x = bin.get_access<access_mode::read>(h);
      auto s = bsum.get_access<access_mode::write>(h, df::no_init);
      df::local_accessor<int, 1> tile(df::range<1>(local), h);
      h.parallel_for(df::nd_range<1>(df::range<1>(n), df::range<1>(local)),
                     [=] SLUICE_KERNEL(df::nd_item<1> it) {
                       const std::size_t l = it.get_local_id(0);
                       tile[l] = x[it.get_global_id()];
                       for (std::size_t half = local / 2; half > 0; half /= 2) {
                         df::group_barrier(it.get_group());
                         if (l < half) tile[l] += tile[l + half];
                       }
                       if (l == 0) s[it.get_group(0)] = tile[0];
                     });
    });
  }
  for (std::size_t g = 0; g < groups; ++g) {
    int expect = 0;
    for (std::size_t l = 0; l < local; ++l) expect += in[g * local + l];
    ASSERT_EQ(sums[g], expect) << "group " << g;
  }
}

/// C = A * B with square tiles in local memory (reference 004's tiled matmul), 2D nd_range.
inline void tiled_matmul(const Device& d, std::size_t M, std::size_t N, std::size_t K,
                         std::size_t tile) {
  auto q = make_queue(d, false);
  std::vector<double> a(M * K), b(K * N), c(M * N, 0.0), ref(M * N, 0.0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < N; ++j) ref[i * N + j] += a[i * K + k] * b[k * N + j];
  {
    df::Buffer<double, 2> A(static_cast<const double*>(a.data()), df::range<2>(M, K));
    df::Buffer<double, 2> B(static_cast<const double*>(b.data()), df::range<2>(K, N));
    df::Buffer<double, 2> C(c.data(), df::range<2>(M, N));
    q.submit([&](df::Handler& h) {
      auto pa = A.get_access<access_mode::read>(h);
      auto pb = B.get_access<access_mode::read>(h);
      auto pc = C.get_access<access_mode::write>(h, df::no_init);
      df::local_accessor<double, 2> ta(df::range<2>(tile, tile), h),
          tb(df::range<2>(tile, tile), h);
      h.parallel_for(df::nd_range<2>(df::range<2>(M, N), df::range<2>(tile, tile)),
                     [=] SLUICE_KERNEL(df::nd_item<2> it) {
                       const std::size_t i = it.get_global_id(0), j = it.get_global_id(1);
                       const std::size_t li = it.get_local_id(0), lj = it.get_local_id(1);
                       double acc = 0;
                       for (std::size_t t0 = 0; t0 < K; t0 += tile) {
                         ta[{li, lj}] = pa[{i, t0 + lj}];
                         tb[{li, lj}] = pb[{t0 + li, j}];
                         it.barrier();
                         for (std::size_t k = 0; k < tile; ++k) acc += ta[{li, k}] * tb[{k, lj}];
                         it.barrier();
                       }
                       pc[{i, j}] = acc;
                     });
    });
  }
  for (std::size_t i = 0; i < M * N; ++i) ASSERT_NEAR(c[i], ref[i], 1e-9) << i;
}

inline void reductions(const Device& d) {
  auto q = make_queue(d, false);
  constexpr std::size_t n = 100'003;
  long long* sum = df::malloc_shared<long long>(1, q);
  double* mx = df::malloc_shared<double>(1, q);
  *sum = 5;
  *mx = 0;
  q.submit([&](df::Handler& h) {
    h.parallel_for(df::range<1>(n), df::reduction(sum, df::plus<long long>()),
                   [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<long long, df::plus<long long>> & r) {
                     r += static_cast<long long>(i);
                   });
  });
  q.submit([&](df::Handler& h) {
    h.parallel_for(df::range<1>(n),
                   df::reduction(mx, df::maximum<double>(), {.initialize_to_identity = true}),
                   [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<double, df::maximum<double>> & r) {
                     r.combine(-double((i * 7919) % n) + 10.0);
                   });
  });
  q.wait();
  EXPECT_EQ(*sum, 5 + static_cast<long long>(n) * (n - 1) / 2);
  EXPECT_EQ(*mx, 10.0);
  // Into a buffer element.
  std::vector<int> v(1, 100);
  {
    df::Buffer<int> b(v.data(), df::range<1>(1));
    q.submit([&](df::Handler& h) {
      auto red = df::reduction(b, h, df::plus<int>());
      h.parallel_for(df::range<2>(10, 20), red,
                     [=] SLUICE_KERNEL(df::item<2> it, decltype(red)::reducer_type & r) {
                       r += int(it.get_linear_id() % 3);
                     });
    });
  }
  int expect = 100;
  for (int i = 0; i < 200; ++i) expect += i % 3;
  EXPECT_EQ(v[0], expect);
  df::free(sum, q);
  df::free(mx, q);
}

/// USM declared with Handler::use is ordered by the tracker, without events.
inline void tracked_usm(const Device& d) {
  auto q = make_queue(d, false);
  constexpr std::size_t n = 2048;
  int* x = df::malloc_device<int>(n, q);
  int* y = df::malloc_shared<int>(n, q);
  for (int round = 0; round < 4; ++round) {
    q.submit([&](df::Handler& h) {
      h.use(x, n, access_mode::write);
      h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { x[i] = int(i) + round; });
    });
    q.submit([&](df::Handler& h) {
      h.use(x, n, access_mode::read);
      h.use(y, n, access_mode::write);
      h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { y[i] = 2 * x[i]; });
    });
  }
  q.wait();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 2 * (int(i) + 3));
  df::free(x, q);  // tracked: waits for the command groups that declared it
  df::free(y, q);
}

inline void misuse(const Device& d) {
  auto q = make_queue(d, false);
  df::Buffer<int> b{df::range<1>(10)};
  auto expect_error = [](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const sluice::Error& e) {
      EXPECT_NE(std::string(e.what()).size(), 0u) << what;
    }
  };
  expect_error(
      [&] {
        q.submit([&](df::Handler& h) {
          (void)b.get_access<access_mode::read>(h, df::range<1>(5), df::id<1>(6));
        });
      },
      "accessor out of bounds");
  expect_error(
      [&] {
        q.submit([&](df::Handler& h) {
          df::local_accessor<int, 1> l(df::range<1>(4), h);
          h.parallel_for(df::range<1>(4), [=] SLUICE_KERNEL(df::id<1>) { (void)l; });
        });
      },
      "local_accessor in a range kernel");
  expect_error(
      [&] {
        q.parallel_for(df::nd_range<1>(df::range<1>(10), df::range<1>(4)),
                       [=] SLUICE_KERNEL(df::nd_item<1>) {});
      },
      "nd_range not divisible");
  expect_error(
      [&] {
        q.submit([&](df::Handler& h) {
          h.single_task([=] SLUICE_KERNEL() {});
          h.single_task([=] SLUICE_KERNEL() {});
        });
      },
      "two kernels");
  expect_error(
      [&] {
        q.submit([&](df::Handler& h) {
          h.single_task([=] SLUICE_KERNEL() {});
          (void)b.get_access<access_mode::write>(h);
        });
      },
      "accessor after the kernel");
  int local = 0;
  expect_error([&] { df::free(&local, q); }, "free of foreign memory");
  expect_error([&] { df::Queue(df::QueueOptions{.device = d, .in_order = true, .contexts = 3}); },
               "in-order with several contexts");
  // Nothing was left half-done: the queue still works.
  int* p = df::malloc_shared<int>(1, q);
  q.single_task([=] SLUICE_KERNEL() { *p = 42; }).wait();
  EXPECT_EQ(*p, 42);
  df::free(p, q);
}

}  // namespace sluice::test::dataflow_cases

namespace sluice::test {

class Dataflow : public BackendTest {};

TEST_P(Dataflow, YPatternBuffersOverlapOutOfOrder) {
  dataflow_cases::y_pattern_buffers(device(), false);
}
TEST_P(Dataflow, YPatternBuffersSerialInOrder) {
  dataflow_cases::y_pattern_buffers(device(), true);
}
TEST_P(Dataflow, YPatternUsmEvents) {
  dataflow_cases::y_pattern_usm(device(), false);
  dataflow_cases::y_pattern_usm(device(), true);
}
TEST_P(Dataflow, RandomDagMatchesSequential) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    dataflow_cases::random_dag(device(), seed % 3 == 0, seed);
  }
}
TEST_P(Dataflow, WriteBack) {
  dataflow_cases::write_back(device());
}
TEST_P(Dataflow, MovesOnlyWhenStale) {
  dataflow_cases::moves_only_when_stale(device());
}
TEST_P(Dataflow, HostAccessorBlocksAndHoldsDeviceBack) {
  dataflow_cases::host_accessor_blocks(device());
}
TEST_P(Dataflow, NdRangeBarrierLocalMemory) {
  dataflow_cases::nd_range_local_memory(device());
}
TEST_P(Dataflow, TiledMatmul) {
  dataflow_cases::tiled_matmul(device(), 16, 24, 32, 8);
  dataflow_cases::tiled_matmul(device(), 16, 16, 16, 16);
}
TEST_P(Dataflow, Reductions) {
  dataflow_cases::reductions(device());
}
TEST_P(Dataflow, TrackedUsm) {
  dataflow_cases::tracked_usm(device());
}
TEST_P(Dataflow, MisuseIsAnError) {
  dataflow_cases::misuse(device());
}

SLUICE_INSTANTIATE_BACKENDS(Dataflow);

}  // namespace sluice::test
