// Canned operations (issue 16 §5): sluice's gemm, FFT and RNG against direct cuBLAS, cuFFT and
// cuRAND calls on the same stream and the same memory, at large sizes (goal: within 3 %; RNG at
// least 90 % of cuRAND), and the host BLAS in GFLOP/s.
//
// Each iteration issues one operation and waits for it; both sides are timed the same way (host
// clock around issue + synchronize), so the difference is sluice's cost per call. Run with
// --benchmark_repetitions=N --benchmark_report_aggregates_only=true for medians.

#include <benchmark/benchmark.h>

#include <chrono>
#include <complex>
#include <string>

#include "sluice/blas.hpp"
#include "sluice/fft.hpp"
#include "sluice/rng.hpp"
#include "sluice/sluice.hpp"

#ifdef SLUICE_BENCH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <curand.h>

#include "sluice/cuda.hpp"
#endif

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
void timed(benchmark::State& state, F&& f) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    f();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

// --- host BLAS ---

template <class T>
void host_gemm(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  sluice::Context ctx(sluice::Device{"host", 0});
  sluice::rng::Philox gen(1);
  sluice::DeviceBuffer<T> a(ctx, n * n), b(ctx, n * n), c(ctx, n * n);
  sluice::rng::uniform(ctx, a, gen);
  sluice::rng::uniform(ctx, b, gen);
  using sluice::blas::Op;
  timed(state, [&] {
    sluice::blas::gemm<T>(ctx, Op::none, Op::none, n, n, n, T(1), a, n, b, n, T(0), c, n);
    ctx.synchronize();
  });
  state.counters["GFLOP"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) / 1e9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(host_gemm<double>)
    ->Name("host/dgemm")
    ->Arg(512)
    ->Arg(1024)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(host_gemm<float>)
    ->Name("host/sgemm")
    ->Arg(1024)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

#ifdef SLUICE_BENCH_CUDA

bool have_cuda(benchmark::State& state) {
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) return true;
    if (b.name == "cuda") state.SkipWithError(("no CUDA device: " + b.unavailable_reason).c_str());
  }
  return false;
}

sluice::Context& gpu() {
  static sluice::Context ctx(sluice::Device{"cuda", 0});
  return ctx;
}

cudaStream_t stream() {
  return sluice::cuda::stream(gpu());
}

void sync() {
  if (cudaStreamSynchronize(stream()) != cudaSuccess) throw std::runtime_error("cuda sync failed");
}

// Registers one benchmark taking one size argument.
template <class F>
bool reg(const char* name, F fn, std::int64_t arg) {
  benchmark::RegisterBenchmark(name, fn)->Arg(arg)->UseManualTime()->Unit(benchmark::kMillisecond);
  return true;
}

// --- gemm ---

template <class T>
void gemm(benchmark::State& state, bool direct) {
  if (!have_cuda(state)) return;
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& ctx = gpu();
  sluice::rng::Philox gen(1);
  sluice::DeviceBuffer<T> a(ctx, n * n), b(ctx, n * n), c(ctx, n * n);
  sluice::rng::uniform(ctx, a, gen);
  sluice::rng::uniform(ctx, b, gen);
  ctx.synchronize();
  cublasHandle_t h = nullptr;
  cublasCreate(&h);
  cublasSetStream(h, stream());
  const T one = 1, zero = 0;
  const int in = static_cast<int>(n);
  auto direct_call = [&] {
    if constexpr (std::is_same_v<T, float>) {
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, in, in, &one, a.data(), in, b.data(), in, &zero,
                  c.data(), in);
    } else {
      cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, in, in, &one, a.data(), in, b.data(), in, &zero,
                  c.data(), in);
    }
  };
  using sluice::blas::Op;
  // Warm up both (cuBLAS picks and loads its kernels on first use).
  direct_call();
  sluice::blas::gemm<T>(ctx, Op::none, Op::none, n, n, n, one, a, n, b, n, zero, c, n);
  ctx.synchronize();
  if (direct) {
    timed(state, [&] {
      direct_call();
      sync();
    });
  } else {
    timed(state, [&] {
      sluice::blas::gemm<T>(ctx, Op::none, Op::none, n, n, n, one, a, n, b, n, zero, c, n);
      ctx.synchronize();
    });
  }
  cublasDestroy(h);
  state.counters["TFLOP"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) / 1e12,
                                               benchmark::Counter::kIsIterationInvariantRate);
}
const bool cuda_dgemm_sluice = reg(
    "cuda/dgemm/sluice", [](benchmark::State& s) { gemm<double>(s, false); }, 8192);
