// Device inspection, the peer-access matrix, and work spread over several devices: a context per
// device, copies between them (peer or staged), the tracker ordering across devices, and a
// buffer of one device on another device's context refused with a clear error.

#include <string>

#include "backend_param.hpp"
#include "canned_test_util.hpp"
#include "sluice/blas.hpp"
#include "sluice/rng.hpp"

namespace sluice::test {
namespace {

class DevicesTest : public BackendTest {};

TEST_P(DevicesTest, InspectionFieldsAreFilled) {
  const auto info = device_info(device());
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GT(info.max_threads_per_block, 0);
  EXPECT_GT(info.warp_size, 0);
  EXPECT_GT(info.total_memory, 0u);
  if (is_host()) {
    EXPECT_EQ(info.compute_capability_major, 0);
    EXPECT_EQ(info.max_threads_per_block, 1);
    EXPECT_LE(info.multiprocessors, info.compute_units);
    EXPECT_EQ(info.peer_access, std::vector<bool>{true});
  } else {
    EXPECT_GE(info.compute_capability_major, 3);
    EXPECT_EQ(info.multiprocessors, info.compute_units);
    EXPECT_GT(info.clock_khz, 0);
    EXPECT_GT(info.memory_bandwidth_gbs, 10.0);
    EXPECT_GT(info.l2_cache_bytes, 0u);
    EXPECT_GT(info.shared_memory_per_block, 0u);
    EXPECT_GE(info.shared_memory_per_multiprocessor, info.shared_memory_per_block);
    EXPECT_GE(info.max_threads_per_multiprocessor, info.max_threads_per_block);
    EXPECT_EQ(info.warp_size, 32);
  }
}

TEST_P(DevicesTest, PeerAccessMatrixIsSquareWithEachDeviceReachingItself) {
  const auto m = peer_access_matrix(device().backend);
  std::size_t n = 0;
  for (const auto& b : backends()) {
    if (b.name == device().backend) n = b.device_count;
  }
  ASSERT_EQ(m.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(m[i].size(), n);
    EXPECT_TRUE(m[i][i]);
    EXPECT_EQ(device_info(Device{device().backend, int(i)}).peer_access, m[i]);
  }
}

// Every device of the backend under test, plus the host: data generated on the host goes
// through each device in turn (peer copies between GPUs, staged where peers lack access) and
// comes back; no call waits by hand: the tracker orders each copy after the last writer.
TEST_P(DevicesTest, DataTravelsAcrossEveryDeviceInTrackerOrder) {
  Context host(Device{"host", 0});
  std::vector<Context> ctxs;
  for (const auto& d : devices()) {
    if (d.device.backend == device().backend) ctxs.emplace_back(d.device);
  }
  const std::size_t n = 300001;
  DeviceBuffer<double> origin(host, n);
  rng::Philox gen(8);
  rng::uniform(host, origin, gen);
  std::vector<DeviceBuffer<double>> hops;
  const DeviceBuffer<double>* last = &origin;
  for (auto& c : ctxs) {
    hops.emplace_back(c, n);
    copy(c, hops.back(), *last);      // host -> device, then device -> device
    blas::scal(c, 2.0, hops.back());  // each device changes the data before passing it on
    last = &hops.back();
  }
  DeviceBuffer<double> back(host, n);
  copy(ctxs.back(), back, *last);  // device -> host backend memory, issued on the device
  const auto want = to_host(host, origin);
  const auto got = to_host(host, back);
  const double factor = std::ldexp(1.0, int(ctxs.size()));
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i] * factor) << i;
}

TEST_P(DevicesTest, ABufferOfAnotherDeviceIsRefused) {
  if (is_host()) GTEST_SKIP() << "needs a second device: run with a GPU";
  auto gpu = make_context();
  Context host(Device{"host", 0});
  DeviceBuffer<double> on_gpu(gpu, 16), on_host(host, 16);
  try {
    blas::axpy(host, 1.0, on_gpu, on_host);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("belongs to " + device().to_string()), std::string::npos)
        << e.what();
  }
  try {
    copy(host, on_host, on_gpu);  // the host cannot reach device memory: issue it on the GPU
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(device().to_string()), std::string::npos) << e.what();
  }
  host.synchronize();
  gpu.synchronize();
}

SLUICE_INSTANTIATE_BACKENDS(DevicesTest);

}  // namespace
}  // namespace sluice::test
