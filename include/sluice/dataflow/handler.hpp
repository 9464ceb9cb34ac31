#pragma once
/// @file
/// Command groups (reference 004): `Handler`, the accessors a command group declares, events and
/// `depends_on`, work-group local memory, reductions, and the kernels themselves.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <source_location>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/dataflow/kernel.hpp"
#include "sluice/dataflow/range.hpp"
#include "sluice/event.hpp"

// Lets <sluice/dataflow_cuda.cuh> detect that it came too late to add device code.
#define SLUICE_DATAFLOW_HANDLER_HPP 1

namespace sluice::detail {
struct DeferredPoint;
}  // namespace sluice::detail

namespace sluice::dataflow {

/// How a command group touches a buffer; the modes build the task graph through sluice's
/// dependency tracker (read after write, write after read or write; reads run concurrently).
enum class AccessMode : std::uint8_t {
  read,           ///< reads the current contents
  write,          ///< writes; the rest of the accessed range keeps its contents
  read_write,     ///< reads and writes
  discard_write,  ///< overwrites the accessed range: nothing is copied in for it
};

class Handler;
class Queue;

namespace detail {
class BufferState;
class QueueState;
class SubmitState;
class EventAccess;
}  // namespace detail

/// The completion of one command group. Cheap to copy; a default-constructed event is complete.
/// A backend event is recorded for it only if it is still held when its context issues the next
/// operation (or it is waited on or depended on before that): `q.submit(...)` whose event is
/// dropped costs none. Either way it marks exactly the command group's end.
class Event {
 public:
  Event() = default;
  /// Blocks until the command group completed; throws WorkFailed (once) if it, or work it
  /// depended on, failed, and Error if the calling thread holds a HostAccessor the command group
  /// waits for (which would never return).
  void wait(std::source_location loc = std::source_location::current()) const;
  /// True once the command group completed. Never blocks, never throws for failed work.
  [[nodiscard]] bool complete() const;
  /// Waits for every event of `events` (SYCL's `event::wait(list)`).
  static void wait(const std::vector<Event>& events,
                   std::source_location loc = std::source_location::current());

