#pragma once
/// @file
/// Device buffers, pinned host buffers, stream-ordered pools, copies and memset.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"

namespace sluice {

class Backend;

namespace detail {
/// Untyped owning device allocation, released in stream order on the context that allocated it.
class RawDeviceBuffer {
 public:
  RawDeviceBuffer() = default;
  RawDeviceBuffer(const Context& ctx, std::size_t bytes, std::source_location loc);
  RawDeviceBuffer(RawDeviceBuffer&& other) noexcept { swap(other); }
  RawDeviceBuffer& operator=(RawDeviceBuffer&& other) noexcept {
    RawDeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  RawDeviceBuffer(const RawDeviceBuffer&) = delete;
  RawDeviceBuffer& operator=(const RawDeviceBuffer&) = delete;
  ~RawDeviceBuffer();

  void swap(RawDeviceBuffer& other) noexcept {
    std::swap(ctx_, other.ctx_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(id_, other.id_);
  }
  [[nodiscard]] void* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] ObjectId id() const noexcept { return id_; }
  [[nodiscard]] ObjectId object_id() const noexcept { return id_; }
  [[nodiscard]] const std::shared_ptr<ContextImpl>& context() const noexcept { return ctx_; }

 private:
  std::shared_ptr<ContextImpl> ctx_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  ObjectId id_ = 0;
};

/// Untyped pinned host allocation.
class RawPinnedBuffer {
 public:
  RawPinnedBuffer() = default;
  RawPinnedBuffer(const Device& device, std::size_t bytes, std::source_location loc);
  RawPinnedBuffer(RawPinnedBuffer&& other) noexcept { swap(other); }
  RawPinnedBuffer& operator=(RawPinnedBuffer&& other) noexcept {
    RawPinnedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  RawPinnedBuffer(const RawPinnedBuffer&) = delete;
  RawPinnedBuffer& operator=(const RawPinnedBuffer&) = delete;
  ~RawPinnedBuffer();

  void swap(RawPinnedBuffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(id_, other.id_);
  }
  [[nodiscard]] void* data() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] ObjectId id() const noexcept { return id_; }

 private:
  std::shared_ptr<Backend> backend_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  ObjectId id_ = 0;
};

void copy_bytes(const Context& ctx, void* dst, const void* src, std::size_t bytes,
                std::source_location loc);
std::size_t checked_bytes(std::size_t count, std::size_t size, std::source_location loc);
void memset_bytes(const Context& ctx, void* dst, int value, std::size_t bytes,
                  std::source_location loc);
/// `count` elements of `elem` bytes at `dst` set to the `elem` bytes at `pattern`.
void fill_bytes(const Context& ctx, void* dst, const void* pattern, std::size_t elem,
                std::size_t count, std::source_location loc);
}  // namespace detail

/// An owning array of `T` in a device's memory.
///
/// Allocated in stream order on `ctx` from the device's pool. Tracked: sluice operations on it
/// (and `Intent` marks) are ordered across contexts by what they read and write, and destroying
/// it while queued work on any context still uses it is safe — the memory is released in stream
/// order once that work completed. The contents are uninitialized. Move-only.
template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "DeviceBuffer<T> needs a trivially copyable T: device memory is copied bytewise");

 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Context& ctx, std::size_t count,
               std::source_location loc = std::source_location::current())
      : raw_(ctx, detail::checked_bytes(count, sizeof(T), loc), loc), size_(count) {}

  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(raw_.data()); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return raw_.bytes(); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// A non-owning view of the elements (device pointers: do not dereference on the host).
  [[nodiscard]] std::span<T> span() const noexcept { return {data(), size_}; }
  /// The tracker's id of this buffer's memory (0 when empty).
  [[nodiscard]] ObjectId object_id() const noexcept { return raw_.id(); }
  /// The byte range of elements [first, first + count), for `Intent` on a part of the buffer.
  [[nodiscard]] ByteRange elements(std::size_t first, std::size_t count) const noexcept {
    return {first * sizeof(T), count * sizeof(T)};
  }

 private:
  detail::RawDeviceBuffer raw_;
  std::size_t size_ = 0;
};

