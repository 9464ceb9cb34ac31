#pragma once
// Stream-ordered pool of the host backend. Blocks come back when the freeing stream reaches the
// free, so a cached block is never in use by earlier work. (The freeing stream itself may reuse a
// block before that, see HostStream::allocate.)

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace sluice::detail::host {

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
  std::multimap<std::size_t, void*> cached_;  // by block size
  std::unordered_map<void*, std::size_t> sizes_;  // every block the pool owns
  std::size_t cached_bytes_ = 0;
  std::size_t in_use_bytes_ = 0;
  std::size_t threshold_ = static_cast<std::size_t>(-1);
};

}  // namespace sluice::detail::host
