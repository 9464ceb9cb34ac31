#pragma once
// Device memory from each device's stream-ordered pool (cudaMallocAsync), pinned host memory, and
// peer access for copies between devices.

#include <cuda_runtime_api.h>

#include <cstddef>

#include "sluice/backend.hpp"

namespace sluice::detail::cuda {

/// The default pool of `device`. On first use its release threshold is raised to "keep
/// everything", so that memory freed in stream order is reused instead of being handed back to
/// the driver at every synchronize; set_release_threshold changes that.
[[nodiscard]] cudaMemPool_t device_pool(int device);

/// `bytes` from the pool of `device`, ordered on `stream`; throws OutOfMemory naming the size.
/// The device must be current.
[[nodiscard]] void* pool_allocate(int device, cudaStream_t stream, std::size_t bytes,
                                  const OpInfo& op);
void set_release_threshold(int device, std::size_t bytes);
void trim_pool(int device, std::size_t keep_bytes);
[[nodiscard]] std::size_t pool_reserved(int device);

/// Page-locked, mapped host memory usable with every device; throws OutOfMemory.
[[nodiscard]] void* allocate_pinned(std::size_t bytes);
void free_pinned(void* ptr) noexcept;

/// Where a pointer points, as far as copies care.
enum class MemoryKind {
  device,    ///< device (or managed) memory: the copy engines reach it without blocking
  pinned,    ///< page-locked host memory
  pageable,  ///< ordinary host memory, unknown to CUDA
};
struct PointerInfo {
  MemoryKind kind = MemoryKind::pageable;
  int device = -1;  ///< owning device of device memory, -1 otherwise
};
[[nodiscard]] PointerInfo classify(const void* p);

/// Before a copy between device memory of `dst_device` and `src_device`: if they differ, enables
/// direct access between them (once per pair, where the hardware allows it). Without it the copy
/// is still correct, staged through the host by the driver.
void prepare_peer_copy(int dst_device, int src_device);

}  // namespace sluice::detail::cuda
