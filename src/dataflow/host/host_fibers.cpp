#include "dataflow/host/host_fibers.hpp"

#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "sluice/dataflow/group.hpp"
#include "sluice/error.hpp"

// Sanitizers are told about every switch between a work-item's stack and the scheduler's.
// ThreadSanitizer: this file is compiled without instrumentation (src/CMakeLists.txt defines
// SLUICE_TSAN_FIBERS): Boost.Context's own code runs after a work-item's last switch announcement,
// and instrumented function exits there would corrupt the sanitizer's shadow stack.
#if defined(SLUICE_TSAN_FIBERS)
extern "C" {
void* __tsan_get_current_fiber();
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SLUICE_ASAN_FIBERS 1
#endif

namespace sluice::dataflow::detail {
namespace bc = boost::context;

namespace {

#if defined(SLUICE_TSAN_FIBERS) || defined(SLUICE_ASAN_FIBERS)
constexpr std::size_t kStackBytes = 256 * 1024;  // sanitizers grow frames a lot
#else
constexpr std::size_t kStackBytes = 128 * 1024;
#endif

/// Reuses fiber stacks on each thread: a work-group's fibers all live on the thread running it.
class StackPool {
 public:
  bc::stack_context allocate() {
#if defined(SLUICE_TSAN_FIBERS)
    // ThreadSanitizer keeps the history of reused stack memory: a stack reused by a new fiber
    // would race with the last one's frames. Fresh memory each time resets it.
    return last_ = base_.allocate();
#else
    if (free_.empty()) return last_ = base_.allocate();
    last_ = free_.back().stack;
    free_.pop_back();
    return last_;
#endif
  }
  void deallocate(bc::stack_context& s) noexcept {
#if defined(SLUICE_TSAN_FIBERS)
    base_.deallocate(s);
#else
    if (free_.size() >= kCached) return base_.deallocate(s);
    try {
      free_.push_back({s, static_cast<char*>(s.sp) - s.size});
    } catch (...) {
      base_.deallocate(s);
    }
#endif
  }
  /// The stack handed out last (to tell the sanitizers its bounds).
  [[nodiscard]] const bc::stack_context& last() const noexcept {
    return last_;
  }
  ~StackPool() {
    for (auto& c : free_) base_.deallocate(c.stack);
  }

 private:
  // Enough for most work-groups; a thread keeps at most this many stacks between kernels.
  static constexpr std::size_t kCached = 256;
  struct Cached {
    bc::stack_context stack;
    void* base;  // the allocation itself: `stack.sp` points past its end, invisible to LSan
  };
  bc::fixedsize_stack base_{kStackBytes};
  std::vector<Cached> free_;
  bc::stack_context last_{};
};

thread_local StackPool t_stacks;

/// Stack allocator handing out pooled stacks (the interface Boost.Context expects).
struct PooledStack {
  bc::stack_context allocate() { return t_stacks.allocate(); }
  void deallocate(bc::stack_context& s) noexcept { t_stacks.deallocate(s); }
};

/// Thrown inside the work-items still waiting at a barrier when the group must stop (another
/// work-item failed, or finished without reaching the barrier), so their stacks unwind normally.
struct Cancelled {};

/// What a suspended work-item waits for.
enum class Wait : std::uint8_t { none, work_group, sub_group };

struct Item {
  bc::fiber fiber;            // the suspended work-item (empty once it finished)
  bc::fiber* sink = nullptr;  // inside the work-item: the way back to the scheduler
  Wait wait = Wait::none;
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* asan_fake = nullptr;
  void* tsan = nullptr;
};

/// A collective's completion, set by the work-items that arrive at it.
struct Pending {
  CollectiveFn fn = nullptr;
  const void* arg = nullptr;
};

struct Group {
  std::vector<Item> items;
  std::size_t current = 0;
  bool cancelled = false;
  std::exception_ptr error;
  std::byte* slots = nullptr;          // kCollectiveSlotBytes per work-item
  Pending work_group;                  // the barrier or work-group collective being met
  std::vector<Pending> sub_groups;     // the sub-group collective each sub-group is meeting
  const void* sched_bottom = nullptr;  // the scheduler's stack, learnt at the first switch
  std::size_t sched_size = 0;
  void* sched_fake = nullptr;
  void* tsan_scheduler = nullptr;
};

thread_local Group* t_group = nullptr;
thread_local std::byte* t_local = nullptr;
thread_local std::vector<std::byte> t_slots;  // the collective slots, reused by every group

// The sanitizer announcements. `start` goes right before a switch, `finish` right after it.
inline void asan_start(void** fake_save, const void* bottom, std::size_t size) {
#if defined(SLUICE_ASAN_FIBERS)
  __sanitizer_start_switch_fiber(fake_save, bottom, size);
#else
  (void)fake_save, (void)bottom, (void)size;
#endif
}
inline void asan_finish(void* fake_save, const void** bottom_old, std::size_t* size_old) {
#if defined(SLUICE_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(fake_save, bottom_old, size_old);
#else
  (void)fake_save, (void)bottom_old, (void)size_old;
#endif
}
inline void tsan_switch(void* to) {
#if defined(SLUICE_TSAN_FIBERS)
  __tsan_switch_to_fiber(to, 0);
#else
  (void)to;
#endif
}

/// Scheduler side: runs work-item `l` until its next barrier or its end.
void resume_item(Group& g, std::size_t l) {
  Item& it = g.items[l];
  g.current = l;
  tsan_switch(it.tsan);
  asan_start(&g.sched_fake, it.stack_bottom, it.stack_size);
  it.fiber = std::move(it.fiber).resume();
  asan_finish(g.sched_fake, nullptr, nullptr);
}

Group& current_group(const char* what) {
  Group* g = t_group;
  if (g == nullptr) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    " called outside a work-item of a parallel_for(nd_range) kernel; group "
                    "functions exist only in nd_range kernels");
  }
  return *g;
}

/// The work-items [first, first + count) that meet at a collective of `scope` with item `l`.
std::pair<std::size_t, std::size_t> scope_of(const Group& g, CollectiveScope scope, std::size_t l) {
  if (scope == CollectiveScope::work_group) return {0, g.items.size()};
  const std::size_t first = l / sub_group_size * sub_group_size;
  return {first, std::min<std::size_t>(sub_group_size, g.items.size() - first)};
}

}  // namespace

