#include "backends/cuda/cuda_host_callback.hpp"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

thread_local bool inside = false;

struct Deferred {
  std::mutex mutex;
  std::vector<std::function<void()>> work;
  std::atomic<bool> pending{false};
};

// Deliberately never destroyed: deferred work may be queued by callbacks that run while the
// process exits, after function-local statics began to be torn down.
Deferred& deferred() {
  static auto* d = new Deferred;
  return *d;
}

}  // namespace

bool in_host_callback() noexcept {
  return inside;
}

void refuse_in_host_callback(std::source_location where) {
  if (inside) [[unlikely]] {
    throw Error(Errc::invalid_state,
                "a CUDA call was needed inside a host task, where CUDA forbids them: do not issue "
                "or wait for cuda work there (issue it after the host task, from an ordinary "
                "thread), and do not drop the last handle of a cuda context there",
                where);
  }
}

HostCallbackScope::HostCallbackScope() noexcept : outer_(std::exchange(inside, true)) {}
HostCallbackScope::~HostCallbackScope() {
  inside = outer_;
}

void defer(std::function<void()> fn) noexcept {
  auto& d = deferred();
  try {
    std::lock_guard lock(d.mutex);
    d.work.push_back(std::move(fn));
    d.pending.store(true, std::memory_order_release);
  } catch (...) {
    // Out of memory while queueing: leaking the resource is the only safe choice here.
  }
}

bool has_deferred() noexcept {
  return deferred().pending.load(std::memory_order_acquire);
}

void run_deferred() noexcept {
  auto& d = deferred();
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(d.mutex);
    work.swap(d.work);
    d.pending.store(false, std::memory_order_release);
  }
  // The lock is not held while running, so deferred work may itself use the backend (and find
  // an empty queue there).
  for (auto& fn : work) {
    try {
      fn();
    } catch (...) {
      // Releases are best effort, like every destructor.
    }
  }
}

}  // namespace sluice::detail::cuda
