// Issuing a command group: its dependencies become waits (events) and tracker marks (accessors,
// tracked USM), then the kernel is one operation of the chosen context.

#include <chrono>
#include <string>

#include "dataflow/state.hpp"
#include "dataflow/submit_profile.hpp"
#include "sluice/error.hpp"

namespace sluice::dataflow::detail {

void apply_writes(SubmitState& s, std::uint64_t seq);  // buffer.cpp

namespace {
void check_not_launched(const SubmitState& s, const char* what, std::source_location loc) {
  s.require_active(what, loc);
  if (s.launched) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    " after the command group's kernel was issued; a command group runs one "
                    "kernel, named last: declare accessors and dependencies before it",
                loc);
  }
}
}  // namespace

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void require_memory(SubmitState& s, const void* ptr, std::size_t bytes, Access mode,
                    std::source_location loc) {
  check_not_launched(s, "Handler::use", loc);
  if (bytes == 0) return;
  auto region = find_memory(ptr);
  if (!region) {
    throw Error(Errc::invalid_argument,
                "Handler::use: the pointer is not memory sluice tracks; allocate it with "
                "malloc_device / malloc_host / malloc_shared",
                loc);
  }
  const auto off = static_cast<std::size_t>(static_cast<const std::byte*>(ptr) -
                                            static_cast<const std::byte*>(region->base));
  if (off + bytes > region->attributes.size) {
    throw Error(Errc::invalid_argument,
                "Handler::use: " + std::to_string(bytes) +
                    " bytes run past the end of the "
                    "allocation (" +
                    std::to_string(region->attributes.size - off) +
                    " bytes left); pass the element count actually used",
                loc);
  }
  s.accesses.add(region->id, {off, bytes}, mode);
}

std::size_t allocate_local(SubmitState& s, std::size_t bytes, std::size_t align,
                           std::source_location loc) {
  check_not_launched(s, "local_accessor created", loc);
  align = std::max<std::size_t>(align, 16);
  const std::size_t offset = (s.local_bytes + align - 1) / align * align;
  s.local_bytes = offset + bytes;
  s.has_local = true;
  return offset;
}

void place(SubmitState& s, std::uint64_t timeline, std::uint64_t seq) noexcept {
  if (s.placed) return;
  s.placed = true;
  const auto& contexts = s.queue->contexts;
  if (contexts.size() < 2 || timeline == 0) return;
  for (const auto& c : contexts) {
    if (c.impl().timeline() != timeline) continue;
    // Nothing issued after the dependency: running here waits for nothing else.
    if (c.impl().issued() == seq) s.ctx = &c;
    return;
  }
}

void add_dependency(SubmitState& s, const Event& e, std::source_location loc) {
  check_not_launched(s, "depends_on", loc);
  const auto& point = EventAccess::point(e);
  if (!point) return;  // a default event: complete
  auto& ctx = *EventAccess::context(e);
  const std::uint64_t seq = EventAccess::seq(e);
  place(s, ctx.timeline(), seq);
  // On the same context, issue order covers it. Otherwise the wait also carries a failure of the
  // event's group over to this one, so it is issued even when that group completed.
  if (&ctx == &s.ctx->impl()) return;
  s.waits.push_back(ctx.point_event(*point, loc));
}

void check_plain_range(SubmitState& s, std::source_location loc) {
  s.require_active("a kernel", loc);
  if (s.has_local) {
    throw Error(Errc::invalid_argument,
                "a local_accessor was created for a plain range kernel (single_task or "
                "parallel_for(range)); work-group local memory exists only in "
                "parallel_for(nd_range) kernels",
                loc);
  }
}

void check_nd_range(const std::size_t* global, const std::size_t* local, int dims,
                    std::source_location loc) {
  std::size_t items = 1;
  for (int d = 0; d < dims; ++d) {
    if (local[d] == 0 || global[d] % local[d] != 0) {
      throw Error(Errc::invalid_argument,
                  "nd_range: global extent " + std::to_string(global[d]) + " of dimension " +
                      std::to_string(d) + " is not a multiple of the local extent " +
                      std::to_string(local[d]) + "; round the global range up and guard",
                  loc);
    }
    items *= local[d];
  }
  if (items > 1024) {
    throw Error(Errc::invalid_argument,
                "nd_range: a work-group of " + std::to_string(items) +
                    " work-items; at most 1024 are supported (the cuda limit)",
                loc);
  }
}

