// The cuda backend's DistKernels: the distributed solvers' finalize step and the packing of
// ghost values as kernels on the context's stream, and the NCCL engine (nccl_engine.cpp).
// Compiled with --fmad=false like la's kernels: the solver logic must round as the host's does.

#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "dist/combine.hpp"
#include "dist/cuda/dist_kernels.hpp"
#include "dist/cuda/nccl_engine.hpp"
#include "la/ksp_logic.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::detail::dist {
namespace {

using sluice::detail::cuda::CudaStream;

/// One thread: the solver state is one small struct, the gathered sums a few doubles a rank.
__global__ void finalize_kernel(DistFinalizeArgs a) {
  if (!ksp_logic::guard_runs(a.state, a.tf_dx)) return;
  double sums[la_math::kMaxSums];
  dist_math::combine(a.gathered, a.ranks, a.parts, sums, a.split);
  ksp_logic::finalize(a.finalize, *a.state, sums);
}

__global__ void gather_kernel(double* dst, const double* src, const std::int32_t* index,
                              std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[index[i]];
  }
}

__global__ void signature_kernel(std::uint64_t* dst, SignatureWords words) {
  for (std::size_t i = 0; i < kSignatureWords; ++i) dst[i] = words.w[i];
}

/// Runs `f(stream)` as operation `op` on `s`, its device current.
template <class F>
void run_on(Stream& s, const OpInfo& op, F&& f) {
  auto call = [](void* state, CUstream_st* stream) { (*static_cast<F*>(state))(stream); };
  static_cast<CudaStream&>(s).run_user(call, static_cast<void*>(&f), op);
}

void check_launch(const OpInfo& op) {
  cuda::check(cudaGetLastError(), "kernel launch", op.where);
}

class CudaDistKernels final : public DistKernels {
 public:
  void finalize(Stream& stream, const DistFinalizeArgs& args, const OpInfo& op) override {
    run_on(stream, op, [&](cudaStream_t s) {
      finalize_kernel<<<1, 1, 0, s>>>(args);
      check_launch(op);
    });
  }

  void gather(Stream& stream, double* dst, const double* src, const std::int32_t* index,
              std::size_t n, const OpInfo& op) override {
    if (n == 0) return;
    run_on(stream, op, [&](cudaStream_t s) {
      constexpr unsigned kThreads = 256;
      const auto blocks =
          static_cast<unsigned>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 4096));
      gather_kernel<<<blocks, kThreads, 0, s>>>(dst, src, index, n);
      check_launch(op);
    });
  }

  std::vector<std::byte> unique_id() override { return nccl_unique_id(); }

  std::shared_ptr<DistEngine> create_engine(const DistEngineConfig& config) override {
    return make_nccl_engine(config);
  }
};

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(finalize_kernel);

}  // namespace

void write_signature(cudaStream_t stream, std::uint64_t* dst, const SignatureWords& words) {
  signature_kernel<<<1, 1, 0, stream>>>(dst, words);
  cuda::check(cudaGetLastError(), "kernel launch (dist signature)",
              std::source_location::current());
}

DistKernels& cuda_dist_kernels() {
  static CudaDistKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::dist
