// Vec and its operations, sync and async (sluice/la.hpp), and what the la sources share.

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "la/la_common.hpp"

namespace sluice {
namespace detail::la {

LaKernels& kernels(const Context& ctx, std::source_location loc) {
  return ctx.impl().extension<LaKernels>(loc);
}

void check_device(const Context& ctx, const Device& device, std::string_view what,
                  std::source_location loc) {
  if (device != ctx.device()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": an operand lives on " + device.to_string() +
                    " but the operation runs on " + ctx.name() + " (" + ctx.device().to_string() +
                    "); use a context of the operand's device",
                loc);
  }
}

void check_sizes(std::size_t a, std::size_t b, std::string_view what, std::source_location loc) {
  if (a != b) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": sizes differ (" + std::to_string(a) + " and " +
                    std::to_string(b) + "); the vectors of one operation must have equal sizes",
                loc);
  }
}

void check_vec(const Vec& v, std::string_view what, std::source_location loc) {
  if (!v.valid()) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    ": a default-constructed or moved-from Vec has no storage; "
                    "create it with Vec(ctx, n)",
                loc);
  }
}

std::string where(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

namespace {

// Pinned buffers kept for reuse: allocating pinned memory is slow on cuda (cudaHostAlloc).
struct PinnedCache {
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
  static constexpr std::size_t kMaxBuffers = 32;
  std::mutex mutex;
  std::vector<std::pair<Device, PinnedBuffer<std::byte>>> free;
  std::size_t bytes = 0;
};

PinnedCache& pinned_cache() {
  static auto* cache = new PinnedCache;  // never destroyed: leases may end during static teardown
  return *cache;
}

std::size_t round_up(std::size_t bytes) {
  std::size_t size = 256;
  while (size < bytes) size *= 2;
  return size;
}

}  // namespace

PinnedLease::PinnedLease(const Device& device, std::size_t bytes, std::source_location loc)
    : device_(device), bytes_(bytes) {
  auto& cache = pinned_cache();
  {
    std::lock_guard lock(cache.mutex);
    auto best = cache.free.end();
    for (auto it = cache.free.begin(); it != cache.free.end(); ++it) {
      const auto size = it->second.size();
      if (it->first == device && size >= bytes && size <= 4 * bytes + 4096 &&
          (best == cache.free.end() || size < best->second.size())) {
        best = it;
      }
    }
    if (best != cache.free.end()) {
      buffer_ = std::move(best->second);
      cache.bytes -= buffer_.size();
      cache.free.erase(best);
      return;
    }
  }
  buffer_ = PinnedBuffer<std::byte>(device, round_up(bytes), loc);
}

PinnedLease::~PinnedLease() {
  if (buffer_.size() == 0) return;
  auto& cache = pinned_cache();
  {
    std::lock_guard lock(cache.mutex);
    if (cache.bytes + buffer_.size() <= PinnedCache::kMaxBytes &&
        cache.free.size() < PinnedCache::kMaxBuffers) {
      cache.bytes += buffer_.size();
      cache.free.emplace_back(device_, std::move(buffer_));
      return;
    }
  }
  // Too much cached: dropping it waits for queued work that still uses it (PinnedBuffer's rule).
}

void PinnedLease::wait_read(std::size_t bytes, std::source_location loc) const {
  wait_for_host_access(buffer_.object_id(), Access::read, {0, bytes}, loc);
}

void PinnedLease::wait_write(std::size_t bytes, std::source_location loc) const {
  wait_for_host_access(buffer_.object_id(), Access::write, {0, bytes}, loc);
}

}  // namespace detail::la
namespace la {

using detail::AccessList;
using detail::issue_tracked;
using detail::LaReduceArgs;
using detail::LaReduceOp;
using detail::LaScalar;
using detail::LaVecArgs;
using detail::LaVecOp;
using detail::la::check_device;
using detail::la::check_sizes;
using detail::la::check_vec;
using detail::la::kernels;
using detail::la::PinnedLease;

// ---- Vec ---------------------------------------------------------------------------------------

Vec::Vec(const Context& ctx, std::size_t n, std::source_location loc)
    : ctx_(ctx), buffer_(ctx, n, loc), size_(n) {}

Vec::Vec(const Context& ctx, std::size_t n, std::size_t before, std::size_t after,
         std::source_location loc)
    : ctx_(ctx), buffer_(ctx, n + before + after, loc), offset_(before), size_(n) {}

Vec::Vec(const Context& ctx, std::span<const double> values, std::source_location loc)
    : Vec(ctx, values.size(), loc) {
  assign(values, ctx, loc);
}

const Context& Vec::context() const {
  if (!ctx_) {
    throw Error(Errc::invalid_state,
                "a default-constructed or moved-from Vec has no context; create it with "
                "Vec(ctx, n)");
  }
  return *ctx_;
}

Vec Vec::duplicate(std::source_location loc) const {
  check_vec(*this, "Vec::duplicate", loc);
  return Vec(*ctx_, size(), offset_, buffer_.size() - offset_ - size_, loc);
}

std::vector<double> Vec::to_vector(std::source_location loc) const {
  check_vec(*this, "Vec::to_vector", loc);
  return to_vector(*ctx_, loc);
}

std::vector<double> Vec::to_vector(const Context& ctx, std::source_location loc) const {
  check_vec(*this, "Vec::to_vector", loc);
  check_device(ctx, device(), "Vec::to_vector", loc);
  std::vector<double> out(size());
  if (out.empty()) return out;
  PinnedLease staging(ctx.device(), size() * sizeof(double), loc);
  staging.wait_write(size() * sizeof(double), loc);
  detail::copy_bytes(ctx, staging.as<double>(), data(), size() * sizeof(double), loc);
  staging.wait_read(size() * sizeof(double), loc);
  std::memcpy(out.data(), staging.as<double>(), size() * sizeof(double));
  return out;
}

void Vec::assign(std::span<const double> values, std::source_location loc) {
  check_vec(*this, "Vec::assign", loc);
  assign(values, *ctx_, loc);
}

void Vec::assign(std::span<const double> values, const Context& ctx, std::source_location loc) {
  check_vec(*this, "Vec::assign", loc);
  check_device(ctx, device(), "Vec::assign", loc);
  check_sizes(size(), values.size(), "Vec::assign", loc);
  if (values.empty()) return;
  PinnedLease staging(ctx.device(), values.size_bytes(), loc);
  staging.wait_write(values.size_bytes(), loc);  // an earlier copy may still read it
  std::memcpy(staging.as<double>(), values.data(), values.size_bytes());
  detail::copy_bytes(ctx, data(), staging.as<double>(), values.size_bytes(), loc);
}

// ---- element-wise operations -------------------------------------------------------------------

namespace {

LaScalar host_scalar(double v) {
  return {v, nullptr, nullptr, 1.0};
}

/// A Managed value read by an async operation on ctx: its device address, marked as read.
LaScalar device_scalar(const Managed<double>& m, const Context& ctx, AccessList& acc,
                       std::source_location loc) {
  const double* p = m.read_ptr(ctx, loc);
  acc.read(m.object_id());
  return {0.0, p, nullptr, 1.0};
}

/// y op= ... with the given operands; y written (read too unless `write_only`).
void vector_op(LaVecOp op, Vec& y, const Vec* x, const Vec* w, LaScalar alpha, LaScalar beta,
               const Context& ctx, std::string_view what, std::source_location loc,
               AccessList acc = {}) {
  check_vec(y, what, loc);
  check_device(ctx, y.device(), what, loc);
  for (const Vec* v : {x, w}) {
    if (v == nullptr) continue;
    check_vec(*v, what, loc);
    check_device(ctx, v->device(), what, loc);
    check_sizes(y.size(), v->size(), what, loc);
  }
  const bool reads_y =
      op == LaVecOp::scale || op == LaVecOp::axpy || op == LaVecOp::aypx || (op == LaVecOp::axpby);
  if (y.empty()) return;
  LaVecArgs args;
  args.op = op;
  args.n = y.size();
  args.x = x != nullptr ? acc.read(*x) : nullptr;
  args.w = w != nullptr ? acc.read(*w) : nullptr;
  args.y = reads_y ? acc.read_write(y) : acc.write(y);
  args.alpha = alpha;
  args.beta = beta;
  auto& k = kernels(ctx, loc);
  issue_tracked(ctx.impl(), acc, what, loc,
                [&](Stream& s, const OpInfo& info) { k.vector(s, args, info); });
}

LaReduceArgs reduce_args(LaReduceOp op, const Vec& x, const Vec* y, const Context& ctx,
                         std::string_view what, std::source_location loc, AccessList& acc) {
  check_vec(x, what, loc);
  check_device(ctx, x.device(), what, loc);
  LaReduceArgs args;
  args.op = op;
  args.n = x.size();
  args.x = acc.read(x);
  if (y != nullptr) {
    check_vec(*y, what, loc);
    check_device(ctx, y->device(), what, loc);
    check_sizes(x.size(), y->size(), what, loc);
    args.y = acc.read(*y);
  }
  return args;
}

/// A reduction whose result comes back to the host: the kernel writes it into pinned memory and
/// the host waits for that kernel only.
double reduce_sync(LaReduceOp op, const Vec& x, const Vec* y, const Context& ctx,
                   std::string_view what, std::source_location loc) {
  AccessList acc;
  auto args = reduce_args(op, x, y, ctx, what, loc, acc);
  PinnedLease result(ctx.device(), sizeof(double), loc);
  result.wait_write(sizeof(double), loc);
  args.out = result.as<double>();
  acc.write(result.id(), {0, sizeof(double)});
  auto& k = kernels(ctx, loc);
  issue_tracked(ctx.impl(), acc, what, loc,
                [&](Stream& s, const OpInfo& info) { k.reduce(s, args, info); });
  result.wait_read(sizeof(double), loc);
  return *result.as<double>();
}

void reduce_async(LaReduceOp op, const Vec& x, const Vec* y, Managed<double>& out,
                  const Context& ctx, std::string_view what, std::source_location loc) {
  AccessList acc;
  auto args = reduce_args(op, x, y, ctx, what, loc, acc);
  args.out = out.write_ptr(ctx, loc);
  acc.write(out.object_id());
  auto& k = kernels(ctx, loc);
  issue_tracked(ctx.impl(), acc, what, loc,
                [&](Stream& s, const OpInfo& info) { k.reduce(s, args, info); });
}

LaReduceOp norm_op(NormType t) {
  switch (t) {
    case NormType::one:
      return LaReduceOp::norm1;
    case NormType::two:
      return LaReduceOp::norm2;
    case NormType::infinity:
      return LaReduceOp::norminf;
  }
  return LaReduceOp::norm2;
}

}  // namespace

void set(Vec& x, double alpha, std::source_location loc) {
  set(x, alpha, x.context(), loc);
}
void set(Vec& x, double alpha, const Context& ctx, std::source_location loc) {
  vector_op(LaVecOp::set, x, nullptr, nullptr, host_scalar(alpha), {}, ctx, "VecSet", loc);
}
void copy(const Vec& x, Vec& y, std::source_location loc) {
  copy(x, y, y.context(), loc);
}
void copy(const Vec& x, Vec& y, const Context& ctx, std::source_location loc) {
  if (&x == &y) return;
  vector_op(LaVecOp::copy, y, &x, nullptr, {}, {}, ctx, "VecCopy", loc);
}
void scale(Vec& x, double alpha, std::source_location loc) {
  scale(x, alpha, x.context(), loc);
}
void scale(Vec& x, double alpha, const Context& ctx, std::source_location loc) {
  vector_op(LaVecOp::scale, x, nullptr, nullptr, host_scalar(alpha), {}, ctx, "VecScale", loc);
}
void axpy(Vec& y, double alpha, const Vec& x, std::source_location loc) {
  axpy(y, alpha, x, y.context(), loc);
}
void axpy(Vec& y, double alpha, const Vec& x, const Context& ctx, std::source_location loc) {
  vector_op(LaVecOp::axpy, y, &x, nullptr, host_scalar(alpha), {}, ctx, "VecAXPY", loc);
}
void aypx(Vec& y, double beta, const Vec& x, std::source_location loc) {
  aypx(y, beta, x, y.context(), loc);
}
void aypx(Vec& y, double beta, const Vec& x, const Context& ctx, std::source_location loc) {
  vector_op(LaVecOp::aypx, y, &x, nullptr, host_scalar(beta), {}, ctx, "VecAYPX", loc);
}
void axpby(Vec& y, double alpha, double beta, const Vec& x, std::source_location loc) {
  axpby(y, alpha, beta, x, y.context(), loc);
}
void axpby(Vec& y, double alpha, double beta, const Vec& x, const Context& ctx,
           std::source_location loc) {
  vector_op(LaVecOp::axpby, y, &x, nullptr, host_scalar(alpha), host_scalar(beta), ctx, "VecAXPBY",
            loc);
}
void waxpy(Vec& w, double alpha, const Vec& x, const Vec& y, std::source_location loc) {
  waxpy(w, alpha, x, y, w.context(), loc);
}
void waxpy(Vec& w, double alpha, const Vec& x, const Vec& y, const Context& ctx,
           std::source_location loc) {
  vector_op(LaVecOp::waxpy, w, &x, &y, host_scalar(alpha), {}, ctx, "VecWAXPY", loc);
}
void pointwise_mult(Vec& w, const Vec& x, const Vec& y, std::source_location loc) {
  pointwise_mult(w, x, y, w.context(), loc);
}
void pointwise_mult(Vec& w, const Vec& x, const Vec& y, const Context& ctx,
                    std::source_location loc) {
  vector_op(LaVecOp::mult, w, &x, &y, {}, {}, ctx, "VecPointwiseMult", loc);
}
void pointwise_divide(Vec& w, const Vec& x, const Vec& y, std::source_location loc) {
  pointwise_divide(w, x, y, w.context(), loc);
}
void pointwise_divide(Vec& w, const Vec& x, const Vec& y, const Context& ctx,
                      std::source_location loc) {
  vector_op(LaVecOp::divide, w, &x, &y, {}, {}, ctx, "VecPointwiseDivide", loc);
}

double dot(const Vec& x, const Vec& y, std::source_location loc) {
  return dot(x, y, x.context(), loc);
}
double dot(const Vec& x, const Vec& y, const Context& ctx, std::source_location loc) {
  return reduce_sync(LaReduceOp::dot, x, &y, ctx, "VecDot", loc);
}
double norm(const Vec& x, NormType type, std::source_location loc) {
  return norm(x, type, x.context(), loc);
}
double norm(const Vec& x, NormType type, const Context& ctx, std::source_location loc) {
  return reduce_sync(norm_op(type), x, nullptr, ctx, "VecNorm", loc);
}
double sum(const Vec& x, std::source_location loc) {
  return sum(x, x.context(), loc);
}
double sum(const Vec& x, const Context& ctx, std::source_location loc) {
  return reduce_sync(LaReduceOp::sum, x, nullptr, ctx, "VecSum", loc);
}
double max(const Vec& x, std::source_location loc) {
  return max(x, x.context(), loc);
}
double max(const Vec& x, const Context& ctx, std::source_location loc) {
  return reduce_sync(LaReduceOp::max, x, nullptr, ctx, "VecMax", loc);
}
double min(const Vec& x, std::source_location loc) {
  return min(x, x.context(), loc);
}
double min(const Vec& x, const Context& ctx, std::source_location loc) {
  return reduce_sync(LaReduceOp::min, x, nullptr, ctx, "VecMin", loc);
}

// ---- asynchronous forms ------------------------------------------------------------------------

void dot(const Vec& x, const Vec& y, Managed<double>& out, const Context& ctx,
         std::source_location loc) {
  reduce_async(LaReduceOp::dot, x, &y, out, ctx, "VecDotAsync", loc);
}
void norm(const Vec& x, NormType type, Managed<double>& out, const Context& ctx,
          std::source_location loc) {
  reduce_async(norm_op(type), x, nullptr, out, ctx, "VecNormAsync", loc);
}
void sum(const Vec& x, Managed<double>& out, const Context& ctx, std::source_location loc) {
  reduce_async(LaReduceOp::sum, x, nullptr, out, ctx, "VecSumAsync", loc);
}
void max(const Vec& x, Managed<double>& out, const Context& ctx, std::source_location loc) {
  reduce_async(LaReduceOp::max, x, nullptr, out, ctx, "VecMaxAsync", loc);
}
void min(const Vec& x, Managed<double>& out, const Context& ctx, std::source_location loc) {
  reduce_async(LaReduceOp::min, x, nullptr, out, ctx, "VecMinAsync", loc);
}
void set(Vec& x, const Managed<double>& alpha, const Context& ctx, std::source_location loc) {
  AccessList acc;
  const auto a = device_scalar(alpha, ctx, acc, loc);
  vector_op(LaVecOp::set, x, nullptr, nullptr, a, {}, ctx, "VecSetAsync", loc, acc);
}
void scale(Vec& x, const Managed<double>& alpha, const Context& ctx, std::source_location loc) {
  AccessList acc;
  const auto a = device_scalar(alpha, ctx, acc, loc);
  vector_op(LaVecOp::scale, x, nullptr, nullptr, a, {}, ctx, "VecScaleAsync", loc, acc);
}
void axpy(Vec& y, const Managed<double>& alpha, const Vec& x, const Context& ctx,
          std::source_location loc) {
  AccessList acc;
  const auto a = device_scalar(alpha, ctx, acc, loc);
  vector_op(LaVecOp::axpy, y, &x, nullptr, a, {}, ctx, "VecAXPYAsync", loc, acc);
}
void aypx(Vec& y, const Managed<double>& beta, const Vec& x, const Context& ctx,
          std::source_location loc) {
  AccessList acc;
  const auto b = device_scalar(beta, ctx, acc, loc);
  vector_op(LaVecOp::aypx, y, &x, nullptr, b, {}, ctx, "VecAYPXAsync", loc, acc);
}
void axpby(Vec& y, const Managed<double>& alpha, const Managed<double>& beta, const Vec& x,
           const Context& ctx, std::source_location loc) {
  AccessList acc;
  const auto a = device_scalar(alpha, ctx, acc, loc);
  const auto b = device_scalar(beta, ctx, acc, loc);
  vector_op(LaVecOp::axpby, y, &x, nullptr, a, b, ctx, "VecAXPBYAsync", loc, acc);
}
void waxpy(Vec& w, const Managed<double>& alpha, const Vec& x, const Vec& y, const Context& ctx,
           std::source_location loc) {
  AccessList acc;
  const auto a = device_scalar(alpha, ctx, acc, loc);
  vector_op(LaVecOp::waxpy, w, &x, &y, a, {}, ctx, "VecWAXPYAsync", loc, acc);
}

}  // namespace la
}  // namespace sluice
