// Dataflow misuse that depends on how a file was compiled, or on the host backend's semantics:
// compiled by the host compiler in every build.

#include <gtest/gtest.h>

#include <string>

#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test {
namespace {

namespace df = sluice::dataflow;
using df::access_mode;

bool has_cuda() {
  for (const auto& b : backends()) {
    if (b.name == "cuda" && b.device_count > 0) return true;
  }
  return false;
}

df::Queue host_queue() {
  return df::Queue(df::QueueOptions{.device = Device{"host", 0}});
}

TEST(DataflowMisuse, KernelWithoutDeviceCodeOnCudaIsAnError) {
  if (!has_cuda()) GTEST_SKIP() << "no cuda device";
  df::Queue q(df::QueueOptions{.device = Device{"cuda", 0}});
  try {
    q.single_task([] {});
    FAIL() << "no error";
  } catch (const sluice::Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("dataflow_cuda.cuh"), std::string::npos) << e.what();
  }
  q.wait();
}

TEST(DataflowMisuse, BufferOverDeviceMemoryOnAnotherDevice) {
  if (!has_cuda()) GTEST_SKIP() << "needs a cuda device beside the host";
  df::Queue gpu(df::QueueOptions{.device = Device{"cuda", 0}});
  auto host = host_queue();
  int* p = df::malloc_device<int>(16, gpu);
  {
    df::Buffer<int> b(p, df::range<1>(16));
    EXPECT_THROW(host.submit([&](df::Handler& h) { (void)b.get_access<access_mode::read>(h); }),
                 sluice::Error);
    EXPECT_THROW((df::HostAccessor<int, 1, access_mode::read>(b)), sluice::Error);
  }
  df::free(p, gpu);
}

TEST(DataflowMisuse, BarrierNotReachedByAllWorkItemsFails) {
  auto q = host_queue();
  q.parallel_for(df::nd_range<1>(df::range<1>(8), df::range<1>(4)), [](df::nd_item<1> it) {
    if (it.get_local_id(0) != 0) it.barrier();
  });
  EXPECT_THROW(q.wait(), sluice::WorkFailed);
  q.wait();  // reported once
}

TEST(DataflowMisuse, KernelExceptionIsReportedAtTheWait) {
  auto q = host_queue();
  df::Buffer<int> b{df::range<1>(64)};
  auto e = q.submit([&](df::Handler& h) {
    auto a = b.get_access<access_mode::write>(h, df::no_init);
    h.parallel_for(df::range<1>(64), [=](df::id<1> i) {
      if (i == 33) throw std::runtime_error("bad element 33");
      a[i] = 1;
    });
  });
  try {
    e.wait();
    FAIL() << "no error";
  } catch (const sluice::WorkFailed& f) {
    EXPECT_NE(f.cause().find("bad element 33"), std::string::npos) << f.cause();
  }
}

TEST(DataflowMisuse, BarrierOutsideNdRangeKernel) {
  auto q = host_queue();
  // A group object cannot be had in a range kernel (compile time); called from plain host code
  // the barrier is an error too.
  EXPECT_THROW(df::detail::host_barrier(), sluice::Error);
}

TEST(DataflowMisuse, UnknownDeviceIsAnError) {
  EXPECT_THROW(df::Queue(df::QueueOptions{.device = Device{"host", 7}}), sluice::Error);
}

}  // namespace
}  // namespace sluice::test
