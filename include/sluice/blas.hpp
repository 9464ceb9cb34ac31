#pragma once
/// @file
/// Canned BLAS on a context: gemm (and strided batched gemm), gemv, axpy, dot, nrm2 and scal in
/// float and double, through the backend's `Blas` extension (cuBLAS on cuda with the context's
/// own handle, OpenBLAS on host).
///
/// Each call is one operation of the context: it returns at once, runs in issue order, is ordered
/// against other contexts by the dependency tracker from what it reads and writes, and a failure
/// names the call and its line. Matrices are column-major, as in every BLAS: element (i, j) of a
/// matrix with leading dimension `ld` is at `i + j * ld`. Every buffer must belong to the
/// context's device; sizes are checked before anything is issued (Error(invalid_argument)).
///
/// Thread safety: as for any operation issued on a context.
///
/// @code
/// sluice::Context ctx;
/// sluice::DeviceBuffer<double> A(ctx, m * k), B(ctx, k * n), C(ctx, m * n), r(ctx, 1);
/// sluice::blas::gemm(ctx, Op::none, Op::none, m, n, k, 1.0, A, m, B, k, 0.0, C, m);
/// sluice::blas::nrm2(ctx, C, r);   // r[0] = |C|, still on the device
/// @endcode

#include <cstddef>
#include <cstdint>
#include <source_location>

#include "sluice/canned.hpp"
#include "sluice/memory.hpp"

namespace sluice::blas {

/// op(X): X itself or its transpose.
enum class Op : std::uint8_t { none, transpose };

/// C = alpha * op(A) * op(B) + beta * C, with op(A) m x k, op(B) k x n and C m x n.
template <CannedReal T>
void gemm(const Context& ctx, Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k,
          T alpha, const DeviceBuffer<T>& a, std::size_t lda, const DeviceBuffer<T>& b,
          std::size_t ldb, T beta, DeviceBuffer<T>& c, std::size_t ldc,
          std::source_location loc = std::source_location::current());

/// `batch` gemms in one operation: matrix i of A, B and C starts `stride_a`, `stride_b`,
/// `stride_c` elements after matrix i - 1 (cublas<T>gemmStridedBatched).
template <CannedReal T>
void gemm_batched(const Context& ctx, Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k,
                  T alpha, const DeviceBuffer<T>& a, std::size_t lda, std::size_t stride_a,
                  const DeviceBuffer<T>& b, std::size_t ldb, std::size_t stride_b, T beta,
                  DeviceBuffer<T>& c, std::size_t ldc, std::size_t stride_c, std::size_t batch,
                  std::source_location loc = std::source_location::current());

/// y = alpha * op(A) * x + beta * y, with A m x n (x and y have the lengths op(A) needs).
template <CannedReal T>
void gemv(const Context& ctx, Op op_a, std::size_t m, std::size_t n, T alpha,
          const DeviceBuffer<T>& a, std::size_t lda, const DeviceBuffer<T>& x, T beta,
          DeviceBuffer<T>& y, std::source_location loc = std::source_location::current());

/// y += alpha * x (equal lengths).
template <CannedReal T>
void axpy(const Context& ctx, T alpha, const DeviceBuffer<T>& x, DeviceBuffer<T>& y,
          std::source_location loc = std::source_location::current());

/// result[0] = x . y (equal lengths), written on the device; read it with a copy.
template <CannedReal T>
void dot(const Context& ctx, const DeviceBuffer<T>& x, const DeviceBuffer<T>& y,
         DeviceBuffer<T>& result, std::source_location loc = std::source_location::current());

/// result[0] = the Euclidean norm of x, written on the device.
template <CannedReal T>
void nrm2(const Context& ctx, const DeviceBuffer<T>& x, DeviceBuffer<T>& result,
          std::source_location loc = std::source_location::current());

/// x *= alpha.
template <CannedReal T>
void scal(const Context& ctx, T alpha, DeviceBuffer<T>& x,
          std::source_location loc = std::source_location::current());

}  // namespace sluice::blas
