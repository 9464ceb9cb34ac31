#include "sluice/memory.hpp"

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "deps/tracker.hpp"

namespace sluice {
namespace detail {

using detail::Tracker;

RawDeviceBuffer::RawDeviceBuffer(const Context& ctx, std::size_t bytes, std::source_location loc)
    : ctx_(ctx.shared_impl()), bytes_(bytes) {
  if (bytes == 0) return;
  // Never recorded by a capture: the buffer's memory must exist now and belongs to the buffer.
  const auto seq = ctx_->enqueue_eager(
      "allocate", loc, [&](Stream& s, const OpInfo& op) { ptr_ = s.allocate(bytes, op); });
  try {
    // Work on other contexts waits for the stream-ordered allocation.
    id_ = Tracker::instance().register_memory(ptr_, {MemoryType::device, bytes, 1, ctx_->device()},
                                              ctx_, seq, loc);
  } catch (...) {
    ctx_->deallocate(ptr_, bytes_);
    throw;
  }
  ctx_->finish_if_blocking();
}

RawDeviceBuffer::~RawDeviceBuffer() {
  if (ptr_ == nullptr) return;
  Tracker::instance().retire(id_, ctx_,
                             [p = ptr_, n = bytes_](ContextImpl& c) { c.deallocate(p, n); });
}

RawPinnedBuffer::RawPinnedBuffer(const Device& device, std::size_t bytes, std::source_location loc)
    : backend_(find_backend(device.backend)), bytes_(bytes) {
  if (bytes == 0) return;
  ptr_ = backend_->allocate_pinned(bytes);
  try {
    id_ = Tracker::instance().register_memory(ptr_, {MemoryType::pinned, bytes, 1, device}, nullptr,
                                              0, loc);
  } catch (...) {
    backend_->deallocate_pinned(ptr_);
    throw;
  }
}

RawPinnedBuffer::~RawPinnedBuffer() {
  if (ptr_ == nullptr) return;
  // Pinned memory cannot be freed from a stream callback (cudaFreeHost synchronizes), so the
  // host waits here for queued work that still uses it.
  auto& tracker = Tracker::instance();
  tracker.wait_host_quietly(id_);
  try {
    tracker.unregister(id_, std::source_location::current());
  } catch (...) {
  }
  backend_->deallocate_pinned(ptr_);
}

std::size_t checked_bytes(std::size_t count, std::size_t size, std::source_location loc) {
  if (size != 0 && count > static_cast<std::size_t>(-1) / size) {
    throw OutOfMemory(static_cast<std::size_t>(-1),
                      std::to_string(count) + " elements of " + std::to_string(size) +
                          " bytes overflow the address space; ask for fewer elements",
                      loc);
  }
  return count * size;
}

void check_copy_sizes(std::size_t dst, std::size_t src, std::source_location loc) {
  if (dst != src) {
    throw Error(Errc::invalid_argument,
                "copy: destination has " + std::to_string(dst) + " elements but source has " +
                    std::to_string(src) + "; pass spans of equal size (subspan() selects a part)",
                loc);
  }
}

namespace {
// A host context copies with memcpy, which cannot reach an accelerator's memory; a device context
// can (it stages host memory itself), so such a copy belongs there.
void check_host_reachable(const Context& ctx, const void* dst, const void* src,
                          std::source_location loc) {
  for (const void* p : {dst, src}) {
    auto found = Tracker::instance().find_memory(p);
    if (!found || !found->attributes.device) continue;
    const Device& d = *found->attributes.device;
    if (d.backend == "host" || found->attributes.type != MemoryType::device) continue;
    throw Error(Errc::invalid_argument,
                "copy: the " + std::string(p == dst ? "destination" : "source") + " is memory of " +
                    d.to_string() + ", which the host context '" + ctx.name() +
                    "' cannot reach; issue the copy on a context of " + d.to_string() +
                    " (it reads and writes host memory too)",
                loc);
  }
}
}  // namespace

namespace {
// Where registered memory lies, for a capture's copy and memset nodes (SimpleOp).
SimpleOp::Place place_of(const std::optional<RegisteredMemory>& m, const Context& ctx,
                         int& device) {
  if (!m) return SimpleOp::Place::unknown;
  const auto& a = m->attributes;
  switch (a.type) {
    case MemoryType::device:
      if (!a.device || a.device->backend != ctx.device().backend) return SimpleOp::Place::unknown;
      device = a.device->index;
      return SimpleOp::Place::device;
    case MemoryType::pinned:
      return SimpleOp::Place::pinned;
    case MemoryType::host:
      return SimpleOp::Place::pageable;
    case MemoryType::managed:
      break;
  }
  return SimpleOp::Place::unknown;
}

/// Adds `bytes` at `p` to `accesses`: by `found`'s id when it holds them (the tracker need not
/// look the memory up again), else as a raw use the tracker resolves (and reports, if it
/// overruns `found`).
void add_access(AccessList& accesses, const std::optional<RegisteredMemory>& found, const void* p,
                std::size_t bytes, Access mode) {
  if (found) {
    const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(p) -
                                                 static_cast<const std::byte*>(found->base));
    if (offset <= found->attributes.size && bytes <= found->attributes.size - offset) {
      accesses.add(found->id, {offset, bytes}, mode);
      return;
    }
  }
  accesses.raw(p, bytes, mode);
}
}  // namespace

void copy_bytes(const Context& ctx, void* dst, const void* src, std::size_t bytes,
                std::source_location loc) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    throw Error(Errc::invalid_argument, "copy: null pointer with a non-empty size", loc);
  }
  auto& c = ctx.impl();
  SimpleOp simple{SimpleOp::Kind::copy, dst, src, bytes, 0};
  // A replay recording the copy it recorded last time: its checks passed then, on this memory.
  if (c.capture_expects() && issue_expected(c, "copy", loc, simple) != 0) return;
  if (ctx.device().backend == "host") check_host_reachable(ctx, dst, src, loc);
  AccessList accesses;
  if (c.capturing()) {
    // A graph replays the copy later: pageable memory would be read or written at launch time
    // without the staging that makes an eager copy safe, so only sluice memory is allowed.
    auto& t = Tracker::instance();
    for (const bool is_dst : {true, false}) {
      const void* p = is_dst ? static_cast<const void*>(dst) : src;
      auto m = t.find_memory(p);
      if (!m || m->attributes.type == MemoryType::host) {
        c.refuse_if_capturing("a copy from or to pageable host memory (use a PinnedBuffer)", loc);
      }
      (is_dst ? simple.dst_place : simple.src_place) =
          place_of(m, ctx, is_dst ? simple.dst_device : simple.src_device);
      add_access(accesses, m, p, bytes, is_dst ? Access::write : Access::read);
    }
  } else {
    accesses.raw(dst, bytes, Access::write).raw(src, bytes, Access::read);
  }
  issue_tracked(c, accesses, "copy", loc, simple,
                [&](Stream& s, const OpInfo& op) { s.copy(dst, src, bytes, op); });
}

