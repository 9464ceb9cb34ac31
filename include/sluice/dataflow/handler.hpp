#pragma once
/// @file
/// Command groups (reference 004): `Handler`, the accessors a command group declares, events and
/// `depends_on`, work-group local memory, reductions, the kernels, and the copy, fill and
/// update commands (SYCL 2020 §4.9.4).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <source_location>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/dataflow/access.hpp"
#include "sluice/dataflow/info.hpp"
#include "sluice/dataflow/kernel.hpp"
#include "sluice/dataflow/range.hpp"
#include "sluice/dataflow/tasks.hpp"
#include "sluice/event.hpp"

// Lets <sluice/dataflow_cuda.cuh> detect that it came too late to add device code.
#define SLUICE_DATAFLOW_HANDLER_HPP 1

namespace sluice::detail {
struct DeferredPoint;
}  // namespace sluice::detail

namespace sluice::dataflow {

class Handler;
class Queue;

namespace detail {
class BufferState;
class QueueState;
class SubmitState;
class EventAccess;
struct Profile;
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

  /// A profiling time of the command group (nanoseconds, see info::event_profiling): submit is
  /// known at once; start and end wait for the command group. Error(invalid_state) unless the
  /// queue was made with `QueueOptions::profiling` (SYCL's `property::queue::enable_profiling`).
  template <class Param>
  [[nodiscard]] typename Param::return_type get_profiling_info(
      std::source_location loc = std::source_location::current()) const {
    if constexpr (std::is_same_v<Param, info::event_profiling::command_submit>) {
      return profiling_ns(0, loc);
    } else if constexpr (std::is_same_v<Param, info::event_profiling::command_start>) {
      return profiling_ns(1, loc);
    } else {
      static_assert(std::is_same_v<Param, info::event_profiling::command_end>,
                    "get_profiling_info: command_submit, command_start or command_end");
      return profiling_ns(2, loc);
    }
  }

 private:
  friend class detail::EventAccess;
  [[nodiscard]] std::uint64_t profiling_ns(int which, std::source_location loc) const;
  // The context of the command group (a nullable handle: a default Event has none) and the end
  // of its operation, whose backend event is recorded only if this event is still held when the
  // context issues its next operation (or is waited on or depended on before that).
  std::shared_ptr<sluice::detail::ContextImpl> ctx_;
  std::shared_ptr<sluice::detail::DeferredPoint> point_;
  std::shared_ptr<const detail::Profile> profile_;  // only on a profiling queue
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
  /// Launches the kernel on a cudaStream_t with `scratch_bytes` of device memory at `scratch`
  /// (stream-ordered, released after it); null when the caller was not compiled through
  /// <sluice/dataflow_cuda.cuh>. Returns null or the name of the CUDA error.
  const char* (*device_launch)(void* stream, const void* task, std::size_t local_bytes,
                               void* scratch) = nullptr;
  bool nd_range = false;
  std::size_t group_items = 0;    ///< nd_range: work-items per group
  std::size_t scratch_bytes = 0;  ///< cuda: device memory the launch needs (reductions)
};

/// A region of memory a command touches: `count[0]` contiguous elements of `elem` bytes, repeated
/// `count[1]` times `pitch[1]` bytes apart, that `count[2]` times `pitch[2]` bytes apart.
struct Region {
  void* ptr = nullptr;
  std::size_t elem = 1;
  std::size_t count[3] = {0, 1, 1};
  std::size_t pitch[3] = {0, 0, 0};
  [[nodiscard]] std::size_t elements() const noexcept { return count[0] * count[1] * count[2]; }
};
/// The elements of `r` from `offset` in a buffer of extents `b`, starting at `first`.
template <int D>
Region region_of(void* first, std::size_t elem, const range<D>& b, const range<D>& r) {
  Region g;
  g.ptr = first;
  g.elem = elem;
  g.count[0] = r[D - 1];
  if constexpr (D >= 2) {
    g.count[1] = r[D - 2];
    g.pitch[1] = b[D - 1] * elem;
  }
  if constexpr (D == 3) {
    g.count[2] = r[0];
    g.pitch[2] = b[1] * b[2] * elem;
  }
  return g;
}

void* require_buffer(SubmitState& s, const std::shared_ptr<BufferState>& b, Access mode,
                     bool no_init, std::size_t offset, std::size_t bytes, std::source_location loc);
void require_memory(SubmitState& s, const void* ptr, std::size_t bytes, Access mode,
                    std::source_location loc);
std::size_t allocate_local(SubmitState& s, std::size_t bytes, std::size_t align,
                           std::source_location loc);
void add_dependency(SubmitState& s, const Event& e, std::source_location loc);
void launch(SubmitState& s, const KernelDesc& k, std::source_location loc);
void check_plain_range(SubmitState& s, std::source_location loc);
void check_nd_range(const std::size_t* global, const std::size_t* local, int dims,
                    std::source_location loc);
/// The command group's operation is a copy, a byte set, a fill with a pattern or an update of
/// the host copy of the buffer whose device copy `device_ptr` points into.
void command_copy(SubmitState& s, const Region& dst, const Region& src, const char* what,
                  std::source_location loc);
void command_memset(SubmitState& s, void* ptr, int value, std::size_t bytes,
                    std::source_location loc);
void command_fill(SubmitState& s, const Region& dst, const void* pattern, const char* what,
                  std::source_location loc);
void command_update_host(SubmitState& s, const void* device_ptr, std::source_location loc);

#if defined(SLUICE_DATAFLOW_CUDA)
// Defined by <sluice/dataflow_cuda.cuh>.
template <class Task>
const char* cuda_launch(void* stream, const void* task, std::size_t local_bytes, void* scratch);
#endif

template <class Task>
KernelDesc describe(const Task& task, const char* what) {
  KernelDesc k;
  k.what = what;
  k.task = &task;
  k.copy = &copy_task<Task>;
  k.host_run = &Task::host_run;
  k.scratch_bytes = task.scratch_bytes();
#if defined(SLUICE_DATAFLOW_CUDA)
  k.device_launch = &cuda_launch<Task>;
#endif
  return k;
}

/// `a[i][j][k]`: each subscript but the last fixes one more index (SYCL 2020's chained
/// subscripts of multi-dimensional accessors).
template <class A, int D, int K>
class Subscript {
 public:
  SLUICE_HD Subscript(const A* a, id<D> i) noexcept : a_(a), i_(i) {}
  SLUICE_HD decltype(auto) operator[](std::size_t j) const noexcept {
    id<D> i = i_;
    i[K] = j;
    if constexpr (K + 1 == D) {
      return (*a_)[i];
    } else {
      return Subscript<A, D, K + 1>(a_, i);
    }
  }

