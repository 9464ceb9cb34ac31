// The dependency tracker's host side: the host waiting for device work, and host accessors
// (deps/tracker.hpp).

#include "deps/tracker.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace sluice::detail {

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
  Object& obj = object(id, loc);
  refuse_if_untracked_captured(obj, mode, what, loc);
  collect(obj, {id, mode, {}}, 0, deps, loc);
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
  Object& obj = object(id, loc);
  refuse_if_untracked_captured(obj, mode, "a host wait", loc);
  collect(obj, {id, mode, range}, 0, deps, loc);
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
    if (auto e = s.writer->event; e && capture_sink_of(*e) == nullptr) {
      if (auto real = captured_base_of(*e)) e = std::move(real);
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

}  // namespace sluice::detail
