// Retiring tracked objects: freed in stream order after their last access, or adopted by the
// capture that uses them (deps/tracker.hpp).

#include "deps/tracker.hpp"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

namespace sluice::detail {

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
    if (auto c = untracked_user(it->second, false)) users.push_back(std::move(c));
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

namespace {

/// A release asked for while this thread held the tracker's lock in Tracker::run.
struct KeptRelease {
  ObjectId id;
  std::shared_ptr<ContextImpl> home;
  std::function<void(ContextImpl&)> release;
};
thread_local std::vector<KeptRelease> kept_releases;

}  // namespace

int& Tracker::run_depth() noexcept {
  thread_local int depth = 0;
  return depth;
}

void Tracker::release_kept() noexcept {
  while (!kept_releases.empty()) {
    auto kept = std::move(kept_releases);
    kept_releases.clear();
    for (auto& k : kept) release_now(k.id, k.home, k.release);
  }
}

void Tracker::release_now(ObjectId id, const std::shared_ptr<ContextImpl>& home,
                          const std::function<void(ContextImpl&)>& release) noexcept {
  if (run_depth() > 0) {
    try {
      kept_releases.push_back({id, home, release});
      return;
    } catch (...) {
      std::terminate();  // releasing here would wait for the lock this thread holds
    }
  }
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

}  // namespace sluice::detail
