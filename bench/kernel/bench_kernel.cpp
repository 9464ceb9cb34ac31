// The kernel layer's costs on the GPU (docs/kernels.md): the host cost of a typed launch against
// a raw `<<<>>>` launch of the same two-parameter kernel on the same stream, and NVRTC's cold
// compile against a load from the memory and disk caches.
//
// Launch benchmarks time the host side only: each iteration enqueues one launch; the stream is
// drained every kDrain launches (inside the timing, the same for every variant) so that the
// launch queue never fills and blocks.

#include <benchmark/benchmark.h>

#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>

#include "../cuda/have_gpu.hpp"
#include "raw_launch.hpp"
#include "sluice/cuda.hpp"
#include "sluice/kernel.hpp"
#include "sluice/sluice.hpp"

namespace {

constexpr int kDrain = 512;
constexpr const char* kSource = R"(extern "C" __global__ void empty_args(float, float*) {})";

void BM_raw_launch(benchmark::State& state) {
  if (!have_gpu(state)) return;
  sluice::Context ctx(sluice::Device{"cuda", 0});
  sluice::DeviceBuffer<float> y(ctx, 1);
  CUstream_st* s = sluice::cuda::stream(ctx);
  int n = 0;
  for (auto _ : state) {
    raw_launch(s, 1.0f, y.data());
    if (++n % kDrain == 0) ctx.synchronize();
  }
  ctx.synchronize();
}

void BM_cuda_launch(benchmark::State& state) {  // sluice::cuda::launch of a __global__ function
  if (!have_gpu(state)) return;
  sluice::Context ctx(sluice::Device{"cuda", 0});
  sluice::DeviceBuffer<float> y(ctx, 1);
  int n = 0;
  for (auto _ : state) {
    sluice::cuda::launch(ctx, empty_args_ptr(), 1, 1, 0, 1.0f, y.data());
    if (++n % kDrain == 0) ctx.synchronize();
  }
  ctx.synchronize();
}

// range(0): 0 a raw pointer (untracked), 1 write(y) (tracked by the dependency tracker).
void BM_typed_launch(benchmark::State& state) {
  if (!have_gpu(state)) return;
  sluice::Context ctx(sluice::Device{"cuda", 0});
  sluice::KernelSpec spec("empty_args", 2);
  spec.add_cuda_source(kSource);
  sluice::TypedKernel<float, float*> kernel(ctx, spec);
  sluice::DeviceBuffer<float> y(ctx, 1);
  const bool tracked = state.range(0) != 0;
  int n = 0;
  for (auto _ : state) {
    if (tracked) {
      kernel.launch(ctx, 1, 1, 1.0f, sluice::write(y));
    } else {
      kernel.launch(ctx, 1, 1, 1.0f, y.data());
    }
    if (++n % kDrain == 0) ctx.synchronize();
  }
  ctx.synchronize();
}

std::filesystem::path scratch_cache() {
  auto dir = std::filesystem::temp_directory_path() /
             ("sluice-bench-kcache-" + std::to_string(::getpid()));
  sluice::kernel_cache::set_directory(dir);
  return dir;
}

// A source no cache has seen: NVRTC compiles (and the disk cache is written).
void BM_nvrtc_cold_compile(benchmark::State& state) {
  auto dir = scratch_cache();
  static std::atomic<int> unique{0};
  for (auto _ : state) {
    const std::string src = std::string(kSource) + "\n// " + std::to_string(unique++);
    auto c = sluice::kernel_cache::compile(src, "empty_args", {}, 90);
    benchmark::DoNotOptimize(c.image.data());
  }
  std::filesystem::remove_all(dir);
}

// The same source again. range(0): 0 from the memory cache, 1 from disk (as a new process).
void BM_nvrtc_cached(benchmark::State& state) {
  auto dir = scratch_cache();
  (void)sluice::kernel_cache::compile(kSource, "empty_args", {}, 90);
  const bool disk = state.range(0) != 0;
  for (auto _ : state) {
    if (disk) sluice::kernel_cache::clear_memory();
    auto c = sluice::kernel_cache::compile(kSource, "empty_args", {}, 90);
    benchmark::DoNotOptimize(c.image.data());
  }
  std::filesystem::remove_all(dir);
}

// A whole TypedKernel load from source with the cache warm: cache lookup, cudaLibraryLoadData,
// the parameter checks. range(0) as BM_nvrtc_cached.
void BM_typed_kernel_load_cached(benchmark::State& state) {
  if (!have_gpu(state)) return;
  auto dir = scratch_cache();
  sluice::Context ctx(sluice::Device{"cuda", 0});
  sluice::KernelSpec spec("empty_args", 2);
  spec.add_cuda_source(kSource);
  { sluice::TypedKernel<float, float*> warm(ctx, spec); }
  const bool disk = state.range(0) != 0;
  for (auto _ : state) {
    if (disk) sluice::kernel_cache::clear_memory();
    sluice::TypedKernel<float, float*> k(ctx, spec);
    benchmark::DoNotOptimize(&k);
    state.PauseTiming();  // unloading (it waits for the device) is not part of a load
    k = {};
    state.ResumeTiming();
  }
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_raw_launch)->Repetitions(5)->ReportAggregatesOnly()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cuda_launch)->Repetitions(5)->ReportAggregatesOnly()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_typed_launch)
    ->ArgName("tracked")
    ->Arg(0)
    ->Arg(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_nvrtc_cold_compile)->Iterations(10)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_nvrtc_cached)
    ->ArgName("disk")
    ->Arg(0)
    ->Arg(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_typed_kernel_load_cached)
    ->ArgName("disk")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(200)
    ->Repetitions(5)
    ->ReportAggregatesOnly()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
