// Host cost of issuing work through a sluice context against raw CUDA (issue 3's goals: an empty
// kernel within 5 % or 0.2 us of cudaLaunchKernel; a cross-context dependency within 10 % of
// cudaEventRecord + cudaStreamWaitEvent). Each pair runs the same CUDA work and synchronizes
// every kSyncEvery iterations in both variants alike, so the queue stays bounded and the
// synchronize cost is shared equally. Google Benchmark measures the loop's wall time.

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "empty_kernel.hpp"
#include "have_gpu.hpp"
#include "sluice/cuda.hpp"
#include "sluice/sluice.hpp"

namespace {

constexpr int kSyncEvery = 1000;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda: %s failed: %s\n", what, cudaGetErrorString(err));
    std::abort();
  }
}

const void* kernel() {
  return reinterpret_cast<const void*>(empty_kernel_ptr());
}

void launch_raw(cudaStream_t s) {
  check(cudaLaunchKernel(kernel(), dim3(1), dim3(1), nullptr, 0, s), "cudaLaunchKernel");
}

void launch_sluice(const sluice::Context& ctx) {
  sluice::cuda::launch(ctx, empty_kernel_ptr(), 1, 1, 0);
}

sluice::Context cuda_context() {
  return sluice::Context(sluice::Device{"cuda", 0});
}

// (a) an empty kernel, raw.
void BM_launch_raw(benchmark::State& state) {
  if (!have_gpu(state)) return;
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  int n = 0;
  for (auto _ : state) {
    launch_raw(s);
    if (++n % kSyncEvery == 0) check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  state.SetItemsProcessed(state.iterations());
}

// (b) the same kernel as an operation of a context.
void BM_launch_sluice(benchmark::State& state) {
  if (!have_gpu(state)) return;
  auto ctx = cuda_context();
  int n = 0;
  for (auto _ : state) {
    launch_sluice(ctx);
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// (c) a cross-context dependency with a kernel on each side, raw.
void BM_dependency_raw(benchmark::State& state) {
  if (!have_gpu(state)) return;
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t e = nullptr;
  check(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  int n = 0;
  for (auto _ : state) {
    launch_raw(a);
    check(cudaEventRecord(e, a), "cudaEventRecord");
    check(cudaStreamWaitEvent(b, e, 0), "cudaStreamWaitEvent");
    launch_raw(b);
    if (++n % kSyncEvery == 0) check(cudaStreamSynchronize(b), "cudaStreamSynchronize");
  }
  check(cudaStreamSynchronize(b), "cudaStreamSynchronize");
  check(cudaEventDestroy(e), "cudaEventDestroy");
  check(cudaStreamDestroy(a), "cudaStreamDestroy");
  check(cudaStreamDestroy(b), "cudaStreamDestroy");
  state.SetItemsProcessed(state.iterations());
}

// (c) the same through sluice: b.wait_for(a) records a pooled event on a and waits on b.
void BM_dependency_sluice(benchmark::State& state) {
  if (!have_gpu(state)) return;
  auto a = cuda_context();
  auto b = cuda_context();
  int n = 0;
  for (auto _ : state) {
    launch_sluice(a);
    b.wait_for(a);
    launch_sluice(b);
    if (++n % kSyncEvery == 0) b.synchronize();
  }
  b.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// Launch plus synchronize: the round trip a blocking call pays.
void BM_roundtrip_raw(benchmark::State& state) {
  if (!have_gpu(state)) return;
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (auto _ : state) {
    launch_raw(s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
}

void BM_roundtrip_sluice(benchmark::State& state) {
  if (!have_gpu(state)) return;
  auto ctx = cuda_context();
  for (auto _ : state) {
    launch_sluice(ctx);
    ctx.synchronize();
  }
}

}  // namespace

BENCHMARK(BM_launch_raw);
BENCHMARK(BM_launch_sluice);
BENCHMARK(BM_dependency_raw);
BENCHMARK(BM_dependency_sluice);
BENCHMARK(BM_roundtrip_raw);
BENCHMARK(BM_roundtrip_sluice);

BENCHMARK_MAIN();
