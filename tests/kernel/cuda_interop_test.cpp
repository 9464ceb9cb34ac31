// sluice/cuda.hpp through the cuda module: the functions live in libsluice and forward to the
// module, the program's own kernels (registered with the shared CUDA runtime, sluice::cuda) are
// launched as operations of a context, and the native stream and handles are the context's.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluice/cuda.hpp"
#include "sluice/sluice.hpp"

#ifdef SLUICE_TEST_CUDA
#include <cublas_v2.h>

#include "cuda_interop_kernels.hpp"
#endif

namespace sluice::test {
namespace {

template <class F>
void expect_needs_cuda(F&& f, const std::string& call) {
  try {
    f();
    ADD_FAILURE() << call << " accepted a host context";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(call + " needs a context on a cuda device"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaInterop, OnAHostContextEveryCallIsAClearError) {
  Context ctx(ContextOptions{.device = Device{"host", 0}});
  DeviceBuffer<float> x(ctx, 16);
  expect_needs_cuda([&] { (void)cuda::stream(ctx); }, "sluice::cuda::stream");
  expect_needs_cuda([&] { (void)cuda::blas_handle(ctx); }, "sluice::cuda::blas_handle");
  expect_needs_cuda([&] { (void)cuda::sparse_handle(ctx); }, "sluice::cuda::sparse_handle");
  expect_needs_cuda([&] { cuda::enqueue(ctx, "nothing", [](CUstream_st*) {}); },
                    "sluice::cuda::enqueue");
  void (*kernel)(float*, int) = [](float*, int) {};
  expect_needs_cuda([&] { cuda::launch(ctx, kernel, 1, 1, 0, x.data(), 16); },
                    "sluice::cuda::launch");
  ctx.synchronize();  // nothing was issued, nothing failed
}

#ifdef SLUICE_TEST_CUDA
class CudaInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& b : backends()) {
      if (b.name == "cuda" && b.device_count > 0) return;
      if (b.name == "cuda") GTEST_SKIP() << "cuda has no devices: " << b.unavailable_reason;
    }
    FAIL() << "the cuda backend is not registered in a build with the cuda module";
  }
  static constexpr int n = 10000;
  static std::vector<float> read(const Context& ctx, const DeviceBuffer<float>& x) {
    std::vector<float> out(x.size());
    copy(ctx, out, x);
    ctx.synchronize();
    return out;
  }
};

TEST_F(CudaInteropTest, LaunchRunsTheProgramsKernelAsAnOperation) {
  Context ctx(ContextOptions{.device = Device{"cuda", 0}});
  DeviceBuffer<float> x(ctx, n);
  memset(ctx, x, 0);
  cuda::launch(ctx, fill_kernel(), (n + 255) / 256, 256, 0, x.data(), 3.0f, n);
  EXPECT_EQ(read(ctx, x), std::vector<float>(n, 3.0f));
}

TEST_F(CudaInteropTest, EnqueueRunsOnTheContextsStreamInIssueOrder) {
  Context ctx(ContextOptions{.device = Device{"cuda", 0}});
  EXPECT_EQ(static_cast<void*>(cuda::stream(ctx)), ctx.native_handle());
  DeviceBuffer<float> x(ctx, n);
  memset(ctx, x, 0);
  CUstream_st* seen = nullptr;
  cuda::enqueue(ctx, "fill", [&](CUstream_st* s) {
    seen = s;
    launch_fill(s, x.data(), 5.0f, n);
  });
  EXPECT_EQ(seen, cuda::stream(ctx));
  EXPECT_EQ(read(ctx, x), std::vector<float>(n, 5.0f));
}

TEST_F(CudaInteropTest, TheBlasHandleIsTheContextsAndWorks) {
  Context ctx(ContextOptions{.device = Device{"cuda", 0}});
  cublasHandle_t handle = cuda::blas_handle(ctx);
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(handle, cuda::blas_handle(ctx));
  EXPECT_NE(cuda::sparse_handle(ctx), nullptr);
  DeviceBuffer<float> x(ctx, n);
  cuda::launch(ctx, fill_kernel(), (n + 255) / 256, 256, 0, x.data(), 1.5f, n);
  const float alpha = 2.0f;
  cuda::enqueue(ctx, "cublasSscal", [&](CUstream_st*) {
    ASSERT_EQ(cublasSscal(handle, n, &alpha, x.data(), 1), CUBLAS_STATUS_SUCCESS);
  });
  EXPECT_EQ(read(ctx, x), std::vector<float>(n, 3.0f));
}
#endif

}  // namespace
}  // namespace sluice::test
