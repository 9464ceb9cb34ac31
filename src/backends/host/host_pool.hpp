#pragma once
// Stream-ordered pool of the host backend. Blocks come back when the freeing stream reaches the
// free, so a cached block is never in use by earlier work. (The freeing stream itself may reuse a
// block before that, see HostStream::allocate.)

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace sluice::detail::host {

/// Bytes of physical memory: the host device's total memory and the largest allocation it grants.
[[nodiscard]] std::size_t physical_memory();

/// Throws OutOfMemory if `bytes` exceeds physical memory. Checked before rounding a size up
/// (which would wrap around near SIZE_MAX) and before asking the system allocator, which under
/// ASan and TSan aborts on absurd sizes instead of returning null.
void check_allocation_size(std::size_t bytes, const char* what);

class HostPool {
 public:
  HostPool() = default;
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  ~HostPool();

  /// A block of at least `bytes`, 256-byte aligned; throws OutOfMemory.
  void* allocate(std::size_t bytes);
  /// Returns a block obtained from `allocate`.
  void release(void* ptr) noexcept;
  /// The usable size of a live block (at least what was asked for).
  [[nodiscard]] std::size_t block_size(void* ptr);
  void set_release_threshold(std::size_t bytes);
  void trim(std::size_t keep_bytes);
  [[nodiscard]] std::size_t reserved();

 private:
  void trim_locked(std::size_t keep_bytes);

  std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;      // by block size
  std::unordered_map<void*, std::size_t> sizes_;  // every block the pool owns
  std::size_t cached_bytes_ = 0;
  std::size_t in_use_bytes_ = 0;
  std::size_t threshold_ = static_cast<std::size_t>(-1);
};

}  // namespace sluice::detail::host
