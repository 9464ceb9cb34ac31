#pragma once
// Pinned staging blocks for copies between device memory and pageable host memory.
//
// CUDA makes such copies block the calling thread: a device-to-pageable cudaMemcpyAsync returns
// only after the copy (and so everything queued before it) completed, and a pageable-to-device
// one may synchronize the stream first. sluice promises that issuing never blocks, and a blocked
// issuing thread can deadlock against a host task that waits for that thread. So such copies are
// split into a device copy to or from a pinned block plus a host-side memcpy run in stream order
// by a host function, which also returns the block here. Returning makes no CUDA call.

#include <cstddef>
#include <map>
#include <mutex>

namespace sluice::detail::cuda {

class StagingPool {
 public:
  StagingPool() = default;
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  /// A pinned block of at least `bytes`; nullptr if pinned memory cannot be had (the caller
  /// then copies directly, blocking). Call outside host functions.
  [[nodiscard]] void* acquire(std::size_t bytes);
  /// Gives back a block from `acquire(bytes)`. Safe inside host functions.
  void release(void* block, std::size_t bytes) noexcept;

  /// Blocks kept for reuse at most; beyond it, returned blocks are freed (cuda_release.hpp:
  /// outside host functions and while no host hold is active).
  static constexpr std::size_t kMaxCached = std::size_t{256} << 20;

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // by size class
  std::size_t cached_ = 0;
};

/// The process-wide staging pool (never destroyed: blocks return from host functions at exit).
[[nodiscard]] StagingPool& staging_pool();

}  // namespace sluice::detail::cuda
