// sluice_bench_scalar: the cost of evaluating scalar expressions (issue 5), on every device
// present.
//
//   run/<n>node/<device>      host time of ExecutableExpression::run (the enqueue cost of one
//                             evaluation of a compiled program); counter launches_per_eval.
//   eval/<n>node/<device>     host time of eval(expr, ctx): compile + allocate + enqueue.
//   device/<n>node/<device>   device time per evaluation: timing events around 100 back-to-back
//                             runs on one context (manual time = device time).
// With the cuda backend, the alternative to interpreting -- a kernel generated for the expression
// and compiled at run time -- is measured too:
//   nvrtc_compile/30node      NVRTC compile of the equivalent CUDA source to PTX (CPU only).
//   specialized_load/30node   loading that PTX as a module (driver JIT to SASS; needs a GPU).
//   specialized_device/<n>node/cuda:0
//                             device time of the compiled kernel, measured like device/.
//
// Why an interpreter (docs/scalar.md has the numbers): a compiled kernel is faster on the device
// by a fraction of a microsecond for 30 nodes, but it must be generated, compiled (NVRTC: tens to
// hundreds of milliseconds) and loaded for every new expression shape before its first run, and
// cached by shape afterwards. The interpreter has no first-run cost, one launch per evaluation
// like the compiled kernel, and its program travels by value in the launch parameters, so a
// captured graph node holds everything and needs no module management.

#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "sluice/event.hpp"
#include "sluice/scalar.hpp"
#include "sluice/sluice.hpp"

#ifdef SLUICE_BENCH_CUDA
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <stdexcept>

#include "sluice/cuda.hpp"
#endif

namespace {

using sluice::Context;
using sluice::Device;
using sluice::Managed;

constexpr int kSyncEvery = 1024;
constexpr int kDeviceBatch = 100;

struct Inputs {
  explicit Inputs(const Context& ctx) : a(0.75, ctx), b(1.5, ctx), c(-0.25, ctx), d(2.0, ctx) {
    ctx.synchronize();
  }
  Managed<double> a, b, c, d;
};

/// One operation: the reciprocal of reference 000, Listing 11.
auto expr1(const Inputs& in) {
  return 1.0 / in.a;
}

/// 30 nodes as written (17 operations, 12 input reads, 1 constant); 22 instructions once the
/// repeated reads of the four inputs are merged.
auto expr30(const Inputs& in) {
  const auto& [a, b, c, d] = in;
  return sqrt(abs(a * b / (d + 1.5) - a * c)) * (b - d) + sin(c) * cos(d) - min(a, b) + exp(a);
}

template <class MakeExpr>
void run(benchmark::State& state, const Device& device, MakeExpr make) {
  Context ctx(device);
  Inputs in(ctx);
  auto program = sluice::compile(make(in));
  Managed<double> target;
  program.run(target, ctx);
  ctx.synchronize();
  const auto before = sluice::scalar::stats().launches;
  int n = 0;
  for (auto _ : state) {
    program.run(target, ctx);
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  const auto launches = sluice::scalar::stats().launches - before;
  state.counters["launches_per_eval"] =
      static_cast<double>(launches) / static_cast<double>(state.iterations());
  state.counters["nodes"] = static_cast<double>(program.info().nodes);
  state.counters["instructions"] = static_cast<double>(program.info().instructions);
  state.SetItemsProcessed(state.iterations());
}

template <class MakeExpr>
void eval(benchmark::State& state, const Device& device, MakeExpr make) {
  Context ctx(device);
  Inputs in(ctx);
  int n = 0;
  for (auto _ : state) {
    Managed<double> r = sluice::eval(make(in), ctx);
    benchmark::DoNotOptimize(r.device_ptr());
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

template <class Launch>
void device_time(benchmark::State& state, const Context& ctx, Launch launch) {
  sluice::Event start({.timing = true}), stop({.timing = true});
  launch();  // warm up
  ctx.synchronize();
  for (auto _ : state) {
    start.record(ctx);
    for (int i = 0; i < kDeviceBatch; ++i) launch();
    stop.record(ctx);
    const double ms = sluice::Event::elapsed_ms(start, stop);
    state.SetIterationTime(ms / 1e3 / kDeviceBatch);
  }
  ctx.synchronize();
}

template <class MakeExpr>
void device(benchmark::State& state, const Device& device, MakeExpr make) {
  Context ctx(device);
  Inputs in(ctx);
  auto program = sluice::compile(make(in));
  Managed<double> target;
  device_time(state, ctx, [&] { program.run(target, ctx); });
}

#ifdef SLUICE_BENCH_CUDA

/// expr30 written as the kernel a runtime code generator would emit for it.
const char* kSource30 = R"(
extern "C" __global__ void expr30(const double* pa, const double* pb, const double* pc,
                                  const double* pd, double* out) {
  const double a = *pa, b = *pb, c = *pc, d = *pd;
  const double m = b < a ? b : a;
  *out = sqrt(fabs(a * b / (d + 1.5) - a * c)) * (b - d) + sin(c) * cos(d) - m + exp(a);
}
)";
const char* kSource1 = R"(
extern "C" __global__ void expr1(const double* pa, const double*, const double*, const double*,
                                 double* out) {
  *out = 1.0 / *pa;
}
)";

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + nvrtcGetErrorString(r));
}

