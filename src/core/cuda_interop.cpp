// The public interop functions of sluice/cuda.hpp, forwarded to the cuda module's CudaInterop
// extension.

#include "core/cuda_interop.hpp"

#include <string>

#include "core/context_impl.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::cuda {
namespace {

// Checked before an operation is numbered: a context of another backend is a clear error, and
// never loads the module.
sluice::detail::CudaInterop& interop(const Context& ctx, const char* what,
                                     std::source_location loc = std::source_location::current()) {
  if (ctx.device().backend != "cuda") {
    throw Error(Errc::unsupported,
                std::string(what) +
                    " needs a context on a cuda device; this context is on another backend "
                    "(create it with Device{\"cuda\", 0})",
                loc);
  }
  return ctx.impl().extension<sluice::detail::CudaInterop>(loc);
}

}  // namespace

cublasContext* blas_handle(const Context& ctx) {
  constexpr const char* what = "sluice::cuda::blas_handle";
  return interop(ctx, what).blas_handle(ctx.impl().stream(), what);
}

cusparseContext* sparse_handle(const Context& ctx) {
  constexpr const char* what = "sluice::cuda::sparse_handle";
  return interop(ctx, what).sparse_handle(ctx.impl().stream(), what);
}

CUstream_st* stream(const Context& ctx) {
  constexpr const char* what = "sluice::cuda::stream";
  return interop(ctx, what).native_stream(ctx.impl().stream(), what);
}

void detail::enqueue_raw(const Context& ctx, std::string_view what, EnqueueFn fn, void* state,
                         std::source_location where) {
  auto& ops = interop(ctx, "sluice::cuda::enqueue", where);
  ctx.impl().issue(what, where,
                   [&](Stream& s, const OpInfo& op) { ops.run_user(s, fn, state, op); });
}

void launch_raw(const Context& ctx, const void* kernel, Dim3 grid, Dim3 block,
                std::size_t shared_bytes, void** args, std::source_location where) {
  if (kernel == nullptr) {
    throw Error(Errc::invalid_argument, "sluice::cuda::launch: null kernel", where);
  }
  auto& ops = interop(ctx, "sluice::cuda::launch", where);
  ctx.impl().issue("kernel", where, [&](Stream& s, const OpInfo& op) {
    ops.launch(s, kernel, grid, block, shared_bytes, args, op);
  });
}

}  // namespace sluice::cuda
