// Raw host baselines: what the host backend's operations cost without sluice around them.

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "benchmarks.hpp"

namespace sluice::bench {
namespace {

/// A FIFO of std::function drained by one worker thread.
class RawQueue {
 public:
  RawQueue() : worker_([this] { run(); }) {}
  RawQueue(const RawQueue&) = delete;
  RawQueue& operator=(const RawQueue&) = delete;
  ~RawQueue() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }

  void push(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      ops_.push_back(std::move(fn));
      ++pushed_;
    }
    work_cv_.notify_one();
  }

  void synchronize() {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return done_ == pushed_; });
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        work_cv_.wait(lock, [&] { return stop_ || !ops_.empty(); });
        if (ops_.empty()) return;
        fn = std::move(ops_.front());
        ops_.pop_front();
      }
      fn();
      std::lock_guard lock(mutex_);
      ++done_;
      done_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::function<void()>> ops_;
  std::uint64_t pushed_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread worker_;  // last: starts after the members it uses
};

/// A completion counter: the raw analogue of a host event.
struct Signal {
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t reached = 0;
  void set(std::uint64_t n) {
    {
      std::lock_guard lock(mutex);
      reached = n;
    }
    cv.notify_all();
  }
  void wait(std::uint64_t n) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return reached >= n; });
  }
};

}  // namespace

void raw_enqueue_host_task(benchmark::State& state) {
  RawQueue q;
  int n = 0;
  for (auto _ : state) {
    q.push([] {});
    if (++n % kSyncEvery == 0) q.synchronize();
  }
  q.synchronize();
  state.SetItemsProcessed(state.iterations());
}

void raw_enqueue_memset(benchmark::State& state) {
  RawQueue q;
  void* p = std::aligned_alloc(256, kMemsetBytes);
  int n = 0;
  for (auto _ : state) {
    q.push([p] { std::memset(p, 0, kMemsetBytes); });
    if (++n % kSyncEvery == 0) q.synchronize();
  }
  q.synchronize();
  std::free(p);
  state.SetItemsProcessed(state.iterations());
}

void raw_task_record_wait(benchmark::State& state) {
  RawQueue a, b;
  auto signal = std::make_shared<Signal>();
  std::uint64_t n = 0;
  for (auto _ : state) {
    ++n;
    a.push([] {});
    a.push([signal, n] { signal->set(n); });
    b.push([signal, n] { signal->wait(n); });
    if (n % kSyncEvery == 0) b.synchronize();
  }
  b.synchronize();
  a.synchronize();
  state.SetItemsProcessed(state.iterations());
}

void raw_queue_create_destroy(benchmark::State& state) {
  for (auto _ : state) {
    RawQueue q;
    benchmark::DoNotOptimize(&q);
  }
  state.SetItemsProcessed(state.iterations());
}

void raw_alloc_free(benchmark::State& state) {
  for (auto _ : state) {
    void* p = std::aligned_alloc(256, kBufferBytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace sluice::bench