 private:
  friend class detail::EventAccess;
  // The context of the command group (a nullable handle: a default Event has none) and the end
  // of its operation, whose backend event is recorded only if this event is still held when the
  // context issues its next operation (or is waited on or depended on before that).
  std::shared_ptr<sluice::detail::ContextImpl> ctx_;
  std::shared_ptr<sluice::detail::DeferredPoint> point_;
  std::uint64_t seq_ = 0;
};

/// Waits for every event of `events`.
inline void wait_all(const std::vector<Event>& events,
                     std::source_location loc = std::source_location::current()) {
  Event::wait(events, loc);
}

namespace detail {
/// A kernel, type-erased for the runtime. `task` is valid during the call that issues it only.
struct KernelDesc {
  const char* what = "kernel";
  const void* task = nullptr;
  /// A heap copy of the task, for the host path (the kernel runs after the call returns).
  std::shared_ptr<const void> (*copy)(const void* task) = nullptr;
  /// Runs the whole kernel on the host (on the CPU pool) with `local_bytes` of group-local
  /// memory per work-group; blocking.
  void (*host_run)(const void* task, std::size_t local_bytes) = nullptr;
  /// Launches the kernel on a cudaStream_t; null when the caller was not compiled through
  /// <sluice/dataflow_cuda.cuh>. Returns null or the name of the CUDA error.
  const char* (*device_launch)(void* stream, const void* task, std::size_t local_bytes) = nullptr;
  bool nd_range = false;
  std::size_t group_items = 0;  ///< nd_range: work-items per group
};

void* require_buffer(SubmitState& s, const std::shared_ptr<BufferState>& b, AccessMode mode,
                     std::size_t offset, std::size_t bytes, std::source_location loc);
void require_memory(SubmitState& s, const void* ptr, std::size_t bytes, AccessMode mode,
                    std::source_location loc);
std::size_t allocate_local(SubmitState& s, std::size_t bytes, std::size_t align,
                           std::source_location loc);
void add_dependency(SubmitState& s, const Event& e, std::source_location loc);
void launch(SubmitState& s, const KernelDesc& k, std::source_location loc);
void check_plain_range(SubmitState& s, std::source_location loc);
void check_nd_range(const std::size_t* global, const std::size_t* local, int dims,
                    std::source_location loc);

/// Host backend: `fn(state, c)` for every chunk c in [0, chunks) on the CPU pool.
void host_parallel(std::size_t chunks, void (*fn)(void* state, std::size_t chunk), void* state);
/// Host backend: how many chunks to split `items` independent work-items into.
[[nodiscard]] std::size_t host_chunks(std::size_t items) noexcept;
/// Host backend: runs every work-group on the CPU pool, each work-item of a group as a fiber on
/// one thread, with `local_bytes` of group-local memory; `item(state, group, local)`.
void host_groups(std::size_t groups, std::size_t group_items, std::size_t local_bytes,
                 void (*item)(void* state, std::size_t group, std::size_t local), void* state);

template <class F>
void host_parallel_for(std::size_t chunks, F& f) {
  host_parallel(
      chunks, [](void* s, std::size_t c) { (*static_cast<F*>(s))(c); }, static_cast<void*>(&f));
}

// Tasks: what one kernel launch needs, copied to the device as the kernel's argument.
template <class F>
struct SingleTask {
  F f;
  static void host_run(const void* t, std::size_t) { static_cast<const SingleTask*>(t)->f(); }
};

template <int D, class F>
struct RangeTask {
  range<D> r;
  F f;
  static void host_run(const void* t, std::size_t) {
    const auto& task = *static_cast<const RangeTask*>(t);
    const std::size_t n = task.r.size();
    const std::size_t chunks = host_chunks(n);
    auto body = [&](std::size_t c) {
      const std::size_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      for (std::size_t i = lo; i < hi; ++i) {
        task.f(item<D>(delinearize<D>(i, task.r), task.r));
      }
    };
    host_parallel_for(chunks, body);
  }
};

template <int D, class F, class T, class Op>
struct ReduceTask {
  range<D> r;
  F f;
  T* out;
  T identity;
  bool initialize_to_identity;
  static void host_run(const void* t, std::size_t) {
    const auto& task = *static_cast<const ReduceTask*>(t);
    const std::size_t n = task.r.size();
    const std::size_t chunks = host_chunks(n);
    std::vector<T> partial(chunks, task.identity);
    auto body = [&](std::size_t c) {
      Reducer<T, Op> red(task.identity);
      const std::size_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      for (std::size_t i = lo; i < hi; ++i) {
        task.f(item<D>(delinearize<D>(i, task.r), task.r), red);
      }
      partial[c] = red.partial();
    };
    host_parallel_for(chunks, body);
    // Combined in chunk order: the result does not depend on which thread ran which chunk.
    T acc = task.initialize_to_identity ? task.identity : *task.out;
    for (const T& p : partial) acc = Op{}(acc, p);
    *task.out = acc;
  }
};

template <int D, class F>
struct NdTask {
  nd_range<D> r;
  F f;
  static void host_run(const void* t, std::size_t local_bytes) {
    const auto& task = *static_cast<const NdTask*>(t);
    const range<D> groups = task.r.get_group_range();
    auto item_fn = [](void* s, std::size_t g, std::size_t l) {
      const auto& tk = *static_cast<const NdTask*>(s);
      const range<D> gr = tk.r.get_group_range();
      tk.f(nd_item<D>(delinearize<D>(g, gr), delinearize<D>(l, tk.r.local), gr, tk.r.local));
    };
    host_groups(groups.size(), task.r.local.size(), local_bytes, item_fn,
                const_cast<void*>(static_cast<const void*>(&task)));
  }
};

template <int D, class F, class T, class Op>
struct NdReduceTask {
  nd_range<D> r;
  F f;
  T* out;
  T identity;
  bool initialize_to_identity;
  static void host_run(const void* t, std::size_t local_bytes) {
    const auto& task = *static_cast<const NdReduceTask*>(t);
    const std::size_t groups = task.r.get_group_range().size();
    // One partial per group: a group's work-items are fibers of one thread, so they combine into
    // it without synchronization, each when it finishes.
    struct State {
      const NdReduceTask* task;
      T* partial;
    };
    std::vector<T> partial(groups, task.identity);
    State state{&task, partial.data()};
    auto item_fn = [](void* raw, std::size_t g, std::size_t l) {
      const auto& st = *static_cast<State*>(raw);
      const auto& tk = *st.task;
      const range<D> gr = tk.r.get_group_range();
      Reducer<T, Op> red(tk.identity);
      tk.f(nd_item<D>(delinearize<D>(g, gr), delinearize<D>(l, tk.r.local), gr, tk.r.local), red);
      st.partial[g] = Op{}(st.partial[g], red.partial());
    };
    host_groups(groups, task.r.local.size(), local_bytes, item_fn, &state);
    // Combined in group order: the result does not depend on which thread ran which group.
    T acc = task.initialize_to_identity ? task.identity : *task.out;
    for (const T& p : partial) acc = Op{}(acc, p);
    *task.out = acc;
  }
};

template <class Task>
std::shared_ptr<const void> copy_task(const void* t) {
  return std::make_shared<const Task>(*static_cast<const Task*>(t));
}

#if defined(SLUICE_DATAFLOW_CUDA)
// Defined by <sluice/dataflow_cuda.cuh>.
template <class Task>
const char* cuda_launch(void* stream, const void* task, std::size_t local_bytes);
#endif

template <class Task>
KernelDesc describe(const Task& task, const char* what) {
  KernelDesc k;
  k.what = what;
  k.task = &task;
  k.copy = &copy_task<Task>;
  k.host_run = &Task::host_run;
#if defined(SLUICE_DATAFLOW_CUDA)
  k.device_launch = &cuda_launch<Task>;
#endif
  return k;
}
}  // namespace detail

namespace detail {
/// The command group being built on this thread (0: none), for the check of accessor copies.
[[nodiscard]] std::uint64_t current_group() noexcept;
/// Throws Error(invalid_state) if an accessor of command group `group` is copied while another
/// command group is being built on this thread (into that group's kernel).
void check_accessor_group(std::uint64_t group);
}  // namespace detail

/// Device access to a buffer inside a command group, from `Buffer::get_access`. Kernels capture
/// it by value (its bytes are copied to the device). Indices are relative to the accessed
/// range's offset. It belongs to the command group whose Handler made it: copying it into
/// another command group (a later kernel's capture) is an Error, since only the group that
/// declared it is ordered by it and has the data moved for it.
template <class T, int D, AccessMode Mode>
class Accessor {
 public:
  using value_type = std::conditional_t<Mode == AccessMode::read, const T, T>;
  Accessor() = default;
  Accessor(T* base, range<D> buffer_range, range<D> r, id<D> offset)
      : base_(base),
        buffer_range_(buffer_range),
        range_(r),
        offset_(offset),
        group_(detail::current_group()) {}
  SLUICE_HD Accessor(const Accessor& other)
      : base_(other.base_),
        buffer_range_(other.buffer_range_),
        range_(other.range_),
        offset_(other.offset_),
        group_(other.group_) {
#if !defined(__CUDA_ARCH__)
    if (group_ != 0) detail::check_accessor_group(group_);
#endif
  }
  SLUICE_HD Accessor& operator=(const Accessor& other) {
#if !defined(__CUDA_ARCH__)
    if (other.group_ != 0) detail::check_accessor_group(other.group_);
#endif
    base_ = other.base_;
    buffer_range_ = other.buffer_range_;
    range_ = other.range_;
    offset_ = other.offset_;
    group_ = other.group_;
    return *this;
  }

