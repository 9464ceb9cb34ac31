#pragma once
/// @file
/// Canned FFTs on a context: 1D and 2D, complex-to-complex, real-to-complex and back, batched,
/// in float and double, through the backend's `Fft` extension (cuFFT on cuda, FFTW on host).
/// Plans are made on first use and cached per context (a later call with the same shape, batch,
/// kind and placement reuses them); the context releases them when it goes.
///
/// Transforms are unnormalized, as in FFTW and cuFFT: a forward then an inverse transform
/// multiplies by the number of points. 2D data is row-major (`Shape(rows, cols)`); the complex
/// side of r2c / c2r keeps `cols / 2 + 1` columns (`rows * (cols / 2 + 1)` values per transform;
/// for 1D, `n / 2 + 1`). Batched transforms lie one after another. Each call is one tracked
/// operation of the context, as in sluice/blas.hpp; sizes and devices are checked first.
///
/// @code
/// sluice::DeviceBuffer<std::complex<double>> x(ctx, n), X(ctx, n);
/// sluice::fft::c2c(ctx, x, X, {n}, sluice::fft::Direction::forward);
/// sluice::fft::c2c(ctx, X, x, {n}, sluice::fft::Direction::inverse);  // x * n
/// @endcode

#include <complex>
#include <cstddef>
#include <cstdint>
#include <source_location>

#include "sluice/canned.hpp"
#include "sluice/memory.hpp"

namespace sluice::fft {

/// The size of one transform: n points, or rows x cols (row-major).
struct Shape {
  Shape(std::size_t n) : rank(1), dims{n, 1} {}  // NOLINT: {n} reads as a shape
  Shape(std::size_t rows, std::size_t cols) : rank(2), dims{rows, cols} {}
  int rank;
  std::size_t dims[2];
};

enum class Direction : std::uint8_t { forward, inverse };

/// Complex-to-complex; `in` and `out` may be the same buffer (in place).
template <CannedReal T>
void c2c(const Context& ctx, const DeviceBuffer<std::complex<T>>& in,
         DeviceBuffer<std::complex<T>>& out, Shape shape, Direction direction,
         std::size_t batch = 1, std::source_location loc = std::source_location::current());

/// Real-to-complex (forward).
template <CannedReal T>
void r2c(const Context& ctx, const DeviceBuffer<T>& in, DeviceBuffer<std::complex<T>>& out,
         Shape shape, std::size_t batch = 1,
         std::source_location loc = std::source_location::current());

/// Complex-to-real (inverse). Overwrites `in` (FFTW and cuFFT both may), which is marked as
/// written: its contents are unspecified afterwards.
template <CannedReal T>
void c2r(const Context& ctx, DeviceBuffer<std::complex<T>>& in, DeviceBuffer<T>& out, Shape shape,
         std::size_t batch = 1, std::source_location loc = std::source_location::current());

}  // namespace sluice::fft
