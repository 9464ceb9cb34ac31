#include "step_end.hpp"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace {

namespace cgs = cooperative_groups;

__device__ double warp_sum(double v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

template <bool kCluster>
__device__ double* in_block(double* local, unsigned rank, unsigned b) {
  if (kCluster && b != rank) return cgs::this_cluster().map_shared_rank(local, b);
  return local;
}

/// `steps` step ends of cg_small_kernel's shape (see step_end.hpp). Two buffers of unit sums, used
/// in turn: the small kernel has two steps (and so two barriers) between writes of one buffer.
template <bool kCluster>
__global__ void __launch_bounds__(1024, 1)
    step_end_kernel(int steps, unsigned units, unsigned* wrong) {
  extern __shared__ double sums[];  // 2 x units
  __shared__ double state;
  const unsigned blocks = kCluster ? cgs::this_cluster().num_blocks() : 1;
  const unsigned rank = kCluster ? cgs::this_cluster().block_rank() : 0;
  const unsigned t = threadIdx.x, lane = t % 32;
  const unsigned all_warps = blocks * blockDim.x / 32;
  const unsigned warp = rank * (blockDim.x / 32) + t / 32;
  if constexpr (kCluster) cgs::this_cluster().sync();
  double seen = 0;
  for (int k = 0; k < steps; ++k) {
    double* S = sums + (k % 2) * units;
    for (unsigned u = warp; u < units; u += all_warps) {
      const double v = lane == 0 ? static_cast<double>(k + u) : 0.0;  // small integers: exact
      const double sum = __shfl_sync(0xffffffffu, warp_sum(v), 0);
      if (lane < blocks) in_block<kCluster>(S, rank, lane)[u] = sum;
    }
    if constexpr (kCluster) {
      cgs::this_cluster().sync();
    } else {
      __syncthreads();
    }
    if (t < 32) {  // warp 0: the step blocks' partials (8 units each), then the total
      double part = 0;
      for (unsigned b = t; b < units / 8; b += 32) {
        double s = 0;
        for (int w = 0; w < 8; ++w) s += S[b * 8 + w];
        part += s;
      }
      part = warp_sum(part);
      if (t == 0) {
        const double want = static_cast<double>(units) * k + units * (units - 1.0) / 2;
        if (part != want) atomicAdd(wrong, 1u);
        state = part / (k + 1.0);  // the scalar logic's division
      }
    }
    __syncthreads();
    seen += state;  // every thread reads the step's scalar
  }
  if (seen < 0) atomicAdd(wrong, 1u);                  // never: keeps the reads
  if constexpr (kCluster) cgs::this_cluster().sync();  // no block leaves while others reach it
}

}  // namespace

StepEndRun run_step_ends(int steps, int blocks, int threads, int units) {
  StepEndRun run;
  auto ok = [&](cudaError_t err, const char* what) {
    if (err != cudaSuccess && run.error.empty()) {
      run.error = std::string(what) + ": " + cudaGetErrorString(err);
    }
    return err == cudaSuccess;
  };
  const bool cluster = blocks > 1;
  const void* kernel = cluster ? reinterpret_cast<const void*>(step_end_kernel<true>)
                               : reinterpret_cast<const void*>(step_end_kernel<false>);
  const std::size_t smem = sizeof(double) * 2 * static_cast<std::size_t>(units);
  if (cluster &&
      !ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
          "cudaFuncSetAttribute")) {
    return run;
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(blocks);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.attrs = cluster ? &attr : nullptr;
  config.numAttrs = cluster ? 1 : 0;
  if (cluster) {
    int fit = 0;
    if (!ok(cudaOccupancyMaxActiveClusters(&fit, kernel, &config),
            "cudaOccupancyMaxActiveClusters"))
      return run;
    if (fit < 1) {
      run.error = "a cluster of " + std::to_string(blocks) + " blocks is not resident here";
      return run;
    }
  }
  unsigned* wrong = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (ok(cudaMalloc(&wrong, sizeof(unsigned)), "cudaMalloc") &&
      ok(cudaMemset(wrong, 0, sizeof(unsigned)), "cudaMemset") &&
      ok(cudaEventCreate(&start), "event") && ok(cudaEventCreate(&stop), "event")) {
    const auto n = static_cast<unsigned>(units);
    float ms = 0;
    const cudaError_t launched =
        cluster ? cudaLaunchKernelEx(&config, step_end_kernel<true>, steps, n, wrong)
                : cudaLaunchKernelEx(&config, step_end_kernel<false>, steps, n, wrong);
    // The launch above warms up; the timed one follows.
    if (ok(launched, "cudaLaunchKernelEx") && ok(cudaDeviceSynchronize(), "warm-up") &&
        ok(cudaEventRecord(start), "cudaEventRecord") &&
        ok(cluster ? cudaLaunchKernelEx(&config, step_end_kernel<true>, steps, n, wrong)
                   : cudaLaunchKernelEx(&config, step_end_kernel<false>, steps, n, wrong),
           "cudaLaunchKernelEx") &&
        ok(cudaEventRecord(stop), "cudaEventRecord") &&
        ok(cudaEventSynchronize(stop), "cudaEventSynchronize") &&
        ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime")) {
      run.seconds = ms * 1e-3;
    }
    unsigned wrong_sums = 0;
    if (ok(cudaMemcpy(&wrong_sums, wrong, sizeof(unsigned), cudaMemcpyDeviceToHost),
           "cudaMemcpy") &&
        wrong_sums != 0) {
      run.error = std::to_string(wrong_sums) + " step sums were wrong";
    }
  }
  cudaFree(wrong);
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  return run;
}
