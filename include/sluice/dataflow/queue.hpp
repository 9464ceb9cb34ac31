#pragma once
/// @file
/// `Queue`: where command groups are submitted (reference 004, "In-order and out-of-order
/// queues").

#include <cstddef>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/dataflow/handler.hpp"
#include "sluice/dataflow/info.hpp"

namespace sluice::dataflow {

/// How to build a queue.
struct QueueOptions {
  std::optional<Device> device;  ///< default: sluice::default_device()
  /// Each command group waits for the one submitted before it (one context). Otherwise only
  /// what the accessors and `depends_on` require orders them, and independent ones overlap.
  bool in_order = false;
  /// Contexts an out-of-order queue spreads command groups over (0: 4).
  std::size_t contexts = 0;
  std::string name;  ///< shows up in error messages; default "queue#N"
  /// Events carry profiling times (SYCL's `property::queue::enable_profiling`): two timed events
  /// more per command group.
  bool profiling = false;
};

/// The device of a queue as SYCL code asks about it: `q.get_device().get_info<...>()`.
class device {
 public:
  explicit device(Device d) : device_(std::move(d)) {}
  /// One of the info::device descriptors (sluice/dataflow/info.hpp).
  template <class Param>
  [[nodiscard]] typename Param::return_type get_info() const;
  [[nodiscard]] const Device& native() const noexcept { return device_; }

 private:
  Device device_;
};

namespace detail {
/// What the info::device descriptors report, computed once per device.
struct DeviceQuery {
  std::string name, vendor;
  std::uint32_t compute_units = 0, clock_mhz = 0, max_sub_groups = 0;
  std::uint64_t global_mem = 0, local_mem = 0, cache = 0;
  info::local_mem_type local_type = info::local_mem_type::none;
  std::size_t max_work_group = 0;
  std::vector<std::size_t> sub_group_sizes;
};
[[nodiscard]] const DeviceQuery& device_query(const Device& d);

/// `r` with the line of the call that names it (a converting constructor's default argument is
/// evaluated where the conversion happens), so the variadic shortcuts keep the caller's line.
template <class R>
struct Located {
  R value;
  std::source_location loc;
  Located(R r, std::source_location l = std::source_location::current())  // NOLINT
      : value(r), loc(l) {}
};
}  // namespace detail

template <class Param>
typename Param::return_type device::get_info() const {
  const detail::DeviceQuery& q = detail::device_query(device_);
  namespace d = info::device;
  if constexpr (std::is_same_v<Param, d::name>) {
    return q.name;
  } else if constexpr (std::is_same_v<Param, d::vendor>) {
    return q.vendor;
  } else if constexpr (std::is_same_v<Param, d::max_compute_units>) {
    return q.compute_units;
  } else if constexpr (std::is_same_v<Param, d::global_mem_size>) {
    return q.global_mem;
  } else if constexpr (std::is_same_v<Param, d::local_mem_size>) {
    return q.local_mem;
  } else if constexpr (std::is_same_v<Param, d::local_mem_type>) {
    return q.local_type;
  } else if constexpr (std::is_same_v<Param, d::max_work_group_size>) {
    return q.max_work_group;
  } else if constexpr (std::is_same_v<Param, d::sub_group_sizes>) {
    return q.sub_group_sizes;
  } else if constexpr (std::is_same_v<Param, d::max_num_sub_groups>) {
    return q.max_sub_groups;
  } else if constexpr (std::is_same_v<Param, d::max_clock_frequency>) {
    return q.clock_mhz;
  } else {
    static_assert(std::is_same_v<Param, d::global_mem_cache_size>,
                  "get_info: not a sluice::dataflow::info::device descriptor");
    return q.cache;
  }
}

namespace detail {
/// One command group being built; returned to a thread-local pool by `end_submit`.
SubmitState& begin_submit(QueueState& q, std::source_location loc);
/// The Handler of `s`: it lives as long as the thread's pool of command groups, so a Handler kept
/// past its submit is refused with an Error instead of touching freed memory.
Handler& handler(SubmitState& s) noexcept;
/// Issues what the command group declared (a group without a kernel still orders: it completes
/// after its dependencies), returns its event and releases `s`.
Event end_submit(SubmitState& s, std::source_location loc);
/// Releases `s` after the command-group function threw.
void abandon_submit(SubmitState& s) noexcept;
std::shared_ptr<QueueState> make_queue(const QueueOptions& options, std::source_location loc);
}  // namespace detail

/// A queue of command groups on one device. Out-of-order (the default): the runtime orders
/// command groups only by their accessors, tracked USM and `depends_on`, and runs independent
/// ones concurrently on several contexts. In-order: one context, submission order.
///
/// Copies refer to the same queue. Thread safety: any number of threads may submit at once.
///
/// @code
/// sluice::dataflow::Queue q;                                  // out-of-order, default device
/// auto e = q.submit([&](sluice::dataflow::Handler& h) {
///   auto a = buf.get_access<sluice::dataflow::access_mode::write>(h);
///   h.parallel_for(buf.get_range(), [=](sluice::dataflow::id<1> i) { a[i] = 2 * i; });
/// });
/// e.wait();
/// @endcode
class Queue {
 public:
  Queue() : Queue(QueueOptions{}) {}
  explicit Queue(const QueueOptions& options,
                 std::source_location loc = std::source_location::current())
      : state_(detail::make_queue(options, loc)) {}
  explicit Queue(const Device& device) : Queue(options_for(device)) {}

