// Where the time of a small async CG solve goes (issue 26): CG + Jacobi on a 2D 5-point n x n
// grid (default 64 x 64), fixed iterations, async mode, for each variant of the small kernel
// (SLUICE_CUDA_CG_SMALL: off is the cooperative kernel). For each it prints
//   - the solve's median time at 2 and at N iterations, and from them the fixed cost and the
//     cost per iteration (what docs/bench/issue26.md reports);
//   - one profiled solve (SLUICE_CUDA_CG_SMALL_PROFILE): the kernel's own time from the device's
//     clock, its phases per iteration (warp 0 of block 0, and the slowest and fastest warp), and
//     the host's time to issue the launch;
// and, once, the round trip of an empty kernel (launch and stream synchronize), the floor of a
// solve's fixed cost. So one GPU run says what an iteration and the fixed cost are made of.
//
//   sluice_bench_small_cg [n] [iterations] [repeat] [variants, comma-separated]

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "empty_kernel.hpp"
#include "sluice/la.hpp"
#include "sluice/sluice.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string w; std::getline(in, w, ',');) {
    if (!w.empty()) out.push_back(w);
  }
  return out;
}

/// Median seconds of `repeat` async solves of `iterations` fixed iterations (after a warm-up).
double solve_time(const sluice::la::Mat& A, const sluice::la::Vec& b, sluice::la::Vec& x,
                  const sluice::Context& ctx, int iterations, int repeat) {
  sluice::la::Ksp ksp(A, {.type = sluice::la::KspType::cg,
                          .pc = sluice::la::PcType::jacobi,
                          .max_it = iterations,
                          .fixed_iterations = true,
                          .mode = sluice::la::SolveMode::async});
  std::vector<double> t;
  for (int r = 0; r <= repeat; ++r) {
    ctx.synchronize();
    const auto start = Clock::now();
    const auto result = ksp.solve(b, x, ctx);
    ctx.synchronize();
    if (result.iterations != iterations) {
      throw std::runtime_error("the solve ran " + std::to_string(result.iterations) +
                               " iterations, not " + std::to_string(iterations));
    }
    if (r > 0) t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return median(t);
}

/// Median round trip of an empty kernel: cudaLaunchKernel, then cudaStreamSynchronize.
double empty_round_trip_us() {
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return -1;
  const void* k = reinterpret_cast<const void*>(empty_kernel_ptr());
  std::vector<double> t;
  for (int r = 0; r < 201; ++r) {
    const auto start = Clock::now();
    if (cudaLaunchKernel(k, dim3(1), dim3(1), nullptr, 0, s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess) {
      t.clear();
      break;
    }
    if (r > 0) t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  cudaStreamDestroy(s);
  return t.empty() ? -1 : median(t);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 64;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  const int repeat = argc > 3 ? std::atoi(argv[3]) : 41;
  const std::vector<std::string> variants =
      split(argc > 4 ? argv[4] : "off,auto,block,cluster:2,cluster:4,cluster:8,cluster:16");
  if (n < 2 || iterations < 4 || repeat < 1) {
    std::cerr << "usage: sluice_bench_small_cg [n >= 2] [iterations >= 4] [repeat >= 1] "
                 "[variants]\n";
    return 2;
  }
  bool gpu = false;
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) gpu = true;
    if (b.name == "cuda" && b.device_count == 0) {
      std::cout << "SKIPPED: no CUDA device: " << b.unavailable_reason << "\n";
    }
  }
  if (!gpu) return 0;

  sluice::Context ctx(sluice::ContextOptions{.device = sluice::Device{"cuda", 0}, .name = "bench"});
  const auto A = sluice::la::Mat::stencil(ctx, sluice::la::Stencil::d2p5, n, n, 1);
  const auto rows = static_cast<std::size_t>(A.rows());
  sluice::la::Vec one(ctx, rows), b(ctx, rows), x(ctx, rows);
  sluice::la::set(one, 1.0);
  sluice::la::mult(A, one, b);

  std::printf("small CG profile: CG + Jacobi, 2D 5-point %d x %d, %d fixed iterations, async\n", n,
              n, iterations);
  std::printf("empty kernel round trip (launch + stream synchronize): %.2f us\n",
              empty_round_trip_us());
  const std::string file =
      (std::filesystem::temp_directory_path() / "sluice_small_cg_profile.txt").string();
  for (const auto& v : variants) {
    const std::string setting = v == "off" || v == "auto" ? v : v + ",require";
    setenv("SLUICE_CUDA_CG_SMALL", setting.c_str(), 1);
    try {
      const double t2 = solve_time(A, b, x, ctx, 2, repeat);
      const double tn = solve_time(A, b, x, ctx, iterations, repeat);
      const double per = (tn - t2) / (iterations - 2);
      std::printf(
          "\n== %-10s solve %.4f ms at %d iterations; fixed cost %.2f us, per iteration %.3f us\n",
          v.c_str(), tn * 1e3, iterations, (t2 - 2 * per) * 1e6, per * 1e6);
      if (v == "off") continue;  // the cooperative kernel has no phase clock
      std::remove(file.c_str());
      setenv("SLUICE_CUDA_CG_SMALL_PROFILE", file.c_str(), 1);
      (void)solve_time(A, b, x, ctx, iterations, 1);  // two solves: the second one is read
      unsetenv("SLUICE_CUDA_CG_SMALL_PROFILE");
      std::ifstream in(file);
      std::string line, last_block;
      for (std::string block; std::getline(in, line);) {
        if (line.rfind("cg_small profile:", 0) == 0) block.clear();
        block += line + "\n";
        last_block = block;
      }
      if (last_block.empty()) {
        std::printf("   (no profile: the small kernel did not take the solve)\n");
      } else {
        std::printf("%s", last_block.c_str());
      }
    } catch (const std::exception& e) {
      unsetenv("SLUICE_CUDA_CG_SMALL_PROFILE");
      std::printf("\n== %-10s not taken: %s\n", v.c_str(), e.what());
    }
  }
  std::remove(file.c_str());
  unsetenv("SLUICE_CUDA_CG_SMALL");
  return 0;
}
