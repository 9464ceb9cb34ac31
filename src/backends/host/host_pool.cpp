#include "backends/host/host_pool.hpp"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include "backends/host/faults.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::host {
namespace {
constexpr std::size_t kAlign = 256;
std::size_t round_up(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

std::size_t physical_memory() {
  static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
                                   static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

void check_allocation_size(std::size_t bytes, const char* what) {
  if (bytes > physical_memory()) {
    throw OutOfMemory(bytes, "host: cannot allocate " + std::to_string(bytes) + " bytes of " +
                                 what + ": the machine has " + std::to_string(physical_memory()) +
                                 " bytes of memory");
  }
}

HostPool::~HostPool() {
  trim_locked(0);
}

void* HostPool::allocate(std::size_t bytes) {
  maybe_fail_allocation(bytes);
  check_allocation_size(bytes, "device memory");
  const std::size_t size = round_up(bytes == 0 ? 1 : bytes);
  {
    std::lock_guard lock(mutex_);
    // Best fit, accepting at most 25 % waste so that small requests do not pin large blocks.
    if (auto it = cached_.lower_bound(size); it != cached_.end() && it->first <= size + size / 4) {
      void* p = it->second;
      cached_bytes_ -= it->first;
      in_use_bytes_ += it->first;
      cached_.erase(it);
      counters().device_allocations.fetch_add(1);
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) {
    trim(0);
    p = std::aligned_alloc(kAlign, size);
  }
  if (p == nullptr) {
    throw OutOfMemory(bytes, "host: cannot allocate " + std::to_string(bytes) +
                                 " bytes of device memory; free buffers or use smaller sizes");
  }
  std::lock_guard lock(mutex_);
  try {
    sizes_.emplace(p, size);
  } catch (...) {
    std::free(p);
    throw OutOfMemory(bytes, "host: out of memory while tracking a new block");
  }
  in_use_bytes_ += size;
  counters().device_allocations.fetch_add(1);
  return p;
}

std::size_t HostPool::block_size(void* ptr) {
  std::lock_guard lock(mutex_);
  return sizes_.at(ptr);
}

void HostPool::release(void* ptr) noexcept {
  std::lock_guard lock(mutex_);
  auto found = sizes_.find(ptr);
  const std::size_t size = found->second;
  in_use_bytes_ -= size;
  counters().device_allocations.fetch_sub(1);
  if (cached_bytes_ + size > threshold_) {
    sizes_.erase(found);
    std::free(ptr);
    return;
  }
  try {
    cached_.emplace(size, ptr);
    cached_bytes_ += size;
  } catch (...) {
    sizes_.erase(found);
    std::free(ptr);
  }
}

void HostPool::set_release_threshold(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  threshold_ = bytes;
  trim_locked(bytes);
}

void HostPool::trim(std::size_t keep_bytes) {
  std::lock_guard lock(mutex_);
  trim_locked(keep_bytes);
}

void HostPool::trim_locked(std::size_t keep_bytes) {
  while (cached_bytes_ > keep_bytes && !cached_.empty()) {
    auto it = std::prev(cached_.end());  // largest first
    cached_bytes_ -= it->first;
    sizes_.erase(it->second);
    std::free(it->second);
    cached_.erase(it);
  }
}

std::size_t HostPool::reserved() {
  std::lock_guard lock(mutex_);
  return cached_bytes_ + in_use_bytes_;
}

}  // namespace sluice::detail::host
