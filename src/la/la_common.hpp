#pragma once
// What the la sources share: finding a backend's kernels, checking arguments, and leasing pinned
// staging memory. Operations are issued through deps/issue.hpp.

#include <array>
#include <cstddef>
#include <source_location>
#include <span>
#include <string>
#include <string_view>

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/la_kernels.hpp"
#include "sluice/la.hpp"

namespace sluice::detail::la {

using sluice::la::Vec;

/// The kernels of ctx's backend; throws Error(unsupported) if it has none.
[[nodiscard]] LaKernels& kernels(const Context& ctx, std::source_location loc);

/// Throws Error(invalid_argument) unless `device` is ctx's device.
void check_device(const Context& ctx, const Device& device, std::string_view what,
                  std::source_location loc);
/// Throws Error(invalid_argument) unless the sizes match.
void check_sizes(std::size_t a, std::size_t b, std::string_view what, std::source_location loc);
/// Throws Error(invalid_state) for a vector without storage that must have some.
void check_vec(const Vec& v, std::string_view what, std::source_location loc);

/// Pinned host memory on loan from a per-device cache, for staging copies and for the results
/// of synchronous reductions (which the device writes directly). The memory is tracked: access
/// it from the host only after `wait_read` / `wait_write`.
class PinnedLease {
 public:
  PinnedLease(const Device& device, std::size_t bytes, std::source_location loc);
  ~PinnedLease();
  PinnedLease(const PinnedLease&) = delete;
  PinnedLease& operator=(const PinnedLease&) = delete;

  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(static_cast<void*>(buffer_.data()));
  }
  [[nodiscard]] ObjectId id() const noexcept { return buffer_.object_id(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  /// Waits until the host may read the first `bytes` (their writer completed).
  void wait_read(std::size_t bytes, std::source_location loc) const;
  /// Waits until the host may overwrite the first `bytes` (writer and readers completed).
  void wait_write(std::size_t bytes, std::source_location loc) const;

 private:
  Device device_;
  std::size_t bytes_;
  PinnedBuffer<std::byte> buffer_;
};

/// Copies host data into a device buffer on ctx and waits for that copy only.
template <class T>
void upload(const Context& ctx, DeviceBuffer<T>& dst, std::span<const T> src,
            std::source_location loc) {
  if (src.empty()) return;
  sluice::copy(ctx, dst, src, loc);
  wait_for_host_access(dst.object_id(), Access::read, {}, loc);
}

/// "file.cpp:123" of a source location, for messages.
[[nodiscard]] std::string where(std::source_location loc);

}  // namespace sluice::detail::la
