// The canned BLAS (sluice/blas.hpp): checks, tracking, and the built-in Blas extensions.

#include "sluice/blas.hpp"

#include <algorithm>
#include <string>

#include "kernel/canned_common.hpp"
#include "kernel/host/canned.hpp"
#include "sluice/extension.hpp"

namespace sluice {

namespace {
template <class E>
std::shared_ptr<E> unowned(E& e) {
  return {std::shared_ptr<void>(), &e};
}
}  // namespace

void Blas::register_builtins() {
  register_extension<Blas>("host", unowned(detail::host::canned_blas()));
}

namespace blas {
namespace {

using detail::canned::check_devices;
using detail::canned::check_size;
using detail::canned::checked_int;
using detail::canned::operand;
using detail::canned::Operand;

// A column-major matrix of `rows` x `cols` with leading dimension `ld` in `o`.
// With `first` > 0 it is the last matrix of a batch, starting at element `first`.
void check_matrix(std::string_view what, const Operand& o, std::size_t rows, std::size_t cols,
                  std::size_t ld, std::string_view ld_name, std::source_location loc,
                  std::size_t first = 0) {
  checked_int(what, ld_name, ld, loc);
  if (ld < std::max<std::size_t>(1, rows)) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": " + std::string(ld_name) + " = " + std::to_string(ld) +
                    " is less than the " + std::to_string(rows) + " rows of " +
                    std::string(o.name) + " (column-major storage needs ld >= rows)",
                loc);
  }
  if (rows == 0 || cols == 0) return;
  const auto needed = first + detail::canned::checked_mul(what, ld, cols - 1, loc) + rows;
  check_size(what, o, needed,
             "a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix with " +
                 std::string(ld_name) + " " + std::to_string(ld) +
                 (first > 0 ? ", the last of the batch starting at element " + std::to_string(first)
                            : std::string()),
             loc);
}

template <class T>
void gemm_impl(std::string_view what, const Context& ctx, Op op_a, Op op_b, std::size_t m,
               std::size_t n, std::size_t k, T alpha, const DeviceBuffer<T>& a, std::size_t lda,
               std::size_t stride_a, const DeviceBuffer<T>& b, std::size_t ldb,
               std::size_t stride_b, T beta, DeviceBuffer<T>& c, std::size_t ldc,
               std::size_t stride_c, std::size_t batch, std::source_location loc) {
  const Operand A = operand("A", a, Access::read), B = operand("B", b, Access::read);
  const Operand C = operand("C", c, beta == T(0) ? Access::write : Access::read_write);
  check_devices(ctx, what, {A, B, C}, loc);
  for (auto [name, v] : {std::pair{"m", m}, {"n", n}, {"k", k}, {"batch", batch}}) {
    checked_int(what, name, v, loc);
  }
  if (batch == 0 || m == 0 || n == 0) return;
  const bool ta = op_a == Op::transpose, tb = op_b == Op::transpose;
  // Each matrix of the batch must fit, the last one starting (batch - 1) strides in.
  auto last = [&](std::size_t stride) {
    return detail::canned::checked_mul(what, batch - 1, stride, loc);
  };
  check_matrix(what, A, ta ? k : m, ta ? m : k, lda, "lda", loc, last(stride_a));
  check_matrix(what, B, tb ? n : k, tb ? k : n, ldb, "ldb", loc, last(stride_b));
  check_matrix(what, C, m, n, ldc, "ldc", loc, last(stride_c));
  if (batch > 1) {
    for (auto [name, v] :
         {std::pair{"stride_a", stride_a}, {"stride_b", stride_b}, {"stride_c", stride_c}}) {
      checked_int(what, name, v, loc);
    }
  }
  BlasGemmArgs args{detail::canned::precision_of<T>(),
                    ta,
                    tb,
                    static_cast<std::int64_t>(m),
                    static_cast<std::int64_t>(n),
                    static_cast<std::int64_t>(k),
                    static_cast<double>(alpha),
                    static_cast<double>(beta),
                    a.data(),
                    static_cast<std::int64_t>(lda),
                    static_cast<std::int64_t>(stride_a),
                    b.data(),
                    static_cast<std::int64_t>(ldb),
                    static_cast<std::int64_t>(stride_b),
                    c.data(),
                    static_cast<std::int64_t>(ldc),
                    static_cast<std::int64_t>(stride_c),
                    static_cast<std::int64_t>(batch)};
  auto& impl = extension<Blas>(ctx, loc);
  detail::canned::issue(ctx, {A, B, C}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.gemm(s, args, op); });
}