/// An owning array of `T` in page-locked host memory, usable for truly asynchronous copies.
///
/// Tracked like device memory. On the host, read it through `read()` / `write()`, which wait only
/// for the work that produced the data (and, for `write()`, the work still reading it). Element
/// access without an accessor is allowed once the work is known complete; in debug mode
/// (deps::set_debug) it throws if queued work still writes the buffer. Destruction waits for
/// queued work that uses the buffer.
template <class T>
class PinnedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "PinnedBuffer<T> needs a trivially copyable T");

 public:
  PinnedBuffer() = default;
  /// Pinned memory suited to `device` (for the cuda backend, page-locked and mapped).
  PinnedBuffer(const Device& device, std::size_t count,
               std::source_location loc = std::source_location::current())
      : raw_(device, detail::checked_bytes(count, sizeof(T), loc), loc), size_(count) {}
  PinnedBuffer(const Context& ctx, std::size_t count,
               std::source_location loc = std::source_location::current())
      : PinnedBuffer(ctx.device(), count, loc) {}

  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(raw_.data()); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return raw_.bytes(); }
  [[nodiscard]] std::span<T> span() const noexcept { return {data(), size_}; }
  [[nodiscard]] ObjectId object_id() const noexcept { return raw_.id(); }

  /// Waits for the work that last wrote the buffer; device writes are refused while it lives.
  [[nodiscard]] HostAccessor<T, Access::read> read(
      std::source_location loc = std::source_location::current()) const {
    return {raw_.id(), span(), loc};
  }
  /// Waits for the last writer and every reader; device access is refused while it lives.
  [[nodiscard]] HostAccessor<T, Access::write> write(
      std::source_location loc = std::source_location::current()) const {
    return {raw_.id(), span(), loc};
  }

  T& operator[](std::size_t i) const {
    if (detail::deps_debug()) detail::check_host_access(raw_.id(), std::source_location::current());
    return data()[i];
  }
  [[nodiscard]] T* begin() const {
    if (detail::deps_debug()) detail::check_host_access(raw_.id(), std::source_location::current());
    return data();
  }
  [[nodiscard]] T* end() const noexcept { return data() + size_; }

 private:
  detail::RawPinnedBuffer raw_;
  std::size_t size_ = 0;
};

namespace detail {
template <class B>
auto as_span(B&& b) {
  if constexpr (requires { b.span(); }) {
    return b.span();
  } else {
    return std::span(b);
  }
}
template <class T>
struct is_std_span : std::false_type {};
template <class T, std::size_t N>
struct is_std_span<std::span<T, N>> : std::true_type {};
/// An rvalue host container (a temporary std::vector or std::array): freed when the call returns,
/// before the asynchronous copy, memset or fill reads or writes it. Sluice buffers (with `span()`)
/// and std::span (a view) may be temporaries.
template <class B>
inline constexpr bool temporary_host_container =
    !std::is_lvalue_reference_v<B> && !is_std_span<std::remove_cvref_t<B>>::value &&
    !requires(std::remove_cvref_t<B> & b) {
  b.span();
};
/// What sluice's copies, fills and memsets take: sluice buffers (with `span()`), std::vector,
/// std::span, arrays.
template <class B>
concept SpanLike = requires(B&& b) {
  b.span();
}
|| requires(B&& b) {
  std::span(b);
};
void check_copy_sizes(std::size_t dst, std::size_t src, std::source_location loc);
/// `count * size` in bytes; throws OutOfMemory instead of wrapping around.
std::size_t checked_bytes(std::size_t count, std::size_t size, std::source_location loc);
}  // namespace detail

/// Copies all of `src` into `dst`, whose sizes must match. Each side may be a DeviceBuffer, a
/// PinnedBuffer, a std::vector or a std::span. Asynchronous on `ctx`: a pageable host side must
/// stay alive and untouched until the copy completed.
template <class Dst, class Src>
void copy(const Context& ctx, Dst&& dst, Src&& src,
          std::source_location loc = std::source_location::current()) {
  static_assert(!detail::temporary_host_container<Src>,
                "sluice::copy: the source is a temporary host container, freed when copy() "
                "returns but read when the asynchronous copy runs; keep it in a variable until "
                "the copy completed (e.g. ctx.synchronize())");
  static_assert(!detail::temporary_host_container<Dst>,
                "sluice::copy: the destination is a temporary host container, freed when copy() "
                "returns but written when the asynchronous copy runs; copy into a variable (or "
                "use sluice::to_vector)");
  auto d = detail::as_span(dst);
  auto s = detail::as_span(src);
  static_assert(std::is_same_v<std::remove_cv_t<typename decltype(d)::element_type>,
                               std::remove_cv_t<typename decltype(s)::element_type>>,
                "sluice::copy needs the same element type on both sides");
  static_assert(!std::is_const_v<typename decltype(d)::element_type>,
                "sluice::copy cannot write into a const destination");
  detail::check_copy_sizes(d.size(), s.size(), loc);
  detail::copy_bytes(ctx, d.data(), s.data(), s.size_bytes(), loc);
}

