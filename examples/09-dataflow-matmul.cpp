// 09 — the dataflow layer: a tiled matrix product with work-group local memory (reference 004,
// "Tiled MatMul"), checked against a plain reference loop.
//
// Each work-group computes a tile x tile block of C. Its work-items load one tile of A and one of
// B into local memory, wait at a group barrier until the whole tile is there, multiply, and wait
// again before the next tiles overwrite it. On the host device every work-item is a fiber, so
// the barriers really suspend it.

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "sluice/dataflow.hpp"

namespace df = sluice::dataflow;
using df::access_mode;

int main() {
  constexpr std::size_t M = 96, N = 64, K = 128, tile = 16;  // each extent a multiple of the tile
  std::vector<double> a(M * K), b(K * N), c(M * N);
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);

  df::Queue q(df::QueueOptions{.device = sluice::Device{"host", 0}});
  {
    df::Buffer<double, 2> A(static_cast<const double*>(a.data()), df::range{M, K});
    df::Buffer<double, 2> B(static_cast<const double*>(b.data()), df::range{K, N});
    df::Buffer<double, 2> C(c.data(), df::range{M, N});
    q.submit([&](df::Handler& h) {
      auto pa = A.get_access<access_mode::read>(h);
      auto pb = B.get_access<access_mode::read>(h);
      auto pc = C.get_access<access_mode::write>(h, df::no_init);
      df::local_accessor<double, 2> ta(df::range{tile, tile}, h), tb(df::range{tile, tile}, h);
      h.parallel_for(df::nd_range{df::range{M, N}, df::range{tile, tile}}, [=](df::nd_item<2> it) {
        const std::size_t i = it.get_global_id(0), j = it.get_global_id(1);
        const std::size_t li = it.get_local_id(0), lj = it.get_local_id(1);
        double sum = 0;
        for (std::size_t t = 0; t < K; t += tile) {
          ta[{li, lj}] = pa[{i, t + lj}];
          tb[{li, lj}] = pb[{t + li, j}];
          df::group_barrier(it.get_group());  // the tiles are complete
          for (std::size_t k = 0; k < tile; ++k) sum += ta[{li, k}] * tb[{k, lj}];
          df::group_barrier(it.get_group());  // everyone is done with them
        }
        pc[{i, j}] = sum;
      });
    });
  }  // C writes back into c

  double worst = 0;
  for (std::size_t i = 0; i < M; ++i) {
    for (std::size_t j = 0; j < N; ++j) {
      double ref = 0;
      for (std::size_t k = 0; k < K; ++k) ref += a[i * K + k] * b[k * N + j];
      worst = std::max(worst, std::abs(ref - c[i * N + j]));
    }
  }
  std::printf("C = A * B (%zux%zu by %zux%zu, %zux%zu tiles): largest error %.3g\n", M, K, K, N,
              tile, tile, worst);
  const bool ok = worst < 1e-12;
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