template <class T>
void check_same_length(std::string_view what, const DeviceBuffer<T>& x, const DeviceBuffer<T>& y,
                       std::source_location loc) {
  if (x.size() != y.size()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": x has " + std::to_string(x.size()) + " elements but y has " +
                    std::to_string(y.size()) + "; pass vectors of equal length",
                loc);
  }
}

template <class T>
void check_result(std::string_view what, const DeviceBuffer<T>& result, std::source_location loc) {
  if (result.empty()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the result buffer is empty; pass one of at least 1 element",
                loc);
  }
}

}  // namespace

template <CannedReal T>
void gemm(const Context& ctx, Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k,
          T alpha, const DeviceBuffer<T>& a, std::size_t lda, const DeviceBuffer<T>& b,
          std::size_t ldb, T beta, DeviceBuffer<T>& c, std::size_t ldc, std::source_location loc) {
  gemm_impl<T>("blas::gemm", ctx, op_a, op_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0,
               1, loc);
}

template <CannedReal T>
void gemm_batched(const Context& ctx, Op op_a, Op op_b, std::size_t m, std::size_t n, std::size_t k,
                  T alpha, const DeviceBuffer<T>& a, std::size_t lda, std::size_t stride_a,
                  const DeviceBuffer<T>& b, std::size_t ldb, std::size_t stride_b, T beta,
                  DeviceBuffer<T>& c, std::size_t ldc, std::size_t stride_c, std::size_t batch,
                  std::source_location loc) {
  gemm_impl<T>("blas::gemm_batched", ctx, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
               stride_b, beta, c, ldc, stride_c, batch, loc);
}

template <CannedReal T>
void gemv(const Context& ctx, Op op_a, std::size_t m, std::size_t n, T alpha,
          const DeviceBuffer<T>& a, std::size_t lda, const DeviceBuffer<T>& x, T beta,
          DeviceBuffer<T>& y, std::source_location loc) {
  constexpr std::string_view what = "blas::gemv";
  const Operand A = operand("A", a, Access::read), X = operand("x", x, Access::read);
  const Operand Y = operand("y", y, beta == T(0) ? Access::write : Access::read_write);
  check_devices(ctx, what, {A, X, Y}, loc);
  checked_int(what, "m", m, loc);
  checked_int(what, "n", n, loc);
  const bool t = op_a == Op::transpose;
  const std::size_t x_len = t ? m : n, y_len = t ? n : m;
  check_matrix(what, A, m, n, lda, "lda", loc);
  check_size(what, X, x_len, t ? "op(A) = A^T with m rows" : "op(A) = A with n columns", loc);
  check_size(what, Y, y_len, t ? "op(A) = A^T with n columns" : "op(A) = A with m rows", loc);
  if (y_len == 0) return;
  BlasGemvArgs args{detail::canned::precision_of<T>(),
                    t,
                    static_cast<std::int64_t>(m),
                    static_cast<std::int64_t>(n),
                    static_cast<double>(alpha),
                    static_cast<double>(beta),
                    a.data(),
                    static_cast<std::int64_t>(lda),
                    x.data(),
                    y.data()};
  auto& impl = extension<Blas>(ctx, loc);
  detail::canned::issue(ctx, {A, X, Y}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.gemv(s, args, op); });
}

template <CannedReal T>
void axpy(const Context& ctx, T alpha, const DeviceBuffer<T>& x, DeviceBuffer<T>& y,
          std::source_location loc) {
  constexpr std::string_view what = "blas::axpy";
  const Operand X = operand("x", x, Access::read), Y = operand("y", y, Access::read_write);
  check_devices(ctx, what, {X, Y}, loc);
  check_same_length(what, x, y, loc);
  checked_int(what, "n", x.size(), loc);
  if (x.empty()) return;
  BlasVecArgs args{detail::canned::precision_of<T>(),
                   static_cast<std::int64_t>(x.size()),
                   static_cast<double>(alpha),
                   x.data(),
                   y.data(),
                   nullptr};
  auto& impl = extension<Blas>(ctx, loc);
  detail::canned::issue(ctx, {X, Y}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.axpy(s, args, op); });
}

