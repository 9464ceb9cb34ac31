#include "sluice/backend.hpp"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#define SLUICE_IMPL_PUBLIC_INCLUDE  // a private header of sluice
#include "sluice/detail/contract_holds.hpp"
#undef SLUICE_IMPL_PUBLIC_INCLUDE
#include "sluice/error.hpp"

namespace sluice {

void FailureState::fail(const OpInfo& op, std::string cause) {
  std::lock_guard lock(mutex_);
  if (failure_ && !failure_->reported.load()) return;  // keep the first
  auto f = std::make_shared<Failure>();
  f->operation = std::string(op.what);
  f->issued_at = op.where;
  f->cause = std::move(cause);
  failure_ = std::move(f);
  since_ = op.seq;
}

void FailureState::adopt(std::shared_ptr<Failure> f, std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  if (failure_ && !failure_->reported.load()) return;
  failure_ = std::move(f);
  since_ = seq;
}

std::shared_ptr<Failure> FailureState::at_or_before(std::uint64_t seq) const {
  std::lock_guard lock(mutex_);
  if (failure_ && since_ <= seq && !failure_->reported.load()) return failure_;
  return nullptr;
}

bool FailureState::skip(std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  if (!failure_ || seq <= since_) return false;
  if (failure_->reported.load()) {
    // Reported elsewhere (an event wait): work issued from now on runs again.
    failure_.reset();
    return false;
  }
  failure_->skipped.fetch_add(1);
  return true;
}

std::shared_ptr<Failure> FailureState::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(failure_, nullptr);
}

std::unique_ptr<Stream> Backend::wrap_stream(const StreamConfig&, void*) {
  throw Error(Errc::unsupported, "backend '" + std::string(name()) +
                                     "' has no native streams to wrap; Context::wrap needs cuda");
}

void Stream::begin_capture(const OpInfo& op) {
  throw Error(Errc::unsupported,
              "this backend cannot capture operations into a graph (" + std::string(op.what) +
                  "); use the host or cuda backend",
              op.where);
}

std::shared_ptr<void> Stream::end_capture(const OpInfo& op) {
  throw Error(Errc::unsupported, "this backend cannot capture operations into a graph", op.where);
}

std::unique_ptr<GraphExecutable> Backend::instantiate_graph(const std::shared_ptr<const ir::Graph>&,
                                                            int) {
  throw Error(Errc::unsupported,
              "backend '" + std::string(name()) + "' has no graphs; use the host or cuda backend");
}

namespace detail {
namespace {

struct Holds {
  std::mutex mutex;
  std::size_t count = 0;  // under mutex
  std::atomic<bool> active{false};
  std::vector<std::function<void()>> kept;
};

// Never destroyed: holds may end while statics are torn down.
Holds& holds() {
  static auto* h = new Holds;
  return *h;
}

}  // namespace

void begin_host_hold() noexcept {
  auto& h = holds();
  std::lock_guard lock(h.mutex);
  ++h.count;
  h.active.store(true, std::memory_order_release);
}

void end_host_hold() noexcept {
  auto& h = holds();
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(h.mutex);
    if (h.count == 0 || --h.count > 0) return;
    h.active.store(false, std::memory_order_release);
    run.swap(h.kept);
  }
  // Outside the lock: a release may end in another release (or a new hold).
  for (auto& fn : run) {
    try {
      fn();
    } catch (...) {
      // Releases are best effort, like destructors.
    }
  }
}

bool host_holds_active() noexcept {
  return holds().active.load(std::memory_order_acquire);
}

void run_when_unheld(std::function<void()> release) noexcept {
  auto& h = holds();
  if (h.active.load(std::memory_order_acquire)) {
    std::unique_lock lock(h.mutex);
    if (h.count > 0) {
      try {
        h.kept.push_back(std::move(release));
      } catch (...) {
        // Out of memory: dropping the release leaks its resource, running it could hang.
      }
      return;
    }
  }
  try {
    release();
  } catch (...) {
  }
}

}  // namespace detail
}  // namespace sluice
