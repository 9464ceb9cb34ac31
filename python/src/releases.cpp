// The release list of foreign memory (releases.hpp).

#include "releases.hpp"

#include <dlpack/dlpack.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>

#include "interop.hpp"

namespace sluice::python {
namespace {

struct Pending {
  Event done;  // the interop context's point after every access to the memory
  Device device;
  ObjectId id = 0;
  bool registered_here = false;
  PyRef owner;
  DLManagedTensor* managed = nullptr;
};

struct Releases {
  std::mutex mutex;
  std::deque<Pending> pending;
  std::deque<Pending> unmarked;       // dropped inside Python work: their point is not recorded yet
  std::atomic<std::size_t> count{0};  // pending + unmarked
  std::map<ObjectId, std::size_t> refs;  // imports alive or pending per region registered here
  std::vector<PyObject*> buried;         // references dropped without the GIL
  std::atomic<std::size_t> buried_count{0};
};
Releases& releases() {
  static auto* r = new Releases;  // never destroyed: entries may be pending at exit
  return *r;
}

/// The count `collect` reads without the lock: pending and unmarked releases (r.mutex held).
void recount(Releases& r) {
  r.count.store(r.pending.size() + r.unmarked.size(), std::memory_order_relaxed);
}

void release(Pending& p) {
  if (p.registered_here) {
    bool last = false;
    {
      auto& r = releases();
      std::lock_guard lock(r.mutex);
      auto it = r.refs.find(p.id);
      if (it != r.refs.end() && --it->second == 0) {
        r.refs.erase(it);
        last = true;
      }
    }
    if (last) {
      try {
        unregister_memory(p.id);
      } catch (const Error&) {
        // Already gone (unregistered by its owner): nothing left to release here.
      }
    }
  }
  if (p.managed != nullptr && p.managed->deleter != nullptr) p.managed->deleter(p.managed);
  p.managed = nullptr;
  p.owner = PyRef();
}

}  // namespace

Region register_or_find(const void* ptr, std::size_t bytes, MemoryType type, const Device& device,
                        std::source_location loc) {
  auto& r = releases();
  if (auto found = find_memory(ptr)) {
    const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(ptr) -
                                                 static_cast<const std::byte*>(found->base));
    if (offset + bytes > found->attributes.size) {
      throw Error(Errc::invalid_argument,
                  "the array's " + std::to_string(bytes) + " bytes from offset " +
                      std::to_string(offset) + " reach past the tracked region (of " +
                      std::to_string(found->attributes.size) +
                      " bytes) that holds its start: import the whole base array first, or "
                      "drop the views that hold the smaller region",
                  loc);
    }
    std::lock_guard lock(r.mutex);
    auto it = r.refs.find(found->id);
    if (it != r.refs.end()) {
      ++it->second;
      return {found->id, offset, true};
    }
    return {found->id, offset, false};  // sluice's own memory (a buffer): its owner tracks it
  }
  MemoryAttributes attr;
  attr.type = type;
  attr.size = bytes == 0 ? 1 : bytes;
  attr.device = device;
  const ObjectId id = register_memory(ptr, attr, loc);
  std::lock_guard lock(r.mutex);
  r.refs[id] = 1;
  return {id, 0, true};
}

namespace {

/// Records the point after every queued access to the memory on the interop context, and puts
/// the release on the list that `collect` performs once that point passed.
void mark_and_queue(Pending p) {
  try {
    nogil([&] {
      const Context ctx = interop::context(p.device);
      const auto loc = std::source_location::current();
      {
        // Waits (on the interop context, not the host) for every queued access to the memory.
        Intent mark(ctx, p.id, Access::write, "release of imported memory", {}, loc);
        interop::numbered_noop(ctx, "release of imported memory", loc);
      }
      p.done.record(ctx, loc);
    });
  } catch (...) {
    // The region is gone already (its sluice owner died): nothing queued can use it.
  }
  auto& r = releases();
  std::lock_guard lock(r.mutex);
  r.pending.push_back(std::move(p));
  recount(r);
}

/// Marks the releases of imports dropped inside Python work (not there: on cuda a host task may
/// not call CUDA).
void mark_unmarked() {
  if (PythonWork::active()) return;
  auto& r = releases();
  std::deque<Pending> batch;
  {
    std::lock_guard lock(r.mutex);
    batch.swap(r.unmarked);
  }
  for (auto& p : batch) mark_and_queue(std::move(p));
}

}  // namespace

