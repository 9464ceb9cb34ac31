// 06 — typed kernels and loader specs (reference 003, StreamExecutor).
//
// The reference's add_mystery_value three ways: from PTX in memory, from CUDA C++ source compiled
// at run time by NVRTC (and cached on disk for the next run), and from a host implementation for
// the host backend. A KernelSpec may hold all of them; loading picks what fits the device.
// TypedKernel<float, float*> checks the arguments at compile time (passing 42.5, a double, would
// not compile) and the module's parameters at load time.

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

// The reference's hand-written PTX: *result_loc = float_literal + 123.
constexpr const char* kPtx = R"(
    .version 3.1
    .target sm_20
    .address_size 64
    .visible .entry add_mystery_value(
        .param .f32 float_literal,
        .param .u64 result_loc
        ) {
      .reg .u64 %rl<2>;
      .reg .f32 %f<2>;
      ld.param.f32 %f1, [float_literal];
      ld.param.u64 %rl1, [result_loc];
      add.f32 %f1, %f1, 123.0;
      st.f32 [%rl1], %f1;
      ret;
    }
    )";

constexpr const char* kSource = R"(
extern "C" __global__ void add_mystery_value(float input, float* output) {
  *output = input + 123.0f;
})";

constexpr float kMystery = 123.0f;

// Loads `spec` for ctx's device, launches it once through the fluent API and checks the result.
bool run(const char* label, const sluice::Context& ctx, const sluice::KernelSpec& spec) {
  sluice::TypedKernel<float, float*> kernel(ctx, spec);
  sluice::DeviceBuffer<float> result(ctx, 1);
  std::vector<float> host(1);
  const float input = 42.5f;
  sluice::Timer timer;
  ctx.then()
      .then_start_timer(timer)
      .then_launch(kernel, 1, 1, input, sluice::write(result))  // write(): tracked output
      .then_stop_timer(timer)
      .then_copy(host, result)
      .block_host_until_done();
  const bool ok = host[0] == input + kMystery;
  std::printf("%-28s on %-7s loaded as %-11s: %.1f + %.1f = %.1f (%.3f ms) %s\n", label,
              ctx.device().to_string().c_str(), sluice::to_string(kernel.format()), input, kMystery,
              host[0], timer.elapsed_ms(), ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace

int main() {
  bool ok = true;

  // The host backend runs the host implementation: f(index, args...) for every thread index.
  sluice::KernelSpec host_spec("add_mystery_value", 2);
  host_spec.add_host<float, float*>(
      [](std::size_t, float input, float* output) { *output = input + kMystery; });
  ok &= run("host implementation", sluice::Context(sluice::Device{"host", 0}), host_spec);

  bool have_gpu = false;
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) have_gpu = true;
    if (b.name == "cuda" && b.device_count == 0) {
      std::printf("cuda parts skipped: %s\n", b.unavailable_reason.c_str());
    }
  }
  if (!have_gpu) {
    std::printf("no GPU: PTX and NVRTC variants not run\n");
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
  }

  sluice::Context gpu(sluice::Device{"cuda", 0});
  sluice::KernelSpec ptx_spec("add_mystery_value", 2);
  ptx_spec.add_ptx_in_memory(kPtx);
  ok &= run("PTX in memory", gpu, ptx_spec);

  sluice::KernelSpec source_spec("add_mystery_value", 2);
  source_spec.add_cuda_source(kSource);
  ok &= run("CUDA source through NVRTC", gpu, source_spec);
  std::printf("NVRTC cache: %s\n", sluice::kernel_cache::directory().c_str());
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
