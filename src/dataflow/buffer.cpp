// Buffers: which copy of the data is current, moving it only when the side that needs it is
// stale, and host accessors (reference 004, "Synchronization with the host").

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "dataflow/state.hpp"
#include "sluice/error.hpp"

namespace sluice::dataflow::detail {

using sluice::detail::Tracker;

BufferState::BufferState(std::size_t n, void* user, bool wb, std::source_location loc)
    : bytes(n), write_back(wb) {
  if (user == nullptr || bytes == 0) return;
  if (auto region = find_memory(user)) {
    const auto off = static_cast<std::size_t>(static_cast<const std::byte*>(user) -
                                              static_cast<const std::byte*>(region->base));
    if (off + bytes > region->attributes.size) {
      throw Error(Errc::invalid_argument,
                  "Buffer: " + std::to_string(bytes) + " bytes from the given pointer run past " +
                      "the end of its allocation (" +
                      std::to_string(region->attributes.size - off) +
                      " bytes left); make the buffer smaller",
                  loc);
    }
    if (region->attributes.type == MemoryType::device) {
      // The user's device memory is the buffer's only copy: it stays on that device.
      bound = region->attributes.device;
      auto c = std::make_unique<Copy>();
      c->device = *region->attributes.device;
      c->ptr = static_cast<std::byte*>(user);
      c->id = region->id;
      c->valid = true;
      copies.push_back(std::move(c));
      initialized = true;
      write_back = false;
      return;
    }
    host_id = region->id;
    host_offset = off;
  } else {
    host_id = register_memory(user, {MemoryType::host, bytes, 1, std::nullopt}, loc);
    registered_host_ = true;
  }
  user_id_ = host_id;
  host = static_cast<std::byte*>(user);
  host_valid = true;
  initialized = true;
  host_const = !wb;  // only the const constructor gives memory without write-back
}

void BufferState::detach_const_host(std::source_location loc) {
  if (!host_const) return;
  const Device device = copies.empty() ? Device{"host", 0} : copies.front()->device;
  own_host_ = sluice::detail::RawPinnedBuffer(device, bytes, loc);
  // Nothing writes const memory, so it holds the data now (copies in may still read it).
  if (host_valid) std::memcpy(own_host_.data(), host, bytes);
  host = static_cast<std::byte*>(own_host_.data());
  host_id = own_host_.id();
  host_offset = 0;
  host_const = false;
  detached_ = true;
}

namespace {
/// The gates this thread keeps closed that hold back work using any of `ids`.
std::vector<std::shared_ptr<Gate>> gates_holding_any(const std::vector<ObjectId>& ids) {
  std::vector<std::shared_ptr<Gate>> out;
  for (auto id : ids) {
    for (const auto& [t, s] :
         Tracker::instance().pending(id, Access::write, {}, std::source_location::current())) {
      for (auto& g : gates_holding(t, s)) {
        if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(std::move(g));
      }
    }
  }
  return out;
}
}  // namespace

BufferState::~BufferState() {
  auto& tracker = Tracker::instance();
  if (gate) {
    gate->open();
    unregister_gate(gate.get());
  }
  std::vector<ObjectId> ids;
  if (host_id != 0) ids.push_back(host_id);
  if (user_id_ != 0 && user_id_ != host_id) ids.push_back(user_id_);
  for (const auto& c : copies) {
    if (c->owned.id() != 0) ids.push_back(c->id);
  }
  std::vector<std::shared_ptr<Gate>> holding;
  try {
    holding = gates_holding_any(ids);
    // The write-back copy would be issued on the valid copy's context: held back there too?
    for (const auto& c : copies) {
      if (!write_back || host_valid || !initialized || !c->valid || !c->home) continue;
      for (auto& g : gates_holding_next(c->home->impl())) holding.push_back(std::move(g));
    }
  } catch (...) {
  }
  if (!holding.empty()) {
    // Waiting would never return: a HostAccessor this thread holds keeps work that uses this
    // buffer back. The data is not written back; device memory goes back in stream order after
    // that work; what must wait on the host for it (pinned memory, the user's registration) is
    // kept by the gates and released once they opened and the work ran.
    std::fprintf(stderr,
                 "sluice: a Buffer was destroyed while a HostAccessor held by the same thread "
                 "holds back command groups that use it: it is not written back (waiting would "
                 "never return); destroy the HostAccessor first\n");
    struct Parked {
      std::vector<ObjectId> ids;
      ObjectId unregister = 0;
      sluice::detail::RawPinnedBuffer own_host, mirror;
      ~Parked() {
        for (auto id : ids) Tracker::instance().wait_host_quietly(id);
        if (unregister != 0) {
          try {
            unregister_memory(unregister);
          } catch (...) {
          }
        }
      }
    };
    auto parked = std::make_shared<Parked>();
    parked->ids = ids;
    parked->unregister = registered_host_ ? user_id_ : 0;
    parked->own_host = std::move(own_host_);
    parked->mirror = std::move(mirror_);
    copies.clear();  // device memory goes back in stream order
    for (auto& g : holding) g->park(parked);
    return;
  }
  try {
    if (write_back && !host_valid && initialized) refresh_host(std::source_location::current());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: Buffer write-back failed: %s\n", e.what());
  }
  // SYCL semantics: destruction waits for every command group that uses the buffer.
  for (auto id : ids) tracker.wait_host_quietly(id);
  copies.clear();  // device memory goes back in stream order
  if (registered_host_) {
    try {
      unregister_memory(user_id_);
    } catch (...) {
    }
  }
}

void BufferState::ensure_host(std::source_location loc) {
  if (host != nullptr) return;
  if (bound) {
    throw Error(Errc::unsupported,
                "Buffer made over device memory of " + bound->to_string() +
                    " has no host copy; read it with a kernel or a copy, or make the buffer over "
                    "host memory",
                loc);
  }
  // Pinned, so that moving the data never goes through a staging copy (on cuda a staging
  // buffer may synchronize the device while a host-accessor gate holds it).
  const Device device = copies.empty() ? Device{"host", 0} : copies.front()->device;
  own_host_ = sluice::detail::RawPinnedBuffer(device, bytes, loc);
  host = static_cast<std::byte*>(own_host_.data());
  host_id = own_host_.id();
}

const sluice::detail::RawPinnedBuffer& BufferState::mirror(const Device& device,
                                                           std::source_location loc) {
  if (mirror_.id() == 0) mirror_ = sluice::detail::RawPinnedBuffer(device, bytes, loc);
  return mirror_;
}

void BufferState::refresh_host(std::source_location loc) {
  if (host_valid || !initialized) return;
  ensure_host(loc);
  for (auto& c : copies) {
    if (c->valid) {
      detach_const_host(loc);
      sluice::detail::copy_bytes(*c->home, host, c->ptr, bytes, loc);
      // The copy waits (through the tracker) for the command group that wrote the device copy:
      // if a HostAccessor holds that back, so is the copy.
      auto& home = c->home->impl();
      propagate_gates(home, home.issued());
      host_valid = true;
      return;
    }
  }
}

BufferState::Copy& BufferState::copy_for(QueueState& q, const Context& ctx,
                                         std::source_location loc) {
  for (auto& c : copies) {
    if (c->device == q.device) {
      if (!c->home) c->home = ctx;
      return *c;
    }
  }
  if (bound) {
    throw Error(Errc::invalid_argument,
                "Buffer made over device memory of " + bound->to_string() + " used on queue '" +
                    q.name + "' of " + q.device.to_string() +
                    ": it has no host copy to move the data through; submit to a queue on " +
                    bound->to_string() + ", or make the buffer over host memory",
                loc);
  }
  auto c = std::make_unique<Copy>();
  c->device = q.device;
  // Allocated in the order of the context that first uses it: made on another context, it
  // would be ready only after that context's earlier work (independent groups serialized).
  c->owned = sluice::detail::RawDeviceBuffer(ctx, bytes, loc);
  c->ptr = static_cast<std::byte*>(c->owned.data());
  c->id = c->owned.id();
  c->home = ctx;
  copies.push_back(std::move(c));
  return *copies.back();
}

std::shared_ptr<BufferState> make_buffer(std::size_t bytes, void* host, bool write_back,
                                         std::source_location loc) {
  return std::make_shared<BufferState>(bytes, host, write_back, loc);
}

void set_write_back(BufferState& b, bool on) noexcept {
  std::lock_guard lock(b.mutex);
  // Memory the buffer was made over as const is never written.
  b.write_back = on && b.host != nullptr && !b.bound && !b.host_const && !b.detached();
}

void check_access_range(const std::size_t* buffer, const std::size_t* r, const std::size_t* offset,
                        int dims, std::source_location loc) {
  for (int d = 0; d < dims; ++d) {
    if (offset[d] > buffer[d] || r[d] > buffer[d] - offset[d]) {
      throw Error(Errc::invalid_argument,
                  "accessor range out of bounds: dimension " + std::to_string(d) + " asks for " +
                      std::to_string(r[d]) + " elements from offset " + std::to_string(offset[d]) +
                      " of a buffer with " + std::to_string(buffer[d]) +
                      "; shrink the range or the offset",
                  loc);
    }
  }
}

void* require_buffer(SubmitState& s, const std::shared_ptr<BufferState>& keep, Access mode,
                     bool no_init, std::size_t offset, std::size_t bytes,
                     std::source_location loc) {
  s.require_active("Buffer::get_access", loc);
  if (s.launched) {
    throw Error(Errc::invalid_state,
                "accessor created after the command group's kernel was issued; create accessors "
                "before calling single_task / parallel_for",
                loc);
  }
  BufferState& b = *keep;
  std::lock_guard lock(b.mutex);
  if (b.bytes == 0) return nullptr;
  place(s, b.last_timeline, b.last_seq);
  auto& c = b.copy_for(*s.queue, *s.ctx, loc);
  const bool whole = offset == 0 && bytes == b.bytes;
  const bool copy_in = !c.valid && b.initialized && !(no_init && whole);
  // A copy in while host accessors live runs after the gate, so it reads what they wrote. From
  // pageable memory it goes through a pinned mirror, allocated here before this command group's
  // gate: the backend's staging would allocate pinned memory at issue, which may synchronize the
  // device while a gate kernel spins there, waiting for this very thread.
  const bool staged = copy_in && b.host_accessors > 0 && b.host_pageable();
  if (staged) (void)b.mirror(s.queue->device, loc);
  if (b.host_accessors > 0) {
    // SYCL: device work on the buffer starts only after the host accessors are gone.
    if (!b.gate) {
      auto g = std::make_shared<Gate>(s.queue->device);
      for (auto t : b.holders) g->add_holder(t);
      register_gate(g);
      b.gate = std::move(g);
    }
    b.gate->issue(*s.ctx, loc);
  }
  if (!c.valid) {
    if (!b.initialized) {
      c.valid = true;  // nothing to copy: the contents are undefined until written
      b.initialized = true;
    } else if (copy_in) {
      b.refresh_host(loc);  // from another device, through the host
      if (staged) {
        auto* m = static_cast<std::byte*>(b.mirror(s.queue->device, loc).data());
        sluice::detail::copy_bytes(*s.ctx, m, b.host, b.bytes, loc);  // in stream order
        sluice::detail::copy_bytes(*s.ctx, c.ptr, m, b.bytes, loc);
      } else {
        sluice::detail::copy_bytes(*s.ctx, c.ptr, b.host, b.bytes, loc);
      }
      c.valid = true;
    }
  }
  if (bytes == 0) return c.ptr;  // an empty range touches nothing
  if (mode != Access::read) s.written.push_back({keep, &c});
  s.buffers.push_back(keep);
  s.accesses.add(c.id, {offset, bytes}, mode);
  return c.ptr;
}

/// After the kernel is issued: the written copies are the only current ones.
void apply_writes(SubmitState& s, std::uint64_t seq) {
  const std::uint64_t timeline = s.ctx->impl().timeline();
  for (auto& w : s.written) {
    std::lock_guard lock(w.buffer->mutex);
    w.buffer->last_timeline = timeline;
    w.buffer->last_seq = seq;
    for (auto& c : w.buffer->copies) c->valid = c.get() == w.copy;
    w.buffer->host_valid = false;
    w.buffer->initialized = true;
  }
  for (auto& b : s.host_updated) {
    std::lock_guard lock(b->mutex);
    b->host_valid = true;
  }
}

void* host_access_begin(BufferState& b, Access mode, std::source_location loc) {
  std::unique_lock lock(b.mutex);
  if (b.bytes == 0) return nullptr;
  b.ensure_host(loc);
  if (!b.initialized) {
    b.initialized = true;
    b.host_valid = true;
  }
  if (!b.host_valid && b.initialized) {
    // Refused before the copy back is issued: the command group that wrote the data, or the
    // copy itself on its context, may be held back by a HostAccessor of this thread (waiting
    // would never return).
    for (const auto& c : b.copies) {
      if (!c->valid) continue;
      check_host_wait(c->id, Access::read, {}, "HostAccessor", loc);
      if (c->home && !gates_holding_next(c->home->impl()).empty()) {
        check_gates(c->home->impl().timeline(), c->home->impl().issued() + 1, "HostAccessor", loc);
      }
    }
  }
  b.refresh_host(loc);
  if (mode != Access::read) b.detach_const_host(loc);
  const ObjectId id = b.host_id;
  const ByteRange range{b.host_offset, b.bytes};
  check_host_wait(id, mode, range, "HostAccessor", loc);
  lock.unlock();
  // Waits only for the copy that brings the data back (and, to write, for copies reading it).
  Tracker::instance().wait_host(id, mode, range, loc);
  lock.lock();
  if (mode != Access::read) {
    for (auto& c : b.copies) c->valid = false;
    b.host_valid = true;
  }
  ++b.host_accessors;
  b.holders.push_back(std::this_thread::get_id());
  if (b.gate) b.gate->add_holder(std::this_thread::get_id());
  return b.host;
}

void host_access_end(BufferState& b, Access) noexcept {
  std::shared_ptr<Gate> opening;
  {
    std::lock_guard lock(b.mutex);
    if (b.bytes == 0) return;
    const auto me = std::this_thread::get_id();
    if (auto it = std::find(b.holders.begin(), b.holders.end(), me); it != b.holders.end()) {
      b.holders.erase(it);
    } else if (!b.holders.empty()) {
      b.holders.pop_back();  // destroyed on another thread than the one that made it
    }
    if (b.gate) b.gate->remove_holder(me);
    if (--b.host_accessors == 0 && b.gate) opening = std::move(b.gate);
  }
  if (!opening) return;
  // Outside the buffer's lock: opening the last hold runs the releases kept meanwhile, and the
  // gate's end releases what it parked (both may wait for the device).
  opening->open();
  unregister_gate(opening.get());
}

}  // namespace sluice::dataflow::detail