Foreign::~Foreign() {
  Pending p;
  p.device = device_;
  p.id = id_;
  p.registered_here = registered_here_;
  p.owner = std::move(owner_);
  p.managed = managed_;
  if (!registered_here_) {
    // sluice's own memory (a buffer, seen again through another library): the buffer releases
    // it after the tracked work on it, and the consumer's work was ordered when the consumer let
    // go of the export. Nothing to wait for here.
    release(p);
    return;
  }
  if (PythonWork::active()) {
    // Dropped by Python inside a host task (or its garbage collector there): the marks wait for
    // the next call into the module on a Python thread.
    auto& r = releases();
    std::lock_guard lock(r.mutex);
    r.unmarked.push_back(std::move(p));
    recount(r);
    return;
  }
  mark_and_queue(std::move(p));
}

void bury(PyObject* obj) noexcept {
  if (finalizing()) return;  // left to the process's end
  auto& r = releases();
  std::lock_guard lock(r.mutex);
  r.buried.push_back(obj);
  r.buried_count.store(r.buried.size(), std::memory_order_relaxed);
}

namespace {
void drop_buried() {
  auto& r = releases();
  while (r.buried_count.load(std::memory_order_relaxed) != 0) {
    std::vector<PyObject*> batch;
    {
      std::lock_guard lock(r.mutex);
      batch.swap(r.buried);
      r.buried_count.store(0, std::memory_order_relaxed);
    }
    for (PyObject* o : batch) Py_DECREF(o);  // may bury more: the loop takes those too
  }
}
}  // namespace

void collect() {
  auto& r = releases();
  drop_buried();
  if (r.count.load(std::memory_order_relaxed) == 0) return;
  mark_unmarked();
  std::deque<Pending> ready;
  {
    std::lock_guard lock(r.mutex);
    while (!r.pending.empty() && r.pending.front().done.query()) {
      ready.push_back(std::move(r.pending.front()));
      r.pending.pop_front();
    }
    recount(r);
  }
  for (auto& p : ready) release(p);
}

void collect_all() {
  auto& r = releases();
  drop_buried();
  mark_unmarked();
  std::deque<Pending> all;
  {
    std::lock_guard lock(r.mutex);
    all.swap(r.pending);
    recount(r);
  }
  for (auto& p : all) {
    nogil([&] {
      try {
        p.done.synchronize();
      } catch (const std::exception&) {
        // A failure of the work on the memory belongs to whoever waits on that work.
      }
    });
    release(p);
  }
  drop_buried();
}

void bind_releases(py::module_& m) {
  m.def(
      "_collect", [] { collect_all(); },
      "Waits for every pending release of imported memory and performs it (for tests).");
  m.def("_pending_releases", [] { return releases().count.load(); });
  m.def(
      "_tracker_stats",
      [] {
        const auto s = deps::stats();
        py::dict d;
        d["marks"] = s.marks;
        d["waits_issued"] = s.waits_issued;
        d["waits_elided"] = s.waits_elided;
        d["events_recorded"] = s.events_recorded;
        d["deferred_releases"] = s.deferred_releases;
        return d;
      },
      "The dependency tracker's counters (sluice::deps::stats(); process-wide, monotonic).");
  py::module_::import("atexit").attr("register")(m.attr("_collect"));
}

}  // namespace sluice::python
