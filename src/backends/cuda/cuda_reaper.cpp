#include "backends/cuda/cuda_reaper.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_release.hpp"

namespace sluice::detail::cuda {
namespace {

struct Release {
  int device;
  std::function<void()> run;
};

class Reaper {
 public:
  ~Reaper() {
    // At exit, before the runtime's own teardown (this object was made after the runtime's first
    // call): the worker finishes what it has, for a bounded time, or is left behind (a release
    // held by device work that never ends must not hang the exit).
    std::unique_lock lock(mutex_);
    stop_ = true;
    wake_.notify_all();
    const bool drained =
        idle_.wait_for(lock, std::chrono::seconds(2), [&] { return queue_.empty() && !busy_; });
    lock.unlock();
    if (worker_.joinable()) {
      if (drained) {
        worker_.join();
      } else {
        worker_.detach();
      }
    }
  }

  bool hand_over(Release& r) noexcept {
    try {
      std::lock_guard lock(mutex_);
      if (stop_) return false;
      if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
      queue_.push_back(std::move(r));
    } catch (...) {
      return false;  // no memory or no thread
    }
    wake_.notify_one();
    return true;
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::deque<Release> batch;
      batch.swap(queue_);
      busy_ = true;
      lock.unlock();
      std::vector<int> synced;
      for (auto& r : batch) {
        if (std::find(synced.begin(), synced.end(), r.device) != synced.end()) continue;
        DeviceGuard guard(r.device, std::nothrow);
        {
          std::unique_lock no_capture(capture_exclusion());
          (void)cudaDeviceSynchronize();
        }
        (void)cudaGetLastError();  // this thread's error state only
        synced.push_back(r.device);
      }
      for (auto& r : batch) {
        DeviceGuard guard(r.device, std::nothrow);
        try {
          r.run();
        } catch (...) {
          // Releases are best effort, like destructors.
        }
        (void)cudaGetLastError();
      }
      batch.clear();  // what the releases captured goes here, off the lock
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Release> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

Reaper& reaper() {
  static Reaper r;
  return r;
}

void destroy_now(RetiredExec& r) noexcept {
  if (r.exec != nullptr) (void)cudaGraphExecDestroy(r.exec);
  if (r.source != nullptr) (void)cudaGraphDestroy(r.source);
  for (auto e : r.events) (void)cudaEventDestroy(e);
  (void)cudaGetLastError();
}

}  // namespace

std::shared_mutex& capture_exclusion() noexcept {
  static std::shared_mutex m;
  return m;
}

void after_device_work(int device, std::function<void()> release) noexcept {
  Release r{device, std::move(release)};
  if (reaper().hand_over(r)) return;
  try {
    release_device_wide([r = std::move(r)] {
      DeviceGuard guard(r.device, std::nothrow);
      // This thread may be inside a capture of its own: then the release leaks (never a hang,
      // never a capture invalidated).
      std::unique_lock no_capture(capture_exclusion(), std::try_to_lock);
      if (!no_capture.owns_lock()) return;
      (void)cudaDeviceSynchronize();
      no_capture.unlock();
      r.run();
      clear_error();
    });
  } catch (...) {
    // Out of memory: the resource leaks (never a hang).
  }
}

void destroy_exec_later(RetiredExec retired) noexcept {
  try {
    after_device_work(retired.device, [retired]() mutable { destroy_now(retired); });
  } catch (...) {
    // Out of memory copying it into the release: the executable leaks (never a hang).
  }
}

void unload_libraries_later(int device, std::vector<cudaLibrary_t> libraries) noexcept {
  try {
    after_device_work(device, [libraries = std::move(libraries)] {
      for (auto l : libraries) (void)cudaLibraryUnload(l);
    });
  } catch (...) {
    // Out of memory: the libraries stay loaded (a leak, never a hang).
  }
}

}  // namespace sluice::detail::cuda
