// Gates: device work on a buffer waits while host accessors on it live (reference 004, "host
// accessors"), and waits that would never return because of one are refused.

#include <algorithm>
#include <atomic>
#include <mutex>

#include "dataflow/state.hpp"
#define SLUICE_IMPL_PUBLIC_INCLUDE  // a private header of sluice
#include "sluice/detail/contract_holds.hpp"
#undef SLUICE_IMPL_PUBLIC_INCLUDE
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::dataflow::detail {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::weak_ptr<Gate>> gates;
  std::atomic<std::size_t> count{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may outlive static destructors
  return *r;
}

}  // namespace

Gate::Gate(const Device& device) : ops_(find_extension<DeviceOps>(device.backend)) {
  if (ops_ != nullptr) {
    // On cuda the gate is a kernel spinning on mapped pinned memory: host tasks of every cuda
    // context share one thread, so a blocked host task would stall all of them.
    device_flag_.emplace(device, 1);
    *device_flag_->data() = 0;
  }
  sluice::detail::begin_host_hold();
}

Gate::~Gate() {
  open();
}

void Gate::issue(const Context& ctx, std::source_location loc) {
  const std::uint64_t timeline = ctx.impl().timeline();
  {
    std::lock_guard lock(mutex_);
    for (const auto& [t, s] : issued_) {
      if (t == timeline) return;  // the context runs in order: once is enough
    }
  }
  std::uint64_t seq = 0;
  if (ops_ != nullptr) {
    const volatile int* flag = device_flag_->data();
    ctx.impl().issue("host accessor gate", loc, [&](Stream& s, const OpInfo& op) {
      ops_->launch_gate(s, flag);
      seq = op.seq;
    });
  } else {
    ctx.impl().failures()->set_may_fail();
    ctx.impl().issue("host accessor gate", loc, [&](Stream& s, const OpInfo& op) {
      s.host_task([f = flag_] { f->wait(0, std::memory_order_acquire); }, op);
      seq = op.seq;
    });
  }
  std::lock_guard lock(mutex_);
  issued_.emplace_back(timeline, seq);
  // Destroying the context waits for its work: kept until the gate opened.
  parked_.push_back(ctx.shared_impl());
}

void Gate::open() noexcept {
  if (opened_.exchange(true)) return;
  if (device_flag_) __atomic_store_n(device_flag_->data(), 1, __ATOMIC_RELEASE);
  flag_->store(1, std::memory_order_release);
  flag_->notify_all();
  sluice::detail::end_host_hold();
}

void Gate::park(std::shared_ptr<void> keeper) {
  std::lock_guard lock(mutex_);
  parked_.push_back(std::move(keeper));
}

void Gate::add_holder(std::thread::id t) {
  std::lock_guard lock(mutex_);
  holders_.push_back(t);
}

void Gate::remove_holder(std::thread::id t) {
  std::lock_guard lock(mutex_);
  if (auto it = std::find(holders_.begin(), holders_.end(), t); it != holders_.end()) {
    holders_.erase(it);
  }
}

bool Gate::blocks(std::uint64_t timeline, std::uint64_t seq) const {
  std::lock_guard lock(mutex_);
  if (std::find(holders_.begin(), holders_.end(), std::this_thread::get_id()) == holders_.end()) {
    return false;  // another thread holds it and will let go
  }
  for (const auto& [t, s] : issued_) {
    if (t == timeline && (seq == 0 || seq >= s)) return true;
  }
  return false;
}

void Gate::propagate(ContextImpl& ctx, std::uint64_t from) {
  const std::uint64_t timeline = ctx.timeline();
  std::lock_guard lock(mutex_);
  for (const auto& [t, s] : issued_) {
    if (t == timeline) return;  // held back from an earlier operation already
  }
  for (std::size_t i = 0; i < issued_.size(); ++i) {
    const auto [t, s] = issued_[i];
    if (ctx.waits_for(t, s)) {
      issued_.emplace_back(timeline, from);
      parked_.push_back(ctx.shared_from_this());
      return;
    }
  }
}

namespace {
/// The gates alive now (none without a lock while there are none).
std::vector<std::shared_ptr<Gate>> live_gates() {
  auto& r = registry();
  std::vector<std::shared_ptr<Gate>> live;
  if (r.count.load(std::memory_order_acquire) == 0) return live;
  std::lock_guard lock(r.mutex);
  for (const auto& w : r.gates) {
    if (auto g = w.lock()) live.push_back(std::move(g));
  }
  return live;
}
}  // namespace

void propagate_gates(ContextImpl& ctx, std::uint64_t from) {
  const auto live = live_gates();
  for (const auto& g : live) g->propagate(ctx, from);
}

void register_gate(const std::shared_ptr<Gate>& g) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.gates, [](const auto& w) { return w.expired(); });
  r.gates.push_back(g);
  r.count.store(r.gates.size(), std::memory_order_release);
}

void unregister_gate(const Gate* g) noexcept {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.gates, [g](const auto& w) {
    auto p = w.lock();
    return p == nullptr || p.get() == g;
  });
  r.count.store(r.gates.size(), std::memory_order_release);
}

std::vector<std::shared_ptr<Gate>> gates_holding(std::uint64_t timeline, std::uint64_t seq) {
  auto live = live_gates();
  std::erase_if(live, [&](const auto& g) { return !g->blocks(timeline, seq); });
  return live;
}

std::vector<std::shared_ptr<Gate>> gates_holding_next(ContextImpl& ctx) {
  if (registry().count.load(std::memory_order_acquire) == 0) return {};
  return gates_holding(ctx.timeline(), ctx.issued() + 1);
}

void check_gates(std::uint64_t timeline, std::uint64_t seq, std::string_view what,
                 std::source_location loc) {
  if (!gates_holding(timeline, seq).empty()) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    " would never return: it waits for a command group that is held back until "
                    "a HostAccessor this thread holds is destroyed; destroy the HostAccessor (end "
                    "its scope) before waiting",
                loc);
  }
}

void check_host_wait(ObjectId id, Access mode, ByteRange range, std::string_view what,
                     std::source_location loc) {
  if (registry().count.load(std::memory_order_acquire) == 0) return;  // no gate is closed
  for (const auto& [t, s] : sluice::detail::Tracker::instance().pending(id, mode, range, loc)) {
    check_gates(t, s, what, loc);
  }
}

}  // namespace sluice::dataflow::detail
