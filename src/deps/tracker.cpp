#include "deps/tracker.hpp"

#include <algorithm>
#include <cstdlib>
#include <ostream>

namespace sluice::detail {
namespace {

const char* mode_name(Access m) {
  switch (m) {
    case Access::read:
      return "read";
    case Access::write:
      return "write";
    case Access::read_write:
      return "read_write";
  }
  return "?";
}

std::string where(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

std::uint64_t open_key(std::uint64_t timeline, ObjectId id) {
  return timeline * 1000003u ^ id;
}

}  // namespace

Tracker& Tracker::instance() {
  static Tracker* t = [] {
    auto* tracker = new Tracker;  // never destroyed: buffers may die during static destruction
    if (const char* env = std::getenv("SLUICE_DEBUG_DEPS"); env != nullptr && *env == '1') {
      tracker->debug_ = true;
    }
    return tracker;
  }();
  return *t;
}

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

void Tracker::run(ContextImpl& ctx, const AccessList& accesses, std::string_view what,
                  std::source_location loc, const std::function<void()>& enqueue) {
  {
    std::lock_guard lock(mutex_);
    std::span<const Use> uses = accesses.uses();
    if (!accesses.raw_uses().empty()) {
      thread_local AccessList resolved;  // reused: no allocation per operation
      resolved = accesses;
      for (const auto& r : accesses.raw_uses()) resolve(r, resolved);
      uses = resolved.uses();
    }
    if (uses.empty()) {
      enqueue();  // untracked memory: the caller orders it
    } else {
      run_locked(ctx, uses, what, loc, enqueue);
    }
  }
  ctx.finish_if_blocking();
}

void Tracker::require_tracked(std::span<const Use> accesses, std::source_location loc) {
  std::lock_guard lock(mutex_);
  for (const auto& a : accesses) (void)object(a.id, loc);
}

Tracker::Object& Tracker::object(ObjectId id, std::source_location loc) {
  auto it = objects_.find(id);
  if (it == objects_.end()) {
    bool gone = false;
    const auto name = describe(id, &gone);
    throw Error(Errc::invalid_argument,
                "the " + name +
                    (gone ? " was destroyed (or unregistered) before this use"
                          : " is not tracked: it was never registered"),
                loc);
  }
  return it->second;
}

std::pair<std::size_t, std::size_t> Tracker::bounds(const Object& obj, const Use& a,
                                                    std::source_location loc) const {
  const std::size_t lo = a.range.offset;
  if (lo > obj.size) {
    throw Error(Errc::invalid_argument,
                "byte range starts at " + std::to_string(lo) + ", past the object's " +
                    std::to_string(obj.size) + " bytes",
                loc);
  }
  const std::size_t avail = obj.size - lo;
  if (a.range.size != ByteRange::whole().size && a.range.size > avail) {
    throw Error(Errc::invalid_argument,
                "byte range [" + std::to_string(lo) + ", +" + std::to_string(a.range.size) +
                    ") exceeds the object's " + std::to_string(obj.size) + " bytes",
                loc);
  }
  return {lo, lo + std::min(a.range.size, avail)};
}

void Tracker::refuse_if_captured(const std::vector<Mark*>& deps, std::string_view what,
                                 std::source_location loc) {
  for (const Mark* m : deps) {
    // The host cannot wait for work that a capture recorded instead of running.
    if (auto c = m->ctx.lock(); c && c->capturing()) c->refuse_if_capturing(what, loc);
  }
}

bool Tracker::complete(const Mark& m) {
  auto c = m.ctx.lock();
  return c == nullptr || c->completed() >= m.seq;  // a destroyed context drained its work
}

void Tracker::collect(Object& obj, const Use& a, std::uint64_t timeline, std::vector<Mark*>& deps,
                      std::source_location loc) {
  auto [lo, hi] = bounds(obj, a, loc);
  if (lo == hi) return;
  auto it = obj.segments.upper_bound(lo);
  if (it != obj.segments.begin() && std::prev(it)->second.end > lo) --it;
  for (; it != obj.segments.end() && it->first < hi; ++it) {
    Segment& s = it->second;
    if (s.writer && s.writer->timeline != timeline && !complete(*s.writer)) {
      deps.push_back(s.writer.get());
    }
    if (a.mode == Access::read) continue;
    for (auto& r : s.readers) {
      if (r->timeline != timeline && !complete(*r)) deps.push_back(r.get());
    }
  }
}

void Tracker::check_host_conflict(const Object& obj, ObjectId id, const Use& a, ContextImpl& ctx,
                                  std::string_view what, std::source_location loc) const {
  if (obj.host_writers > 0 || (obj.host_readers > 0 && a.mode != Access::read)) {
    throw Error(Errc::invalid_state,
                "'" + std::string(what) + "' on " + ctx.name() + " would " +
                    (a.mode == Access::read ? "read" : "write") + " the " + describe(id) +
                    " while a host accessor " + (obj.host_writers > 0 ? "writes" : "reads") +
                    " it; destroy the accessor before issuing this work",
                loc);
  }
}

std::shared_ptr<EventImpl> Tracker::event_for(Mark& m) {
  if (m.event && m.event->capture_sink() == nullptr) {
    // A point of a capture that ended before capture_ended() reached this mark: the real point.
    if (auto real = m.event->captured_base()) m.event = std::move(real);
  }
  auto c = m.ctx.lock();
  if (c && c->capturing()) {
    if (auto sink = c->capture(); sink && sink->active()) return sink->record_at(*c, m.seq);
  }
  if (m.event) return m.event;
  if (!c) return nullptr;
  // Recorded now, it also covers work issued after the access: conservative, never wrong.
  m.event = c->record(false, std::source_location::current());
  ++stats_.events_recorded;
  return m.event;
}

void Tracker::wait_all(ContextImpl& ctx, std::vector<Mark*>& deps, std::uint32_t node,
                       std::source_location loc) {
  if (deps.empty()) return;
  // One wait per timeline, for its latest point; the vector clock drops what is already implied.
  std::sort(deps.begin(), deps.end(), [](const Mark* a, const Mark* b) {
    return a->timeline != b->timeline ? a->timeline < b->timeline : a->seq > b->seq;
  });
  std::uint64_t last_timeline = 0;
  for (Mark* m : deps) {
    if (m->timeline == last_timeline) {
      if (debug_ && m->node != 0) edges_.emplace_back(m->node, node, true);
      continue;
    }
    last_timeline = m->timeline;
    bool issued = false;
    if (!ctx.waits_for(m->timeline, m->seq)) {
      if (auto e = event_for(*m)) issued = ctx.wait(e, loc);
    }
    ++(issued ? stats_.waits_issued : stats_.waits_elided);
    if (debug_ && m->node != 0) edges_.emplace_back(m->node, node, !issued);
  }
}

void Tracker::split(Object& obj, std::size_t lo, std::size_t hi) {
  auto cut = [&](std::size_t x) {
    auto it = obj.segments.upper_bound(x);
    if (it == obj.segments.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      Segment right = it->second;
      it->second.end = x;
      obj.segments.emplace(x, std::move(right));
    }
  };
  cut(lo);
  cut(hi);
  // Fill gaps inside [lo, hi) so that every byte has a segment.
  std::size_t pos = lo;
  auto it = obj.segments.lower_bound(lo);
  while (pos < hi) {
    if (it == obj.segments.end() || it->first > pos) {
      std::size_t end = it == obj.segments.end() ? hi : std::min(hi, it->first);
      it = obj.segments.emplace_hint(it, pos, Segment{end, nullptr, {}});
    }
    pos = it->second.end;
    ++it;
  }
}

void Tracker::record(ContextImpl& ctx, Object& obj, const Use& a, std::uint64_t seq,
                     std::uint32_t node, std::source_location loc) {
  auto [lo, hi] = bounds(obj, a, loc);
  if (lo == hi) return;
  // An operation a capture recorded: its mark carries the capture's point, and becomes the
  // capture's end point when the capture ends (capture_ended).
  std::shared_ptr<CaptureSink> sink;
  if (ctx.capturing()) {
    sink = ctx.capture();
    if (sink && !sink->active()) sink.reset();
  }
  if (a.mode != Access::read && !obj.shared && node == 0 && !sink) {
    // Fast path: a write over exactly one segment last written by this context alone, with no
    // readers: advance that mark in place (no allocation; nobody else holds it).
    auto it = obj.segments.find(lo);
    if (it != obj.segments.end() && it->second.end == hi && it->second.readers.empty() &&
        it->second.writer && it->second.writer.use_count() == 1 &&
        it->second.writer->timeline == ctx.timeline() && !it->second.writer->event) {
      it->second.writer->seq = seq;
      return;
    }
  }
  if (a.mode == Access::read && !obj.shared && node == 0 && !sink) {
    // Likewise for a read over exactly one segment whose only reader is this context's earlier
    // read: that mark moves forward (the latest read per timeline is all a segment keeps).
    auto it = obj.segments.find(lo);
    if (it != obj.segments.end() && it->second.end == hi && it->second.readers.size() == 1) {
      auto& r = it->second.readers.front();
      if (r.use_count() == 1 && r->timeline == ctx.timeline() && !r->event) {
        r->seq = seq;
        if (it->second.writer && complete(*it->second.writer)) it->second.writer.reset();
        return;
      }
    }
  }
  auto mark =
      std::make_shared<Mark>(Mark{ctx.weak_from_this(), ctx.timeline(), seq, nullptr, node});
  if (sink) {
    mark->event = sink->record(ctx, loc);
    captured_marks_[sink.get()].push_back(mark);
  } else if (obj.shared) {
    mark->event = ctx.record(false, loc);
    ++stats_.events_recorded;
  }
  split(obj, lo, hi);
  auto first = obj.segments.find(lo);
  if (a.mode == Access::read) {
    for (auto it = first; it != obj.segments.end() && it->first < hi; ++it) {
      auto& readers = it->second.readers;
      std::erase_if(readers, [&](const MarkRef& r) {
        return r->timeline == mark->timeline || complete(*r);  // keep the latest per timeline
      });
      readers.push_back(mark);
      if (it->second.writer && complete(*it->second.writer)) it->second.writer.reset();
    }
    return;
  }
  // A write replaces everything in [lo, hi) by one segment.
  auto last = first;
  while (last != obj.segments.end() && last->first < hi) ++last;
  obj.segments.erase(first, last);
  auto it = obj.segments.emplace(lo, Segment{hi, mark, {}}).first;
  // Coalesce with a neighbour written by the same access (e.g. a whole-object write in parts).
  if (it != obj.segments.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end == lo && prev->second.writer == mark && prev->second.readers.empty()) {
      prev->second.end = hi;
      obj.segments.erase(it);
    }
  }
}

std::uint32_t Tracker::add_node(ContextImpl& ctx, std::span<const Use> accesses,
                                std::string_view what, std::source_location loc) {
  std::string label =
      ctx.name() + " #" + std::to_string(ctx.issued() + 1) + "\\n" + std::string(what);
  for (const auto& a : accesses) {
    label += "\\n" + std::string(mode_name(a.mode)) + " obj" + std::to_string(a.id);
    if (a.range.size != ByteRange::whole().size) {
      label += "[" + std::to_string(a.range.offset) + ",+" + std::to_string(a.range.size) + ")";
    }
  }
  label += "\\n" + where(loc);
  nodes_.push_back({std::move(label)});
  return static_cast<std::uint32_t>(nodes_.size());  // ids start at 1; 0 means none
}

void Tracker::run_locked(ContextImpl& ctx, std::span<const Use> accesses, std::string_view what,
                         std::source_location loc, const std::function<void()>& enqueue) {
  {
    const std::uint32_t node = debug_ ? add_node(ctx, accesses, what, loc) : 0;
    std::vector<Mark*> deps;
    for (const auto& a : accesses) {
      Object& obj = object(a.id, loc);
      check_host_conflict(obj, a.id, a, ctx, what, loc);
      if (obj.first_timeline == 0) obj.first_timeline = ctx.timeline();
      if (obj.first_timeline != ctx.timeline()) obj.shared = true;
      collect(obj, a, ctx.timeline(), deps, loc);
    }
    wait_all(ctx, deps, node, loc);
    if (ctx.capturing()) ctx.note_capture_uses(accesses);
    enqueue();
    const auto seq = ctx.issued();
    for (const auto& a : accesses) record(ctx, objects_.at(a.id), a, seq, node, loc);
    stats_.marks += accesses.size();
  }
}

void Tracker::begin(ContextImpl& ctx, const Use& a, std::string_view what,
                    std::source_location loc) {
  {
    std::lock_guard lock(mutex_);
    Object& obj = object(a.id, loc);
    check_host_conflict(obj, a.id, a, ctx, what, loc);
    if (obj.first_timeline == 0) obj.first_timeline = ctx.timeline();
    if (obj.first_timeline != ctx.timeline()) obj.shared = true;
    const std::uint32_t node = debug_ ? add_node(ctx, {&a, 1}, what, loc) : 0;
    if (node != 0) open_nodes_[open_key(ctx.timeline(), a.id)] = node;
    std::vector<Mark*> deps;
    collect(obj, a, ctx.timeline(), deps, loc);
    wait_all(ctx, deps, node, loc);
    if (ctx.capturing()) ctx.note_capture_uses({&a, 1});
  }
  ctx.finish_if_blocking();
}

void Tracker::end(ContextImpl& ctx, const Use& a, std::string_view what, std::source_location loc) {
  std::lock_guard lock(mutex_);
  Object& obj = object(a.id, loc);
  std::uint32_t node = 0;
  if (debug_) {
    auto it = open_nodes_.find(open_key(ctx.timeline(), a.id));
    if (it != open_nodes_.end()) {
      node = it->second;
      open_nodes_.erase(it);
    } else {
      node = add_node(ctx, {&a, 1}, what, loc);
    }
  }
  record(ctx, obj, a, ctx.issued(), node, loc);
  ++stats_.marks;
}

void Tracker::wait_on_host(std::unique_lock<std::mutex>& lock, std::vector<Mark*>& deps,
                           bool report, std::source_location loc) {
  struct Wait {
    std::shared_ptr<EventImpl> event;
    std::weak_ptr<ContextImpl> ctx;
  };
  std::vector<Wait> waits;
  for (Mark* m : deps) {
    if (auto e = event_for(*m)) waits.push_back({std::move(e), m->ctx});
  }
  lock.unlock();  // never block other threads' issue while the host waits
  std::shared_ptr<Failure> failure;
  for (auto& w : waits) {
    w.event->synchronize();
    if (auto c = w.ctx.lock()) c->note_completed(w.event->seq);
    if (!failure && w.event->failures) failure = w.event->failures->at_or_before(w.event->seq);
  }
  if (report && failure && !failure->reported.exchange(true)) {
    throw WorkFailed(failure->operation, failure->issued_at, failure->cause,
                     failure->skipped.load());
  }
  (void)loc;
}

void Tracker::refuse_host_wait_if_captured(ObjectId id, Access mode, std::string_view what,
                                           std::source_location loc) {
  std::lock_guard lock(mutex_);
  std::vector<Mark*> deps;
  collect(object(id, loc), {id, mode, {}}, 0, deps, loc);
  refuse_if_captured(deps, what, loc);
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> Tracker::pending(ObjectId id, Access mode,
                                                                      ByteRange range,
                                                                      std::source_location loc) {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  auto it = objects_.find(id);
  if (it == objects_.end()) return out;
  std::vector<Mark*> deps;
  collect(it->second, {id, mode, range}, 0, deps, loc);
  out.reserve(deps.size());
  for (const Mark* m : deps) {
    // A wait uses the mark's event, or one recorded then, which covers the context's later work.
    std::uint64_t upto = m->seq;
    if (m->event) {
      upto = std::max(upto, m->event->seq);
    } else if (auto c = m->ctx.lock()) {
      upto = std::max(upto, c->issued());
    }
    out.emplace_back(m->timeline, upto);
  }
  return out;
}

void Tracker::wait_host(ObjectId id, Access mode, ByteRange range, std::source_location loc) {
  std::unique_lock lock(mutex_);
  std::vector<Mark*> deps;
  collect(object(id, loc), {id, mode, range}, 0, deps, loc);
  refuse_if_captured(deps, "a host wait", loc);
  wait_on_host(lock, deps, true, loc);
}

void Tracker::wait_host_quietly(ObjectId id) noexcept {
  try {
    std::unique_lock lock(mutex_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return;
    std::vector<Mark*> deps;
    collect(it->second, {id, Access::write, {}}, 0, deps, std::source_location::current());
    wait_on_host(lock, deps, false, std::source_location::current());
  } catch (...) {
  }
}

void Tracker::host_access_begin(ObjectId id, Access mode, ByteRange range,
                                std::source_location loc) {
  wait_host(id, mode, range, loc);
  std::lock_guard lock(mutex_);
  Object& obj = object(id, loc);
  ++(mode == Access::read ? obj.host_readers : obj.host_writers);
}

void Tracker::host_access_end(ObjectId id, Access mode, ByteRange range) noexcept {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  Object& obj = it->second;
  if (mode == Access::read) {
    --obj.host_readers;
    return;
  }
  --obj.host_writers;
  // The host wrote the range and is done: nothing queued touches it any more.
  try {
    auto [lo, hi] = bounds(obj, {id, mode, range}, std::source_location::current());
    split(obj, lo, hi);
    for (auto s = obj.segments.find(lo); s != obj.segments.end() && s->first < hi; ++s) {
      s->second.writer.reset();
      s->second.readers.clear();
    }
  } catch (...) {
  }
}

void Tracker::check_unguarded_host_access(ObjectId id, std::source_location loc) {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  Object& obj = it->second;
  if (obj.host_readers > 0 || obj.host_writers > 0) return;  // inside an accessor
  for (auto& [start, s] : obj.segments) {
    if (!s.writer || complete(*s.writer)) continue;
    if (auto e = s.writer->event; e && e->capture_sink() == nullptr) {
      if (auto real = e->captured_base()) e = std::move(real);
      if (e->query()) continue;
    }
    std::string writer = s.writer->node != 0 && s.writer->node <= nodes_.size()
                             ? nodes_[s.writer->node - 1].label
                             : "operation #" + std::to_string(s.writer->seq);
    for (auto pos = writer.find("\\n"); pos != std::string::npos; pos = writer.find("\\n", pos)) {
      writer.replace(pos, 2, ", ");  // DOT line breaks in the label
    }
    throw Error(Errc::invalid_state,
                "host access to the " + describe(id) + ", bytes [" + std::to_string(start) + "," +
                    std::to_string(s.end) +
                    ") outside an accessor while queued work still writes them (" + writer +
                    "); use the buffer's read()/write() accessor or synchronize first",
                loc);
  }
}

std::shared_ptr<CaptureSink> Tracker::capture_using(ObjectId id,
                                                    const std::shared_ptr<ContextImpl>& home) {
  auto active = [](ContextImpl* c) -> std::shared_ptr<CaptureSink> {
    if (c == nullptr || !c->capturing()) return nullptr;
    auto sink = c->capture();
    return sink && sink->active() ? sink : nullptr;
  };
  if (auto s = active(home.get())) return s;
  std::vector<std::shared_ptr<ContextImpl>> users;
  {
    std::lock_guard lock(mutex_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return nullptr;
    for (const auto& [start, seg] : it->second.segments) {
      (void)start;
      if (seg.writer) users.push_back(seg.writer->ctx.lock());
      for (const auto& r : seg.readers) users.push_back(r->ctx.lock());
    }
  }
  for (const auto& c : users) {
    if (auto s = active(c.get())) return s;
  }
  return nullptr;
}

void Tracker::retire(ObjectId id, const std::shared_ptr<ContextImpl>& home,
                     const std::function<void(ContextImpl&)>& release) noexcept {
  std::shared_ptr<CaptureSink> sink;
  if (ContextImpl::any_capturing()) {  // a buffer's release outside any capture pays one load
    try {
      sink = capture_using(id, home);
    } catch (...) {
    }
  }
  if (sink) {
    // The capture's graph owns it from now on. If adopting fails, the keeper is destroyed at
    // once and releases it (a shared_ptr calls its deleter when its construction throws).
    try {
      sink->adopt(std::shared_ptr<void>(nullptr, [id, home, release](void*) {
        Tracker::instance().release_now(id, home, release);
      }));
    } catch (...) {
    }
    return;
  }
  release_now(id, home, release);
}

void Tracker::release_now(ObjectId id, const std::shared_ptr<ContextImpl>& home,
                          const std::function<void(ContextImpl&)>& release) noexcept {
  std::unique_lock lock(mutex_);
  try {
    auto it = objects_.find(id);
    if (it == objects_.end()) {
      lock.unlock();
      release(*home);
      return;
    }
    std::vector<Mark*> deps;
    collect(it->second, {id, Access::write, {}}, 0, deps, std::source_location::current());
    auto target = release_target(home, deps);
    if (!deps.empty() && target->timeline() != home->timeline()) ++stats_.deferred_releases;
    wait_all(*target, deps, 0, std::source_location::current());
    if (it->second.base != 0) regions_.erase(it->second.base);
    erase_object(it);
    lock.unlock();
    release(*target);
  } catch (...) {
    // Out of memory while ordering the release: fall back to waiting on the host.
    if (lock.owns_lock()) lock.unlock();
    wait_host_quietly(id);
    {
      std::lock_guard relock(mutex_);
      if (auto it = objects_.find(id); it != objects_.end()) {
        if (it->second.base != 0) regions_.erase(it->second.base);
        erase_object(it);
      }
    }
    try {
      release(*home);
    } catch (...) {
    }
  }
}

std::shared_ptr<ContextImpl> Tracker::release_target(const std::shared_ptr<ContextImpl>& home,
                                                     const std::vector<Mark*>& deps) {
  if (deps.empty()) return home;
  // A user that is already ordered after every other use frees it without a new dependency.
  std::vector<std::shared_ptr<ContextImpl>> users;
  for (Mark* m : deps) {
    auto c = m->ctx.lock();
    if (!c || c->device() != home->device()) continue;
    if (std::find(users.begin(), users.end(), c) == users.end()) users.push_back(std::move(c));
  }
  for (auto& c : users) {
    bool ordered = std::all_of(deps.begin(), deps.end(), [&](const Mark* m) {
      return m->timeline == c->timeline() || c->waits_for(m->timeline, m->seq);
    });
    if (ordered) return c;
  }
  // Otherwise a context of the device's own waits for all of them, so no user gains a false
  // dependency on another user's work.
  auto& r = release_contexts_[home->device().to_string()];
  if (!r) {
    r = Context(ContextOptions{.device = home->device(),
                               .name = "sluice.release(" + home->device().to_string() + ")"})
            .shared_impl();
  }
  return r;
}

void Tracker::capture_ended(const CaptureSink* sink, const std::shared_ptr<ContextImpl>& origin,
                            const std::shared_ptr<EventImpl>& end) noexcept {
  std::lock_guard lock(mutex_);
  auto it = captured_marks_.find(sink);
  if (it == captured_marks_.end()) return;
  for (auto& weak : it->second) {
    auto m = weak.lock();
    if (!m) continue;
    m->ctx = origin;
    m->timeline = origin->timeline();
    m->seq = end ? end->seq : 0;  // 0: complete (the host waited for the capture's streams)
    m->event = end;
  }
  captured_marks_.erase(it);
}

void Tracker::set_debug(bool on) {
  debug_.store(on);
  set_host_tasks_note_completion(on);
}

void Tracker::write_dot(std::ostream& out) {
  std::lock_guard lock(mutex_);
  out << "digraph sluice_deps {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    out << "  n" << i + 1 << " [label=\"" << nodes_[i].label << "\"];\n";
  }
  for (const auto& [from, to, elided] : edges_) {
    out << "  n" << from << " -> n" << to;
    if (elided) out << " [style=dashed, label=\"implied\"]";
    out << ";\n";
  }
  out << "}\n";
}

void Tracker::clear_graph() {
  std::lock_guard lock(mutex_);
  nodes_.clear();
  edges_.clear();
  open_nodes_.clear();
}

deps::Stats Tracker::stats() {
  std::lock_guard lock(mutex_);
  return stats_;
}

deps::Footprint Tracker::footprint() {
  std::lock_guard lock(mutex_);
  deps::Footprint f;
  f.objects = objects_.size();
  for (const auto& [id, obj] : objects_) {
    f.segments += obj.segments.size();
    for (const auto& [start, s] : obj.segments) f.records += (s.writer ? 1 : 0) + s.readers.size();
  }
  return f;
}

}  // namespace sluice::detail
