#include "backends/host/host_stream.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backends/host/faults.hpp"
#include "backends/host/host_graph.hpp"
#include "backends/host/host_pool.hpp"
#include "backends/host/spin_wait.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::host {

std::uint64_t Queue::push(Op op) {
  std::lock_guard lock(mutex);
  ops.push_back(std::move(op));
  const std::uint64_t n = pushed.load(std::memory_order_relaxed) + 1;
  pushed.store(n, std::memory_order_release);
  if (worker_sleeps) work_cv.notify_one();
  return n;
}

namespace {
// Operations of any queue the calling thread is running (nested: a helping waiter inside one).
thread_local int t_running_ops = 0;
}  // namespace

void Queue::run_op(Op& op) {
  ++t_running_ops;
  if (op.essential || !failures->skip(op.seq)) {
    try {
      if (!op.essential) maybe_fail_operation();
      op.fn();
    } catch (const std::exception& e) {
      failures->fail({op.seq, op.what, op.where}, e.what());
    } catch (...) {
      failures->fail({op.seq, op.what, op.where}, "an exception not derived from std::exception");
    }
  }
  op.fn = nullptr;  // release captures before completion becomes visible
  --t_running_ops;
}

void Queue::complete_one() {
  done.fetch_add(1);
  if (sleepers.load() > 0) {
    std::lock_guard lock(mutex);
    done_cv.notify_all();
  }
}

bool Queue::runs_here() {
  std::lock_guard lock(mutex);
  return running && runner == std::this_thread::get_id();
}

void Queue::help(std::uint64_t target) {
  std::unique_lock lock(mutex);
  if (running || ops.empty()) return;
  running = true;
  runner = std::this_thread::get_id();
  while (done.load() < target && !ops.empty()) {
    Op op = std::move(ops.front());
    ops.pop_front();
    lock.unlock();
    run_op(op);
    complete_one();
    lock.lock();
  }
  running = false;
  if (worker_sleeps) work_cv.notify_one();  // it may run what is left, or stop
}

void Queue::wait_done(std::uint64_t target) {
  if (done.load(std::memory_order_acquire) >= target) return;
  if (t_running_ops == 0) help(target);
  if (spin_until([&] { return done.load(std::memory_order_acquire) >= target; })) return;
  std::unique_lock lock(mutex);
  if (done.load() >= target) return;
  if (running && runner == std::this_thread::get_id()) {
    throw Error(Errc::invalid_state,
                "a host task waited for work queued after it on its own context; this would "
                "deadlock. Wait only from the issuing thread or from another context");
  }
  sleepers.fetch_add(1);
  done_cv.wait(lock, [&] { return done.load() >= target; });
  sleepers.fetch_sub(1);
}

bool Queue::is_done(std::uint64_t target) {
  return done.load(std::memory_order_acquire) >= target;
}

void Queue::run_worker() {
  std::deque<Op> batch;
  for (;;) {
    // Between two batches done is the number popped, so pushed > done means work is queued (or
    // being run by a helping waiter).
    (void)spin_until([&] {
      return pushed.load(std::memory_order_acquire) > done.load(std::memory_order_relaxed) ||
             stop.load(std::memory_order_relaxed);
    });
    {
      // Everything queued at once: one lock for the batch, less contention with the issuer.
      std::unique_lock lock(mutex);
      auto may_run = [&] {
        return !running && (!ops.empty() || stop.load(std::memory_order_relaxed));
      };
      if (!may_run()) {
        worker_sleeps = true;
        work_cv.wait(lock, may_run);
        worker_sleeps = false;
      }
      if (ops.empty()) return;
      running = true;
      runner = std::this_thread::get_id();
      batch.swap(ops);
    }
    while (!batch.empty()) {
      run_op(batch.front());
      batch.pop_front();
      complete_one();
    }
    std::lock_guard lock(mutex);
    running = false;
  }
}

void HostEvent::synchronize() {
  queue_->wait_done(target_);
}

double HostEvent::elapsed_ms_since(const EventImpl& start) {
  const auto* s = dynamic_cast<const HostEvent*>(&start);
  if (s == nullptr || !s->stamp_ || !stamp_) {
    throw Error(Errc::invalid_argument, "elapsed time needs two timing events of the host backend");
  }
  s->queue_->wait_done(s->target_);
  return std::chrono::duration<double, std::milli>(*stamp_ - *s->stamp_).count();
}

HostStream::HostStream(const StreamConfig& config, HostPool& pool)
    : queue_(std::make_shared<Queue>()), pool_(pool), priority_(config.priority) {
  queue_->failures = config.failures;
  worker_ = std::thread([q = queue_, offset = config.priority] {
    // Priorities map onto the worker's nice value, relative to the one it inherited (lower is
    // more urgent, as nice values are). The core clamped a negative priority to 0 unless the
    // process may raise a thread's priority (host_backend.cpp).
    if (offset != 0) {
      const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
      errno = 0;
      const int inherited = getpriority(PRIO_PROCESS, tid);
      if (errno == 0) {
        (void)setpriority(PRIO_PROCESS, tid, std::clamp(inherited + offset, -20, 19));
      }
    }
    q->run_worker();
  });
  {
    std::lock_guard lock(queue_->mutex);
    queue_->worker = worker_.get_id();
  }
  counters().streams.fetch_add(1);
}

