#pragma once
/// @file
/// The canned operations' extension interfaces (sluice/extension.hpp): BLAS, RNG and FFT, which a
/// backend may provide or leave out (reference 003's "canned operations"). For backend authors;
/// users call sluice/blas.hpp, sluice/rng.hpp and sluice/fft.hpp.
///
/// Each call enqueues one operation on `stream` and never blocks the host; arguments were checked
/// and accesses tracked by the caller. Matrices are column-major (the BLAS convention); sizes
/// fit in `int` (checked by the caller).

#include <cstdint>
#include <memory>
#include <string_view>

#include "sluice/backend.hpp"

namespace sluice {

/// The element type of a canned operation (real, or the real part of a complex type).
enum class Precision : std::uint8_t { f32, f64 };

/// C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i < batch, where X[i] starts
/// `stride_x` elements after X[i - 1].
struct BlasGemmArgs {
  Precision precision = Precision::f64;
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  const void* a = nullptr;
  std::int64_t lda = 1, stride_a = 0;
  const void* b = nullptr;
  std::int64_t ldb = 1, stride_b = 0;
  void* c = nullptr;
  std::int64_t ldc = 1, stride_c = 0;
  std::int64_t batch = 1;
};

/// y = alpha * op(A) * x + beta * y, A m x n.
struct BlasGemvArgs {
  Precision precision = Precision::f64;
  bool trans = false;
  std::int64_t m = 0, n = 0;
  double alpha = 1, beta = 0;
  const void* a = nullptr;
  std::int64_t lda = 1;
  const void* x = nullptr;
  void* y = nullptr;
};

/// Level-1 operations on contiguous vectors of length n: axpy (y += alpha x), dot
/// (*result = x . y), nrm2 (*result = |x|), scal (y *= alpha). `result` is device memory.
struct BlasVecArgs {
  Precision precision = Precision::f64;
  std::int64_t n = 0;
  double alpha = 1;
  const void* x = nullptr;
  void* y = nullptr;
  void* result = nullptr;
};

/// A backend's BLAS (cuBLAS on cuda, OpenBLAS on host).
class Blas {
 public:
  static constexpr std::string_view extension_name = "Blas";
  static void register_builtins();
  virtual ~Blas() = default;
  virtual void gemm(Stream& stream, const BlasGemmArgs& args, const OpInfo& op) = 0;
  virtual void gemv(Stream& stream, const BlasGemvArgs& args, const OpInfo& op) = 0;
  virtual void axpy(Stream& stream, const BlasVecArgs& args, const OpInfo& op) = 0;
  virtual void dot(Stream& stream, const BlasVecArgs& args, const OpInfo& op) = 0;
  virtual void nrm2(Stream& stream, const BlasVecArgs& args, const OpInfo& op) = 0;
  virtual void scal(Stream& stream, const BlasVecArgs& args, const OpInfo& op) = 0;
};

/// What an RNG fill draws.
enum class RngDistribution : std::uint8_t { uniform, normal };

/// Fills `out[0, n)` from the Philox4x32-10 stream of key `seed` and subsequence `subsequence`,
/// starting at 128-bit block `counter` (sluice/rng.hpp defines the map from blocks to values;
/// every backend must give the same bits).
struct RngFillArgs {
  Precision precision = Precision::f64;
  RngDistribution distribution = RngDistribution::uniform;
  void* out = nullptr;
  std::int64_t n = 0;
  std::uint64_t seed = 0;
  std::uint64_t counter = 0;
  double mean = 0, stddev = 1;  ///< normal only
  std::uint64_t subsequence = 0;
};

/// A backend's counter-based generator.
class Rng {
 public:
  static constexpr std::string_view extension_name = "Rng";
  static void register_builtins();
  virtual ~Rng() = default;
  virtual void fill(Stream& stream, const RngFillArgs& args, const OpInfo& op) = 0;
};

/// Which transform: complex-to-complex either way, real-to-complex (forward) or
/// complex-to-real (inverse, which may overwrite its input).
enum class FftKind : std::uint8_t { c2c_forward, c2c_inverse, r2c, c2r };

/// `batch` unnormalized transforms of rank 1 (dims[0]) or 2 (dims[0] rows of dims[1], row-major),
/// contiguous one after another. Real-side and complex-side layouts as FFTW and cuFFT define them
/// (the complex side of r2c/c2r keeps dims[rank-1] / 2 + 1 of the last dimension).
struct FftArgs {
  Precision precision = Precision::f64;
  FftKind kind = FftKind::c2c_forward;
  int rank = 1;
  std::int64_t dims[2] = {0, 0};
  std::int64_t batch = 1;
  const void* in = nullptr;
  void* out = nullptr;
};

/// A backend's FFT (cuFFT on cuda, FFTW on host).
class Fft {
 public:
  static constexpr std::string_view extension_name = "Fft";
  static void register_builtins();
  virtual ~Fft() = default;
  /// `plans` is the context's slot for this extension (initially null): the implementation keeps
  /// its plan cache there, and the context destroys it after its work completed.
  virtual void execute(Stream& stream, std::shared_ptr<void>& plans, const FftArgs& args,
                       const OpInfo& op) = 0;
};

}  // namespace sluice
