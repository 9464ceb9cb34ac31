// The commands a command group may name instead of a kernel (SYCL 2020 handler::memcpy, copy,
// memset, fill, update_host): one operation of the group's context each, through the same path
// as kernels (issue_group, hence issue_tracked), so events, depends_on, placement, gates and
// profiling apply to them alike.

#include <cstring>
#include <string>

#include "dataflow/state.hpp"
#include "memory/fill_impl.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/fill.hpp"

namespace sluice::dataflow::detail {
namespace {

[[nodiscard]] std::size_t bytes_of(const Region& r) {
  return r.elements() * r.elem;
}

/// Whether the elements of `r` are one contiguous run of bytes.
[[nodiscard]] bool contiguous(const Region& r) {
  const bool rows = r.count[1] == 1 || r.count[0] * r.elem == r.pitch[1];
  const bool planes = r.count[2] == 1 || r.count[1] * r.pitch[1] == r.pitch[2];
  return rows && planes;
}

void check_pointer(const void* p, std::size_t bytes, const char* what, const char* side,
                   std::source_location loc) {
  if (p == nullptr && bytes != 0) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the " + side + " is a null pointer with " +
                    std::to_string(bytes) + " bytes to move",
                loc);
  }
}

}  // namespace

void command_copy(SubmitState& s, const Region& dst, const Region& src, const char* what,
                  std::source_location loc) {
  const std::size_t bytes = bytes_of(src);
  if (bytes_of(dst) != bytes) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the source holds " + std::to_string(bytes) +
                    " bytes and the destination " + std::to_string(bytes_of(dst)) +
                    "; copy between regions of the same size",
                loc);
  }
  if (!contiguous(dst) || !contiguous(src)) {
    throw Error(Errc::unsupported,
                std::string(what) +
                    ": a ranged accessor whose rows are not contiguous in its buffer; copy whole "
                    "rows (a range spanning the buffer's trailing extents), or copy the elements "
                    "in a parallel_for",
                loc);
  }
  check_pointer(dst.ptr, bytes, what, "destination", loc);
  check_pointer(src.ptr, bytes, what, "source", loc);
  // USM and host memory the tracker knows are ordered like `Handler::use`; accessors were
  // marked when they were made.
  s.accesses.raw(dst.ptr, bytes, Access::write).raw(src.ptr, bytes, Access::read);
  struct Copy {
    void* dst;
    const void* src;
    std::size_t bytes;
  } c{dst.ptr, src.ptr, bytes};
  issue_group(
      s, what, loc,
      bytes == 0 ? nullptr
                 : +[](Stream& st, const OpInfo& op, void* raw) {
                     const auto& k = *static_cast<Copy*>(raw);
                     st.copy(k.dst, k.src, k.bytes, op);
                   },
      &c);
}

void command_memset(SubmitState& s, void* ptr, int value, std::size_t bytes,
                    std::source_location loc) {
  check_pointer(ptr, bytes, "memset", "destination", loc);
  s.accesses.raw(ptr, bytes, Access::write);
  struct Set {
    void* ptr;
    int value;
    std::size_t bytes;
  } m{ptr, value, bytes};
  issue_group(
      s, "memset", loc,
      bytes == 0 ? nullptr
                 : +[](Stream& st, const OpInfo& op, void* raw) {
                     const auto& k = *static_cast<Set*>(raw);
                     st.memset(k.ptr, k.value, k.bytes, op);
                   },
      &m);
}

void command_fill(SubmitState& s, const Region& dst, const void* pattern, const char* what,
                  std::source_location loc) {
  const std::size_t bytes = bytes_of(dst);
  check_pointer(dst.ptr, bytes, what, "destination", loc);
  if (dst.elem > FillArgs::kMaxPattern) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": elements of " + std::to_string(dst.elem) +
                    " bytes; at most " + std::to_string(FillArgs::kMaxPattern) +
                    " are supported (write them with a parallel_for)",
                loc);
  }
  if (bytes != 0) sluice::detail::check_fill_target(*s.ctx, dst.ptr, loc);
  FillArgs args;
  args.dst = dst.ptr;
  args.elem = dst.elem;
  for (int i = 0; i < 3; ++i) {
    args.count[i] = dst.count[i];
    args.pitch[i] = dst.pitch[i];
  }
  std::memcpy(args.pattern, pattern, dst.elem);
  if (contiguous(dst)) s.accesses.raw(dst.ptr, bytes, Access::write);
  struct Work {
    FillArgs args;
    Fill* impl;
  } w{args, bytes == 0 ? nullptr : &s.ctx->impl().extension<Fill>(loc)};
  issue_group(
      s, what, loc,
      bytes == 0 ? nullptr
                 : +[](Stream& st, const OpInfo& op, void* raw) {
                     const auto& k = *static_cast<Work*>(raw);
                     k.impl->fill(st, k.args, op);
                   },
      &w);
}

void command_update_host(SubmitState& s, const void* device_ptr, std::source_location loc) {
  // The buffer whose copy the accessor points into (accessors of this group keep theirs alive).
  std::shared_ptr<BufferState> buffer;
  const BufferState::Copy* copy = nullptr;
  const auto* p = static_cast<const std::byte*>(device_ptr);
  for (const auto& b : s.buffers) {
    std::lock_guard lock(b->mutex);
    for (const auto& c : b->copies) {
      if (p >= c->ptr && p <= c->ptr + b->bytes) {
        buffer = b;
        copy = c.get();
      }
    }
  }
  if (!buffer || copy == nullptr) {
    throw Error(Errc::invalid_argument,
                "update_host: the accessor does not belong to this command group; make it with "
                "buffer.get_access(h) in the same command group",
                loc);
  }
  std::byte* host = nullptr;
  std::size_t bytes = 0;
  {
    std::lock_guard lock(buffer->mutex);
    buffer->ensure_host(loc);
    host = buffer->host;
    bytes = buffer->bytes;
    s.accesses.add(buffer->host_id, {buffer->host_offset, bytes}, Access::write);
  }
  s.host_updated.push_back(buffer);
  struct Copy {
    void* dst;
    const void* src;
    std::size_t bytes;
  } c{host, copy->ptr, bytes};
  issue_group(
      s, "update_host", loc,
      bytes == 0 ? nullptr
                 : +[](Stream& st, const OpInfo& op, void* raw) {
                     const auto& k = *static_cast<Copy*>(raw);
                     st.copy(k.dst, k.src, k.bytes, op);
                   },
      &c);
}

}  // namespace sluice::dataflow::detail
