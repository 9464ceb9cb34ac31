#pragma once
/// @file
/// cuda-backend interop: a context's cuBLAS and cuSPARSE handles, its `cudaStream_t`, and kernel
/// launches issued as operations of a context.
///
/// The functions are part of libsluice and work wherever the cuda module (libsluice-cuda.so) is
/// loaded (`sluice::backends()` lists "cuda" with devices); on a context of another backend they
/// throw Error(unsupported). A program with its own CUDA code (kernels launched through `launch`,
/// streams shared with a context) links CMake's `sluice::cuda` and builds its .cu files with the
/// shared CUDA runtime (`CUDA_RUNTIME_LIBRARY Shared`, nvcc `-cudart shared`): the module uses
/// that one, and a kernel registered with another copy of the runtime cannot be launched here.
/// Includes no CUDA header, so plain C++ translation units can use it: the handle types are
/// declared here under the names CUDA gives them (`cublasHandle_t` is `cublasContext*`,
/// `cusparseHandle_t` is `cusparseContext*`, `cudaStream_t` is `CUstream_st*`), so the results
/// pass straight to cuBLAS, cuSPARSE and the CUDA runtime.
///
/// How the cuda backend carries out sluice's semantics, where it differs in cost or detail:
/// - Host tasks run on the CUDA runtime's host-function thread (cudaLaunchHostFunc), which all
///   cuda contexts of the process share: host tasks of different cuda contexts do not run at the
///   same time, and a host task must not call CUDA (nor issue or wait for cuda work, nor drop the
///   last handle of a cuda context; sluice throws Error(invalid_state) there instead of hanging).
/// - A cuda context waiting for an event of another backend (e.g. a host context) blocks that
///   thread until the event completes, delaying other cuda contexts' host tasks meanwhile.
/// - After a host task failed, later host tasks of the context are skipped (and counted in
///   WorkFailed::skipped()); device work already queued behind it (copies, kernels) still runs.
/// - Copies between device memory and pageable host memory go through pinned staging blocks in
///   stream order, so issuing them never blocks; pinned memory (PinnedBuffer) skips the staging.
/// - A device fault (e.g. an illegal address in a kernel) is thrown by the next synchronize as
///   Error(backend_failure), naming the context's operations in flight; CUDA makes it sticky.
///
/// @code
/// // in a .cu file
/// __global__ void scale(float* x, float a, int n);
/// sluice::Context ctx(sluice::Device{"cuda", 0});
/// sluice::DeviceBuffer<float> x(ctx, n);
/// sluice::cuda::launch(ctx, scale, (n + 255) / 256, 256, 0, x.data(), 2.0f, n);
/// cublasSnrm2(sluice::cuda::blas_handle(ctx), n, x.data(), 1, &norm);  // on ctx's stream
/// @endcode

#include <array>
#include <cstddef>
#include <source_location>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "sluice/context.hpp"

struct cublasContext;
struct cusparseContext;
struct CUstream_st;

