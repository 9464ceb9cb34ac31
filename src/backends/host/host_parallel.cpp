#include "backends/host/host_parallel.hpp"

#include "backends/host/spin_wait.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sluice::detail::host {
namespace {

struct Job {
  void (*fn)(void*, std::size_t) = nullptr;
  void* state = nullptr;
  std::size_t chunks = 0;
  // The unclaimed chunks [front, back): front in the low 32 bits, back in the high 32. The
  // calling thread claims from the front, the pool's threads from the back, so that with two
  // threads each takes about the same half of a vector every time: that half stays in its
  // core's cache from one kernel to the next (claimed in turn, a chunk ran on either core and
  // half of every kernel's data came from the other core's cache).
  std::atomic<std::uint64_t> range{0};
  std::atomic<std::size_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;

  void start(std::size_t n) {
    chunks = n;
    range.store(static_cast<std::uint64_t>(n) << 32, std::memory_order_relaxed);
  }

  [[nodiscard]] bool unclaimed() const {
    const std::uint64_t r = range.load(std::memory_order_relaxed);
    return (r & 0xffffffffu) < (r >> 32);
  }

  /// Claims the next chunk from the front or the back; false when none is left.
  bool claim(bool front, std::size_t& chunk) {
    std::uint64_t r = range.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t f = r & 0xffffffffu, b = r >> 32;
      if (f >= b) return false;
      const std::uint64_t next = front ? r + 1 : ((b - 1) << 32) | f;
      if (range.compare_exchange_weak(r, next, std::memory_order_relaxed)) {
        chunk = static_cast<std::size_t>(front ? f : b - 1);
        return true;
      }
    }
  }

  /// Runs chunks until none is left unclaimed.
  void work(bool front) {
    std::size_t c = 0;
    while (claim(front, c)) {
      fn(state, c);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard lock(mutex);
        finished.notify_all();
      }
    }
  }
};

class Pool {
 public:
  Pool() {
    std::size_t n = std::max(1u, std::thread::hardware_concurrency()) - 1;
    if (const char* env = std::getenv("SLUICE_HOST_THREADS"); env != nullptr && *env != '\0') {
      n = static_cast<std::size_t>(std::max(1L, std::strtol(env, nullptr, 10))) - 1;
    }
    for (std::size_t i = 0; i < n; ++i) threads_.emplace_back([this] { serve(); });
  }
  // Never destroyed (see instance()): threads of contexts still alive at exit may be inside run.

  void run(const std::shared_ptr<Job>& job) {
    if (!threads_.empty()) {
      std::lock_guard lock(mutex_);
      jobs_.push_back(job);
      queued_.store(jobs_.size(), std::memory_order_release);
      if (sleepers_ > 0) wake_.notify_all();
    }
    job->work(true);
    // The other threads are finishing their last chunks: spin for them, sleep if they take long.
    auto finished = [&] { return job->done.load(std::memory_order_acquire) == job->chunks; };
    if (!spin_until(finished)) {
      std::unique_lock lock(job->mutex);
      job->finished.wait(lock, finished);
    }
    retire(job.get());
  }

  [[nodiscard]] std::size_t threads() const noexcept { return threads_.size(); }

 private:
  void serve() {
    for (;;) {
      std::shared_ptr<Job> job;
      // Kernels of a solve follow each other within microseconds: spin before sleeping.
      (void)spin_until([&] { return queued_.load(std::memory_order_acquire) > 0; });
      {
        std::unique_lock lock(mutex_);
        if (jobs_.empty()) {
          ++sleepers_;
          wake_.wait(lock, [&] { return !jobs_.empty(); });
          --sleepers_;
        }
        job = jobs_.front();
        // Rotate so that concurrent jobs of several contexts share the threads.
        jobs_.pop_front();
        if (job->unclaimed()) jobs_.push_back(job);
        queued_.store(jobs_.size(), std::memory_order_release);
      }
      job->work(false);
      retire(job.get());
    }
  }

  void retire(const Job* job) {
    std::lock_guard lock(mutex_);
    std::erase_if(jobs_, [&](const std::shared_ptr<Job>& j) { return j.get() == job; });
    queued_.store(jobs_.size(), std::memory_order_release);
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
  std::atomic<std::size_t> queued_{0};  // jobs_.size(), for spinning without the lock
  int sleepers_ = 0;                    // threads waiting on wake_
  std::vector<std::thread> threads_;
};

Pool& instance() {
  static Pool* pool = [] {
    auto* p = new Pool;
    return p;
  }();
  return *pool;
}

}  // namespace

void parallel_chunks(std::size_t chunks, void (*fn)(void*, std::size_t), void* state) {
  if (chunks == 0) return;
  auto& pool = instance();
  if (chunks == 1 || pool.threads() == 0) {
    for (std::size_t c = 0; c < chunks; ++c) fn(state, c);
    return;
  }
  if (chunks >= (std::size_t{1} << 32)) {  // beyond Job's 32-bit chunk indices: in parts
    const std::size_t half = chunks / 2;
    struct Part {
      void (*fn)(void*, std::size_t);
      void* state;
      std::size_t offset;
    };
    for (const auto& [first, count] :
         {std::pair{std::size_t{0}, half}, std::pair{half, chunks - half}}) {
      Part part{fn, state, first};
      parallel_chunks(
          count,
          [](void* p, std::size_t c) {
            auto* pt = static_cast<Part*>(p);
            pt->fn(pt->state, pt->offset + c);
          },
          &part);
    }
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = fn;
  job->state = state;
  job->start(chunks);
  pool.run(job);
}

std::size_t parallel_threads() {
  return instance().threads();
}

}  // namespace sluice::detail::host
