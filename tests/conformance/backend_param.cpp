#include "backend_param.hpp"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#ifdef SLUICE_TEST_CUDA
#include "cuda_rendezvous.hpp"
#endif

namespace sluice::test {

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("SLUICE_TEST_BACKENDS"); env != nullptr && *env != '\0') {
    std::stringstream ss(env);
    for (std::string n; std::getline(ss, n, ',');) names.push_back(n);
    return names;
  }
  for (const auto& b : backends()) names.push_back(b.name);
  return names;
}

bool under_host_sanitizer() {
  const char* s = std::getenv("SLUICE_TEST_SANITIZER");
  return s != nullptr && *s != '\0';
}

void BackendTest::SetUp() {
  const std::string& name = GetParam();
  for (const auto& b : backends()) {
    if (b.name != name) continue;
    if (b.device_count == 0)
      GTEST_SKIP() << "backend '" << name << "' has no devices: " << b.unavailable_reason;
    device_ = Device{name, 0};
    return;
  }
  FAIL() << "backend '" << name << "' is not registered in this build";
}

namespace {
constexpr auto kTimeout = std::chrono::seconds(10);
}

Rendezvous::Rendezvous(const Context& home, int parties) : home_(home), parties_(parties) {
  if (home.device().backend == "cuda") {
    if (const char* tool = std::getenv("SLUICE_UNDER_SANITIZER"); tool != nullptr && *tool) {
      // compute-sanitizer serializes kernels, so a rendezvous of two kernels cannot meet there.
      skipped_ = true;
      [tool] {
        GTEST_SKIP() << "kernel overlap cannot be observed under compute-sanitizer " << tool;
      }();
    }
    flags_ = DeviceBuffer<int>(home, static_cast<std::size_t>(2 * parties));
    memset(home, flags_, 0);
    home_.synchronize();
  }
}

void Rendezvous::arrive(const Context& ctx, int me) {
  if (skipped_) return;
  if (ctx.device().backend == "cuda") {
#ifdef SLUICE_TEST_CUDA
    launch_rendezvous(ctx.native_handle(), flags_.data(), me, parties_,
                      std::chrono::nanoseconds(kTimeout).count());
    return;
#else
    (void)me;
    FAIL() << "cuda rendezvous not built";
#endif
  }
  ctx.host_task(
      [arrived = arrived_, timeouts = timeouts_, n = parties_] {
        arrived->fetch_add(1);
        auto deadline = std::chrono::steady_clock::now() + kTimeout;
        while (arrived->load() < n) {
          if (std::chrono::steady_clock::now() > deadline) {
            timeouts->fetch_add(1);
            return;
          }
          std::this_thread::yield();
        }
      },
      "rendezvous");
}

Gate::Gate(const Device& device, std::chrono::nanoseconds timeout)
    : cuda_(device.backend == "cuda"), timeout_(timeout) {
  if (cuda_) {
    device_flag_ = PinnedBuffer<int>(device, 1);
    auto w = device_flag_.write();
    w[0] = 0;
  }
}

namespace {
// The stack of the thread that took the signal, to stderr (async-signal-safe once backtrace's
// library is loaded: watch_gate calls it once first).
void print_stack(int) {
  static const char head[] = "[ gate     ] held 10 s; the thread that blocked it is at:\n";
  (void)!::write(2, head, sizeof head - 1);
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), 2);
}

/// After 10 s of `flag` still closed, the native stack of the main thread, where it called
/// block() (most likely held since in a call that waits for the gated work), goes to stderr: a
/// GPU machine may have no debugger to attach.
void watch_gate(std::shared_ptr<std::atomic<int>> flag) {
  static const bool installed = [] {
    void* warm[1];
    (void)::backtrace(warm, 1);
    struct sigaction sa {};
    sa.sa_handler = print_stack;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGUSR2, &sa, nullptr) == 0;
  }();
  // Only the main thread's: it lives as long as the process (another may be gone in 10 s).
  if (!installed || ::gettid() != ::getpid()) return;
  std::thread([thread = ::pthread_self(), flag = std::move(flag)] {
    for (int i = 0; i < 100 && flag->load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (flag->load() == 0) ::pthread_kill(thread, SIGUSR2);
  }).detach();
}
}  // namespace

void Gate::block(const Context& ctx) {
  if (!blocked_at_) {
    blocked_at_ = std::chrono::steady_clock::now();
    watch_gate(host_flag_);
  }
  if (cuda_) {
#ifdef SLUICE_TEST_CUDA
    launch_gate(ctx.native_handle(), device_flag_.data(), timeout_.count());
#endif
    return;
  }
  ctx.host_task(
      [flag = host_flag_, timeout = timeout_] {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (flag->load() == 0 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
      },
      "gate");
}

void Gate::open() {
  if (blocked_at_ && std::chrono::steady_clock::now() - *blocked_at_ >= timeout_) {
    ADD_FAILURE() << "the gate gave up (" << std::chrono::duration<double>(timeout_).count()
                  << " s) before open(): the host waited between block() and open() for the work "
                     "the gate held back, so nothing issued in between was ordered behind it";
  }
  release();
}

void Gate::release() {
  host_flag_->store(1);
  if (cuda_ && device_flag_.size() > 0) {
    // Raw store, bypassing the tracker on purpose: the kernel polls this word.
    std::atomic_ref<int>(*device_flag_.data()).store(1);
  }
}

bool Rendezvous::all_met() {
  if (skipped_) return true;  // the test is reported as skipped
  if (home_.device().backend == "cuda") {
    std::vector<int> h(static_cast<std::size_t>(2 * parties_));
    copy(home_, h, flags_);
    home_.synchronize();
    for (int i = 0; i < parties_; ++i) {
      if (h[static_cast<std::size_t>(i)] != 1 || h[static_cast<std::size_t>(parties_ + i)] != 0)
        return false;
    }
    return true;
  }
  return arrived_->load() == parties_ && timeouts_->load() == 0;
}

}  // namespace sluice::test