  /// Builds and issues one command group: `cgf(Handler&)` declares accessors and dependencies,
  /// then names one kernel. Returns at once with the command group's event.
  template <class CGF>
  Event submit(CGF&& cgf, std::source_location loc = std::source_location::current()) {
    detail::SubmitState& s = detail::begin_submit(*state_, loc);
    try {
      cgf(detail::handler(s));
    } catch (...) {
      detail::abandon_submit(s);
      throw;
    }
    return detail::end_submit(s, loc);
  }

  // ---- shortcuts: one operation as a command group of its own, optionally after events ----

  /// `q.parallel_for(range, [deps,] [reductions...,] f)`: the kernel (see Handler::parallel_for)
  /// after `deps` (an Event or a std::vector of them), if given.
#define SLUICE_QUEUE_PARALLEL_FOR(R)                                                         \
  template <class... Rest>                                                                   \
  Event parallel_for(detail::Located<R> r, Rest&&... rest) {                                 \
    return shortcut(r.value, r.loc, std::forward<Rest>(rest)...);                            \
  }                                                                                          \
  template <class... Rest>                                                                   \
  Event parallel_for(detail::Located<R> r, const std::vector<Event>& deps, Rest&&... rest) { \
    return shortcut(r.value, r.loc, deps, std::forward<Rest>(rest)...);                      \
  }
  SLUICE_QUEUE_PARALLEL_FOR(range<1>)
  SLUICE_QUEUE_PARALLEL_FOR(range<2>)
  SLUICE_QUEUE_PARALLEL_FOR(range<3>)
  SLUICE_QUEUE_PARALLEL_FOR(nd_range<1>)
  SLUICE_QUEUE_PARALLEL_FOR(nd_range<2>)
  SLUICE_QUEUE_PARALLEL_FOR(nd_range<3>)
#undef SLUICE_QUEUE_PARALLEL_FOR
  template <class F>
  Event single_task(F f, std::source_location loc = std::source_location::current()) {
    return submit([&](Handler& h) { h.single_task(std::move(f), loc); }, loc);
  }
  template <class F>
  Event single_task(const Event& dep, F f,
                    std::source_location loc = std::source_location::current()) {
    return single_task_after(std::span(&dep, 1), std::move(f), loc);
  }
  template <class F>
  Event single_task(const std::vector<Event>& deps, F f,
                    std::source_location loc = std::source_location::current()) {
    return single_task_after(deps, std::move(f), loc);
  }

  // Commands as command groups of their own; each also after one event or a list of them.

  /// Copies `bytes` from `src` to `dest` (USM or host memory).
  Event memcpy(void* dest, const void* src, std::size_t bytes,
               std::source_location loc = std::source_location::current()) {
    return memcpy_after({}, dest, src, bytes, loc);
  }
  Event memcpy(void* dest, const void* src, std::size_t bytes, const Event& dep,
               std::source_location loc = std::source_location::current()) {
    return memcpy_after(std::span(&dep, 1), dest, src, bytes, loc);
  }
  Event memcpy(void* dest, const void* src, std::size_t bytes, const std::vector<Event>& deps,
               std::source_location loc = std::source_location::current()) {
    return memcpy_after(deps, dest, src, bytes, loc);
  }
  /// Copies `count` elements from `src` to `dest`.
  template <class T>
  Event copy(const T* src, T* dest, std::size_t count,
             std::source_location loc = std::source_location::current()) {
    return memcpy_after({}, dest, src, count * sizeof(T), loc);
  }
  template <class T>
  Event copy(const T* src, T* dest, std::size_t count, const Event& dep,
             std::source_location loc = std::source_location::current()) {
    return memcpy_after(std::span(&dep, 1), dest, src, count * sizeof(T), loc);
  }
  template <class T>
  Event copy(const T* src, T* dest, std::size_t count, const std::vector<Event>& deps,
             std::source_location loc = std::source_location::current()) {
    return memcpy_after(deps, dest, src, count * sizeof(T), loc);
  }
  /// Sets `bytes` bytes at `ptr` to `value`.
  Event memset(void* ptr, int value, std::size_t bytes,
               std::source_location loc = std::source_location::current()) {
    return memset_after({}, ptr, value, bytes, loc);
  }
  Event memset(void* ptr, int value, std::size_t bytes, const Event& dep,
               std::source_location loc = std::source_location::current()) {
    return memset_after(std::span(&dep, 1), ptr, value, bytes, loc);
  }
  Event memset(void* ptr, int value, std::size_t bytes, const std::vector<Event>& deps,
               std::source_location loc = std::source_location::current()) {
    return memset_after(deps, ptr, value, bytes, loc);
  }
  /// Sets `count` elements at `ptr` to `pattern`.
  template <class T>
  Event fill(void* ptr, const T& pattern, std::size_t count,
             std::source_location loc = std::source_location::current()) {
    return fill_after({}, ptr, pattern, count, loc);
  }
  template <class T>
  Event fill(void* ptr, const T& pattern, std::size_t count, const Event& dep,
             std::source_location loc = std::source_location::current()) {
    return fill_after(std::span(&dep, 1), ptr, pattern, count, loc);
  }
  template <class T>
  Event fill(void* ptr, const T& pattern, std::size_t count, const std::vector<Event>& deps,
             std::source_location loc = std::source_location::current()) {
    return fill_after(deps, ptr, pattern, count, loc);
  }

