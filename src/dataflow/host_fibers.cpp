#include "dataflow/host_fibers.hpp"

#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>

#include <exception>
#include <memory>
#include <vector>

#include "sluice/dataflow/kernel.hpp"
#include "sluice/error.hpp"

// Under ThreadSanitizer this file is compiled without instrumentation (src/CMakeLists.txt) and
// with SLUICE_TSAN_FIBERS: Boost.Context's own code runs after a work-item's last switch
// announcement, and instrumented function exits there would corrupt the sanitizer's shadow stack.
#if defined(SLUICE_TSAN_FIBERS)
extern "C" {
void* __tsan_get_current_fiber();
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif

namespace sluice::dataflow::detail {
namespace bc = boost::context;

namespace {

#if defined(SLUICE_TSAN_FIBERS) || defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kStackBytes = 512 * 1024;  // sanitizers grow frames a lot
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
    return base_.allocate();
#endif
    if (free_.empty()) return base_.allocate();
    auto s = free_.back();
    free_.pop_back();
    return s;
  }
  void deallocate(bc::stack_context& s) noexcept {
#if defined(SLUICE_TSAN_FIBERS)
    base_.deallocate(s);
    return;
#endif
    try {
      free_.push_back(s);
    } catch (...) {
      base_.deallocate(s);
    }
  }
  ~StackPool() {
    for (auto& s : free_) base_.deallocate(s);
  }

 private:
  bc::fixedsize_stack base_{kStackBytes};
  std::vector<bc::stack_context> free_;
};

thread_local StackPool t_stacks;

/// Stack allocator handing out pooled stacks (the interface Boost.Context expects).
struct PooledStack {
  bc::stack_context allocate() { return t_stacks.allocate(); }
  void deallocate(bc::stack_context& s) noexcept { t_stacks.deallocate(s); }
};

struct Item {
  bc::fiber fiber;            // the suspended work-item (empty once it finished)
  bc::fiber* sink = nullptr;  // inside the work-item: the way back to the scheduler
#if defined(SLUICE_TSAN_FIBERS)
  void* tsan = nullptr;
#endif
};

struct Group {
  std::vector<Item> items;
  std::size_t current = 0;
  std::exception_ptr error;
#if defined(SLUICE_TSAN_FIBERS)
  void* tsan_scheduler = nullptr;
#endif
};

thread_local Group* t_group = nullptr;
thread_local std::byte* t_local = nullptr;

/// Inside a work-item: back to the scheduler, until it resumes this work-item.
void yield_to_scheduler(Group& g, Item& it) {
#if defined(SLUICE_TSAN_FIBERS)
  __tsan_switch_to_fiber(g.tsan_scheduler, 0);
#else
  (void)g;
#endif
  *it.sink = std::move(*it.sink).resume();
}

}  // namespace

void host_barrier() {
  Group* g = t_group;
  if (g == nullptr) {
    throw Error(Errc::invalid_state,
                "group barrier called outside a work-item of a parallel_for(nd_range) kernel");
  }
  if (g->items.size() <= 1) return;  // a group of one has nobody to wait for
  Item& it = g->items[g->current];
  yield_to_scheduler(*g, it);
}

std::byte* host_local_memory() noexcept {
  return t_local;
}

void run_group_fibers(std::size_t group, std::size_t n, std::byte* local,
                      void (*item)(void*, std::size_t, std::size_t), void* state) {
  Group g;
  t_local = local;
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
#if defined(SLUICE_TSAN_FIBERS)
  g.tsan_scheduler = __tsan_get_current_fiber();
#endif
  for (std::size_t l = 0; l < n; ++l) {
    Item& it = g.items[l];
    it.fiber = bc::fiber(std::allocator_arg, PooledStack{},
                         [&g, &it, l, group, item, state](bc::fiber&& sink) {
                           bc::fiber back = std::move(sink);
                           it.sink = &back;
#if defined(SLUICE_TSAN_FIBERS)
                           // Also on unwinding: the switch back happens either way.
                           struct TsanBack {
                             void* to;
                             ~TsanBack() { __tsan_switch_to_fiber(to, 0); }
                           } tsan_back{g.tsan_scheduler};
#endif
                           try {
                             item(state, group, l);
                           } catch (const bc::detail::forced_unwind&) {
                             throw;  // the scheduler is unwinding a stuck work-item
                           } catch (...) {
                             if (!g.error) g.error = std::current_exception();
                           }
                           return back;
                         });
#if defined(SLUICE_TSAN_FIBERS)
    it.tsan = __tsan_create_fiber(0);
#endif
  }
  // Rounds: every waiting work-item runs to its next barrier (or its end). A barrier is passed
  // when a round ends with every work-item at it.
  for (;;) {
    std::size_t finished = 0;
    for (std::size_t l = 0; l < n; ++l) {
      Item& it = g.items[l];
      if (!it.fiber) {
        ++finished;
        continue;
      }
      g.current = l;
#if defined(SLUICE_TSAN_FIBERS)
      __tsan_switch_to_fiber(it.tsan, 0);
#endif
      it.fiber = std::move(it.fiber).resume();
      if (!it.fiber) ++finished;
      if (g.error) break;
    }
    if (finished == n || g.error) break;
    if (finished != 0) {
      g.error = std::make_exception_ptr(
          Error(Errc::invalid_state,
                "work-group " + std::to_string(group) + ": " + std::to_string(finished) + " of " +
                    std::to_string(n) +
                    " work-items finished while the others wait at a group barrier; every "
                    "work-item of a group must reach each barrier"));
      break;
    }
  }
  // Stuck work-items (after an error) are unwound by destroying their fibers.
  for (auto& it : g.items) {
    if (it.fiber) {
#if defined(SLUICE_TSAN_FIBERS)
      __tsan_switch_to_fiber(it.tsan, 0);
#endif
      it.fiber = bc::fiber();
    }
#if defined(SLUICE_TSAN_FIBERS)
    if (it.tsan != nullptr) __tsan_destroy_fiber(it.tsan);
#endif
  }
  if (g.error) std::rethrow_exception(g.error);
}

}  // namespace sluice::dataflow::detail