  SLUICE_HD value_type& operator[](id<D> i) const noexcept {
    for (int d = 0; d < D; ++d) i[d] += offset_[d];
    return base_[detail::linearize<D>(i, buffer_range_)];
  }
  /// The accessed range and its offset in the buffer.
  [[nodiscard]] SLUICE_HD range<D> get_range() const noexcept {
    return range_;
  }
  [[nodiscard]] SLUICE_HD id<D> get_offset() const noexcept {
    return offset_;
  }
  [[nodiscard]] SLUICE_HD std::size_t size() const noexcept {
    return range_.size();
  }
  /// The first accessed element (elements of a row are contiguous).
  [[nodiscard]] SLUICE_HD value_type* get_pointer() const noexcept {
    return base_ + detail::linearize<D>(offset_, buffer_range_);
  }

 private:
  T* base_ = nullptr;
  range<D> buffer_range_;
  range<D> range_;
  id<D> offset_;
  std::uint64_t group_ = 0;  // the command group that made it (0: default-constructed)
};

/// Work-group local memory for an nd_range kernel: one uninitialized array per work-group, alive
/// while the group runs. Creating one and launching a plain range kernel is an Error.
template <class T, int D = 1>
class local_accessor {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "local_accessor<T> holds raw, uninitialized memory: T must be trivial");

