#pragma once
/// @file
/// `Buffer<T, Dims>`: data the runtime moves between host and devices on demand, and
/// `HostAccessor`, the blocking host view of it (reference 004).

#include <cstddef>
#include <memory>
#include <source_location>
#include <type_traits>

#include "sluice/dataflow/handler.hpp"
#include "sluice/dataflow/range.hpp"

namespace sluice::dataflow {

namespace detail {
/// A buffer of `bytes`; over `host` when not null (written back to it on destruction if
/// `write_back`), else uninitialized.
std::shared_ptr<BufferState> make_buffer(std::size_t bytes, void* host, bool write_back,
                                         std::source_location loc);
/// Blocks until the buffer's data is on the host; holds device work on it back until the end.
void* host_access_begin(BufferState& b, Access mode, std::source_location loc);
void host_access_end(BufferState& b, Access mode) noexcept;
void set_write_back(BufferState& b, bool on) noexcept;
void check_access_range(const std::size_t* buffer, const std::size_t* r, const std::size_t* offset,
                        int dims, std::source_location loc);
}  // namespace detail

template <class T, int D, Access Mode>
class HostAccessor;

/// A D-dimensional array of `T` whose device copies the runtime keeps coherent: command groups
/// declare how they access it, which orders them (the task DAG) and moves data only when the
/// copy on the side that needs it is stale.
///
/// Made over host memory, it writes the data back there when the last handle (and host accessor)
/// goes away, after waiting for every command group that uses it; made over `const` memory, it
/// never writes back. Copies of a Buffer refer to the same data.
///
/// @code
/// std::vector<double> v(n, 0.0);
/// {
///   sluice::dataflow::Buffer<double> b(v.data(), n);
///   q.submit([&](sluice::dataflow::Handler& h) {
///     auto a = b.get_access<sluice::dataflow::access_mode::write>(h, sluice::dataflow::no_init);
///     h.parallel_for(sluice::dataflow::range{n}, [=](sluice::dataflow::id<1> i) { a[i] = 1; });
///   });
/// }  // waits for the kernel, then v holds the ones
/// @endcode
template <class T, int D = 1>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "Buffer<T> needs a trivially copyable T: its data is copied bytewise");

 public:
  /// An uninitialized buffer.
  explicit Buffer(range<D> r, std::source_location loc = std::source_location::current())
      : state_(detail::make_buffer(r.size() * sizeof(T), nullptr, false, loc)), range_(r) {}
  /// A buffer over `host`, which it reads on first use and writes back on destruction. `host`
  /// must stay alive, and untouched by the host, until then.
  Buffer(T* host, range<D> r, std::source_location loc = std::source_location::current())
      : state_(detail::make_buffer(r.size() * sizeof(T), host, true, loc)), range_(r) {}
  /// A buffer initialized from `host`, never written back.
  Buffer(const T* host, range<D> r, std::source_location loc = std::source_location::current())
      : state_(detail::make_buffer(r.size() * sizeof(T), const_cast<T*>(host), false, loc)),
        range_(r) {}

  [[nodiscard]] range<D> get_range() const noexcept { return range_; }
  [[nodiscard]] std::size_t size() const noexcept { return range_.size(); }
  [[nodiscard]] std::size_t byte_size() const noexcept { return range_.size() * sizeof(T); }
  /// Stops (or resumes) writing back to the host memory the buffer was made over.
  void set_write_back(bool on) noexcept { detail::set_write_back(*state_, on); }

  /// Accesses the whole buffer in the command group of `h`.
  template <Access Mode = Access::read_write>
  Accessor<T, D, Mode> get_access(Handler& h,
                                  std::source_location loc = std::source_location::current()) {
    return access<Mode>(h, range_, id<D>{}, false, loc);
  }
  /// As above, overwriting it: nothing is copied in (SYCL 2020's `no_init`; write modes only).
  template <Access Mode>
  Accessor<T, D, Mode> get_access(Handler& h, property::no_init,
                                  std::source_location loc = std::source_location::current()) {
    static_assert(Mode != Access::read, "no_init with a read accessor: there is nothing to read");
    return access<Mode>(h, range_, id<D>{}, true, loc);
  }
  /// Accesses `r` elements from `offset`; an Error if that leaves the buffer.
  template <Access Mode = Access::read_write>
  Accessor<T, D, Mode> get_access(Handler& h, range<D> r, id<D> offset = {},
                                  std::source_location loc = std::source_location::current()) {
    return access<Mode>(h, r, offset, false, loc);
  }
  /// As above, overwriting the range: nothing is copied in for it when it is the whole buffer
  /// (the rest of a buffer keeps its contents, so a partial range still needs them).
  template <Access Mode>
  Accessor<T, D, Mode> get_access(Handler& h, range<D> r, id<D> offset, property::no_init,
                                  std::source_location loc = std::source_location::current()) {
    static_assert(Mode != Access::read, "no_init with a read accessor: there is nothing to read");
    return access<Mode>(h, r, offset, true, loc);
  }
  /// SYCL 2020's tags: `get_access(h, read_only)`, `get_access(h, write_only, no_init)`.
  template <Access Mode>
  Accessor<T, D, Mode> get_access(Handler& h, mode_tag_t<Mode>,
                                  std::source_location loc = std::source_location::current()) {
    return get_access<Mode>(h, loc);
  }
  template <Access Mode>
  Accessor<T, D, Mode> get_access(Handler& h, mode_tag_t<Mode>, property::no_init p,
                                  std::source_location loc = std::source_location::current()) {
    return get_access<Mode>(h, p, loc);
  }

  /// A host view; blocks until the data is on the host (see HostAccessor).
  template <Access Mode = Access::read_write>
  [[nodiscard]] HostAccessor<T, D, Mode> get_host_access(
      std::source_location loc = std::source_location::current()) {
    return HostAccessor<T, D, Mode>(*this, loc);
  }
  template <Access Mode>
  [[nodiscard]] HostAccessor<T, D, Mode> get_host_access(
      mode_tag_t<Mode>, std::source_location loc = std::source_location::current()) {
    return HostAccessor<T, D, Mode>(*this, loc);
  }

  /// Internal: the shared state.
  [[nodiscard]] const std::shared_ptr<detail::BufferState>& state() const noexcept {
    return state_;
  }

 private:
  template <Access Mode>
  Accessor<T, D, Mode> access(Handler& h, range<D> r, id<D> offset, bool no_init,
                              std::source_location loc) {
    detail::check_access_range(range_.v, r.v, offset.v, D, loc);
    std::size_t first = 0, end = 0;
    if (r.size() != 0) {
      id<D> last;
      for (int d = 0; d < D; ++d) last[d] = offset[d] + r[d] - 1;
      first = detail::linearize<D>(offset, range_);
      end = detail::linearize<D>(last, range_) + 1;
    }
    void* base = detail::require_buffer(h.state(), state_, Mode, no_init, first * sizeof(T),
                                        (end - first) * sizeof(T), loc);
    return Accessor<T, D, Mode>(static_cast<T*>(base), range_, r, offset);
  }

  std::shared_ptr<detail::BufferState> state_;
  range<D> range_;
};