std::string compile_ptx(const char* source, const char* name, int major, int minor) {
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, source, name, 0, nullptr, nullptr), "nvrtcCreateProgram");
  const std::string arch = "--gpu-architecture=compute_" + std::to_string(major * 10 + minor);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 2, options);
  if (r != NVRTC_SUCCESS) {
    std::size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    nvrtcDestroyProgram(&prog);
    throw std::runtime_error("nvrtcCompileProgram: " + log);
  }
  std::size_t size = 0;
  check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  check_nvrtc(nvrtcGetPTX(prog, ptx.data()), "nvrtcGetPTX");
  nvrtcDestroyProgram(&prog);
  return ptx;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

void nvrtc_compile(benchmark::State& state) {
  for (auto _ : state) {
    auto ptx = compile_ptx(kSource30, "expr30.cu", 9, 0);
    benchmark::DoNotOptimize(ptx.data());
  }
}

void specialized_load(benchmark::State& state) {
  const std::string ptx = compile_ptx(kSource30, "expr30.cu", 9, 0);
  for (auto _ : state) {
    cudaLibrary_t lib;
    check_cuda(cudaLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
               "cudaLibraryLoadData");
    cudaKernel_t kernel;
    check_cuda(cudaLibraryGetKernel(&kernel, lib, "expr30"), "cudaLibraryGetKernel");
    check_cuda(cudaLibraryUnload(lib), "cudaLibraryUnload");
  }
}

void specialized_device(benchmark::State& state, const char* source, const char* name) {
  Context ctx(Device{"cuda", 0});
  Inputs in(ctx);
  Managed<double> out(ctx);
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), "attribute");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), "attribute");
  const std::string ptx = compile_ptx(source, name, major, minor);
  cudaLibrary_t lib;
  check_cuda(cudaLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             "cudaLibraryLoadData");
  cudaKernel_t kernel;
  check_cuda(cudaLibraryGetKernel(&kernel, lib, name), "cudaLibraryGetKernel");
  const double *pa = in.a.device_ptr(), *pb = in.b.device_ptr(), *pc = in.c.device_ptr(),
               *pd = in.d.device_ptr();
  double* po = out.write_ptr(ctx);
  void* args[] = {&pa, &pb, &pc, &pd, &po};
  device_time(state, ctx, [&] {
    sluice::cuda::enqueue(ctx, name, [&](CUstream_st* s) {
      check_cuda(
          cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, s),
          "cudaLaunchKernel");
    });
  });
  ctx.synchronize();
  check_cuda(cudaLibraryUnload(lib), "cudaLibraryUnload");
}

#endif  // SLUICE_BENCH_CUDA

std::vector<Device> devices_present() {
  std::vector<Device> out{Device{"host", 0}};
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) out.push_back(Device{"cuda", 0});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto e1 = [](const Inputs& in) { return expr1(in); };
  const auto e30 = [](const Inputs& in) { return expr30(in); };
  bool have_cuda = false;
  for (const auto& d : devices_present()) {
    have_cuda = have_cuda || d.backend == "cuda";
    const std::string dev = d.to_string();
    benchmark::RegisterBenchmark(("run/1node/" + dev).c_str(), run<decltype(e1)>, d, e1)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("run/30node/" + dev).c_str(), run<decltype(e30)>, d, e30)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("eval/1node/" + dev).c_str(), eval<decltype(e1)>, d, e1)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("eval/30node/" + dev).c_str(), eval<decltype(e30)>, d, e30)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("device/1node/" + dev).c_str(), device<decltype(e1)>, d, e1)
        ->UseManualTime();
    benchmark::RegisterBenchmark(("device/30node/" + dev).c_str(), device<decltype(e30)>, d, e30)
        ->UseManualTime();
  }
#ifdef SLUICE_BENCH_CUDA
  benchmark::RegisterBenchmark("nvrtc_compile/30node", nvrtc_compile)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  if (have_cuda) {
    benchmark::RegisterBenchmark("specialized_load/30node", specialized_load)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("specialized_device/1node/cuda:0", specialized_device, kSource1,
                                 "expr1")
        ->UseManualTime();
    benchmark::RegisterBenchmark("specialized_device/30node/cuda:0", specialized_device, kSource30,
                                 "expr30")
        ->UseManualTime();
  }
#endif
  (void)have_cuda;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
