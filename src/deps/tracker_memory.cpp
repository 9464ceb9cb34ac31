// What the dependency tracker tracks: objects, and registered memory regions that raw pointers
// resolve to (deps/tracker.hpp).

#include "deps/tracker.hpp"

#include <string>
#include <utility>

namespace sluice::detail {

ObjectId Tracker::register_memory(const void* ptr, const MemoryAttributes& attr,
                                  const std::shared_ptr<ContextImpl>& producer,
                                  std::uint64_t produced_at, std::source_location loc) {
  if (ptr == nullptr || attr.size == 0) {
    throw Error(Errc::invalid_argument, "register_memory needs a non-null pointer and a size > 0",
                loc);
  }
  const auto base = reinterpret_cast<std::uintptr_t>(ptr);
  if (attr.alignment == 0 || base % attr.alignment != 0) {
    throw Error(
        Errc::invalid_argument,
        "register_memory: pointer is not aligned to " + std::to_string(attr.alignment) + " bytes",
        loc);
  }
  std::lock_guard lock(mutex_);
  if (auto it = regions_.upper_bound(base + attr.size - 1); it != regions_.begin()) {
    --it;
    if (it->first + it->second.size > base) {
      throw Error(Errc::invalid_argument,
                  "register_memory: the region overlaps registered object " +
                      std::to_string(it->second.id) +
                      "; use find_memory() to get the id of registered memory",
                  loc);
    }
  }
  const ObjectId id = next_id_++;
  regions_.emplace(base, Region{attr.size, id, attr});
  Object& obj = objects_[id];
  obj.size = attr.size;
  obj.base = base;
  if (producer) {  // e.g. a stream-ordered allocation: others must wait for it
    auto m = std::make_shared<Mark>(Mark{producer, producer->timeline(), produced_at, nullptr, 0});
    obj.first_timeline = producer->timeline();
    obj.segments.emplace(0, Segment{attr.size, std::move(m), {}});
  }
  return id;
}

std::optional<RegisteredMemory> Tracker::find_memory(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mutex_);
  auto it = regions_.upper_bound(p);
  if (it == regions_.begin()) return std::nullopt;
  --it;
  if (p >= it->first + it->second.size) return std::nullopt;
  return RegisteredMemory{it->second.id, reinterpret_cast<const void*>(it->first),
                          it->second.attributes};
}

void Tracker::unregister(ObjectId id, std::source_location loc) {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(id);
  if (it == objects_.end()) {
    throw Error(Errc::invalid_argument,
                "unregister_memory: object " + std::to_string(id) + " is not registered", loc);
  }
  if (it->second.base != 0) regions_.erase(it->second.base);
  objects_.erase(it);
}

ObjectId Tracker::new_object() {
  std::lock_guard lock(mutex_);
  const ObjectId id = next_id_++;
  objects_[id];
  return id;
}

void Tracker::resolve(const RawUse& a, AccessList& out) {
  const auto p = reinterpret_cast<std::uintptr_t>(a.ptr);
  auto it = regions_.upper_bound(p);
  if (it == regions_.begin()) return;
  --it;
  if (p >= it->first + it->second.size) return;
  const std::size_t offset = p - it->first;
  if (a.bytes > it->second.size - offset) {
    throw Error(Errc::invalid_argument, std::to_string(a.bytes) + " bytes at offset " +
                                            std::to_string(offset) + " overrun object " +
                                            std::to_string(it->second.id) + " of " +
                                            std::to_string(it->second.size) + " bytes");
  }
  out.add(it->second.id, {offset, a.bytes}, a.mode);
}

}  // namespace sluice::detail