namespace sluice::cuda {

/// The context's cuBLAS handle, created on first use, bound to the context's stream and owned by
/// the context (destroyed with it). Do not call cublasSetStream on it, do not destroy it, and do
/// not use it after the context is gone: sluice keeps work issued through it on the context's
/// stream, in order with the context's other work.
///
/// cuBLAS needs the context's device to be current when called: `enqueue` makes it so; outside
/// it, call cudaSetDevice yourself on machines with several GPUs.
/// Calls through the handle are not numbered sluice operations: on a `StreamKind::blocking`
/// context they are not completed when the call returns (call `ctx.synchronize()`, or issue them
/// through `enqueue`). Throws Error(unsupported) for a context of another backend.
[[nodiscard]] cublasContext* blas_handle(const Context& ctx);

/// The context's cuSPARSE handle; the same rules as `blas_handle` (no cusparseSetStream, no
/// cusparseDestroy).
[[nodiscard]] cusparseContext* sparse_handle(const Context& ctx);

/// The context's `cudaStream_t`, for interop. The rules of `Context::native_handle` apply: never
/// destroy it; order your own work on it with the context's (e.g. by `enqueue`).
/// Throws Error(unsupported) for a context of another backend.
[[nodiscard]] CUstream_st* stream(const Context& ctx);

namespace detail {
using EnqueueFn = void (*)(void* state, CUstream_st* stream);
void enqueue_raw(const Context& ctx, std::string_view what, EnqueueFn fn, void* state,
                 std::source_location where);
}  // namespace detail

/// Runs `f(cudaStream_t)` as one operation of `ctx`: numbered, in issue order with other threads
/// issuing to `ctx`, named `what` in error messages, and on a blocking context completed before
/// this returns. `f` enqueues work on the stream (cuBLAS calls through `blas_handle`, raw kernel
/// launches, ...) and must not block on it.
template <class F>
void enqueue(const Context& ctx, std::string_view what, F&& f,
             std::source_location where = std::source_location::current()) {
  auto call = [](void* state, CUstream_st* s) {
    (*static_cast<std::remove_reference_t<F>*>(state))(s);
  };
  detail::enqueue_raw(ctx, what, call, const_cast<void*>(static_cast<const void*>(&f)), where);
}

/// Launch dimensions; converts from `dim3` or any type with members x, y, z.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3() = default;
  constexpr Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  template <class D>
  requires requires(const D& d) {
    d.x;
    d.y;
    d.z;
  }
  constexpr Dim3(const D& d)
      : x(static_cast<unsigned>(d.x)),
        y(static_cast<unsigned>(d.y)),
        z(static_cast<unsigned>(d.z)) {}
};

/// The grid of a launch. It also records where the launch was written, so that a kernel named in
/// a device-fault message points at the caller's line (a default argument after the kernel's
/// argument pack is impossible).
struct Grid : Dim3 {
  std::source_location where;
  Grid(unsigned x_, unsigned y_ = 1, unsigned z_ = 1,
       std::source_location w = std::source_location::current())
      : Dim3(x_, y_, z_), where(w) {}
  template <class D>
  requires std::is_constructible_v<Dim3, const D&> &&
      (!std::is_integral_v<D>)Grid(const D& d,
                                   std::source_location w = std::source_location::current())
      : Dim3(d), where(w) {}
};

/// Launches `kernel` with `args` as one operation of `ctx` (in issue order, numbered, named
/// "kernel" in error messages; completed before returning on a blocking context). Each argument
/// is converted to the kernel's parameter type first, so literals of another type are safe.
/// Launch errors (bad dimensions, a kernel not built for this GPU) throw at once; faults of the
/// running kernel are reported at the next synchronize.
template <class... Params, class... Args>
void launch(const Context& ctx, void (*kernel)(Params...), Grid grid, Dim3 block,
            std::size_t shared_bytes, Args&&... args);

/// The non-template part of `launch`: `args` points at one value per kernel parameter.
void launch_raw(const Context& ctx, const void* kernel, Dim3 grid, Dim3 block,
                std::size_t shared_bytes, void** args, std::source_location where);

template <class... Params, class... Args>
void launch(const Context& ctx, void (*kernel)(Params...), Grid grid, Dim3 block,
            std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "sluice::cuda::launch: pass exactly one argument per kernel parameter");
  static_assert(
      (std::is_convertible_v<Args&&, std::remove_cvref_t<Params>> && ...),
      "sluice::cuda::launch: an argument does not convert to the kernel's parameter type");
  // Exact parameter types: cudaLaunchKernel copies sizeof(parameter) bytes from each pointer.
  std::tuple<std::remove_cvref_t<Params>...> values(std::forward<Args>(args)...);
  std::apply(
      [&](auto&... v) {
        std::array<void*, sizeof...(Params)> pointers{static_cast<void*>(&v)...};
        launch_raw(ctx, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes,
                   pointers.data(), grid.where);
      },
      values);
}

}  // namespace sluice::cuda