 public:
  local_accessor(range<D> r, Handler& h,
                 std::source_location loc = std::source_location::current());

  SLUICE_HD T& operator[](id<D> i) const noexcept {
    return get_pointer()[detail::linearize<D>(i, range_)];
  }
  [[nodiscard]] SLUICE_HD range<D> get_range() const noexcept { return range_; }
  [[nodiscard]] SLUICE_HD std::size_t size() const noexcept { return range_.size(); }
  [[nodiscard]] SLUICE_HD T* get_pointer() const noexcept {
#if defined(__CUDA_ARCH__)
    extern __shared__ __align__(16) unsigned char sluice_dataflow_local[];
    return reinterpret_cast<T*>(sluice_dataflow_local + offset_);
#else
    return reinterpret_cast<T*>(detail::host_local_memory() + offset_);
#endif
  }

 private:
  std::size_t offset_ = 0;
  range<D> range_;
};

/// A sum or max reduction into one value (SYCL 2020's reduction objects); see `reduction`.
template <class T, class Op>
struct Reduction {
  /// What the kernel receives (nvcc's device lambdas cannot be generic: name this type there).
  using reducer_type = Reducer<T, Op>;
  T* out = nullptr;
  T identity{};
  bool initialize_to_identity = false;
};

/// Identity values of the supported operators.
template <class T>
constexpr T identity_of(plus<T>) {
  return T{};
}
template <class T>
constexpr T identity_of(maximum<T>) {
  return std::numeric_limits<T>::lowest();
}

/// Properties of a reduction.
struct ReductionOptions {
  /// Ignore the destination's value instead of combining the result with it.
  bool initialize_to_identity = false;
};

/// A reduction into `*out`, USM memory of the queue's device (or host memory on the host
/// device): the result is combined with the value there unless `initialize_to_identity`.
template <class T, class Op>
Reduction<T, Op> reduction(T* out, Op op, ReductionOptions options = {}) {
  return {out, identity_of(op), options.initialize_to_identity};
}

/// The command group being built inside `Queue::submit`: declares accessors (through
/// `Buffer::get_access`), dependencies on events and tracked USM, then runs exactly one kernel.
/// The kernel is issued by the call that names it; declare everything else before it.
class Handler {
 public:
  explicit Handler(detail::SubmitState& s) noexcept : s_(&s) {}
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

  /// The command group starts after `e` completed.
  void depends_on(const Event& e, std::source_location loc = std::source_location::current()) {
    detail::add_dependency(*s_, e, loc);
  }
  /// The command group starts after every event of `events` completed.
  void depends_on(const std::vector<Event>& events,
                  std::source_location loc = std::source_location::current()) {
    for (const auto& e : events) detail::add_dependency(*s_, e, loc);
  }
  /// Declares that the kernel touches `count` elements of USM memory at `ptr` in `mode`, so the
  /// tracker orders it against other command groups touching them (beyond SYCL: USM then needs
  /// no events). `ptr` must come from this layer's malloc_* functions.
  template <class T>
  void use(const T* ptr, std::size_t count, AccessMode mode,
           std::source_location loc = std::source_location::current()) {
    detail::require_memory(*s_, ptr, count * sizeof(T), mode, loc);
  }

