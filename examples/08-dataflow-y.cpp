// 08 — the dataflow layer: the Y pattern of a task graph (reference 004).
//
// Tasks A and B are independent, C needs both, D needs C. With buffers and accessors the runtime
// infers that graph from how each command group accesses the data; with USM (plain pointers) the
// program states it with events. An out-of-order queue (the default) runs A and B at the same
// time; an in-order queue would run them one after the other.
//
// This file is plain C++, so its kernels run on the host device's CPU pool. Compiled by nvcc
// through <sluice/dataflow_cuda.cuh>, with kernels marked SLUICE_KERNEL, the same code runs on a
// GPU (bench/dataflow/ does that).

#include <cstdio>
#include <vector>

#include "sluice/dataflow.hpp"

namespace df = sluice::dataflow;
using df::access_mode;

int main() {
  constexpr std::size_t n = 1 << 16;
  df::Queue q(df::QueueOptions{.device = sluice::Device{"host", 0}});

  // 1. Buffers and accessors: the modes build the graph.
  std::vector<double> a_data(n), b_data(n);
  {
    df::Buffer<double> A(a_data.data(), df::range{n}), B(b_data.data(), df::range{n});
    q.submit([&](df::Handler& h) {  // task A: writes A
      auto a = A.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range{n}, [=](df::id<1> i) { a[i] = 1; });
    });
    q.submit([&](df::Handler& h) {  // task B: writes B, independent of A
      auto b = B.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range{n}, [=](df::id<1> i) { b[i] = 2; });
    });
    q.submit([&](df::Handler& h) {  // task C: reads B, updates A, so it follows A and B
      auto a = A.get_access<access_mode::read_write>(h);
      auto b = B.get_access<access_mode::read>(h);
      h.parallel_for(df::range{n}, [=](df::id<1> i) { a[i] += b[i]; });
    });
    q.submit([&](df::Handler& h) {  // task D: follows C
      auto a = A.get_access<access_mode::read_write>(h);
      h.single_task([=] {
        for (std::size_t i = 1; i < n; ++i) a[0] += a[i];
        a[0] /= 3;
      });
    });
    // A host accessor blocks until the data is on the host.
    df::HostAccessor<double, 1, access_mode::read> result(A);
    std::printf("buffers: A[0] = %.0f (expected %zu)\n", result[0], n);
  }  // the buffers write back into a_data and b_data here

  // 2. USM and events: the program states the graph.
  double* a = df::malloc_shared<double>(n, q);
  double* b = df::malloc_shared<double>(n, q);
  auto e1 = q.parallel_for(df::range{n}, [=](df::id<1> i) { a[i] = 1; });
  auto e2 = q.parallel_for(df::range{n}, [=](df::id<1> i) { b[i] = 2; });
  auto e3 = q.parallel_for(df::range{n}, {e1, e2}, [=](df::id<1> i) { a[i] += b[i]; });
  auto e4 = q.single_task(e3, [=] {
    for (std::size_t i = 1; i < n; ++i) a[0] += a[i];
    a[0] /= 3;
  });
  e4.wait();
  std::printf("USM:     a[0] = %.0f (expected %zu)\n", a[0], n);

  const bool ok =
      a_data[0] == double(n) && a_data[n - 1] == 3 && b_data[0] == 2 && a[0] == double(n);
  df::free(a, q);
  df::free(b, q);
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
