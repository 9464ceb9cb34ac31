// Typed kernels on every backend: the reference's add_mystery_value from each format, spec
// selection, every mismatch reported at load time, misuse, tracked arguments ordered across
// contexts, and a randomized differential test against sequential execution.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "kernel_test_util.hpp"
#include "sluice/kernel.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test {
namespace {

class TypedKernelTest : public BackendTest {
 protected:
  // The spec's every format: each backend picks what fits it.
  static KernelSpec mystery_spec() {
    KernelSpec spec("add_mystery_value", 2);
    spec.add_ptx_in_memory(kMysteryPtx).add_cuda_source(kMysterySource);
    add_mystery_host(spec);
    return spec;
  }

  float run_mystery(const MysteryKernel& kernel, const Context& ctx, float input) {
    DeviceBuffer<float> result(ctx, 1);
    kernel.launch(ctx, 1, 1, input, write(result));
    std::vector<float> h(1);
    copy(ctx, h, result);
    ctx.synchronize();
    return h[0];
  }

  template <class F>
  static std::string error_of(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_P(TypedKernelTest, MysteryValueFromEveryFormatThatFits) {
  auto ctx = make_context();
  MysteryKernel kernel(ctx, mystery_spec());
  EXPECT_EQ(kernel.format(), is_host() ? KernelFormat::host : KernelFormat::ptx);
  EXPECT_EQ(kernel.name(), "add_mystery_value");
  EXPECT_EQ(kernel.device(), device());
  EXPECT_EQ(run_mystery(kernel, ctx, 42.5f), 42.5f + kMystery);
  if (!is_host()) {  // the same from source through NVRTC, and from a cubin
    KernelSpec source("add_mystery_value");
    source.add_cuda_source(kMysterySource);
    MysteryKernel from_source(ctx, source);
    EXPECT_EQ(from_source.format(), KernelFormat::cuda_source);
    EXPECT_EQ(run_mystery(from_source, ctx, 1.5f), 1.5f + kMystery);
  }
}

TEST_P(TypedKernelTest, LoadPicksCubinOfTheDeviceThenPtxThenSource) {
  if (is_host()) GTEST_SKIP() << "device code formats: cuda only";
  auto ctx = make_context();
  const auto info = device_info(device());
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(info.details.c_str(), "compute capability %d.%d", &major, &minor), 2)
      << info.details;
  const int arch = major * 10 + minor;
  const std::string cubin =
      kernel_cache::compile(kMysterySource, "add_mystery_value", {}, arch).image;

  KernelSpec all("add_mystery_value");
  all.add_cuda_source(kMysterySource)
      .add_ptx_in_memory(kMysteryPtx)
      .add_cubin_in_memory(cubin, arch);
  EXPECT_EQ(MysteryKernel(ctx, all).format(), KernelFormat::cubin);

  KernelSpec wrong_arch("add_mystery_value");
  wrong_arch.add_cubin_in_memory(cubin, major * 10 + 10).add_ptx_in_memory(kMysteryPtx);
  MysteryKernel ptx(ctx, wrong_arch);
  EXPECT_EQ(ptx.format(), KernelFormat::ptx);
  EXPECT_EQ(run_mystery(ptx, ctx, 2.0f), 2.0f + kMystery);

  KernelSpec only_wrong("add_mystery_value");
  only_wrong.add_cubin_in_memory(cubin, major * 10 + 10);
  EXPECT_NE(error_of([&] { MysteryKernel k(ctx, only_wrong); }).find("has no code that fits"),
            std::string::npos);

  // On disk: the same cubin and PTX from files.
  auto dir =
      std::filesystem::temp_directory_path() / ("sluice-kernel-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "m.cubin", std::ios::binary) << cubin;
  std::ofstream(dir / "m.ptx") << kMysteryPtx;
  KernelSpec disk_cubin("add_mystery_value");
  disk_cubin.add_cubin_on_disk(dir / "m.cubin", arch);
  EXPECT_EQ(run_mystery(MysteryKernel(ctx, disk_cubin), ctx, 3.0f), 3.0f + kMystery);
  KernelSpec disk_ptx("add_mystery_value");
  disk_ptx.add_ptx_on_disk(dir / "m.ptx");
  EXPECT_EQ(run_mystery(MysteryKernel(ctx, disk_ptx), ctx, 4.0f), 4.0f + kMystery);
  std::filesystem::remove_all(dir);
}

TEST_P(TypedKernelTest, EveryMismatchIsAnErrorAtLoad) {
  auto ctx = make_context();
  KernelSpec spec = mystery_spec();
  // Too many parameters in the TypedKernel.
  auto e = error_of([&] { TypedKernel<float, float*, int> k(ctx, spec); });
  EXPECT_TRUE(e.find("add_mystery_value") != std::string::npos) << e;
  EXPECT_TRUE(e.find("parameter") != std::string::npos) << e;
  // A parameter of the wrong size (double for float).
  e = error_of([&] { TypedKernel<double, float*> k(ctx, spec); });
  EXPECT_TRUE(e.find("add_mystery_value") != std::string::npos) << e;
  // A spec whose arity contradicts the module.
  KernelSpec wrong_arity("add_mystery_value", 3);
  wrong_arity.add_ptx_in_memory(kMysteryPtx);
  add_mystery_host(wrong_arity);
  e = error_of([&] { MysteryKernel k(ctx, wrong_arity); });
  EXPECT_TRUE(e.find("spec says 3 parameters") != std::string::npos) << e;

  if (is_host()) {
    KernelSpec device_only("add_mystery_value");
    device_only.add_ptx_in_memory(kMysteryPtx);
    e = error_of([&] { MysteryKernel k(ctx, device_only); });
    EXPECT_TRUE(e.find("no host implementation") != std::string::npos) << e;
    return;
  }
  // Wrong name, malformed PTX, NVRTC error, missing file: all at load.
  KernelSpec wrong_name("add_mystery");
  wrong_name.add_ptx_in_memory(kMysteryPtx);
  e = error_of([&] { MysteryKernel k(ctx, wrong_name); });
  EXPECT_TRUE(e.find("has no kernel named 'add_mystery'") != std::string::npos) << e;
  EXPECT_TRUE(e.find("add_mystery_value") != std::string::npos) << e;  // lists what it has

  KernelSpec bad_ptx("add_mystery_value");
  bad_ptx.add_ptx_in_memory(
      ".version 3.1\n.target sm_20\n.address_size 64\n.visible .entry "
      "add_mystery_value( { bogus; }\n");
  e = error_of([&] { MysteryKernel k(ctx, bad_ptx); });
  EXPECT_TRUE(e.find("could not load ptx") != std::string::npos) << e;

  KernelSpec bad_source("add_mystery_value");
  bad_source.add_cuda_source(
      "extern \"C\" __global__ void add_mystery_value(float x, float* y) "
      "{ *y = x + undefined_thing; }");
  e = error_of([&] { MysteryKernel k(ctx, bad_source); });
  EXPECT_TRUE(e.find("NVRTC could not compile") != std::string::npos) << e;
  EXPECT_TRUE(e.find("undefined_thing") != std::string::npos) << e;  // the log

  KernelSpec missing("add_mystery_value");
  missing.add_ptx_on_disk("/nonexistent/sluice/m.ptx");
  e = error_of([&] { MysteryKernel k(ctx, missing); });
  EXPECT_TRUE(e.find("/nonexistent/sluice/m.ptx") != std::string::npos) << e;
}

TEST_P(TypedKernelTest, MisuseIsAClearError) {
  auto ctx = make_context();
  MysteryKernel unloaded;
  DeviceBuffer<float> r(ctx, 1);
  try {
    unloaded.launch(ctx, 1, 1, 1.0f, write(r));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state);
    EXPECT_EQ(e.where().line(), __LINE__ - 4);  // the launch's line
  }
  MysteryKernel kernel(ctx, mystery_spec());
  EXPECT_THROW(kernel.launch(ctx, 0, 1, 1.0f, write(r)), Error);        // empty grid
  EXPECT_THROW(kernel.launch(ctx, 1, 1, 1.0f, write(r, 1, 1)), Error);  // range past the end
  // A kernel loaded for one device, launched on another device's context.
  for (const auto& other : devices()) {
    if (other.device == device()) continue;
    Context there(other.device);
    DeviceBuffer<float> r2(there, 1);
    auto e = error_of([&] { kernel.launch(there, 1, 1, 1.0f, write(r2)); });
    EXPECT_NE(e.find("was loaded for " + device().to_string()), std::string::npos) << e;
    EXPECT_NE(e.find("load it for that device"), std::string::npos) << e;
  }
  ctx.synchronize();
}

TEST_P(TypedKernelTest, RangesPassTheFirstElementAndRawPointersStayUntracked) {
  auto ctx = make_context();
  AxpyKernel axpy(ctx, axpy_spec());
  constexpr unsigned n = 10000;
  std::vector<float> hx(n), hy(n);
  for (unsigned i = 0; i < n; ++i) {
    hx[i] = static_cast<float>(i % 97);
    hy[i] = static_cast<float>(i % 13);
  }
  DeviceBuffer<float> x(ctx, n), y(ctx, n);
  copy(ctx, x, hx);
  copy(ctx, y, hy);
  // The second half only, through ranges: the kernel sees element n/2 as its element 0.
  axpy.launch(ctx, (n / 2 + 255) / 256, 256, n / 2, 2.0f, read(x, n / 2, n / 2),
              read_write(y, n / 2, n / 2));
  // Then all of it with raw pointers (untracked; same context, so in order anyway).
  axpy.launch(ctx, (n + 127) / 128, 128, n, 1.0f, static_cast<const float*>(x.data()), y.data());
  std::vector<float> out(n);
  copy(ctx, out, y);
  ctx.synchronize();
  for (unsigned i = 0; i < n; ++i) {
    const float expect = hy[i] + (i >= n / 2 ? 2.0f * hx[i] : 0.0f) + hx[i];
    ASSERT_EQ(out[i], expect) << i;
  }
}

TEST_P(TypedKernelTest, TrackedArgumentsOrderLaunchesAcrossContexts) {
  auto a = make_context();
  auto b = make_context();
  AxpyKernel axpy(a, axpy_spec());
  constexpr unsigned n = 4096;
  DeviceBuffer<float> x(a, n), y(a, n);
  memset(a, y, 0);
  std::vector<float> ones(n, 1.0f);
  copy(a, x, ones);
  a.synchronize();
  Gate gate(device());
  gate.block(a);
  // a: y += 3 x (held back by the gate); b: x += 1 y must wait for it (it reads y).
  axpy.launch(a, n / 256, 256, n, 3.0f, read(x), read_write(y));
  axpy.launch(b, n / 256, 256, n, 1.0f, read(y), read_write(x));
  gate.open();
  std::vector<float> hx(n);
  copy(b, hx, x);
  b.synchronize();
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(hx[i], 4.0f) << i;  // 1 + 3
}

// Dropping a kernel whose launch is still held back behind another context's work never waits
// for the device (on cuda the unload of its library ran cudaDeviceSynchronize on this thread).
TEST_P(TypedKernelTest, DroppingAKernelWhileItsLaunchIsHeldBackNeverWaits) {
  auto a = make_context();
  auto b = make_context();
  constexpr unsigned n = 4096;
  DeviceBuffer<float> x(a, n), y(a, n);
  memset(a, y, 0);
  a.synchronize();
  auto axpy = std::make_unique<AxpyKernel>(a, axpy_spec());
  const std::vector<float> twos(n, 2.0f);  // read when the copy runs
  {
    Gate gate(device());
    gate.block(a);
    copy(a, x, twos);                                                // held back
    axpy->launch(b, n / 256, 256, n, 3.0f, read(x), read_write(y));  // ordered after it
    axpy.reset();
    gate.open();
  }
  std::vector<float> hy(n);
  copy(b, hy, y);
  b.synchronize();
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(hy[i], 6.0f) << i;
}

// Random launches over random contexts and buffers, tracked, against the same steps run
// sequentially on the host.
TEST_P(TypedKernelTest, RandomLaunchesMatchSequentialExecution) {
  std::vector<Context> ctxs{make_context(), make_context(), make_context()};
  AxpyKernel axpy(ctxs[0], axpy_spec());
  constexpr unsigned n = 1000;
  constexpr int buffers = 4;
  std::mt19937 rng(1234);
  std::vector<DeviceBuffer<float>> dev;
  std::vector<std::vector<float>> ref(buffers, std::vector<float>(n));
  for (int b = 0; b < buffers; ++b) {
    for (unsigned i = 0; i < n; ++i) ref[b][i] = static_cast<float>((i * (b + 1)) % 7);
    dev.emplace_back(ctxs[0], n);
    copy(ctxs[0], dev.back(), ref[b]);
  }
  ctxs[0].synchronize();  // the pageable sources change below
  for (int step = 0; step < 60; ++step) {
    const int src = static_cast<int>(rng() % buffers);
    int dst = static_cast<int>(rng() % buffers);
    if (dst == src) dst = (dst + 1) % buffers;
    const float a = static_cast<float>(static_cast<int>(rng() % 5) - 2);
    const unsigned first = rng() % n;
    const unsigned count = 1 + rng() % (n - first);
    const auto& ctx = ctxs[rng() % ctxs.size()];
    axpy.launch(ctx, (count + 63) / 64, 64, count, a, read(dev[src], first, count),
                read_write(dev[dst], first, count));
    for (unsigned i = first; i < first + count; ++i) ref[dst][i] = a * ref[src][i] + ref[dst][i];
  }
  for (int b = 0; b < buffers; ++b) {
    std::vector<float> out(n);
    copy(ctxs[1], out, dev[b]);
    ctxs[1].synchronize();
    ASSERT_EQ(out, ref[b]) << "buffer " << b;
  }
}

TEST_P(TypedKernelTest, BlockingContextCompletesTheLaunch) {
  auto ctx = make_context(StreamKind::blocking);
  MysteryKernel kernel(ctx, mystery_spec());
  PinnedBuffer<float> r(ctx, 1);
  kernel.launch(ctx, 1, 1, 7.0f, write(r));
  EXPECT_EQ(r.read()[0], 7.0f + kMystery);
}

SLUICE_INSTANTIATE_BACKENDS(TypedKernelTest);

}  // namespace
}  // namespace sluice::test