  /// Runs `f()` once.
  template <class F>
  void single_task(F f, std::source_location loc = std::source_location::current()) {
    detail::check_plain_range(*s_, loc);
    detail::SingleTask<F> task{std::move(f)};
    detail::launch(*s_, detail::describe(task, "single_task"), loc);
  }

  /// Runs `f(item<D>)` (or `f(id<D>)`) for every point of `r`, in no particular order.
  template <int D, class F>
  void parallel_for(range<D> r, F f, std::source_location loc = std::source_location::current()) {
    detail::check_plain_range(*s_, loc);
    if (r.size() == 0) return detail::launch(*s_, {}, loc);
    detail::RangeTask<D, F> task{r, std::move(f)};
    detail::launch(*s_, detail::describe(task, "parallel_for"), loc);
  }
  template <class F>
  void parallel_for(std::size_t n, F f,
                    std::source_location loc = std::source_location::current()) {
    parallel_for(range<1>(n), std::move(f), loc);
  }

  /// Runs `f(item<D>, reducer)` for every point of `r`; the partial results combined with `op`
  /// land in the reduction's destination when the command group completes.
  template <int D, class T, class Op, class F>
  void parallel_for(range<D> r, Reduction<T, Op> red, F f,
                    std::source_location loc = std::source_location::current()) {
    detail::check_plain_range(*s_, loc);
    detail::ReduceTask<D, F, T, Op> task{r, std::move(f), red.out, red.identity,
                                         red.initialize_to_identity};
    detail::launch(*s_, detail::describe(task, "parallel_for(reduction)"), loc);
  }

  /// Runs `f(nd_item<D>)` for every work-item of `r`, work-group by work-group; work-items of a
  /// group share `local_accessor` memory and synchronize with `group_barrier`.
  template <int D, class F>
  void parallel_for(nd_range<D> r, F f,
                    std::source_location loc = std::source_location::current()) {
    detail::check_nd_range(r.global.v, r.local.v, D, loc);
    detail::NdTask<D, F> task{r, std::move(f)};
    auto k = detail::describe(task, "parallel_for(nd_range)");
    k.nd_range = true;
    k.group_items = r.local.size();
    detail::launch(*s_, k, loc);
  }

  /// Runs `f(nd_item<D>, reducer)` for every work-item of `r` (SYCL 2020's nd_range reduction):
  /// work-items of a group share `local_accessor` memory and barriers as in the plain nd_range
  /// form; the partial results combined with `op` land in the reduction's destination when the
  /// command group completes.
  template <int D, class T, class Op, class F>
  void parallel_for(nd_range<D> r, Reduction<T, Op> red, F f,
                    std::source_location loc = std::source_location::current()) {
    detail::check_nd_range(r.global.v, r.local.v, D, loc);
    detail::NdReduceTask<D, F, T, Op> task{r, std::move(f), red.out, red.identity,
                                           red.initialize_to_identity};
    auto k = detail::describe(task, "parallel_for(nd_range, reduction)");
    k.nd_range = true;
    k.group_items = r.local.size();
    detail::launch(*s_, k, loc);
  }

  /// Internal: the command group's state.
  [[nodiscard]] detail::SubmitState& state() const noexcept { return *s_; }

 private:
  detail::SubmitState* s_;
};

template <class T, int D>
local_accessor<T, D>::local_accessor(range<D> r, Handler& h, std::source_location loc)
    : offset_(detail::allocate_local(h.state(), r.size() * sizeof(T), alignof(T), loc)),
      range_(r) {}

}  // namespace sluice::dataflow