 private:
  const A* a_;
  id<D> i_;
};
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
template <class T, int D, Access Mode>
class Accessor {
 public:
  using value_type = std::conditional_t<Mode == Access::read, const T, T>;
  using reference = value_type&;
  static constexpr Access mode = Mode;
  static constexpr int dimensions = D;
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
  /// `acc[i][j]` (and `acc[i][j][k]` in 3D).
  SLUICE_HD detail::Subscript<Accessor, D, 1> operator[](std::size_t i) const noexcept
      requires(D > 1) {
    id<D> idx;
    idx[0] = i;
    return {this, idx};
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
  [[nodiscard]] SLUICE_HD std::size_t byte_size() const noexcept {
    return size() * sizeof(T);
  }
  /// The first accessed element (elements of a row are contiguous).
  [[nodiscard]] SLUICE_HD value_type* get_pointer() const noexcept {
    return base_ + detail::linearize<D>(offset_, buffer_range_);
  }
  /// The whole buffer's extents.
  [[nodiscard]] SLUICE_HD range<D> buffer_range() const noexcept {
    return buffer_range_;
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
  using value_type = T;
  static constexpr int dimensions = D;
  local_accessor(range<D> r, Handler& h,
                 std::source_location loc = std::source_location::current());

  SLUICE_HD T& operator[](id<D> i) const noexcept {
    return get_pointer()[detail::linearize<D>(i, range_)];
  }
  SLUICE_HD detail::Subscript<local_accessor, D, 1> operator[](std::size_t i) const noexcept
      requires(D > 1) {
    id<D> idx;
    idx[0] = i;
    return {this, idx};
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

/// The command group being built inside `Queue::submit`: declares accessors (through
/// `Buffer::get_access`), dependencies on events and tracked USM, then names exactly one
/// operation: a kernel, or a copy, fill, memset or host update. The operation is issued by the
/// call that names it; declare everything else before it.
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
  /// Declares that the operation touches `count` elements of USM memory at `ptr` in `mode`, so
  /// the tracker orders it against other command groups touching them (beyond SYCL: USM then
  /// needs no events). `ptr` must come from this layer's malloc_* functions.
  template <class T>
  void use(const T* ptr, std::size_t count, Access mode,
           std::source_location loc = std::source_location::current()) {
    detail::require_memory(*s_, ptr, count * sizeof(T), mode, loc);
  }

  // ---- kernels ----

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

  /// Runs `f(item<D>, reducer...)` for every point of `r`, one Reducer per reduction; the
  /// partial results combined with each reduction's operator land in its destination when the
  /// command group completes (SYCL 2020 §4.9.2).
  template <int D, detail::ReductionObject R1, class F>
  void parallel_for(range<D> r, R1 r1, F f,
                    std::source_location loc = std::source_location::current()) {
    reduce(r, loc, std::move(f), r1);
  }
  template <int D, detail::ReductionObject R1, detail::ReductionObject R2, class F>
  void parallel_for(range<D> r, R1 r1, R2 r2, F f,
                    std::source_location loc = std::source_location::current()) {
    reduce(r, loc, std::move(f), r1, r2);
  }
  template <int D, detail::ReductionObject R1, detail::ReductionObject R2,
            detail::ReductionObject R3, class F>
  void parallel_for(range<D> r, R1 r1, R2 r2, R3 r3, F f,
                    std::source_location loc = std::source_location::current()) {
    reduce(r, loc, std::move(f), r1, r2, r3);
  }
  template <int D, detail::ReductionObject R1, detail::ReductionObject R2,
            detail::ReductionObject R3, detail::ReductionObject R4, class F>
  void parallel_for(range<D> r, R1 r1, R2 r2, R3 r3, R4 r4, F f,
                    std::source_location loc = std::source_location::current()) {
    reduce(r, loc, std::move(f), r1, r2, r3, r4);
  }

  /// Runs `f(nd_item<D>)` for every work-item of `r`, work-group by work-group; work-items of a
  /// group share `local_accessor` memory, synchronize with `group_barrier` and run group
  /// algorithms.
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

  /// Runs `f(nd_item<D>, reducer...)` for every work-item of `r` (SYCL 2020's nd_range
  /// reductions), with local memory, barriers and group algorithms as in the plain form.
  template <int D, detail::ReductionObject R1, class F>
  void parallel_for(nd_range<D> r, R1 r1, F f,
                    std::source_location loc = std::source_location::current()) {
    nd_reduce(r, loc, std::move(f), r1);
  }
  template <int D, detail::ReductionObject R1, detail::ReductionObject R2, class F>
  void parallel_for(nd_range<D> r, R1 r1, R2 r2, F f,
                    std::source_location loc = std::source_location::current()) {
    nd_reduce(r, loc, std::move(f), r1, r2);
  }
  template <int D, detail::ReductionObject R1, detail::ReductionObject R2,
            detail::ReductionObject R3, class F>
  void parallel_for(nd_range<D> r, R1 r1, R2 r2, R3 r3, F f,
                    std::source_location loc = std::source_location::current()) {
    nd_reduce(r, loc, std::move(f), r1, r2, r3);
  }
  template <int D, detail::ReductionObject R1, detail::ReductionObject R2,
            detail::ReductionObject R3, detail::ReductionObject R4, class F>
  void parallel_for(nd_range<D> r, R1 r1, R2 r2, R3 r3, R4 r4, F f,
                    std::source_location loc = std::source_location::current()) {
    nd_reduce(r, loc, std::move(f), r1, r2, r3, r4);
  }

  // ---- commands (SYCL 2020 §4.9.4.3): memory of the queue's device or the host ----

  /// Copies `bytes` from `src` to `dest` (USM or host memory).
  void memcpy(void* dest, const void* src, std::size_t bytes,
              std::source_location loc = std::source_location::current()) {
    detail::command_copy(*s_, raw_region(dest, bytes), raw_region(const_cast<void*>(src), bytes),
                         "memcpy", loc);
  }
  /// Copies `count` elements from `src` to `dest` (USM or host memory).
  template <class T>
  void copy(const T* src, T* dest, std::size_t count,
            std::source_location loc = std::source_location::current()) {
    static_assert(std::is_trivially_copyable_v<T>, "copy: T must be trivially copyable");
    memcpy(dest, src, count * sizeof(T), loc);
  }
  /// Sets `bytes` bytes at `ptr` to `value`.
  void memset(void* ptr, int value, std::size_t bytes,
              std::source_location loc = std::source_location::current()) {
    detail::command_memset(*s_, ptr, value, bytes, loc);
  }
  /// Sets `count` elements at `ptr` to `pattern` (any trivially copyable T of at most 64 bytes).
  template <class T>
  void fill(void* ptr, const T& pattern, std::size_t count,
            std::source_location loc = std::source_location::current()) {
    static_assert(std::is_trivially_copyable_v<T>, "fill: T must be trivially copyable");
    detail::Region r;
    r.ptr = ptr;
    r.elem = sizeof(T);
    r.count[0] = count;
    detail::command_fill(*s_, r, &pattern, "fill", loc);
  }
  /// Copies the accessed elements of `src` to `dest` (host or USM memory, holding as many).
  template <class T, int D, Access M>
  void copy(const Accessor<T, D, M>& src, T* dest,
            std::source_location loc = std::source_location::current()) {
    static_assert(M != Access::write, "copy from a write-only accessor: read it instead");
    detail::command_copy(*s_, dense(dest, src.size() * sizeof(T)), region(src), "copy", loc);
  }
  /// Copies `dest.size()` elements from `src` (host or USM memory) into the accessed elements.
  template <class T, int D, Access M>
  void copy(const T* src, const Accessor<T, D, M>& dest,
            std::source_location loc = std::source_location::current()) {
    static_assert(M != Access::read, "copy into a read-only accessor: write it instead");
    detail::command_copy(*s_, region(dest), dense(const_cast<T*>(src), dest.size() * sizeof(T)),
                         "copy", loc);
  }
  /// Copies the accessed elements of `src` into those of `dest` (the same number).
  template <class T, int D1, Access M1, int D2, Access M2>
  void copy(const Accessor<T, D1, M1>& src, const Accessor<T, D2, M2>& dest,
            std::source_location loc = std::source_location::current()) {
    static_assert(M1 != Access::write && M2 != Access::read,
                  "copy(src, dest): read src and write dest");
    detail::command_copy(*s_, region(dest), region(src), "copy", loc);
  }
  /// Sets every accessed element of `dest` to `value`.
  template <class T, int D, Access M>
  void fill(const Accessor<T, D, M>& dest, const T& value,
            std::source_location loc = std::source_location::current()) {
    static_assert(M != Access::read, "fill of a read-only accessor: write it instead");
    detail::command_fill(*s_, region(dest), &value, "fill", loc);
  }
  /// Makes the host memory of `acc`'s buffer current (what a host accessor would see), as a
  /// command: the host memory the buffer was made over holds the data once the event completes.
  template <class T, int D, Access M>
  void update_host(const Accessor<T, D, M>& acc,
                   std::source_location loc = std::source_location::current()) {
    detail::command_update_host(*s_, acc.get_pointer(), loc);
  }

  /// Internal: the command group's state.
  [[nodiscard]] detail::SubmitState& state() const noexcept { return *s_; }

 private:
  template <int D, class F, class... R>
  void reduce(range<D> r, std::source_location loc, F f, const R&... reds) {
    detail::check_plain_range(*s_, loc);
    detail::ReduceTask<D, F, R...> task{r, std::move(f), detail::make_pack(reds...)};
    detail::launch(*s_, detail::describe(task, "parallel_for(reduction)"), loc);
  }
  template <int D, class F, class... R>
  void nd_reduce(nd_range<D> r, std::source_location loc, F f, const R&... reds) {
    detail::check_nd_range(r.global.v, r.local.v, D, loc);
    detail::NdReduceTask<D, F, R...> task{r, std::move(f), detail::make_pack(reds...)};
    auto k = detail::describe(task, "parallel_for(nd_range, reduction)");
    k.nd_range = true;
    k.group_items = r.local.size();
    detail::launch(*s_, k, loc);
  }
  static detail::Region raw_region(void* p, std::size_t bytes) {
    detail::Region r;
    r.ptr = p;
    r.count[0] = bytes;
    return r;
  }
  template <class T>
  static detail::Region dense(T* p, std::size_t bytes) {
    detail::Region r = raw_region(const_cast<std::remove_const_t<T>*>(p), bytes / sizeof(T));
    r.elem = sizeof(T);
    return r;
  }
  template <class T, int D, Access M>
  static detail::Region region(const Accessor<T, D, M>& a) {
    return detail::region_of<D>(const_cast<T*>(a.get_pointer()), sizeof(T), a.buffer_range(),
                                a.get_range());
  }

  detail::SubmitState* s_;
};

template <class T, int D>
local_accessor<T, D>::local_accessor(range<D> r, Handler& h, std::source_location loc)
    : offset_(detail::allocate_local(h.state(), r.size() * sizeof(T), alignof(T), loc)),
      range_(r) {}

}  // namespace sluice::dataflow