void host_collective(CollectiveScope scope, CollectiveFn complete, const void* arg) {
  Group& g = current_group("a group function");
  const std::size_t l = g.current;
  auto [first, count] = scope_of(g, scope, l);
  if (count <= 1) {  // nobody to wait for
    if (complete != nullptr) complete(g.slots, first, count, arg);
    return;
  }
  Item& it = g.items[l];
  Pending& p =
      scope == CollectiveScope::work_group ? g.work_group : g.sub_groups[l / sub_group_size];
  p = {complete, arg};
  it.wait = scope == CollectiveScope::work_group ? Wait::work_group : Wait::sub_group;
  tsan_switch(g.tsan_scheduler);
  asan_start(&it.asan_fake, g.sched_bottom, g.sched_size);
  *it.sink = std::move(*it.sink).resume();
  asan_finish(it.asan_fake, &g.sched_bottom, &g.sched_size);
  if (g.cancelled) throw Cancelled{};
}

void host_barrier() {
  (void)current_group("group barrier");
  host_collective(CollectiveScope::work_group, nullptr, nullptr);
}

std::byte* host_collective_slot() {
  Group& g = current_group("a group function");
  return g.slots + g.current * kCollectiveSlotBytes;
}

std::byte* host_local_memory() noexcept {
  return t_local;
}