void launch(SubmitState& s, const KernelDesc& k, std::source_location loc) {
  s.require_active("a kernel", loc);
  check_not_launched(s, "a second kernel", loc);
  QueueState& q = *s.queue;
  if (k.host_run != nullptr) {
    if (q.backend == BackendKind::cuda && k.device_launch == nullptr) {
      throw Error(Errc::unsupported,
                  std::string(k.what) + " on queue '" + q.name + "' (" + q.device.to_string() +
                      ") has no device code: compile this file with nvcc --extended-lambda and "
                      "include <sluice/dataflow_cuda.cuh> before other dataflow headers",
                  loc);
    }
    if (q.backend == BackendKind::other) {
      throw Error(Errc::unsupported,
                  "the dataflow layer runs kernels on the host and cuda backends only, not on " +
                      q.device.to_string(),
                  loc);
    }
  }
  if (k.host_run == nullptr) return issue_group(s, k.what, loc, nullptr, nullptr);
  struct Run {
    const KernelDesc& k;
    SubmitState& s;
    std::source_location loc;
  } run{k, s, loc};
  // Host kernels run user code that may throw: failures must be reported at the next wait.
  if (q.backend == BackendKind::host) s.ctx->impl().failures()->set_may_fail();
  issue_group(
      s, k.what, loc,
      [](Stream& st, const OpInfo& op, void* raw) {
        auto& r = *static_cast<Run*>(raw);
        const KernelDesc& kd = r.k;
        const std::size_t local = r.s.local_bytes;
        if (r.s.queue->backend == BackendKind::host) {
          st.host_task(
              [task = kd.copy(kd.task), fn = kd.host_run, local] { fn(task.get(), local); }, op);
          return;
        }
        // Reductions' partial results: stream-ordered scratch, released right after the launch
        // (the release is ordered after it too).
        void* scratch = kd.scratch_bytes != 0 ? st.allocate(kd.scratch_bytes, op) : nullptr;
        const char* err = kd.device_launch(st.native_handle(), kd.task, local, scratch);
        if (scratch != nullptr) st.deallocate(scratch, kd.scratch_bytes);
        if (err != nullptr) {
          throw Error(Errc::backend_failure,
                      std::string(kd.what) + ": the kernel launch failed with " + err +
                          (local > 48 * 1024 ? " (local memory above 48 KiB per group)" : ""),
                      r.loc);
        }
      },
      &run);
}

void issue_group(SubmitState& s, const char* what, std::source_location loc,
                 void (*work)(Stream&, const OpInfo&, void*), void* state) {
  check_not_launched(s, what, loc);
  QueueState& q = *s.queue;
  const Context& ctx = *s.ctx;
  auto& c = ctx.impl();
  s.launched = true;
  s.placed = true;
  PhaseClock clock;  // the command-group function so far, then each step (submit_profile.hpp)
  if (clock.on()) clock.restart_from(s.profile_from);
  clock.mark(SubmitPhase::cgf);
  for (const auto& e : s.waits) c.wait(e, loc);
  clock.mark(SubmitPhase::waits);
  const bool profiling = q.profiling && !c.capturing();
  std::shared_ptr<Profile> profile;
  if (profiling) {
    profile = std::make_shared<Profile>();
    profile->submit_ns = steady_ns();
    profile->epoch = q.epoch(ctx);
  }
  // The command group's end: an event is recorded for it only if its Event is still held when
  // the context issues its next operation, or is waited on or depended on before that.
  std::shared_ptr<sluice::detail::DeferredPoint> point;
  std::uint64_t seq = 0;
  bool deferred = false;
  auto enqueue = [&] {
    if (work == nullptr) return;
    c.enqueue(what, loc, [&](Stream& st, const OpInfo& op) {
      clock.mark(SubmitPhase::enqueue);
      if (profile) profile->start = st.record(true, op);
      work(st, op, state);
      if (profile) profile->end = st.record(true, op);
      clock.mark(SubmitPhase::launch);
      seq = op.seq;
      point = c.spare_point();
      deferred = c.defer_point(point, op.seq);
      clock.mark(SubmitPhase::point);
    });
  };
  sluice::detail::issue_tracked(c, s.accesses, what, loc, enqueue);
  clock.mark(SubmitPhase::enqueue);
  if (!deferred) {
    // No operation (the group completes after its dependencies), or a capturing context.
    point = std::make_shared<sluice::detail::DeferredPoint>();
    point->event = c.record(profile != nullptr, loc);
    seq = point->event->seq;
    point->seq = seq;
    if (profile && !profile->start) profile->start = profile->end = point->event;
  }
  apply_writes(s, seq);
  propagate_gates(c, seq);
  s.result = EventAccess::make(ctx.shared_impl(), std::move(point), seq, std::move(profile));
  clock.mark(SubmitPhase::after);
  if (clock.on()) s.profile_from = clock.last();
}

}  // namespace sluice::dataflow::detail
