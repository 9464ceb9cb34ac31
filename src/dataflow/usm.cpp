// Unified shared memory of the dataflow layer. Every allocation is registered with the tracker,
// so command groups that declare it (Handler::use) are ordered without events, and a free waits
// for them.

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include "dataflow/state.hpp"
#include "deps/tracker.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::dataflow::detail {
namespace {

struct Managed {
  void* ptr = nullptr;
  ObjectId id = 0;
  DeviceOps* ops = nullptr;
  Managed() = default;
  Managed(void* p, ObjectId i, DeviceOps* o) : ptr(p), id(i), ops(o) {}
  Managed(Managed&& o) noexcept : ptr(std::exchange(o.ptr, nullptr)), id(o.id), ops(o.ops) {}
  Managed& operator=(Managed&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(id, o.id);
    std::swap(ops, o.ops);
    return *this;
  }
  ~Managed() {
    if (ptr == nullptr) return;
    sluice::detail::Tracker::instance().wait_host_quietly(id);
    try {
      unregister_memory(id);
    } catch (...) {
    }
    ops->free_shared(ptr);
  }
};

using Allocation =
    std::variant<sluice::detail::RawDeviceBuffer, sluice::detail::RawPinnedBuffer, Managed>;

struct Registry {
  std::mutex mutex;
  std::unordered_map<void*, Allocation> live;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may come from static destructors
  return *r;
}

}  // namespace

void* usm_allocate(const Queue& q, std::size_t bytes, UsmKind kind, std::source_location loc) {
  if (bytes == 0) return nullptr;
  const QueueState& s = q.state();
  Allocation a;
  void* ptr = nullptr;
  // Shared memory is the backend's managed memory if it has any, else pinned host memory.
  DeviceOps* shared_ops =
      kind == UsmKind::shared ? find_extension<DeviceOps>(s.device.backend) : nullptr;
  if (kind == UsmKind::device) {
    const Context& home = s.contexts.front();
    sluice::detail::RawDeviceBuffer b(home, bytes, loc);
    // SYCL's malloc is synchronous: the memory is usable on any context once it returns.
    home.synchronize(loc);
    ptr = b.data();
    a = std::move(b);
  } else if (shared_ops == nullptr) {
    sluice::detail::RawPinnedBuffer b(s.device, bytes, loc);
    ptr = b.data();
    a = std::move(b);
  } else {
    DeviceOps& ops = *shared_ops;
    std::string why;
    ptr = ops.allocate_shared(s.device.index, bytes, why);
    if (ptr == nullptr) {
      throw OutOfMemory(bytes,
                        "malloc_shared: " + std::to_string(bytes) + " bytes of managed memory on " +
                            s.device.to_string() + ": " + why,
                        loc);
    }
    try {
      const ObjectId id = register_memory(ptr, {MemoryType::managed, bytes, 1, s.device}, loc);
      a.emplace<Managed>(ptr, id, &ops);
    } catch (...) {
      ops.free_shared(ptr);
      throw;
    }
  }
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.live.emplace(ptr, std::move(a));
  return ptr;
}

void usm_free(void* ptr, std::source_location loc) {
  if (ptr == nullptr) return;
  std::optional<Allocation> a;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.live.find(ptr);
    if (it == r.live.end()) {
      throw Error(Errc::invalid_argument,
                  "free: the pointer was not returned by malloc_device / malloc_host / "
                  "malloc_shared, or was freed already",
                  loc);
    }
    a.emplace(std::move(it->second));
    r.live.erase(it);
  }
  // `a` goes here: released once the tracked work that uses it completed.
}

}  // namespace sluice::dataflow::detail
