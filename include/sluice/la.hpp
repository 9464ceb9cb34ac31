#pragma once
/// @file
/// Linear algebra on any context: vectors, sparse and matrix-free matrices, and Krylov solvers
/// (CG, TFQMR) that run either synchronously (every scalar to the host, like PETSc) or
/// asynchronously (scalars stay on the device as `Managed` values; reference 000, §3.3 and §4).
///
/// Every operation marks what it reads and writes with the dependency tracker, so sync and async
/// calls on any mix of contexts interleave freely without user synchronization (Listing 12 of
/// the reference is examples/04-mixed-cg.cpp):
///
/// @code
/// namespace la = sluice::la;
/// sluice::Context a, b;
/// la::Vec x(a, n), y(a, n);
/// la::set(x, 1.0);                          // on x's context
/// sluice::Managed<double> nrm;
/// la::norm(x, la::NormType::two, nrm, b);   // async on b: waits for the set, not the host
/// la::scale(y, 1.0 / nrm, a);               // async on a: waits for the norm on b
/// double host = la::dot(x, y);              // sync: waits for these two vectors only
/// @endcode
///
/// Everything lives in namespace `sluice::la` (its `copy(x, y)` is VecCopy, not the memory layer's
/// `sluice::copy(ctx, dst, src)`). Argument order follows PETSc (`axpy(y, a, x)` is VecAXPY: y += a
/// x). Every operation takes the context to run on as its last argument; the default is the context
/// of the vector it writes (for reductions, of the first vector). Vectors and matrices may live on
/// any context of the same device as the context used.
///
/// Thread safety: operations on distinct objects may be issued from any threads; a `Vec` must not
/// be written by one thread while another uses it (as any C++ object).

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/memory.hpp"
#include "sluice/scalar.hpp"

namespace sluice::detail::la {
class KspParallel;
}

namespace sluice::la {

// ---- Vec ----------------------------------------------------------------------------------------

/// A vector of doubles in a device's memory.
///
/// Created on a context (allocated in that context's stream order); move-only (`duplicate` makes
/// another of the same shape). Destroying it while queued work still uses it is safe. Element
/// values are not initialized until an operation writes them.
class Vec {
 public:
  Vec() = default;
  /// `n` uninitialized elements on ctx's device.
  Vec(const Context& ctx, std::size_t n,
      std::source_location loc = std::source_location::current());
  /// A copy of `values` on ctx's device (the host data is staged: it may change once this returns).
  Vec(const Context& ctx, std::span<const double> values,
      std::source_location loc = std::source_location::current());

  /// `n` uninitialized elements with room for `before` more before them and `after` more after
  /// them in the same allocation (a distributed vector's ghost layers, sluice/dist.hpp): data()
  /// points at the first of the n, buffer() holds all of them.
  Vec(const Context& ctx, std::size_t n, std::size_t before, std::size_t after,
      std::source_location loc = std::source_location::current());