const bool cuda_dgemm_cublas = reg(
    "cuda/dgemm/cublas", [](benchmark::State& s) { gemm<double>(s, true); }, 8192);
const bool cuda_sgemm_sluice = reg(
    "cuda/sgemm/sluice", [](benchmark::State& s) { gemm<float>(s, false); }, 8192);
const bool cuda_sgemm_cublas = reg(
    "cuda/sgemm/cublas", [](benchmark::State& s) { gemm<float>(s, true); }, 8192);

// --- FFT: batched 2D c2c, float ---

void fft2d(benchmark::State& state, bool direct) {
  if (!have_cuda(state)) return;
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t batch = 4;
  auto& ctx = gpu();
  sluice::DeviceBuffer<std::complex<float>> x(ctx, n * n * batch), y(ctx, n * n * batch);
  sluice::memset(ctx, x, 0);
  cufftHandle plan = 0;
  int dims[2] = {static_cast<int>(n), static_cast<int>(n)};
  const int dist = static_cast<int>(n * n);
  cufftPlanMany(&plan, 2, dims, nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C,
                static_cast<int>(batch));
  cufftSetStream(plan, stream());
  auto* in = reinterpret_cast<cufftComplex*>(x.data());
  auto* out = reinterpret_cast<cufftComplex*>(y.data());
  const sluice::fft::Shape shape(n, n);
  sluice::fft::c2c(ctx, x, y, shape, sluice::fft::Direction::forward, batch);  // makes the plan
  ctx.synchronize();
  if (direct) {
    timed(state, [&] {
      cufftExecC2C(plan, in, out, CUFFT_FORWARD);
      sync();
    });
  } else {
    timed(state, [&] {
      sluice::fft::c2c(ctx, x, y, shape, sluice::fft::Direction::forward, batch);
      ctx.synchronize();
    });
  }
  cufftDestroy(plan);
}
const bool cuda_fft2d_c2c_f32_x4_sluice = reg(
    "cuda/fft2d_c2c_f32_x4/sluice", [](benchmark::State& s) { fft2d(s, false); }, 4096);
const bool cuda_fft2d_c2c_f32_x4_cufft = reg(
    "cuda/fft2d_c2c_f32_x4/cufft", [](benchmark::State& s) { fft2d(s, true); }, 4096);

// 1D r2c, double, batched.
void fft1d_r2c(benchmark::State& state, bool direct) {
  if (!have_cuda(state)) return;
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t batch = 16;
  auto& ctx = gpu();
  sluice::DeviceBuffer<double> x(ctx, n * batch);
  sluice::DeviceBuffer<std::complex<double>> y(ctx, (n / 2 + 1) * batch);
  sluice::memset(ctx, x, 0);
  cufftHandle plan = 0;
  int dims[1] = {static_cast<int>(n)};
  cufftPlanMany(&plan, 1, dims, nullptr, 1, static_cast<int>(n), nullptr, 1,
                static_cast<int>(n / 2 + 1), CUFFT_D2Z, static_cast<int>(batch));
  cufftSetStream(plan, stream());
  sluice::fft::r2c(ctx, x, y, {n}, batch);
  ctx.synchronize();
  if (direct) {
    timed(state, [&] {
      cufftExecD2Z(plan, x.data(), reinterpret_cast<cufftDoubleComplex*>(y.data()));
      sync();
    });
  } else {
    timed(state, [&] {
      sluice::fft::r2c(ctx, x, y, {n}, batch);
      ctx.synchronize();
    });
  }
  cufftDestroy(plan);
}
const bool cuda_fft1d_r2c_f64_x16_sluice = reg(
    "cuda/fft1d_r2c_f64_x16/sluice", [](benchmark::State& s) { fft1d_r2c(s, false); }, 1 << 20);
