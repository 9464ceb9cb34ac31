// 07 — canned operations: BLAS, random numbers and FFTs on a context.
//
// The same calls run on every backend (cuBLAS / cuFFT / a Philox kernel on cuda, OpenBLAS /
// FFTW on the host), as ordinary operations of a context: they return at once, run in order,
// and the tracker orders them against work on other contexts.

#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "sluice/blas.hpp"
#include "sluice/fft.hpp"
#include "sluice/rng.hpp"
#include "sluice/sluice.hpp"

int main() {
  sluice::Context ctx;  // the default device: a GPU if there is one, else the host
  std::printf("device: %s (%s)\n", ctx.device().to_string().c_str(),
              sluice::device_info(ctx.device()).name.c_str());

  // Random matrices from a seeded generator: the same numbers on every backend.
  constexpr std::size_t n = 256;
  sluice::rng::Philox gen(2026);
  sluice::DeviceBuffer<double> a(ctx, n * n), b(ctx, n * n), c(ctx, n * n);
  sluice::rng::uniform(ctx, a, gen);
  sluice::rng::normal(ctx, b, gen);

  // C = A * B (column-major, as in every BLAS), then |C| on the device.
  using sluice::blas::Op;
  sluice::blas::gemm(ctx, Op::none, Op::none, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
  sluice::DeviceBuffer<double> norm(ctx, 1);
  sluice::blas::nrm2(ctx, c, norm);

  // Check one column on the host against a plain loop.
  std::vector<double> ha(n * n), hb(n * n), hc(n * n), hn(1);
  sluice::copy(ctx, std::span(ha), a);
  sluice::copy(ctx, std::span(hb), b);
  sluice::copy(ctx, std::span(hc), c);
  sluice::copy(ctx, std::span(hn), norm);
  ctx.synchronize();
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double ref = 0;
    for (std::size_t k = 0; k < n; ++k) ref += ha[i + k * n] * hb[k];
    worst = std::max(worst, std::abs(ref - hc[i]));
  }
  std::printf("gemm %zux%zu: |C| = %.6f, first column off by at most %.2e\n", n, n, hn[0], worst);

  // An FFT round trip: forward then inverse multiplies by the length.
  constexpr std::size_t len = 1 << 12;
  std::vector<std::complex<float>> signal(len);
  for (std::size_t i = 0; i < len; ++i) {
    signal[i] = {std::sin(0.05f * static_cast<float>(i)), 0.0f};
  }
  sluice::DeviceBuffer<std::complex<float>> x(ctx, len), spectrum(ctx, len);
  sluice::copy(ctx, x, std::span<const std::complex<float>>(signal));
  sluice::fft::c2c(ctx, x, spectrum, {len}, sluice::fft::Direction::forward);
  sluice::fft::c2c(ctx, spectrum, x, {len}, sluice::fft::Direction::inverse);
  std::vector<std::complex<float>> back(len);
  sluice::copy(ctx, std::span(back), x);
  ctx.synchronize();
  float fft_error = 0;
  for (std::size_t i = 0; i < len; ++i) {
    fft_error = std::max(fft_error, std::abs(back[i] / static_cast<float>(len) - signal[i]));
  }
  std::printf("fft round trip of %zu points: off by at most %.2e\n", len, fft_error);

  const bool ok = worst < 1e-9 && fft_error < 1e-4f;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
