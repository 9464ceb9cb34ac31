#pragma once
// Dataflow commands and queue conveniences from SYCL 2020 §4.6.5 and §4.9.4: queue::memcpy,
// memset, fill, copy with events and depends_on; handler::copy, fill, update_host on accessors;
// the queue's shortcut overloads; event profiling; device information. Written once like
// dataflow_cases.hpp; every case runs on every backend.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "backend_param.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test::dataflow_command_cases {

namespace df = sluice::dataflow;
using df::access_mode;

/// A 12-byte pattern: fills are not byte-wise.
struct Triple {
  int a, b, c;
  friend bool operator==(const Triple&, const Triple&) = default;
};

/// USM commands chained by events only (SYCL's model for USM): memset, fill, a kernel, memcpy,
/// copy, each depending on the one before, on an out-of-order queue whose groups spread over
/// contexts; the results read back through host memory.
inline void usm_commands_with_events(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 10000;
  auto* a = df::malloc_device<int>(n, q);
  auto* b = df::malloc_device<int>(n, q);
  auto* t = df::malloc_device<Triple>(n, q);
  auto* out = df::malloc_host<int>(n, q);
  auto* tout = df::malloc_host<Triple>(n, q);
  const df::Event e1 = q.memset(a, 0, n * sizeof(int));
  const df::Event e2 = q.fill(b, 7, n, e1);
  const df::Event e3 = q.parallel_for(df::range<1>(n), std::vector<df::Event>{e1, e2},
                                      [=] SLUICE_KERNEL(df::id<1> i) { a[i] += b[i] + int(i[0]); });
  const df::Event e4 = q.memcpy(b, a, n * sizeof(int), e3);
  const df::Event e5 = q.copy(b, out, n, e4);
  const df::Event e6 = q.fill(t, Triple{1, -2, 3}, n);
  const df::Event e7 = q.copy(t, tout, n, {e6, e1});
  df::wait_all({e5, e7});
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], 7 + static_cast<int>(i)) << i;
    ASSERT_EQ(tout[i], (Triple{1, -2, 3})) << i;
  }
  // Host memory the queue does not know: a copy into a std::vector.
  std::vector<int> v(n, -1);
  q.copy(out, v.data(), n).wait();
  EXPECT_EQ(v[n - 1], 7 + static_cast<int>(n - 1));
  // Sizes that do not match: an Error before anything is issued.
  EXPECT_THROW(q.submit([&](df::Handler& h) { h.memcpy(nullptr, a, 4); }), sluice::Error);
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(t),
                  static_cast<void*>(out), static_cast<void*>(tout)}) {
    df::free(p, q);
  }
}

/// Accessor commands: a kernel writes a buffer, handler::copy reads it into host memory, copy
/// from host memory into a ranged accessor of whole rows, copy between accessors, fill of a
/// ranged (strided) accessor, update_host; the buffer's accessors order them.
inline void accessor_commands(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t rows = 6, cols = 10;
  std::vector<int> host(rows * cols, 0);
  std::vector<int> dst(rows * cols, -1);
  std::vector<int> src(2 * cols);
  std::iota(src.begin(), src.end(), 1000);
  {
    df::Buffer<int, 2> b(host.data(), df::range<2>(rows, cols));
    df::Buffer<int, 2> c{df::range<2>(rows, cols)};
    q.submit([&](df::Handler& h) {
      auto a = b.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range<2>(rows, cols),
                     [=] SLUICE_KERNEL(df::id<2> i) { a[i] = int(i[0] * 100 + i[1]); });
    });
    // Rows 2 and 3 from host memory (a ranged accessor spanning whole rows is contiguous).
    q.submit([&](df::Handler& h) {
      auto a = b.get_access<access_mode::write>(h, df::range<2>(2, cols), df::id<2>(2, 0));
      h.copy(src.data(), a);
    });
    // The whole buffer into another buffer, then a strided 3x4 block of it filled.
    q.submit([&](df::Handler& h) {
      auto from = b.get_access<access_mode::read>(h);
      auto to = c.get_access<access_mode::write>(h, df::no_init);
      h.copy(from, to);
    });
    q.submit([&](df::Handler& h) {
      auto block = c.get_access<access_mode::write>(h, df::range<2>(3, 4), df::id<2>(1, 5));
      h.fill(block, -7);
    });
    const df::Event read = q.submit([&](df::Handler& h) {
      auto from = c.get_access<access_mode::read>(h);
      h.copy(from, dst.data());
    });
    read.wait();
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {
        const int base = (i == 2 || i == 3) ? src[(i - 2) * cols + j] : int(i * 100 + j);
        const bool filled = i >= 1 && i < 4 && j >= 5 && j < 9;
        EXPECT_EQ(dst[i * cols + j], filled ? -7 : base) << i << "," << j;
      }
    }
    // update_host: the host memory b was made over holds the data once the event completed,
    // while the buffer still lives.
    q.submit([&](df::Handler& h) {
       auto a = b.get_access<access_mode::read>(h);
       h.update_host(a);
     }).wait();
    EXPECT_EQ(host[2 * cols + 3], 1003);
    EXPECT_EQ(host[5 * cols + 9], 509);
    // A column block of b is not contiguous: copying it is an Error that says what to do.
    EXPECT_THROW(q.submit([&](df::Handler& h) {
      auto a = b.get_access<access_mode::read>(h, df::range<2>(2, 3), df::id<2>(0, 0));
      h.copy(a, dst.data());
    }),
                 sluice::Error);
  }
}