namespace {

/// Scheduler side: after a round, completes every collective whose work-items all arrived and
/// makes them ready again. Returns whether any did.
bool complete_collectives(Group& g) {
  const std::size_t n = g.items.size();
  bool progress = false;
  for (std::size_t first = 0; first < n; first += sub_group_size) {
    const std::size_t count = std::min<std::size_t>(sub_group_size, n - first);
    bool all = true;
    for (std::size_t l = first; l < first + count && all; ++l) {
      all = g.items[l].fiber && g.items[l].wait == Wait::sub_group;
    }
    if (!all) continue;
    Pending& p = g.sub_groups[first / sub_group_size];
    if (p.fn != nullptr) p.fn(g.slots, first, count, p.arg);
    p = {};
    for (std::size_t l = first; l < first + count; ++l) g.items[l].wait = Wait::none;
    progress = true;
  }
  bool all = true;
  for (std::size_t l = 0; l < n && all; ++l) {
    all = g.items[l].fiber && g.items[l].wait == Wait::work_group;
  }
  if (all) {
    if (g.work_group.fn != nullptr) g.work_group.fn(g.slots, 0, n, g.work_group.arg);
    g.work_group = {};
    for (auto& it : g.items) it.wait = Wait::none;
    progress = true;
  }
  return progress;
}

std::exception_ptr stuck(std::size_t group, const Group& g) {
  const std::size_t n = g.items.size();
  std::size_t finished = 0, at_group = 0;
  for (const auto& it : g.items) {
    finished += it.fiber ? 0 : 1;
    at_group += it.fiber && it.wait == Wait::work_group ? 1 : 0;
  }
  const std::string where = "work-group " + std::to_string(group) + ": ";
  if (finished != 0) {
    return std::make_exception_ptr(Error(
        Errc::invalid_state,
        where + std::to_string(finished) + " of " + std::to_string(n) +
            " work-items finished while the others wait at a group barrier or group function; "
            "every work-item of a group (or sub-group) must reach each of them"));
  }
  return std::make_exception_ptr(Error(
      Errc::invalid_state,
      where + std::to_string(at_group) + " of " + std::to_string(n) +
          " work-items wait at a work-group barrier or function while the others wait at a "
          "sub-group function; every work-item must call the same group functions in the same "
          "order"));
}

}  // namespace

void run_group_fibers(std::size_t group, std::size_t n, std::byte* local,
                      void (*item)(void*, std::size_t, std::size_t), void* state) {
  Group g;
  t_local = local;
  if (t_slots.size() < n * kCollectiveSlotBytes) t_slots.resize(n * kCollectiveSlotBytes);
  g.slots = t_slots.data();
  struct Reset {
    Group* prev;
    ~Reset() {
      t_group = prev;
      t_local = nullptr;
    }
  } reset{t_group};
  t_group = &g;
  if (n == 1) {
    g.items.resize(1);
    item(state, group, 0);  // no barrier can block: no fiber needed
    return;
  }
  g.items.resize(n);
  g.sub_groups.resize((n + sub_group_size - 1) / sub_group_size);
#if defined(SLUICE_TSAN_FIBERS)
  g.tsan_scheduler = __tsan_get_current_fiber();
#endif
  for (std::size_t l = 0; l < n; ++l) {
    Item& it = g.items[l];
    it.fiber = bc::fiber(std::allocator_arg, PooledStack{},
                         [&g, &it, l, group, item, state](bc::fiber&& sink) {
                           asan_finish(nullptr, &g.sched_bottom, &g.sched_size);
                           bc::fiber back = std::move(sink);
                           it.sink = &back;
                           try {
                             item(state, group, l);
                           } catch (const Cancelled&) {
                             // the group stopped: this work-item just ends
                           } catch (...) {
                             if (!g.error) g.error = std::current_exception();
                           }
                           // The last switch out: nothing to save, never resumed.
                           tsan_switch(g.tsan_scheduler);
                           asan_start(nullptr, g.sched_bottom, g.sched_size);
                           return back;
                         });
    const bc::stack_context& s = t_stacks.last();
    it.stack_bottom = static_cast<const char*>(s.sp) - s.size;
    it.stack_size = s.size;
#if defined(SLUICE_TSAN_FIBERS)
    it.tsan = __tsan_create_fiber(0);
#endif
  }
  // Rounds: every ready work-item runs to its next barrier or group function (or its end); then
  // every collective whose work-items all arrived completes, and they are ready again.
  for (;;) {
    std::size_t finished = 0;
    bool ran = false;
    for (std::size_t l = 0; l < n && !g.error; ++l) {
      Item& it = g.items[l];
      if (it.fiber && it.wait == Wait::none) {
        resume_item(g, l);
        ran = true;
      }
      if (!it.fiber) ++finished;
    }
    if (finished == n || g.error) break;
    if (!complete_collectives(g) && !ran) {
      g.error = stuck(group, g);
      break;
    }
  }
  // After an error, the work-items still at a barrier unwind (Cancelled) and end.
  g.cancelled = true;
  for (std::size_t l = 0; l < n; ++l) {
    while (g.items[l].fiber) resume_item(g, l);
#if defined(SLUICE_TSAN_FIBERS)
    __tsan_destroy_fiber(g.items[l].tsan);
#endif
  }
  if (g.error) std::rethrow_exception(g.error);
}

}  // namespace sluice::dataflow::detail
