// The public interop functions of sluice/cuda.hpp.

#include "sluice/cuda.hpp"

#include "backends/cuda/cuda_stream.hpp"
#include "core/context_impl.hpp"
#include "sluice/error.hpp"

namespace sluice::cuda {
namespace {

::sluice::detail::cuda::CudaStream& cuda_stream_of(const Context& ctx, const char* what) {
  return ::sluice::detail::cuda::as_cuda_stream(ctx.impl().stream(), what);
}

}  // namespace

cublasContext* blas_handle(const Context& ctx) {
  return cuda_stream_of(ctx, "sluice::cuda::blas_handle").blas();
}

cusparseContext* sparse_handle(const Context& ctx) {
  return cuda_stream_of(ctx, "sluice::cuda::sparse_handle").sparse();
}

CUstream_st* stream(const Context& ctx) {
  return cuda_stream_of(ctx, "sluice::cuda::stream").handle();
}

void detail::enqueue_raw(const Context& ctx, std::string_view what, EnqueueFn fn, void* state,
                         std::source_location where) {
  auto& s = cuda_stream_of(ctx, "sluice::cuda::enqueue");  // checked before an op is numbered
  ctx.impl().issue(what, where, [&](Stream&, const OpInfo& op) { s.run_user(fn, state, op); });
}

void launch_raw(const Context& ctx, const void* kernel, Dim3 grid, Dim3 block,
                std::size_t shared_bytes, void** args, std::source_location where) {
  if (kernel == nullptr) {
    throw Error(Errc::invalid_argument, "sluice::cuda::launch: null kernel", where);
  }
  auto& s = cuda_stream_of(ctx, "sluice::cuda::launch");
  ctx.impl().issue("kernel", where, [&](Stream&, const OpInfo& op) {
    s.launch(kernel, dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), shared_bytes,
             args, op);
  });
}

}  // namespace sluice::cuda