HostStream::~HostStream() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->stop.store(true, std::memory_order_relaxed);
    queue_->work_cv.notify_one();
  }
  // The last handle of a context may be dropped by one of its own host tasks (on the worker, or
  // on a waiter running the queue's operations); the worker then finishes the queue on its own.
  if (worker_.get_id() == std::this_thread::get_id() || queue_->runs_here()) {
    worker_.detach();
  } else {
    worker_.join();
  }
  counters().streams.fetch_sub(1);
}

void HostStream::push(std::function<void()> fn, const OpInfo& op, bool essential) {
  if (recording_ && !essential) {
    recording_->push_back(std::move(fn));
    return;
  }
  queue_->push({std::move(fn), op.seq, std::string(op.what), op.where, essential});
}

void HostStream::host_task(std::function<void()> fn, const OpInfo& op) {
  push(std::move(fn), op);
}

void HostStream::copy(void* dst, const void* src, std::size_t bytes, const OpInfo& op) {
  push([=] { std::memmove(dst, src, bytes); }, op);
}

void HostStream::memset(void* dst, int value, std::size_t bytes, const OpInfo& op) {
  push([=] { std::memset(dst, value, bytes); }, op);
}

void* HostStream::allocate(std::size_t bytes, const OpInfo&) {
  // Like cudaMallocAsync: a block freed earlier on this stream may be reused at once, since all
  // later use of it is ordered after the free. Other streams get it once the free ran.
  {
    std::lock_guard lock(freed_->mutex);
    auto& blocks = freed_->blocks;
    if (auto it = blocks.lower_bound(bytes); it != blocks.end() && it->first <= bytes + bytes / 4) {
      it->second->reused = true;
      void* p = it->second->ptr;
      blocks.erase(it);
      return p;
    }
  }
  return pool_.allocate(bytes);
}

void HostStream::deallocate(void* ptr, std::size_t) noexcept {
  try {
    auto freed = std::make_shared<Freed>(Freed{ptr, pool_.block_size(ptr)});
    auto release = [list = freed_, freed, &pool = pool_] {
      {
        std::lock_guard lock(list->mutex);
        if (freed->reused) return;
        auto [first, last] = list->blocks.equal_range(freed->size);
        for (auto it = first; it != last; ++it) {
          if (it->second == freed) {
            list->blocks.erase(it);
            break;
          }
        }
      }
      pool.release(freed->ptr);
    };
    {
      std::lock_guard lock(freed_->mutex);
      freed_->blocks.emplace(freed->size, freed);
    }
    try {
      push(release, {0, "deallocate", {}}, true);
    } catch (...) {
      synchronize();
      release();
    }
  } catch (...) {
    // Out of memory before the block was offered for reuse: drain, then release it now.
    try {
      synchronize();
    } catch (...) {
    }
    pool_.release(ptr);
  }
}

std::shared_ptr<EventImpl> HostStream::record(bool timing, const OpInfo& op) {
  if (!timing) return std::make_shared<HostEvent>(queue_, queue_->pushed.load());
  auto stamp = std::make_shared<std::chrono::steady_clock::time_point>();
  auto target = queue_->push(
      {[stamp] { *stamp = std::chrono::steady_clock::now(); }, op.seq, "record", op.where, true});
  auto e = std::make_shared<HostEvent>(queue_, target);
  e->stamp_ = std::move(stamp);
  return e;
}

void HostStream::wait(const std::shared_ptr<EventImpl>& event, const OpInfo& op) {
  auto mine = queue_->failures;
  push(
      [event, mine, seq = op.seq] {
        event->synchronize();
        if (event->failures) {
          if (auto f = event->failures->at_or_before(event->seq)) mine->adopt(std::move(f), seq);
        }
      },
      op, /*essential=*/true);  // ordering must hold even while a failure is being skipped past
}

void HostStream::begin_capture(const OpInfo&) {
  recording_ = std::make_unique<std::vector<std::function<void()>>>();
}

std::shared_ptr<void> HostStream::end_capture(const OpInfo&) {
  auto ops = std::move(recording_);
  if (!ops || ops->empty()) return nullptr;
  return make_recording(std::move(*ops));
}

bool HostStream::query() {
  return queue_->done.load(std::memory_order_acquire) == queue_->pushed.load();
}

void HostStream::synchronize() {
  queue_->wait_done(queue_->pushed.load());
}

}  // namespace sluice::detail::host
