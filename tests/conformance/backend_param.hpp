#pragma once

#include <chrono>
#include <optional>
// Parametrizes a test suite over every backend. A backend without devices is reported as
// skipped (with the reason), never as passed. SLUICE_TEST_BACKENDS=cuda,host restricts the list.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice::test {

/// The backend names the suite runs over.
std::vector<std::string> backend_names();

/// Whether the asan or tsan test preset runs this (it sets SLUICE_TEST_SANITIZER): a test whose
/// size only buys time there may run smaller, through the same code paths with the same checks.
bool under_host_sanitizer();

/// Fixture base: `device()` is the first device of the backend under test.
class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  [[nodiscard]] const Device& device() const { return device_; }
  [[nodiscard]] bool is_host() const { return device_.backend == "host"; }
  [[nodiscard]] Context make_context(StreamKind kind = StreamKind::async, int priority = 0) const {
    return Context(ContextOptions{.device = device_, .kind = kind, .priority = priority});
  }

 private:
  Device device_;
};

/// Makes every context of `parties` reach a rendezvous point before any continues; proves that
/// the contexts run concurrently. Host: a host task spinning on an atomic; cuda: a device kernel.
class Rendezvous {
 public:
  Rendezvous(const Context& home, int parties);
  /// Issues party `me`'s arrival on `ctx`: it waits there until all parties arrived (or 10 s).
  void arrive(const Context& ctx, int me);
  /// Call after every context synchronized: true if no party timed out waiting for the others.
  [[nodiscard]] bool all_met();

 private:
  Context home_;
  int parties_;
  bool skipped_ = false;
  std::shared_ptr<std::atomic<int>> arrived_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> timeouts_ = std::make_shared<std::atomic<int>>(0);
  DeviceBuffer<int> flags_;  // cuda: arrival flags, then timeout markers
};

/// Holds contexts back until `open()`: a host task on the host backend, a device kernel spinning
/// on pinned memory on cuda (whose host tasks all share one thread, so a blocked host task there
/// would stall every context). Opens itself on destruction; gives up after its timeout (30 s).
///
/// `open()` fails the test when the gate had already given up: the host was held between
/// `block()` and `open()` (a call that waited for the held-back work, such as a kernel loaded
/// lazily while the gate kernel spins), so the work meant to be issued behind the gate was
/// issued after it, and the ordering the test checks was never put to the test.
class Gate {
 public:
  /// `timeout`: when the gate gives up by itself (the tests' gates keep the 30 s default; the
  /// gate's own test takes a short one).
  explicit Gate(const Device& device, std::chrono::nanoseconds timeout = std::chrono::seconds(30));
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { release(); }
  /// Issues the gate on `ctx`: work issued there afterwards waits for `open()`.
  void block(const Context& ctx);
  void open();

 private:
  void release();
  bool cuda_;
  std::chrono::nanoseconds timeout_;
  std::optional<std::chrono::steady_clock::time_point> blocked_at_;  // the first block()
  std::shared_ptr<std::atomic<int>> host_flag_ = std::make_shared<std::atomic<int>>(0);
  PinnedBuffer<int> device_flag_;
};

}  // namespace sluice::test

#define SLUICE_INSTANTIATE_BACKENDS(Suite)                                                        \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(::sluice::test::backend_names()), \
                           [](const auto& info) { return info.param; })
