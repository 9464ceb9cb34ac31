// What the dependency tracker tracks: objects, and registered memory regions that raw pointers
// resolve to, and how errors name them (deps/tracker.hpp).

#include "deps/tracker.hpp"

#include <string>
#include <utility>

namespace sluice::detail {
namespace {

std::string where(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

}  // namespace

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
                  "register_memory: the region overlaps the registered " + describe(it->second.id) +
                      "; use find_memory() to get the id of registered memory",
                  loc);
    }
  }
  const ObjectId id = next_id_++;
  regions_.emplace(base, Region{attr.size, id, attr});
  Object& obj = objects_[id];
  obj.size = attr.size;
  obj.base = base;
  obj.origin = {attr.size, attr.type, attr.device, loc};
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
                "unregister_memory: the " + describe(id) + " is not registered (any more)", loc);
  }
  if (it->second.base != 0) regions_.erase(it->second.base);
  erase_object(it);
}

ObjectId Tracker::new_object(std::source_location loc) {
  std::lock_guard lock(mutex_);
  const ObjectId id = next_id_++;
  objects_[id].origin.made = loc;
  return id;
}

namespace {
const char* kind_name(MemoryType t) {
  switch (t) {
    case MemoryType::device:
      return "device buffer";
    case MemoryType::host:
      return "host memory";
    case MemoryType::pinned:
      return "pinned host buffer";
    case MemoryType::managed:
      return "managed buffer";
  }
  return "buffer";
}
}  // namespace

std::string Tracker::describe(ObjectId id, bool* gone) const {
  const Origin* o = nullptr;
  if (auto it = objects_.find(id); it != objects_.end()) {
    o = &it->second.origin;
  } else {
    for (const auto& [erased, origin] : erased_) {
      if (erased == id) o = &origin;
    }
    if (gone != nullptr) *gone = o != nullptr;
  }
  if (o == nullptr) return "tracked object #" + std::to_string(id);
  std::string s;
  if (o->type) {
    s = std::string(kind_name(*o->type)) + " of " + std::to_string(o->size) + " bytes";
    if (o->device && *o->type == MemoryType::device) s += " on " + o->device->to_string();
  } else {
    s = "tracked object #" + std::to_string(id);
  }
  if (o->made.line() != 0) s += " made at " + where(o->made);
  return s;
}

void Tracker::erase_object(std::unordered_map<ObjectId, Object>::iterator it) {
  erased_[erased_next_] = {it->first, it->second.origin};
  erased_next_ = (erased_next_ + 1) % erased_.size();
  objects_.erase(it);
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
                                            std::to_string(offset) + " overrun the " +
                                            describe(it->second.id));
  }
  out.add(it->second.id, {offset, a.bytes}, a.mode);
}

}  // namespace sluice::detail
