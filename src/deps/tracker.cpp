// The dependency tracker's ordering of device work: what an access must wait for, the waits,
// and the marks it leaves (deps/tracker.hpp).

#include "deps/tracker.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>

namespace sluice::detail {
namespace {

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

void Tracker::run(ContextImpl& ctx, const AccessList& accesses, std::string_view what,
                  std::source_location loc, const std::function<void()>& enqueue) {
  {
    // What the work drops while the lock is held (an IR version that adopted a buffer) releases
    // after the lock is let go.
    struct Depth {
      Depth() { ++run_depth(); }
      ~Depth() {
        if (--run_depth() == 0) Tracker::instance().release_kept();
      }
    } depth;
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
  if (m.event && capture_sink_of(*m.event) == nullptr) {
    // A point of a capture that ended before capture_ended() reached this mark: the real point.
    if (auto real = captured_base_of(*m.event)) m.event = std::move(real);
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

void Tracker::run_untracked(ContextImpl& ctx, CaptureSink& sink, std::span<const Use> accesses,
                            std::string_view what, std::source_location loc,
                            const std::function<void()>& enqueue) {
  const auto serial = sink.serial();
  note_untracked_capture(ctx, serial);
  for (const auto& a : accesses) {
    Object& obj = object(a.id, loc);
    (void)bounds(obj, a, loc);
    check_host_conflict(obj, a.id, a, ctx, what, loc);
    obj.untracked_use = serial;
    if (a.mode != Access::read) obj.untracked_write = serial;
  }
  ctx.note_capture_uses(accesses);
  enqueue();
}

void Tracker::note_untracked_capture(ContextImpl& ctx, std::uint64_t serial) {
  if (!untracked_captures_.empty() && untracked_captures_.back().first == serial) return;
  const bool known = std::any_of(untracked_captures_.begin(), untracked_captures_.end(),
                                 [&](const auto& c) { return c.first == serial; });
  if (!known) untracked_captures_.emplace_back(serial, ctx.weak_from_this());
}

std::uint64_t Tracker::run_expected(ContextImpl& ctx, std::string_view what,
                                    std::source_location loc, const SimpleOp& simple) {
  if (debug_) return 0;  // the debug graph wants every operation's node
  std::lock_guard lock(mutex_);
  auto admit = [&](CaptureSink& sink, std::span<const Use> uses) {
    // The recording resolved these same addresses to the objects of `uses`. While those are
    // tracked (ids are never reused, registered regions never overlap), resolving again finds
    // them: the accesses the copy or memset declares must be `uses` exactly, by AccessList's
    // merge rule (no other noted use, such as an intent's, came with them). Memory outside
    // sluice's (no use) is resolved as usual.
    std::array<Object*, 2> objs{};  // a copy or memset has one or two uses
    if (uses.empty() || uses.size() > objs.size()) return false;
    for (std::size_t k = 0; k < uses.size(); ++k) {
      auto it = objects_.find(uses[k].id);
      if (it == objects_.end()) return false;
      objs[k] = &it->second;
    }
    // Where each address lies: the use whose object holds its bytes, and the offset there.
    auto holder = [&](const void* p, std::size_t& offset) -> std::size_t {
      const auto a = reinterpret_cast<std::uintptr_t>(p);
      for (std::size_t k = 0; k < uses.size(); ++k) {
        const Object& o = *objs[k];
        if (o.base != 0 && a >= o.base && a - o.base <= o.size &&
            simple.bytes <= o.size - (a - o.base)) {
          offset = a - o.base;
          return k;
        }
      }
      return uses.size();
    };
    auto same = [](const Use& u, ObjectId id, Access mode, std::size_t lo, std::size_t hi) {
      return u.id == id && u.mode == mode && u.range.offset == lo && u.range.size == hi - lo;
    };
    std::size_t dst_off = 0;
    const auto d = holder(simple.dst, dst_off);
    if (d == uses.size()) return false;
    const ObjectId dst_id = uses[d].id;
    if (simple.kind == SimpleOp::Kind::memset) {
      if (uses.size() != 1 ||
          !same(uses[0], dst_id, Access::write, dst_off, dst_off + simple.bytes)) {
        return false;
      }
    } else {
      std::size_t src_off = 0;
      const auto s = holder(simple.src, src_off);
      if (s == uses.size()) return false;
      const ObjectId src_id = uses[s].id;
      const auto dlo = dst_off, dhi = dst_off + simple.bytes;
      const auto slo = src_off, shi = src_off + simple.bytes;
      // AccessList's rule for a write and a read: one read_write access where they overlap.
      if (dst_id == src_id && accesses_join(dlo, dhi, slo, shi, false)) {
        if (uses.size() != 1 ||
            !same(uses[0], dst_id, Access::read_write, std::min(dlo, slo), std::max(dhi, shi))) {
          return false;
        }
      } else if (uses.size() != 2 || !same(uses[0], dst_id, Access::write, dlo, dhi) ||
                 !same(uses[1], src_id, Access::read, slo, shi)) {
        return false;
      }
    }
    const auto serial = sink.serial();
    note_untracked_capture(ctx, serial);
    for (std::size_t k = 0; k < uses.size(); ++k) {
      const auto& a = uses[k];
      check_host_conflict(*objs[k], a.id, a, ctx, what, loc);
      objs[k]->untracked_use = serial;
      if (a.mode != Access::read) objs[k]->untracked_write = serial;
    }
    return true;
  };
  return ctx.enqueue_expected(what, loc, simple, admit);
}

std::shared_ptr<ContextImpl> Tracker::untracked_user(const Object& obj, bool writes_only) const {
  const auto serial = writes_only ? obj.untracked_write : obj.untracked_use;
  if (serial == 0) return nullptr;
  for (const auto& [s, ctx] : untracked_captures_) {
    if (s == serial) return ctx.lock();
  }
  return nullptr;
}

void Tracker::join_untracked(ContextImpl& ctx, const Object& obj, const Use& a,
                             std::source_location loc) {
  if (obj.untracked_use == 0 || untracked_captures_.empty()) return;
  // A read conflicts with captured writes, a write with any captured access.
  auto c = untracked_user(obj, a.mode == Access::read);
  if (!c || c.get() == &ctx || !c->capturing()) return;
  if (auto sink = c->capture(); sink && sink->active()) {
    ++stats_.waits_issued;
    (void)ctx.wait(sink->record(*c, loc), loc);
  }
}

void Tracker::refuse_if_untracked_captured(const Object& obj, Access mode, std::string_view what,
                                           std::source_location loc) const {
  // A host read conflicts with captured writes, a host write with any captured access.
  if (auto c = untracked_user(obj, mode == Access::read); c && c->capturing()) {
    c->refuse_if_capturing(what, loc);
  }
}

void Tracker::run_locked(ContextImpl& ctx, std::span<const Use> accesses, std::string_view what,
                         std::source_location loc, const std::function<void()>& enqueue) {
  if (ctx.capturing() && !debug_) {
    if (auto sink = ctx.capture(); sink && sink->active() && sink->untracked()) {
      run_untracked(ctx, *sink, accesses, what, loc, enqueue);
      return;
    }
  }
  {
    const std::uint32_t node = debug_ ? add_node(ctx, accesses, what, loc) : 0;
    std::vector<Mark*> deps;
    for (const auto& a : accesses) {
      Object& obj = object(a.id, loc);
      check_host_conflict(obj, a.id, a, ctx, what, loc);
      join_untracked(ctx, obj, a, loc);
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
    join_untracked(ctx, obj, a, loc);
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

void Tracker::capture_ended(const CaptureSink* sink, const std::shared_ptr<ContextImpl>& origin,
                            const std::shared_ptr<EventImpl>& end) noexcept {
  std::lock_guard lock(mutex_);
  if (const auto serial = sink->serial(); serial != 0) {
    std::erase_if(untracked_captures_, [&](const auto& c) { return c.first == serial; });
  }
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

}  // namespace sluice::detail