template <CannedReal T>
void dot(const Context& ctx, const DeviceBuffer<T>& x, const DeviceBuffer<T>& y,
         DeviceBuffer<T>& result, std::source_location loc) {
  constexpr std::string_view what = "blas::dot";
  const Operand X = operand("x", x, Access::read), Y = operand("y", y, Access::read);
  const Operand R = operand("result", result, Access::write);
  check_devices(ctx, what, {X, Y, R}, loc);
  check_same_length(what, x, y, loc);
  check_result(what, result, loc);
  checked_int(what, "n", x.size(), loc);
  BlasVecArgs args{detail::canned::precision_of<T>(),
                   static_cast<std::int64_t>(x.size()),
                   1,
                   x.data(),
                   y.data(),
                   result.data()};
  auto& impl = extension<Blas>(ctx, loc);
  detail::canned::issue(ctx, {X, Y, R}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.dot(s, args, op); });
}

template <CannedReal T>
void nrm2(const Context& ctx, const DeviceBuffer<T>& x, DeviceBuffer<T>& result,
          std::source_location loc) {
  constexpr std::string_view what = "blas::nrm2";
  const Operand X = operand("x", x, Access::read), R = operand("result", result, Access::write);
  check_devices(ctx, what, {X, R}, loc);
  check_result(what, result, loc);
  checked_int(what, "n", x.size(), loc);
  BlasVecArgs args{detail::canned::precision_of<T>(),
                   static_cast<std::int64_t>(x.size()),
                   1,
                   x.data(),
                   nullptr,
                   result.data()};
  auto& impl = extension<Blas>(ctx, loc);
  detail::canned::issue(ctx, {X, R}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.nrm2(s, args, op); });
}

template <CannedReal T>
void scal(const Context& ctx, T alpha, DeviceBuffer<T>& x, std::source_location loc) {
  constexpr std::string_view what = "blas::scal";
  const Operand X = operand("x", x, Access::read_write);
  check_devices(ctx, what, {X}, loc);
  checked_int(what, "n", x.size(), loc);
  if (x.empty()) return;
  BlasVecArgs args{detail::canned::precision_of<T>(),
                   static_cast<std::int64_t>(x.size()),
                   static_cast<double>(alpha),
                   nullptr,
                   x.data(),
                   nullptr};
  auto& impl = extension<Blas>(ctx, loc);
  detail::canned::issue(ctx, {X}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.scal(s, args, op); });
}

#define SLUICE_BLAS_INSTANTIATE(T)                                                                \
  template void gemm<T>(const Context&, Op, Op, std::size_t, std::size_t, std::size_t, T,         \
                        const DeviceBuffer<T>&, std::size_t, const DeviceBuffer<T>&, std::size_t, \
                        T, DeviceBuffer<T>&, std::size_t, std::source_location);                  \
  template void gemm_batched<T>(                                                                  \
      const Context&, Op, Op, std::size_t, std::size_t, std::size_t, T, const DeviceBuffer<T>&,   \
      std::size_t, std::size_t, const DeviceBuffer<T>&, std::size_t, std::size_t, T,              \
      DeviceBuffer<T>&, std::size_t, std::size_t, std::size_t, std::source_location);             \
  template void gemv<T>(const Context&, Op, std::size_t, std::size_t, T, const DeviceBuffer<T>&,  \
                        std::size_t, const DeviceBuffer<T>&, T, DeviceBuffer<T>&,                 \
                        std::source_location);                                                    \
  template void axpy<T>(const Context&, T, const DeviceBuffer<T>&, DeviceBuffer<T>&,              \
                        std::source_location);                                                    \
  template void dot<T>(const Context&, const DeviceBuffer<T>&, const DeviceBuffer<T>&,            \
                       DeviceBuffer<T>&, std::source_location);                                   \
  template void nrm2<T>(const Context&, const DeviceBuffer<T>&, DeviceBuffer<T>&,                 \
                        std::source_location);                                                    \
  template void scal<T>(const Context&, T, DeviceBuffer<T>&, std::source_location);
SLUICE_BLAS_INSTANTIATE(float)
SLUICE_BLAS_INSTANTIATE(double)
#undef SLUICE_BLAS_INSTANTIATE

}  // namespace blas
}  // namespace sluice
