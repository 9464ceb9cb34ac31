#include "sluice/memory.hpp"

#include "core/context_impl.hpp"

namespace sluice {
namespace detail {

RawDeviceBuffer::RawDeviceBuffer(const Context& ctx, std::size_t bytes, std::source_location loc)
    : ctx_(ctx.shared_impl()), bytes_(bytes) {
  if (bytes == 0) return;
  ctx_->issue("allocate", loc,
              [&](Stream& s, const OpInfo& op) { ptr_ = s.allocate(bytes, op); });
}

RawDeviceBuffer::~RawDeviceBuffer() {
  if (ptr_ != nullptr) ctx_->deallocate(ptr_, bytes_);
}

RawPinnedBuffer::RawPinnedBuffer(const Device& device, std::size_t bytes, std::source_location loc)
    : backend_(find_backend(device.backend)), bytes_(bytes) {
  (void)loc;
  if (bytes > 0) ptr_ = backend_->allocate_pinned(bytes);
}

RawPinnedBuffer::~RawPinnedBuffer() {
  if (ptr_ != nullptr) backend_->deallocate_pinned(ptr_);
}

void check_copy_sizes(std::size_t dst, std::size_t src, std::source_location loc) {
  if (dst != src) {
    throw Error(Errc::invalid_argument,
                "copy: destination has " + std::to_string(dst) + " elements but source has " +
                    std::to_string(src) + "; pass spans of equal size (subspan() selects a part)",
                loc);
  }
}

void copy_bytes(const Context& ctx, void* dst, const void* src, std::size_t bytes,
                std::source_location loc) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    throw Error(Errc::invalid_argument, "copy: null pointer with a non-empty size", loc);
  }
  ctx.impl().issue("copy", loc,
                   [&](Stream& s, const OpInfo& op) { s.copy(dst, src, bytes, op); });
}

void memset_bytes(const Context& ctx, void* dst, int value, std::size_t bytes,
                  std::source_location loc) {
  if (bytes == 0) return;
  if (dst == nullptr) throw Error(Errc::invalid_argument, "memset: null pointer", loc);
  ctx.impl().issue("memset", loc,
                   [&](Stream& s, const OpInfo& op) { s.memset(dst, value, bytes, op); });
}

}  // namespace detail

void set_pool_options(const Device& device, const PoolOptions& options) {
  (void)device_info(device);
  find_backend(device.backend)->set_pool_release_threshold(device.index, options.release_threshold);
}

void trim_pool(const Device& device, std::size_t keep_bytes) {
  (void)device_info(device);
  find_backend(device.backend)->trim_pool(device.index, keep_bytes);
}

std::size_t pool_reserved(const Device& device) {
  (void)device_info(device);
  return find_backend(device.backend)->pool_reserved(device.index);
}

}  // namespace sluice
