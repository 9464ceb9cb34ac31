#include "backends/cuda/cuda_exec_reaper.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_device.hpp"

namespace sluice::detail::cuda {
namespace {

void destroy_now(RetiredExec& r) noexcept {
  DeviceGuard guard(r.device, std::nothrow);
  if (r.exec != nullptr) (void)cudaGraphExecDestroy(r.exec);
  if (r.source != nullptr) (void)cudaGraphDestroy(r.source);
  for (auto e : r.events) (void)cudaEventDestroy(e);
  (void)cudaGetLastError();  // this thread's error state only
}

class Reaper {
 public:
  ~Reaper() {
    // At exit, before the runtime's own teardown (this object was made after the runtime's first
    // call): the worker finishes what it has, for a bounded time, or is left behind (a destroy
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

  bool hand_over(RetiredExec& retired) noexcept {
    try {
      std::lock_guard lock(mutex_);
      if (stop_) return false;
      if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
      queue_.push_back(std::move(retired));
    } catch (...) {
      return false;  // no memory or no thread: the caller destroys it
    }
    wake_.notify_one();
    return true;
  }

  void drain() noexcept {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::deque<RetiredExec> batch;
      batch.swap(queue_);
      busy_ = true;
      lock.unlock();
      // The destroy holds a driver lock while it waits, so every CUDA call of every thread would
      // wait with it: first wait here, without that lock, for the work issued before these
      // executables were retired (only that: later work cannot starve the reaper).
      std::vector<int> synced;
      for (auto& r : batch) {
        if (std::find(synced.begin(), synced.end(), r.device) != synced.end()) continue;
        DeviceGuard guard(r.device, std::nothrow);
        (void)cudaDeviceSynchronize();
        (void)cudaGetLastError();
        synced.push_back(r.device);
      }
      for (auto& r : batch) destroy_now(r);
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<RetiredExec> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

Reaper& reaper() {
  static Reaper r;
  return r;
}

}  // namespace

void destroy_exec_later(RetiredExec retired) noexcept {
  if (!reaper().hand_over(retired)) destroy_now(retired);
}

void drain_exec_reaper() noexcept {
  reaper().drain();
}

}  // namespace sluice::detail::cuda
