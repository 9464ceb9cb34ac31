#pragma once
// Memory that other libraries own, used by sluice: registered with the tracker while Python
// holds a view of it, and released (unregistered, handed back to its owner) only once sluice's
// queued work on it completed — without a host wait and without the GIL in a host task: an
// event of the module's interop context marks the point, and later calls into the module
// release what has passed it (`collect`).

#include <memory>
#include <source_location>

#include "common.hpp"
#include "sluice/deps.hpp"
#include "sluice/event.hpp"

struct DLManagedTensor;

namespace sluice::python {

/// Foreign memory as sluice sees it: the tracker's id (registered here, or the id of sluice
/// memory the pointer lies in), the byte offset of the view in that region, and what keeps the
/// memory alive (a Python object, a DLPack tensor). Shared by every view of one import; its
/// destructor hands it to the release list.
class Foreign {
 public:
  Foreign(Device device, ObjectId id, bool registered_here, PyRef owner, DLManagedTensor* managed)
      : device_(std::move(device)),
        id_(id),
        registered_here_(registered_here),
        owner_(std::move(owner)),
        managed_(managed) {}
  Foreign(const Foreign&) = delete;
  Foreign& operator=(const Foreign&) = delete;
  ~Foreign();

  [[nodiscard]] ObjectId id() const noexcept { return id_; }
  [[nodiscard]] const Device& device() const noexcept { return device_; }

 private:
  Device device_;
  ObjectId id_;
  bool registered_here_;
  PyRef owner_;
  DLManagedTensor* managed_;
};

/// Registers `[ptr, ptr + bytes)` for tracking, or finds the region that already holds it.
/// Returns the id, the view's offset in that region, and whether this call registered it.
struct Region {
  ObjectId id = 0;
  std::size_t offset = 0;
  bool registered_here = false;
};
[[nodiscard]] Region register_or_find(const void* ptr, std::size_t bytes, MemoryType type,
                                      const Device& device, std::source_location loc);

/// Releases what passed its point (needs the GIL; cheap when nothing is pending).
void collect();
/// Waits for every pending release and performs it (exit; tests).
void collect_all();

}  // namespace sluice::python