/// The host's view of a whole buffer. Construction blocks until the buffer's data is on the host
/// (waiting only for the command groups that write it). While it lives, command groups submitted
/// on the buffer are issued but start only after it is destroyed, as in SYCL; waiting for one of
/// them on the thread that holds it is an Error (it would never return).
template <class T, int D = 1, Access Mode = Access::read_write>
class HostAccessor {
 public:
  using value_type = std::conditional_t<Mode == Access::read, const T, T>;
  explicit HostAccessor(Buffer<T, D>& b, std::source_location loc = std::source_location::current())
      : state_(b.state()),
        data_(static_cast<value_type*>(detail::host_access_begin(*state_, Mode, loc))),
        range_(b.get_range()) {}
  HostAccessor(const HostAccessor&) = delete;
  HostAccessor& operator=(const HostAccessor&) = delete;
  ~HostAccessor() { detail::host_access_end(*state_, Mode); }

  SLUICE_HD value_type& operator[](id<D> i) const noexcept {
    return data_[detail::linearize<D>(i, range_)];
  }
  /// `h[i][j]` (and `h[i][j][k]` in 3D).
  detail::Subscript<HostAccessor, D, 1> operator[](std::size_t i) const noexcept requires(D > 1) {
    id<D> idx;
    idx[0] = i;
    return {this, idx};
  }
  [[nodiscard]] value_type* data() const noexcept { return data_; }
  [[nodiscard]] value_type* begin() const noexcept { return data_; }
  [[nodiscard]] value_type* end() const noexcept { return data_ + range_.size(); }
  [[nodiscard]] std::size_t size() const noexcept { return range_.size(); }
  [[nodiscard]] range<D> get_range() const noexcept { return range_; }

 private:
  std::shared_ptr<detail::BufferState> state_;
  value_type* data_;
  range<D> range_;
};

/// A reduction into element 0 of `b`, accessed in the command group of `h`, with an operator of
/// known identity.
template <class T, class Op, class Props = ReductionOptions>
requires detail::ReductionProperty<Props> Reduction<T, Op> reduction(
    Buffer<T, 1>& b, Handler& h, Op op, Props props = {},
    std::source_location loc = std::source_location::current()) {
  static_assert(has_known_identity_v<Op, T>,
                "reduction(buffer, h, op): this operator has no known identity for this type; "
                "pass one with reduction(buffer, h, identity, op)");
  return reduction(b, h, known_identity_v<Op, T>, op, props, loc);
}
/// A reduction into element 0 of `b` with any associative operator and its identity.
template <class T, class Op, class Props = ReductionOptions>
requires detail::ReductionProperty<Props> Reduction<T, Op> reduction(
    Buffer<T, 1>& b, Handler& h, const T& identity, Op op, Props props = {},
    std::source_location loc = std::source_location::current()) {
  const bool init = detail::options_of(props).initialize_to_identity;
  T* out =
      init ? b.template get_access<Access::write>(h, range<1>(1), id<1>(0), no_init, loc)
                 .get_pointer()
           : b.template get_access<Access::read_write>(h, range<1>(1), id<1>(0), loc).get_pointer();
  return {out, identity, op, init};
}

}  // namespace sluice::dataflow