/// The queue's shortcuts (§4.6.5.2): parallel_for over a range and an nd_range after one event
/// or a list, with reductions, and single_task after an event.
inline void queue_shortcuts(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const std::size_t n = 256;
  auto* x = df::malloc_shared<int>(n, q);
  auto* s = df::malloc_shared<int>(2, q);
  const df::Event e1 =
      q.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { x[i] = 1; });
  const df::Event e2 = q.parallel_for(df::range<1>(n), e1, [=] SLUICE_KERNEL(df::item<1> it) {
    x[it] += static_cast<int>(it.get_id(0));
  });
  const df::Event e3 =
      q.parallel_for(df::nd_range<1>(df::range<1>(n), df::range<1>(64)), {e1, e2},
                     [=] SLUICE_KERNEL(df::nd_item<1> it) { x[it.get_global_id(0)] *= 2; });
  const df::Event e4 = q.single_task({e3, e2}, [=] SLUICE_KERNEL() { s[1] = x[n - 1]; });
  q.parallel_for(
       df::range<1>(n), e4,
       df::reduction(s, df::plus<int>(), df::property::reduction::initialize_to_identity{}),
       [=] SLUICE_KERNEL(df::id<1> i, df::Reducer<int, df::plus<int>> & r) { r += x[i]; })
      .wait();
  EXPECT_EQ(s[1], 2 * (1 + static_cast<int>(n) - 1));
  EXPECT_EQ(s[0], 2 * static_cast<int>(n + n * (n - 1) / 2));
  df::free(x, q);
  df::free(s, q);
}

/// §4.6.6.2: with profiling on, command_submit <= command_start <= command_end, and a command
/// group that takes at least 20 ms shows it; without, asking is an Error.
inline void profiling(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d, .profiling = true});
  auto* flag = df::malloc_shared<int>(1, q);
  const auto before = std::chrono::steady_clock::now();
  const df::Event e = q.single_task([=] SLUICE_KERNEL() {
#if defined(__CUDA_ARCH__)
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < 20'000'000ull);
#else
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
#endif
    *flag = 1;
  });
  const auto submit = e.get_profiling_info<df::info::event_profiling::command_submit>();
  const auto start = e.get_profiling_info<df::info::event_profiling::command_start>();
  const auto end = e.get_profiling_info<df::info::event_profiling::command_end>();
  EXPECT_EQ(*flag, 1);
  EXPECT_LE(
      static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count()),
      submit);
  EXPECT_LE(submit, start);
  EXPECT_LE(start, end);
  EXPECT_GE(end - start, 19'000'000u);
  // A command (not a kernel) and a group with no operation are profiled too.
  const df::Event c = q.memset(flag, 0, sizeof(int), e);
  EXPECT_LE(c.get_profiling_info<df::info::event_profiling::command_start>(),
            c.get_profiling_info<df::info::event_profiling::command_end>());
  EXPECT_GE(c.get_profiling_info<df::info::event_profiling::command_start>(), end);
  df::Queue plain(df::QueueOptions{.device = d});
  const df::Event p = plain.single_task([=] SLUICE_KERNEL() {});
  EXPECT_THROW((void)p.get_profiling_info<df::info::event_profiling::command_end>(), sluice::Error);
  EXPECT_FALSE(plain.profiling());
  q.wait();
  df::free(flag, q);
}

/// §4.6.4.2: what programs ask of a device before they size their work-groups.
inline void device_info(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  const df::device dev = q.get_device();
  const DeviceInfo info = sluice::device_info(d);
  EXPECT_EQ(dev.get_info<df::info::device::name>(), info.name);
  EXPECT_FALSE(dev.get_info<df::info::device::vendor>().empty());
  EXPECT_GT(dev.get_info<df::info::device::local_mem_size>(), 0u);
  EXPECT_EQ(dev.get_info<df::info::device::max_work_group_size>(), 1024u);
  EXPECT_EQ(dev.get_info<df::info::device::sub_group_sizes>(), std::vector<std::size_t>{32});
  EXPECT_EQ(dev.get_info<df::info::device::max_num_sub_groups>(), 32u);
  EXPECT_EQ(dev.get_info<df::info::device::max_compute_units>(),
            static_cast<std::uint32_t>(info.compute_units));
  EXPECT_EQ(dev.get_info<df::info::device::global_mem_size>(), info.total_memory);
  const auto type = dev.get_info<df::info::device::local_mem_type>();
  EXPECT_EQ(type, d.backend == "cuda" ? df::info::local_mem_type::local
                                      : df::info::local_mem_type::global);
  if (d.backend == "cuda") {
    EXPECT_EQ(dev.get_info<df::info::device::vendor>(), "NVIDIA Corporation");
  }
}

}  // namespace sluice::test::dataflow_command_cases

namespace sluice::test {

class DataflowCommands : public BackendTest {};

TEST_P(DataflowCommands, UsmCommandsOrderedByEvents) {
  dataflow_command_cases::usm_commands_with_events(device());
}
TEST_P(DataflowCommands, AccessorCopyFillAndUpdateHost) {
  dataflow_command_cases::accessor_commands(device());
}
TEST_P(DataflowCommands, QueueShortcutsWithDependencies) {
  dataflow_command_cases::queue_shortcuts(device());
}
TEST_P(DataflowCommands, EventProfiling) {
  dataflow_command_cases::profiling(device());
}
TEST_P(DataflowCommands, DeviceInfo) {
  dataflow_command_cases::device_info(device());
}

SLUICE_INSTANTIATE_BACKENDS(DataflowCommands);

}  // namespace sluice::test
