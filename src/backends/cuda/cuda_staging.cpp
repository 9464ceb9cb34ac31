#include "backends/cuda/cuda_staging.hpp"

#include <cuda_runtime_api.h>

#include <bit>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_release.hpp"

namespace sluice::detail::cuda {
namespace {

// Power-of-two classes from 64 KiB: a block serves any request of its class, so few blocks
// cover a workload of varying sizes.
std::size_t size_class(std::size_t bytes) {
  constexpr std::size_t kMin = std::size_t{64} << 10;
  return bytes <= kMin ? kMin : std::bit_ceil(bytes);
}

void free_block(void* block) noexcept {
  release_device_wide([block] {
    if (cudaFreeHost(block) != cudaSuccess) clear_error();
  });
}

}  // namespace

void* StagingPool::acquire(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    if (auto it = free_.find(size); it != free_.end()) {
      void* block = it->second;
      free_.erase(it);
      cached_ -= size;
      return block;
    }
  }
  void* block = nullptr;
  if (cudaHostAlloc(&block, size, cudaHostAllocPortable) != cudaSuccess) {
    clear_error();
    return nullptr;
  }
  return block;
}

void StagingPool::release(void* block, std::size_t bytes) noexcept {
  const std::size_t size = size_class(bytes);
  try {
    std::lock_guard lock(mutex_);
    if (cached_ + size <= kMaxCached) {
      free_.emplace(size, block);
      cached_ += size;
      return;
    }
  } catch (...) {
    // Out of memory growing the free list: free the block instead.
  }
  free_block(block);  // later, outside host functions and holds
}

StagingPool& staging_pool() {
  static auto* pool = new StagingPool;
  return *pool;
}

}  // namespace sluice::detail::cuda