void memset_bytes(const Context& ctx, void* dst, int value, std::size_t bytes,
                  std::source_location loc) {
  if (bytes == 0) return;
  if (dst == nullptr) throw Error(Errc::invalid_argument, "memset: null pointer", loc);
  auto& c = ctx.impl();
  SimpleOp simple{SimpleOp::Kind::memset, dst, nullptr, bytes, value};
  if (c.capture_expects() && issue_expected(c, "memset", loc, simple) != 0) return;
  AccessList accesses;
  if (c.capturing()) {
    const auto m = Tracker::instance().find_memory(dst);
    simple.dst_place = place_of(m, ctx, simple.dst_device);
    add_access(accesses, m, dst, bytes, Access::write);
  } else {
    accesses.raw(dst, bytes, Access::write);
  }
  issue_tracked(c, accesses, "memset", loc, simple,
                [&](Stream& s, const OpInfo& op) { s.memset(dst, value, bytes, op); });
}

}  // namespace detail

void set_pool_options(const Device& device, const PoolOptions& options) {
  (void)device_info(device);
  find_backend(device.backend)->set_pool_release_threshold(device.index, options.release_threshold);
}

void trim_pool(const Device& device, std::size_t keep_bytes) {
  (void)device_info(device);
  find_backend(device.backend)->trim_pool(device.index, keep_bytes);
}

std::size_t pool_reserved(const Device& device) {
  (void)device_info(device);
  return find_backend(device.backend)->pool_reserved(device.index);
}

}  // namespace sluice