  Vec(Vec&& other) noexcept
      : ctx_(std::exchange(other.ctx_, std::nullopt)),
        buffer_(std::move(other.buffer_)),
        offset_(std::exchange(other.offset_, 0)),
        size_(std::exchange(other.size_, 0)) {}
  Vec& operator=(Vec&& other) noexcept {
    ctx_ = std::exchange(other.ctx_, std::nullopt);
    buffer_ = std::move(other.buffer_);
    offset_ = std::exchange(other.offset_, 0);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  Vec(const Vec&) = delete;
  Vec& operator=(const Vec&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The context it was created on: the default context of operations that write it. Throws
  /// Error(invalid_state) for a default-constructed or moved-from Vec.
  [[nodiscard]] const Context& context() const;
  [[nodiscard]] const Device& device() const { return context().device(); }
  /// False for a default-constructed or moved-from Vec.
  [[nodiscard]] bool valid() const noexcept { return ctx_.has_value(); }
  /// Device address of the elements (do not dereference on the host; mark access with Intent).
  [[nodiscard]] double* data() const noexcept { return buffer_.data() + offset_; }
  /// The tracker's id of its memory.
  [[nodiscard]] ObjectId object_id() const noexcept { return buffer_.object_id(); }
  /// Its allocation: the elements, and the room around them if it was made with some.
  [[nodiscard]] const DeviceBuffer<double>& buffer() const noexcept { return buffer_; }
  /// Elements of room before data() in buffer() (0 unless made with room).
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
  /// The byte range of the elements in buffer(), for marking exactly them.
  [[nodiscard]] ByteRange elements() const noexcept {
    return {offset_ * sizeof(double), size_ * sizeof(double)};
  }

  /// A new vector of the same size on the same context (VecDuplicate: values not copied).
  [[nodiscard]] Vec duplicate(std::source_location loc = std::source_location::current()) const;

  /// The values on the host. Waits only for the work that produced them (and the copy, issued on
  /// `ctx`).
  [[nodiscard]] std::vector<double> to_vector(
      std::source_location loc = std::source_location::current()) const;
  [[nodiscard]] std::vector<double> to_vector(
      const Context& ctx, std::source_location loc = std::source_location::current()) const;
  /// Overwrites the values with `values` (same size), staged through pinned memory: asynchronous
  /// on `ctx`, and `values` may change once this returns.
  void assign(std::span<const double> values,
              std::source_location loc = std::source_location::current());
  void assign(std::span<const double> values, const Context& ctx,
              std::source_location loc = std::source_location::current());

 private:
  std::optional<Context> ctx_;  // empty until constructed with one (a Context always owns a stream)
  DeviceBuffer<double> buffer_;
  std::size_t offset_ = 0;
  std::size_t size_ = 0;
};

/// Which norm.
enum class NormType : std::uint8_t { one, two, infinity };

// Synchronous forms take and return host scalars. Those that return a value wait for that
// reduction only (issued on `ctx`): never for a whole context or device.

/// x[i] = alpha.
void set(Vec& x, double alpha, std::source_location loc = std::source_location::current());
void set(Vec& x, double alpha, const Context& ctx,
         std::source_location loc = std::source_location::current());
/// y = x (VecCopy).
void copy(const Vec& x, Vec& y, std::source_location loc = std::source_location::current());
void copy(const Vec& x, Vec& y, const Context& ctx,
          std::source_location loc = std::source_location::current());
/// x = alpha x.
void scale(Vec& x, double alpha, std::source_location loc = std::source_location::current());
void scale(Vec& x, double alpha, const Context& ctx,
           std::source_location loc = std::source_location::current());
/// y = y + alpha x.
void axpy(Vec& y, double alpha, const Vec& x,
          std::source_location loc = std::source_location::current());
void axpy(Vec& y, double alpha, const Vec& x, const Context& ctx,
          std::source_location loc = std::source_location::current());
/// y = x + beta y.
void aypx(Vec& y, double beta, const Vec& x,
          std::source_location loc = std::source_location::current());
void aypx(Vec& y, double beta, const Vec& x, const Context& ctx,
          std::source_location loc = std::source_location::current());
/// y = alpha x + beta y.
void axpby(Vec& y, double alpha, double beta, const Vec& x,
           std::source_location loc = std::source_location::current());
void axpby(Vec& y, double alpha, double beta, const Vec& x, const Context& ctx,
           std::source_location loc = std::source_location::current());
/// w = alpha x + y.
void waxpy(Vec& w, double alpha, const Vec& x, const Vec& y,
           std::source_location loc = std::source_location::current());
void waxpy(Vec& w, double alpha, const Vec& x, const Vec& y, const Context& ctx,
           std::source_location loc = std::source_location::current());
/// w = x .* y.
void pointwise_mult(Vec& w, const Vec& x, const Vec& y,
                    std::source_location loc = std::source_location::current());
void pointwise_mult(Vec& w, const Vec& x, const Vec& y, const Context& ctx,
                    std::source_location loc = std::source_location::current());
/// w = x ./ y.
void pointwise_divide(Vec& w, const Vec& x, const Vec& y,
                      std::source_location loc = std::source_location::current());
void pointwise_divide(Vec& w, const Vec& x, const Vec& y, const Context& ctx,
                      std::source_location loc = std::source_location::current());

/// x'y.
[[nodiscard]] double dot(const Vec& x, const Vec& y,
                         std::source_location loc = std::source_location::current());
[[nodiscard]] double dot(const Vec& x, const Vec& y, const Context& ctx,
                         std::source_location loc = std::source_location::current());
/// ||x|| (NormType::two by default).
[[nodiscard]] double norm(const Vec& x, NormType type = NormType::two,
                          std::source_location loc = std::source_location::current());
[[nodiscard]] double norm(const Vec& x, NormType type, const Context& ctx,
                          std::source_location loc = std::source_location::current());
/// sum of the elements.
[[nodiscard]] double sum(const Vec& x, std::source_location loc = std::source_location::current());
[[nodiscard]] double sum(const Vec& x, const Context& ctx,
                         std::source_location loc = std::source_location::current());
/// The largest element (-inf for an empty vector).
[[nodiscard]] double max(const Vec& x, std::source_location loc = std::source_location::current());
[[nodiscard]] double max(const Vec& x, const Context& ctx,
                         std::source_location loc = std::source_location::current());
/// The smallest element (+inf for an empty vector).
[[nodiscard]] double min(const Vec& x, std::source_location loc = std::source_location::current());
[[nodiscard]] double min(const Vec& x, const Context& ctx,
                         std::source_location loc = std::source_location::current());

// Asynchronous forms: scalars are Managed<double> values on ctx's device, read and written where
// they lie; nothing waits on the host. A scalar argument may also be an expression of Managed
// values (`-a`, `beta / betaold`): it is evaluated on `ctx` first (one launch).

void dot(const Vec& x, const Vec& y, Managed<double>& out, const Context& ctx,
         std::source_location loc = std::source_location::current());
void norm(const Vec& x, NormType type, Managed<double>& out, const Context& ctx,
          std::source_location loc = std::source_location::current());
void sum(const Vec& x, Managed<double>& out, const Context& ctx,
         std::source_location loc = std::source_location::current());
void max(const Vec& x, Managed<double>& out, const Context& ctx,
         std::source_location loc = std::source_location::current());
void min(const Vec& x, Managed<double>& out, const Context& ctx,
         std::source_location loc = std::source_location::current());
void set(Vec& x, const Managed<double>& alpha, const Context& ctx,
         std::source_location loc = std::source_location::current());
void scale(Vec& x, const Managed<double>& alpha, const Context& ctx,
           std::source_location loc = std::source_location::current());
void axpy(Vec& y, const Managed<double>& alpha, const Vec& x, const Context& ctx,
          std::source_location loc = std::source_location::current());
void aypx(Vec& y, const Managed<double>& beta, const Vec& x, const Context& ctx,
          std::source_location loc = std::source_location::current());
void axpby(Vec& y, const Managed<double>& alpha, const Managed<double>& beta, const Vec& x,
           const Context& ctx, std::source_location loc = std::source_location::current());
void waxpy(Vec& w, const Managed<double>& alpha, const Vec& x, const Vec& y, const Context& ctx,
           std::source_location loc = std::source_location::current());

/// A scalar expression other than a plain Managed<double> (those take the overloads above).
template <class E>
concept ScalarExpressionOperand =
    ScalarExpression<E> && !std::is_same_v<std::remove_cvref_t<E>, Managed<double>>;

/// Scalar expressions as arguments of the asynchronous forms: evaluated on `ctx`, then used.
template <ScalarExpressionOperand E>
void set(Vec& x, const E& alpha, const Context& ctx,
         std::source_location loc = std::source_location::current()) {
  set(x, eval(alpha, ctx, {}, loc), ctx, loc);
}
template <ScalarExpressionOperand E>
void scale(Vec& x, const E& alpha, const Context& ctx,
           std::source_location loc = std::source_location::current()) {
  scale(x, eval(alpha, ctx, {}, loc), ctx, loc);
}
template <ScalarExpressionOperand E>
void axpy(Vec& y, const E& alpha, const Vec& x, const Context& ctx,
          std::source_location loc = std::source_location::current()) {
  axpy(y, eval(alpha, ctx, {}, loc), x, ctx, loc);
}
template <ScalarExpressionOperand E>
void aypx(Vec& y, const E& beta, const Vec& x, const Context& ctx,
          std::source_location loc = std::source_location::current()) {
  aypx(y, eval(beta, ctx, {}, loc), x, ctx, loc);
}
template <ScalarExpressionOperand E>
void waxpy(Vec& w, const E& alpha, const Vec& x, const Vec& y, const Context& ctx,
           std::source_location loc = std::source_location::current()) {
  waxpy(w, eval(alpha, ctx, {}, loc), x, y, ctx, loc);
}

// ---- Mat ----------------------------------------------------------------------------------------

/// The matrix-free Laplacians (Dirichlet boundaries, unit spacing): the centre coefficient is
/// the number of neighbours of an interior point and every neighbour's is -1, so each is
/// symmetric positive definite (5-point: 4 and -1; 9-point: 8 and -1; 7-point: 6 and -1;
/// 27-point: 26 and -1). Grid points are numbered x fastest, then y, then z.
enum class Stencil : std::uint8_t { d2p5, d2p9, d3p7, d3p27 };

/// "2d5", "2d9", "3d7", "3d27"; throws Error naming the accepted spellings otherwise.
[[nodiscard]] Stencil parse_stencil(std::string_view name);
[[nodiscard]] std::string_view to_string(Stencil s) noexcept;
/// Points per row of an interior grid point.
[[nodiscard]] int stencil_points(Stencil s) noexcept;
[[nodiscard]] bool stencil_is_3d(Stencil s) noexcept;

/// One entry of a matrix given as triplets.
struct Triplet {
  std::int64_t row = 0;
  std::int64_t col = 0;
  double value = 0;
};

/// Adds the entries of one row: `add(col, value)`; repeated columns are summed.
using RowAdder = std::function<void(std::int64_t col, double value)>;

/// A sparse matrix on a device: CSR (32-bit indices), or a matrix-free stencil operator.
///
/// Immutable once built; copies share it (a handle, like PETSc's Mat). Built on a context
/// (uploaded in its stream order); usable on any context of the same device.
class Mat {
 public:
  Mat() = default;

  /// CSR from (row, col, value) triplets; duplicates are summed. Throws Error for an index out of
  /// range, naming the entry.
  [[nodiscard]] static Mat from_triplets(
      const Context& ctx, std::int64_t rows, std::int64_t cols, std::span<const Triplet> entries,
      std::source_location loc = std::source_location::current());
  /// CSR from a generator called once per row, in order: `g(row, add)`.
  [[nodiscard]] static Mat from_rows(
      const Context& ctx, std::int64_t rows, std::int64_t cols,
      const std::function<void(std::int64_t row, const RowAdder&)>& g,
      std::source_location loc = std::source_location::current());
  /// CSR from a Matrix Market file (coordinate; real, integer or pattern; general or symmetric).
  /// A malformed file throws Error naming the file and line.
  [[nodiscard]] static Mat read_matrix_market(
      const Context& ctx, const std::string& path,
      std::source_location loc = std::source_location::current());
  /// A matrix-free stencil on an nx × ny (× nz) grid.
  [[nodiscard]] static Mat stencil(const Context& ctx, Stencil kind, std::int64_t nx,
                                   std::int64_t ny, std::int64_t nz = 1,
                                   std::source_location loc = std::source_location::current());
  /// The same operator assembled as CSR (for cross-checks and CSR benchmarks).
  [[nodiscard]] static Mat stencil_csr(const Context& ctx, Stencil kind, std::int64_t nx,
                                       std::int64_t ny, std::int64_t nz = 1,
                                       std::source_location loc = std::source_location::current());

  [[nodiscard]] bool valid() const noexcept { return impl_ != nullptr; }
  [[nodiscard]] std::int64_t rows() const noexcept;
  [[nodiscard]] std::int64_t cols() const noexcept;
  /// Stored entries (for a stencil: the entries its assembled form would have).
  [[nodiscard]] std::int64_t nnz() const noexcept;
  [[nodiscard]] bool is_matrix_free() const noexcept;
  [[nodiscard]] const Context& context() const;
  [[nodiscard]] const Device& device() const;
  /// The stencil of a matrix-free operator (throws for CSR) and its grid.
  [[nodiscard]] Stencil stencil_kind() const;
  [[nodiscard]] std::array<std::int64_t, 3> grid() const;
  /// The CSR arrays on the host (waits for the upload only); empty for a matrix-free operator.
  struct HostCsr {
    std::vector<std::int32_t> row_ptr, col;
    std::vector<double> val;
  };
  [[nodiscard]] HostCsr to_host(std::source_location loc = std::source_location::current()) const;

  struct Impl;
  [[nodiscard]] const std::shared_ptr<const Impl>& impl() const noexcept { return impl_; }
  /// Internal: a handle to shared state made by sluice (the dist layer's blocks).
  explicit Mat(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

/// y = A x.
void mult(const Mat& A, const Vec& x, Vec& y,
          std::source_location loc = std::source_location::current());
void mult(const Mat& A, const Vec& x, Vec& y, const Context& ctx,
          std::source_location loc = std::source_location::current());
/// z = y + A x (MatMultAdd; z may be y).
void multadd(const Mat& A, const Vec& x, const Vec& y, Vec& z,
             std::source_location loc = std::source_location::current());
void multadd(const Mat& A, const Vec& x, const Vec& y, Vec& z, const Context& ctx,
             std::source_location loc = std::source_location::current());
/// d[i] = A(i, i) (MatGetDiagonal).
void diagonal(const Mat& A, Vec& d, std::source_location loc = std::source_location::current());
void diagonal(const Mat& A, Vec& d, const Context& ctx,
              std::source_location loc = std::source_location::current());

// ---- KSP ----------------------------------------------------------------------------------------

enum class KspType : std::uint8_t { cg, tfqmr };
enum class PcType : std::uint8_t { none, jacobi };
/// The norm the convergence test uses (KSPNormType). CG supports all; TFQMR preconditioned
/// (left preconditioning), unpreconditioned (right preconditioning) and none.
enum class KspNormType : std::uint8_t { none, preconditioned, unpreconditioned, natural };
/// How a solve runs.
enum class SolveMode : std::uint8_t {
  /// Every scalar goes to the host where PETSc's synchronous solvers need it there: the host
  /// waits for each reduction, decides, and passes host scalars to the next kernels.
  sync,
  /// Scalars and decisions stay on the device; the host reads the solver's state every
  /// `check_every` iterations (overlapped with the next block). Kernels issued past convergence
  /// do nothing, so the iterates, counts and history equal sync's.
  async,
  /// Async mode's kernels recorded once into a graph (sluice/graph.hpp) per solver, operator,
  /// vectors and options, and relaunched: the set-up, then a while node whose body is a block of
  /// `check_every` iterations and whose condition the device state keeps (the convergence test
  /// runs on the device). The host takes part only at the launch and the final read. Later
  /// solves with other vectors update the executable in place. Counts and history equal sync's.
  graph,
};

/// How CG forms its two inner products per iteration (docs/la.md, "CG variants").
enum class CgVariant : std::uint8_t {
  /// PETSc's KSPSolve_CG: p'Ap after the product, then the norm and z'r after the update; two
  /// reductions an iteration (across ranks, two gathers of partial sums).
  classic,
  /// Chronopoulos–Gear (PETSc's KSPCGUseSingleReduction, `-ksp_cg_single_reduction`): s = A z
  /// after the update, the norm, z'r and z's summed together, p'Ap from the recurrence
  /// delta - beta^2 dpiold / betaold^2; one reduction an iteration and one more vector (s),
  /// w = s + b w formed beside p = z + b p. Iterates equal classic's within rounding.
  single_reduction,
};

/// Why a solve stopped: PETSc's KSPConvergedReason values and names.
enum class ConvergedReason : std::int8_t {
  iterating = 0,
  converged_rtol = 2,
  converged_atol = 3,
  converged_its = 4,
  diverged_its = -3,
  diverged_dtol = -4,
  diverged_breakdown = -5,
  diverged_indefinite_pc = -8,
  diverged_nanorinf = -9,
  diverged_indefinite_mat = -10,
};
/// "CONVERGED_RTOL", "DIVERGED_INDEFINITE_MAT", ...
[[nodiscard]] std::string_view to_string(ConvergedReason r) noexcept;

[[nodiscard]] KspType parse_ksp_type(std::string_view name);
[[nodiscard]] PcType parse_pc_type(std::string_view name);
[[nodiscard]] KspNormType parse_norm_type(std::string_view name);
[[nodiscard]] SolveMode parse_solve_mode(std::string_view name);
/// "classic", "single-reduction" (also accepted: "one-reduction")
[[nodiscard]] CgVariant parse_cg_variant(std::string_view name);
[[nodiscard]] std::string_view to_string(KspType t) noexcept;
[[nodiscard]] std::string_view to_string(PcType t) noexcept;
[[nodiscard]] std::string_view to_string(KspNormType t) noexcept;
[[nodiscard]] std::string_view to_string(SolveMode m) noexcept;
[[nodiscard]] std::string_view to_string(CgVariant v) noexcept;

/// Called with each residual norm the solver logs (PETSc's KSPMonitor): the iteration number and
/// the norm as a device value (`.value()` waits for it alone). In async mode the calls for a
/// block of iterations come when the block is checked, and only for iterations that counted.
using KspMonitor = std::function<void(int iteration, const Managed<double>& rnorm)>;

struct KspOptions {
  KspType type = KspType::cg;
  PcType pc = PcType::jacobi;
  /// CG only (ignored by TFQMR): classic, or one reduction an iteration (see CgVariant).
  CgVariant cg_variant = CgVariant::classic;
  /// Default: preconditioned (PETSc's default for CG and TFQMR).
  KspNormType norm_type = KspNormType::preconditioned;
  double rtol = 1e-5;  ///< PETSc's defaults
  double atol = 1e-50;
  double dtol = 1e4;
  int max_it = 10000;
  /// Run exactly max_it iterations (PETSc's KSPConvergedSkip): reason CONVERGED_ITS unless the
  /// method breaks down first.
  bool fixed_iterations = false;
  /// Use x's values as the initial guess (else x = 0).
  bool initial_guess_nonzero = false;
  SolveMode mode = SolveMode::async;
  /// Async mode: iterations per host check; 0 lets the solver choose (Ksp::check_interval):
  /// 32 for CG on a matrix-free operator, whose iterations past the stop cost nothing (on a GPU
  /// a block of them is one kernel that stops with the solve), else 8, which bounds the
  /// unguarded products a CSR solve issues past its stop. From `sluice bench --check-sweep`
  /// (H200, CG on 2D 5-point problems of 53 to 773 iterations): 32 is within 3% of the fastest
  /// interval there and 8 is 13 to 19% slower (docs/la.md).
  int check_every = 0;
  /// Keep the residual history (KSPSetResidualHistory); see KspResult::history.
  bool history = false;
  KspMonitor monitor;
};

struct KspResult {
  int iterations = 0;        ///< KSPGetIterationNumber
  double residual_norm = 0;  ///< the last norm logged (KSPGetResidualNorm)
  ConvergedReason reason = ConvergedReason::iterating;
  /// The norms PETSc logs: CG one per iteration from 0; TFQMR two per iteration from 1.
  std::vector<double> history;
  [[nodiscard]] bool converged() const noexcept { return static_cast<int>(reason) > 0; }
};

/// A Krylov solver for A x = b (KSP). Keeps its work vectors between solves of the same size.
/// One Ksp runs one solve at a time: use one Ksp per thread for concurrent solves.
///
/// @code
/// auto A = sluice::la::Mat::stencil(ctx, sluice::la::Stencil::d2p5, 512, 512);
/// sluice::la::Vec b(ctx, A.rows()), x(ctx, A.rows());
/// sluice::la::set(x, 1.0);
/// sluice::la::mult(A, x, b);                         // b = A 1
/// sluice::la::Ksp ksp(A, {.type = sluice::la::KspType::cg, .rtol = 1e-8});
/// auto r = ksp.solve(b, x);                      // async by default
/// std::cout << r.iterations << " " << sluice::to_string(r.reason) << "\n";
/// @endcode
class Ksp {
 public:
  explicit Ksp(Mat A, KspOptions options = {});
  ~Ksp();
  Ksp(Ksp&&) noexcept;
  Ksp& operator=(Ksp&&) noexcept;

  [[nodiscard]] const KspOptions& options() const noexcept { return options_; }
  void set_options(KspOptions options);
  [[nodiscard]] const Mat& operator_matrix() const noexcept { return A_; }
  /// Iterations per host check of an async solve: options().check_every, or the solver's
  /// choice for this operator and solver where that is 0 (see KspOptions::check_every).
  [[nodiscard]] int check_interval() const noexcept;

  /// Solves on `ctx` (default: x's context). Returns once the solve stopped; x holds the iterate
  /// the result reports. Throws Error for mismatched sizes or devices, or unsupported options.
  KspResult solve(const Vec& b, Vec& x, std::source_location loc = std::source_location::current());
  KspResult solve(const Vec& b, Vec& x, const Context& ctx,
                  std::source_location loc = std::source_location::current());
  /// Internal (the dist layer): solves one rank's block of a distributed system; `par`
  /// completes its products and reductions across the ranks (src/la/ksp_parallel.hpp).
  KspResult solve(const Vec& b, Vec& x, const Context& ctx, detail::la::KspParallel& par,
                  std::source_location loc = std::source_location::current());

  struct Work;

 private:
  KspResult solve_on(const Vec& b, Vec& x, const Context& ctx, detail::la::KspParallel* par,
                     std::source_location loc);

  Mat A_;
  KspOptions options_;
  std::unique_ptr<Work> work_;
};

}  // namespace sluice::la
