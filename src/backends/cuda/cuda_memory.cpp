#include "backends/cuda/cuda_memory.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "backends/cuda/cuda_release.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

struct PoolSlot {
  std::once_flag once;
  cudaMemPool_t pool = nullptr;
};

// One slot per device; never destroyed (pools belong to the CUDA context, not to us).
PoolSlot& slot(int device) {
  static std::vector<PoolSlot>* slots =
      new std::vector<PoolSlot>(static_cast<std::size_t>(device_count()));
  return (*slots)[static_cast<std::size_t>(device)];
}

std::string mib(std::size_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

[[noreturn]] void throw_out_of_memory(int device, std::size_t bytes, const OpInfo& op) {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) clear_error();
  std::uint64_t held = 0;
  if (cudaMemPoolGetAttribute(device_pool(device), cudaMemPoolAttrReservedMemCurrent, &held) !=
      cudaSuccess) {
    clear_error();
  }
  throw OutOfMemory(bytes,
                    "cuda:" + std::to_string(device) + ": cannot allocate " +
                        std::to_string(bytes) + " bytes of device memory (" + mib(free) + " of " +
                        mib(total) + " free, the pool holds " + mib(held) +
                        "); free buffers, call sluice::trim_pool(), or use smaller sizes",
                    op.where);
}

// Makes `from` able to read and write memory of `to`, for both kinds of allocation.
void enable_peer(int from, int to) {
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess) {
    clear_error();
    return;
  }
  if (can == 0) return;  // the driver stages such copies through the host
  {
    DeviceGuard guard(from);
    // For cudaMalloc'd memory (a wrapped user's buffers). Failure only costs speed.
    auto err = cudaDeviceEnablePeerAccess(to, 0);
    if (err != cudaSuccess) clear_error();  // cudaErrorPeerAccessAlreadyEnabled included
  }
  // Pool allocations ignore cudaDeviceEnablePeerAccess; their pool grants access per device.
  cudaMemAccessDesc desc{};
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = from;
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  if (cudaMemPoolSetAccess(device_pool(to), &desc, 1) != cudaSuccess) clear_error();
}

}  // namespace

cudaMemPool_t device_pool(int device) {
  auto& s = slot(device);
  std::call_once(s.once, [&] {
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
          "cudaMemPoolSetAttribute(release threshold)");
    s.pool = pool;
  });
  return s.pool;
}

void* pool_allocate(int device, cudaStream_t stream, std::size_t bytes, const OpInfo& op) {
  (void)device_pool(device);  // threshold set before the first allocation
  void* p = nullptr;
  auto err = cudaMallocAsync(&p, bytes, stream);
  if (err == cudaErrorMemoryAllocation) {
    // Cached blocks may be too fragmented for this size: hand them back and try once more.
    clear_error();
    if (cudaMemPoolTrimTo(device_pool(device), 0) != cudaSuccess) clear_error();
    err = cudaMallocAsync(&p, bytes, stream);
  }
  if (err == cudaErrorMemoryAllocation) {
    clear_error();
    throw_out_of_memory(device, bytes, op);
  }
  if (err != cudaSuccess) throw_error(err, "cudaMallocAsync", op.where, bytes);
  return p;
}

void set_release_threshold(int device, std::size_t bytes) {
  refuse_in_host_callback();
  std::uint64_t v = bytes;
  check(cudaMemPoolSetAttribute(device_pool(device), cudaMemPoolAttrReleaseThreshold, &v),
        "cudaMemPoolSetAttribute(release threshold)");
}

void trim_pool(int device, std::size_t keep_bytes) {
  refuse_in_host_callback();
  check(cudaMemPoolTrimTo(device_pool(device), keep_bytes), "cudaMemPoolTrimTo");
}

std::size_t pool_reserved(int device) {
  refuse_in_host_callback();
  std::uint64_t v = 0;
  check(cudaMemPoolGetAttribute(device_pool(device), cudaMemPoolAttrReservedMemCurrent, &v),
        "cudaMemPoolGetAttribute(reserved)");
  return static_cast<std::size_t>(v);
}

void* allocate_pinned(std::size_t bytes) {
  refuse_in_host_callback();
  if (device_count() == 0) require_device(0);  // says why there is no CUDA
  void* p = nullptr;
  auto err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (err == cudaErrorMemoryAllocation) {
    clear_error();
    throw OutOfMemory(bytes, "cuda: cannot allocate " + std::to_string(bytes) +
                                 " bytes of pinned host memory; pinned memory is scarcer than "
                                 "pageable memory: free pinned buffers or use smaller ones");
  }
  check(err, "cudaHostAlloc");
  return p;
}

void free_pinned(void* ptr) noexcept {
  // cudaFreeHost waits for the whole device: never while sluice's own work is held back.
  release_device_wide([ptr] {
    if (cudaFreeHost(ptr) != cudaSuccess) clear_error();
  });
}

PointerInfo classify(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    clear_error();
    return {};
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
      return {MemoryKind::device, a.device};
    case cudaMemoryTypeHost:
      return {MemoryKind::pinned, -1};
    case cudaMemoryTypeUnregistered:
      return {};
  }
  return {};
}

void prepare_peer_copy(int dst_device, int src_device) {
  if (dst_device == src_device || dst_device < 0 || src_device < 0) return;
  static std::mutex mutex;
  static std::set<std::pair<int, int>> done;
  std::lock_guard lock(mutex);
  if (!done.insert({std::min(dst_device, src_device), std::max(dst_device, src_device)}).second) {
    return;
  }
  enable_peer(dst_device, src_device);
  enable_peer(src_device, dst_device);
}

}  // namespace sluice::detail::cuda