  /// Blocks until every command group submitted so far completed; throws WorkFailed (once) for
  /// a failed one, and Error if the calling thread holds a HostAccessor that one waits for.
  void wait(std::source_location loc = std::source_location::current()) const;

  [[nodiscard]] const Device& device() const noexcept;
  /// The device, for SYCL's `get_info` queries.
  [[nodiscard]] dataflow::device get_device() const {
    return dataflow::device(device());
  }
  [[nodiscard]] bool in_order() const noexcept;
  /// True if events carry profiling times (QueueOptions::profiling).
  [[nodiscard]] bool profiling() const noexcept;
  /// The contexts command groups run on (one for an in-order queue).
  [[nodiscard]] std::span<const Context> contexts() const noexcept;

  /// Internal: the shared state.
  [[nodiscard]] detail::QueueState& state() const noexcept {
    return *state_;
  }

  friend bool operator==(const Queue& a, const Queue& b) noexcept {
    return a.state_ == b.state_;
  }

 private:
  static void after(Handler& h, std::span<const Event> deps, std::source_location loc) {
    for (const Event& e : deps) h.depends_on(e, loc);
  }
  template <class F>
  Event single_task_after(std::span<const Event> deps, F f, std::source_location loc) {
    return submit(
        [&](Handler& h) {
          after(h, deps, loc);
          h.single_task(std::move(f), loc);
        },
        loc);
  }
  Event memcpy_after(std::span<const Event> deps, void* dest, const void* src, std::size_t bytes,
                     std::source_location loc) {
    return submit(
        [&](Handler& h) {
          after(h, deps, loc);
          h.memcpy(dest, src, bytes, loc);
        },
        loc);
  }
  Event memset_after(std::span<const Event> deps, void* ptr, int value, std::size_t bytes,
                     std::source_location loc) {
    return submit(
        [&](Handler& h) {
          after(h, deps, loc);
          h.memset(ptr, value, bytes, loc);
        },
        loc);
  }
  template <class T>
  Event fill_after(std::span<const Event> deps, void* ptr, const T& pattern, std::size_t count,
                   std::source_location loc) {
    return submit(
        [&](Handler& h) {
          after(h, deps, loc);
          h.fill(ptr, pattern, count, loc);
        },
        loc);
  }
  template <class R, class First, class... Rest>
  Event shortcut(R r, std::source_location loc, First&& first, Rest&&... rest) {
    return submit(
        [&](Handler& h) {
          if constexpr (std::is_same_v<std::remove_cvref_t<First>, Event>) {
            after(h, std::span(&first, 1), loc);
            h.parallel_for(r, std::forward<Rest>(rest)..., loc);
          } else if constexpr (std::is_same_v<std::remove_cvref_t<First>, std::vector<Event>>) {
            after(h, first, loc);
            h.parallel_for(r, std::forward<Rest>(rest)..., loc);
          } else {
            h.parallel_for(r, std::forward<First>(first), std::forward<Rest>(rest)..., loc);
          }
        },
        loc);
  }
  static QueueOptions options_for(const Device& device) {
    QueueOptions o;  // field by field: user code built with -Wextra sees no missing initializer
    o.device = device;
    return o;
  }

  std::shared_ptr<detail::QueueState> state_;
};

}  // namespace sluice::dataflow
