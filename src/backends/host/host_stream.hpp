#pragma once
// A host-backend stream: one worker thread draining a FIFO of operations.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/backend.hpp"

namespace sluice::detail::host {

class HostPool;

/// The queue and its progress; shared with events so they outlive the stream.
struct Queue {
  struct Op {
    std::function<void()> fn;
    std::uint64_t seq = 0;
    std::string what;
    std::source_location where;
    bool essential = false;  // runs even after a failure (frees, waits, timing); never injected
  };

  // pushed and stop change under `mutex`; done only by the thread running operations (the
  // worker, or a waiter helping). All three are atomic so that the worker (waiting for work) and
  // waiters (waiting for completion) can spin on them before they sleep; `sleepers` and `done`
  // pair up as in Dekker's protocol (both sequentially consistent) so that the runner locks the
  // mutex to wake waiters only when one sleeps.
  std::mutex mutex;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::deque<Op> ops;
  std::atomic<std::uint64_t> pushed{0};  // ops ever pushed
  std::atomic<std::uint64_t> done{0};    // ops completed, in order
  std::atomic<bool> stop{false};
  bool worker_sleeps = false;    // the worker waits on work_cv
  std::atomic<int> sleepers{0};  // threads waiting on done_cv
  bool running = false;          // a thread runs operations: the worker, or a waiter helping
  std::thread::id runner;        // which one, while running
  std::thread::id worker;
  std::shared_ptr<FailureState> failures;

  std::uint64_t push(Op op);
  /// Waits until `target` operations completed. A thread that runs no operation itself (the
  /// issuing thread of a sync solve) runs the queued ones up to `target` when nobody else does:
  /// no hand-off at all, and no dependence on the worker being scheduled.
  void wait_done(std::uint64_t target);
  [[nodiscard]] bool is_done(std::uint64_t target);
  void run_worker();
  /// True if the calling thread is running one of this queue's operations.
  [[nodiscard]] bool runs_here();

 private:
  void run_op(Op& op);
  /// Marks one more operation complete and wakes sleeping waiters (lock held or not).
  void complete_one();
  /// Runs queued operations on the calling thread until `target` completed or none is left.
  void help(std::uint64_t target);
};

class HostEvent final : public EventImpl {
 public:
  HostEvent(std::shared_ptr<Queue> queue, std::uint64_t target)
      : queue_(std::move(queue)), target_(target) {}
  bool query() override { return queue_->is_done(target_); }
  void synchronize() override;
  double elapsed_ms_since(const EventImpl& start) override;

  std::shared_ptr<Queue> queue_;
  std::uint64_t target_;
  std::shared_ptr<std::chrono::steady_clock::time_point> stamp_;  // timing events only
};

class HostStream final : public Stream {
 public:
  HostStream(const StreamConfig& config, HostPool& pool);
  ~HostStream() override;

  void host_task(std::function<void()> fn, const OpInfo& op) override;
  void copy(void* dst, const void* src, std::size_t bytes, const OpInfo& op) override;
  void memset(void* dst, int value, std::size_t bytes, const OpInfo& op) override;
  void* allocate(std::size_t bytes, const OpInfo& op) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
  std::shared_ptr<EventImpl> record(bool timing, const OpInfo& op) override;
  void wait(const std::shared_ptr<EventImpl>& event, const OpInfo& op) override;
  bool query() override;
  void synchronize() override;
  void* native_handle() noexcept override { return nullptr; }
  int priority() const noexcept override { return priority_; }
  void begin_capture(const OpInfo& op) override;
  std::shared_ptr<void> end_capture(const OpInfo& op) override;
  void abort_capture() noexcept override { recording_.reset(); }
  /// A host graph's copy and memset nodes do what `copy` and `memset` do.
  bool can_record_as_node(const SimpleOp&) const override { return true; }

 private:
  void push(std::function<void()> fn, const OpInfo& op, bool essential = false);

  struct Freed {  // a block freed on this stream whose free has not run yet
    void* ptr;
    std::size_t size;
    bool reused = false;
  };
  struct FreeList {  // shared with queued frees, which may outlive the stream object
    std::mutex mutex;
    std::multimap<std::size_t, std::shared_ptr<Freed>> blocks;  // by block size
  };

  std::shared_ptr<Queue> queue_;
  HostPool& pool_;
  std::shared_ptr<FreeList> freed_ = std::make_shared<FreeList>();
  int priority_;
  std::thread worker_;
  // Graph capture (host_graph.hpp): non-essential work goes here instead of the queue. Touched
  // only by the issuing thread under the context's lock.
  std::unique_ptr<std::vector<std::function<void()>>> recording_;
};

}  // namespace sluice::detail::host
