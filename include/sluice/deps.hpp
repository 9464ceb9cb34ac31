#pragma once
/// @file
/// Automatic ordering across contexts from marked memory intent (reference 000, §3.1.2, §3.3).
///
/// Work on one context runs in issue order. For work on different contexts that touches the same
/// bytes, write→write, write→read and read→write are ordered by issue order; read→read is free,
/// and so are accesses to disjoint byte ranges of one allocation. sluice's own operations
/// (copies, memsets, kernels, canned operations, the `scalar`, `la`, `graph` and `dataflow`
/// layers) mark their intent themselves; code that
/// launches its own kernels marks it with `Intent` (or the begin/end pair).
///
/// @code
/// sluice::Context a, b;
/// sluice::DeviceBuffer<float> x(a, n);       // tracked: has an ObjectId
/// {
///   sluice::Intent w(a, x, sluice::Access::write, "my_fill_kernel");
///   my_fill_kernel<<<grid, block, 0, sluice::cuda::stream(a)>>>(x.data(), n);
/// }
/// sluice::copy(b, host, x);                  // b waits for the kernel on a, nothing else
/// @endcode

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "sluice/access.hpp"
#include "sluice/context.hpp"

namespace sluice {

/// Where registered memory lives.
enum class MemoryType : std::uint8_t { device, host, pinned, managed };

/// What `register_memory` needs to know about a region (reference 000, Listing 5).
struct MemoryAttributes {
  MemoryType type = MemoryType::device;
  std::size_t size = 0;       ///< bytes; must be > 0
  std::size_t alignment = 1;  ///< bytes; the pointer must be aligned to it
  std::optional<Device> device;
};

/// A registered region found by pointer.
struct RegisteredMemory {
  ObjectId id = 0;
  const void* base = nullptr;
  MemoryAttributes attributes;
};

/// Registers `[ptr, ptr + size)` for tracking and returns its id. Registering a pointer that lies
/// inside a registered region is an error (find it with `find_memory`). Thread-safe.
ObjectId register_memory(const void* ptr, const MemoryAttributes& attributes,
                         std::source_location loc = std::source_location::current());
/// The registered region containing `ptr`, if any.
[[nodiscard]] std::optional<RegisteredMemory> find_memory(const void* ptr);
/// Stops tracking a region. The memory itself is the caller's; the caller must keep it alive until
/// queued work that used it completed (or use `release_when_unused`).
void unregister_memory(ObjectId id, std::source_location loc = std::source_location::current());

/// A fresh id for an object that is not a memory region (a matrix, a solver state, ...).
[[nodiscard]] ObjectId new_object_id(std::source_location loc = std::source_location::current());

/// Marks the start of `ctx`'s access to `range` of `id`: later work issued on `ctx` waits for
/// every conflicting earlier access on other contexts. Pair with `mark_intent_end`.
void mark_intent_begin(const Context& ctx, ObjectId id, Access mode, std::string_view description,
                       ByteRange range = {},
                       std::source_location loc = std::source_location::current());
/// Marks the end of the access begun with the same arguments: the work issued on `ctx` since the
/// begin is what later conflicting accesses on other contexts wait for.
void mark_intent_end(const Context& ctx, ObjectId id, Access mode, std::string_view description,
                     ByteRange range = {},
                     std::source_location loc = std::source_location::current());

/// RAII form of mark_intent_begin / mark_intent_end.
class Intent {
 public:
  Intent(const Context& ctx, ObjectId id, Access mode, std::string_view description,
         ByteRange range = {}, std::source_location loc = std::source_location::current());
  /// Marks an access to a sluice buffer (anything with `object_id()`), optionally a sub-range.
  template <class Tracked>
  requires requires(const Tracked& t) { t.object_id(); }
  Intent(const Context& ctx, const Tracked& object, Access mode, std::string_view description,
         ByteRange range = {}, std::source_location loc = std::source_location::current())
      : Intent(ctx, object.object_id(), mode, description, range, loc) {}
  Intent(const Intent&) = delete;
  Intent& operator=(const Intent&) = delete;
  ~Intent();

 private:
  Context ctx_;
  ObjectId id_;
  Access mode_;
  std::string description_;
  ByteRange range_;
  std::source_location loc_;
};

/// Blocks the host until the work that last wrote `range` of `id` completed (for `Access::read`),
/// or until that work and every reader since completed (write and read_write). Never waits for
/// unrelated work or, for reads, for other readers. Throws WorkFailed if that work failed.
void wait_for_host_access(ObjectId id, Access mode, ByteRange range = {},
                          std::source_location loc = std::source_location::current());

/// Tracker switches and introspection.
namespace deps {

/// Debug mode (also set by the environment variable SLUICE_DEBUG_DEPS=1): records the dependency
/// graph for `write_dot`, and makes host element access to a tracked pinned buffer outside an
/// accessor throw when queued work still writes it.
void set_debug(bool on);
[[nodiscard]] bool debug();
/// Writes the recorded dependency graph (debug mode) as Graphviz DOT.
void write_dot(std::ostream& out);
/// Forgets the recorded graph.
void clear_graph();

/// Counters for tests and benchmarks (process-wide, monotonic).
struct Stats {
  std::uint64_t marks = 0;            ///< accesses marked
  std::uint64_t waits_issued = 0;     ///< cross-context waits enqueued
  std::uint64_t waits_elided = 0;     ///< waits skipped: already implied by an earlier wait
  std::uint64_t events_recorded = 0;  ///< events recorded by the tracker
  std::uint64_t deferred_releases = 0;
};
[[nodiscard]] Stats stats();
/// Tracked objects and the access records they hold (to prove memory stays bounded).
struct Footprint {
  std::size_t objects = 0;
  std::size_t segments = 0;
  std::size_t records = 0;
};
[[nodiscard]] Footprint footprint();

}  // namespace deps

namespace detail {
[[nodiscard]] bool deps_debug();
void check_host_access(ObjectId id, std::source_location loc);
void host_access_begin(ObjectId id, Access mode, std::source_location loc);
void host_access_end(ObjectId id, Access mode) noexcept;
}  // namespace detail

/// A host view of tracked host-accessible memory (a PinnedBuffer). Creating it waits only for the
/// work it conflicts with; while it lives, device work that conflicts with it is refused with an
/// Error instead of racing with the host.
template <class T, Access Mode>
class HostAccessor {
 public:
  using element_type = std::conditional_t<Mode == Access::read, const T, T>;
  HostAccessor(ObjectId id, std::span<element_type> view, std::source_location loc)
      : id_(id), view_(view) {
    detail::host_access_begin(id_, Mode, loc);
  }
  HostAccessor(const HostAccessor&) = delete;
  HostAccessor& operator=(const HostAccessor&) = delete;
  ~HostAccessor() { detail::host_access_end(id_, Mode); }

  [[nodiscard]] element_type* data() const noexcept { return view_.data(); }
  [[nodiscard]] std::size_t size() const noexcept { return view_.size(); }
  element_type& operator[](std::size_t i) const noexcept { return view_[i]; }
  [[nodiscard]] element_type* begin() const noexcept { return view_.data(); }
  [[nodiscard]] element_type* end() const noexcept { return view_.data() + view_.size(); }
  [[nodiscard]] std::span<element_type> span() const noexcept { return view_; }

 private:
  ObjectId id_;
  std::span<element_type> view_;
};

}  // namespace sluice