const bool cuda_fft1d_r2c_f64_x16_cufft = reg(
    "cuda/fft1d_r2c_f64_x16/cufft", [](benchmark::State& s) { fft1d_r2c(s, true); }, 1 << 20);

// --- RNG ---

enum class Impl { sluice, curand };

template <class T, bool Normal>
void rng(benchmark::State& state, Impl impl) {
  if (!have_cuda(state)) return;
  const auto n = static_cast<std::size_t>(state.range(0));
  auto& ctx = gpu();
  sluice::DeviceBuffer<T> x(ctx, n);
  curandGenerator_t g = nullptr;
  curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10);
  curandSetStream(g, stream());
  curandSetPseudoRandomGeneratorSeed(g, 1234);
  sluice::rng::Philox gen(1234);
  auto sluice_call = [&] {
    if constexpr (Normal) {
      sluice::rng::normal<T>(ctx, x, gen);
    } else {
      sluice::rng::uniform<T>(ctx, x, gen);
    }
  };
  auto curand_call = [&] {
    if constexpr (std::is_same_v<T, float>) {
      if constexpr (Normal) {
        curandGenerateNormal(g, x.data(), n, 0.0f, 1.0f);
      } else {
        curandGenerateUniform(g, x.data(), n);
      }
    } else {
      if constexpr (Normal) {
        curandGenerateNormalDouble(g, x.data(), n, 0.0, 1.0);
      } else {
        curandGenerateUniformDouble(g, x.data(), n);
      }
    }
  };
  sluice_call();
  curand_call();
  ctx.synchronize();
  sync();
  if (impl == Impl::curand) {
    timed(state, [&] {
      curand_call();
      sync();
    });
  } else {
    timed(state, [&] {
      sluice_call();
      ctx.synchronize();
    });
  }
  curandDestroyGenerator(g);
  state.counters["GB"] = benchmark::Counter(double(n * sizeof(T)) / 1e9,
                                            benchmark::Counter::kIsIterationInvariantRate);
}
constexpr std::int64_t kRngN = std::int64_t{1} << 28;
const bool cuda_rng_uniform_f32_sluice = reg(
    "cuda/rng_uniform_f32/sluice", [](benchmark::State& s) { rng<float, false>(s, Impl::sluice); },
    kRngN);
const bool cuda_rng_uniform_f32_curand = reg(
    "cuda/rng_uniform_f32/curand", [](benchmark::State& s) { rng<float, false>(s, Impl::curand); },
    kRngN);
const bool cuda_rng_normal_f32_sluice = reg(
    "cuda/rng_normal_f32/sluice", [](benchmark::State& s) { rng<float, true>(s, Impl::sluice); },
    kRngN);
const bool cuda_rng_normal_f32_curand = reg(
    "cuda/rng_normal_f32/curand", [](benchmark::State& s) { rng<float, true>(s, Impl::curand); },
    kRngN);
const bool cuda_rng_uniform_f64_sluice = reg(
    "cuda/rng_uniform_f64/sluice", [](benchmark::State& s) { rng<double, false>(s, Impl::sluice); },
    kRngN / 2);
const bool cuda_rng_uniform_f64_curand = reg(
    "cuda/rng_uniform_f64/curand", [](benchmark::State& s) { rng<double, false>(s, Impl::curand); },
    kRngN / 2);
const bool cuda_rng_normal_f64_sluice = reg(
    "cuda/rng_normal_f64/sluice", [](benchmark::State& s) { rng<double, true>(s, Impl::sluice); },
    kRngN / 2);
const bool cuda_rng_normal_f64_curand = reg(
    "cuda/rng_normal_f64/curand", [](benchmark::State& s) { rng<double, true>(s, Impl::curand); },
    kRngN / 2);

#endif  // SLUICE_BENCH_CUDA

}  // namespace

BENCHMARK_MAIN();