/// Sets every byte of `dst` to `value`; asynchronous on `ctx`.
template <class Dst>
void memset(const Context& ctx, Dst&& dst, int value,
            std::source_location loc = std::source_location::current()) {
  static_assert(!detail::temporary_host_container<Dst>,
                "sluice::memset: the destination is a temporary host container, freed when "
                "memset() returns but written when the asynchronous memset runs");
  auto d = detail::as_span(dst);
  detail::memset_bytes(ctx, d.data(), value, d.size_bytes(), loc);
}

/// Sets every element of `dst` (a DeviceBuffer, PinnedBuffer, std::vector or std::span) to
/// `value`, converted to the element type (any trivially copyable type of at most 128 bytes);
/// asynchronous on `ctx`, ordered by the tracker like a memset.
template <class Dst, class V>
void fill(const Context& ctx, Dst&& dst, const V& value,
          std::source_location loc = std::source_location::current()) {
  static_assert(!detail::temporary_host_container<Dst>,
                "sluice::fill: the destination is a temporary host container, freed when fill() "
                "returns but written when the asynchronous fill runs");
  auto d = detail::as_span(dst);
  using T = std::remove_cv_t<typename decltype(d)::element_type>;
  static_assert(!std::is_const_v<typename decltype(d)::element_type>,
                "sluice::fill cannot write into a const destination");
  static_assert(std::is_trivially_copyable_v<T>, "sluice::fill needs a trivially copyable type");
  static_assert(sizeof(T) <= 128, "sluice::fill takes elements of at most 128 bytes");
  const T v = static_cast<T>(value);
  detail::fill_bytes(ctx, d.data(), &v, sizeof(T), d.size(), loc);
}

/// The contents of `src` (a DeviceBuffer, PinnedBuffer, std::span or std::vector) as a new
/// std::vector: a copy on `ctx`, then `ctx.synchronize()` (what `wp.array.numpy()` is to Warp
/// users). Throws the failure of the copy, or of earlier work on `ctx`, as WorkFailed.
template <class Src>
[[nodiscard]] auto to_vector(const Context& ctx, const Src& src,
                             std::source_location loc = std::source_location::current()) {
  auto s = detail::as_span(src);
  std::vector<std::remove_cv_t<typename decltype(s)::element_type>> out(s.size());
  detail::copy_bytes(ctx, out.data(), s.data(), s.size_bytes(), loc);
  ctx.synchronize(loc);
  return out;
}

/// On the calling thread's current context (`current_context()`, sluice/context.hpp): the forms
/// above for code that takes no context argument, as in Warp. Explicit contexts stay the primary
/// API.
template <detail::SpanLike Dst, detail::SpanLike Src>
void copy(Dst&& dst, Src&& src, std::source_location loc = std::source_location::current()) {
  copy(current_context(), std::forward<Dst>(dst), std::forward<Src>(src), loc);
}
template <detail::SpanLike Dst>
void memset(Dst&& dst, int value, std::source_location loc = std::source_location::current()) {
  memset(current_context(), std::forward<Dst>(dst), value, loc);
}
template <detail::SpanLike Dst, class V>
void fill(Dst&& dst, const V& value, std::source_location loc = std::source_location::current()) {
  fill(current_context(), std::forward<Dst>(dst), value, loc);
}
template <detail::SpanLike Src>
[[nodiscard]] auto to_vector(const Src& src,
                             std::source_location loc = std::source_location::current()) {
  return to_vector(current_context(), src, loc);
}

/// Stream-ordered pool control for one device.
struct PoolOptions {
  /// Bytes kept cached after a synchronize instead of being returned to the system.
  std::size_t release_threshold = 0;
};
void set_pool_options(const Device& device, const PoolOptions& options);
/// Returns cached pool memory of `device` to the system, keeping at most `keep_bytes`.
void trim_pool(const Device& device, std::size_t keep_bytes = 0);
/// Bytes the device's pool currently holds (in use plus cached).
[[nodiscard]] std::size_t pool_reserved(const Device& device);

}  // namespace sluice
