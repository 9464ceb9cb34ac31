// The public face of the dependency tracker (sluice/deps.hpp).

#include "sluice/deps.hpp"

#include "deps/tracker.hpp"

namespace sluice {

using detail::Tracker;

ObjectId register_memory(const void* ptr, const MemoryAttributes& attributes,
                         std::source_location loc) {
  return Tracker::instance().register_memory(ptr, attributes, nullptr, 0, loc);
}

std::optional<RegisteredMemory> find_memory(const void* ptr) {
  return Tracker::instance().find_memory(ptr);
}

void unregister_memory(ObjectId id, std::source_location loc) {
  Tracker::instance().unregister(id, loc);
}

ObjectId new_object_id(std::source_location loc) {
  return Tracker::instance().new_object(loc);
}

void mark_intent_begin(const Context& ctx, ObjectId id, Access mode, std::string_view description,
                       ByteRange range, std::source_location loc) {
  Tracker::instance().begin(ctx.impl(), {id, mode, range}, description, loc);
}

void mark_intent_end(const Context& ctx, ObjectId id, Access mode, std::string_view description,
                     ByteRange range, std::source_location loc) {
  Tracker::instance().end(ctx.impl(), {id, mode, range}, description, loc);
}

Intent::Intent(const Context& ctx, ObjectId id, Access mode, std::string_view description,
               ByteRange range, std::source_location loc)
    : ctx_(ctx), id_(id), mode_(mode), description_(description), range_(range), loc_(loc) {
  mark_intent_begin(ctx_, id_, mode_, description_, range_, loc_);
}

Intent::~Intent() {
  try {
    mark_intent_end(ctx_, id_, mode_, description_, range_, loc_);
  } catch (...) {
    // Only possible if the object was unregistered inside the guard: nothing left to record.
  }
}

void wait_for_host_access(ObjectId id, Access mode, ByteRange range, std::source_location loc) {
  Tracker::instance().wait_host(id, mode, range, loc);
}

namespace deps {
void set_debug(bool on) {
  Tracker::instance().set_debug(on);
}
bool debug() {
  return Tracker::instance().debug();
}
void write_dot(std::ostream& out) {
  Tracker::instance().write_dot(out);
}
void clear_graph() {
  Tracker::instance().clear_graph();
}
Stats stats() {
  return Tracker::instance().stats();
}
Footprint footprint() {
  return Tracker::instance().footprint();
}
}  // namespace deps

namespace detail {
bool deps_debug() {
  return Tracker::instance().debug();
}
void check_host_access(ObjectId id, std::source_location loc) {
  Tracker::instance().check_unguarded_host_access(id, loc);
}
void host_access_begin(ObjectId id, Access mode, std::source_location loc) {
  Tracker::instance().host_access_begin(id, mode, {}, loc);
}
void host_access_end(ObjectId id, Access mode) noexcept {
  Tracker::instance().host_access_end(id, mode, {});
}
}  // namespace detail

}  // namespace sluice
