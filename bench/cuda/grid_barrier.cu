#include "grid_barrier.hpp"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;
constexpr int kMaxPartials = 8192;

__device__ double warp_sum(double v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

/// Partials through L1 (plain loads, as cg_block_kernel's finish_step) or L2 alone (`__ldcg`).
template <bool kShared>
__device__ double load(const double* p) {
  return kShared ? *p : __ldcg(p);
}

/// The sum of partials[0, n) in block order, valid in every thread: the shape of la_kernels.cu's
/// combine_partials followed by block_combine (one round of loads up to 4 x 256 single sums,
/// else rounds of four), with the total broadcast through shared memory.
template <bool kShared>
__device__ double combine(const double* partials, int n, int t) {
  __shared__ double warps[kThreads / 32];
  __shared__ double total;
  double v = 0;
  if (n <= 4 * kThreads) {
    double u[4];
    for (int k = 0; k < 4; ++k) {
      u[k] = t + k * kThreads < n ? load<kShared>(&partials[t + k * kThreads]) : 0.0;
    }
    for (int k = 0; k < 4; ++k) v += u[k];
  } else {
    int b = t;
    for (; b + 3 * kThreads < n; b += 4 * kThreads) {
      double u[4];
      for (int k = 0; k < 4; ++k) u[k] = load<kShared>(&partials[b + k * kThreads]);
      for (int k = 0; k < 4; ++k) v += u[k];
    }
    for (; b < n; b += kThreads) v += load<kShared>(&partials[b]);
  }
  v = warp_sum(v);
  if (t % 32 == 0) warps[t / 32] = v;
  __syncthreads();
  if (t == 0) {
    double s = 0;
    for (double w : warps) s += w;
    total = s;
  }
  __syncthreads();
  return total;
}

template <bool kShared>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    barrier_kernel(double* partials, int barriers, int per_block, unsigned* wrong) {
  const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const int t = static_cast<int>(threadIdx.x);
  const int n = per_block * static_cast<int>(gridDim.x);
  for (int k = 0; k < barriers; ++k) {
    double* part = partials + (k % 2) * kMaxPartials;  // two buffers: no block overwrites a
                                                       // partial another still reads
    if (t == 0) {
      for (int j = 0; j < per_block; ++j) part[blockIdx.x * per_block + j] = k + j;
    }
    grid.sync();
    if (n > 0) {
      // Small integers: exact in any order. A stale partial (say an L1 line from two barriers
      // before) gives another sum.
      const double sum = combine<kShared>(part, n, t);
      double expected = 0;
      for (int j = 0; j < per_block; ++j) expected += static_cast<double>(k + j) * gridDim.x;
      if (t == 0 && sum != expected) atomicAdd(wrong, 1u);
    }
  }
}

}  // namespace

GridBarrierRun run_grid_barriers(int barriers, int partials_per_block, bool through_l1) {
  const void* kernel = through_l1 ? reinterpret_cast<const void*>(barrier_kernel<true>)
                                  : reinterpret_cast<const void*>(barrier_kernel<false>);
  GridBarrierRun run;
  auto ok = [&](cudaError_t err, const char* what) {
    if (err != cudaSuccess && run.error.empty()) {
      run.error = std::string(what) + ": " + cudaGetErrorString(err);
    }
    return err == cudaSuccess;
  };
  int sms = 0, resident = 0;
  if (!ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute")) return run;
  if (!ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, 0),
          "occupancy")) {
    return run;
  }
  run.blocks = sms * (resident < kBlocksPerSm ? resident : kBlocksPerSm);
  if (partials_per_block * run.blocks > kMaxPartials) {
    run.error = "too many partials";
    return run;
  }
  double* partials = nullptr;
  unsigned* wrong = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (ok(cudaMalloc(&partials, sizeof(double) * 2 * kMaxPartials), "cudaMalloc") &&
      ok(cudaMalloc(&wrong, sizeof(unsigned)), "cudaMalloc") &&
      ok(cudaMemset(wrong, 0, sizeof(unsigned)), "cudaMemset") &&
      ok(cudaEventCreate(&start), "event") && ok(cudaEventCreate(&stop), "event")) {
    void* args[] = {&partials, &barriers, &partials_per_block, &wrong};
    float ms = 0;
    if (ok(cudaEventRecord(start), "cudaEventRecord") &&
        ok(cudaLaunchCooperativeKernel(kernel, dim3(run.blocks), dim3(kThreads), args, 0, nullptr),
           "cudaLaunchCooperativeKernel") &&
        ok(cudaEventRecord(stop), "cudaEventRecord") &&
        ok(cudaEventSynchronize(stop), "cudaEventSynchronize") &&
        ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime")) {
      run.seconds = ms * 1e-3;
    }
    unsigned wrong_sums = 0;
    if (ok(cudaMemcpy(&wrong_sums, wrong, sizeof(unsigned), cudaMemcpyDeviceToHost),
           "cudaMemcpy") &&
        wrong_sums != 0) {
      run.error = std::to_string(wrong_sums) + " sums read a stale partial";
    }
  }
  cudaFree(partials);
  cudaFree(wrong);
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  return run;
}
