#pragma once
// The one path for tracked work. Every layer that issues an operation touching tracked memory
// (copies, memsets, la and scalar kernels, typed kernels, canned operations, dataflow command
// groups, graph launches) describes it as an AccessList and calls issue_tracked: the tracker
// makes the context wait for conflicting earlier work on other contexts, the work is enqueued,
// the accesses are recorded at its operation number, and a blocking context completes it.

#include <cstdint>
#include <memory>
#include <source_location>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/context_impl.hpp"
#include "deps/access_list.hpp"

namespace sluice::detail {

/// Runs `enqueue()` under the tracker's lock, after ctx's waits for `accesses`, then records the
/// accesses at ctx's last operation and completes blocking work. `enqueue` issues at most one
/// operation on ctx (through `ctx.enqueue`); issuing none records the accesses at ctx's current
/// point (a dataflow group without a kernel). The layers call the typed forms below.
void issue_tracked_raw(ContextImpl& ctx, const AccessList& accesses, std::string_view what,
                       std::source_location where, void (*enqueue)(void*), void* state);

/// A copy or memset `simple` issued on a capturing ctx: when a replay's capture expects exactly
/// it next (the node its previous recording has there), records it with that node's uses,
/// checked by the tracker, without an access list. Returns the operation's number, or 0 when
/// the caller must issue it as usual (issue_tracked with its accesses).
[[nodiscard]] std::uint64_t issue_expected(ContextImpl& ctx, std::string_view what,
                                           std::source_location where, const SimpleOp& simple);

/// Issues `work(Stream&, const OpInfo&)` as one operation `what` of ctx, ordered by `accesses`.
/// Returns the operation's number.
template <class Work>
requires std::is_invocable_v<Work&, Stream&, const OpInfo&> std::uint64_t issue_tracked(
    ContextImpl& ctx, const AccessList& accesses, std::string_view what, std::source_location where,
    Work&& work) {
  struct State {
    ContextImpl& ctx;
    std::string_view what;
    std::source_location where;
    Work& work;
    std::uint64_t seq = 0;
  } state{ctx, what, where, work};
  issue_tracked_raw(
      ctx, accesses, what, where,
      [](void* p) {
        auto& s = *static_cast<State*>(p);
        s.seq =
            s.ctx.enqueue(s.what, s.where, [&s](Stream& st, const OpInfo& op) { s.work(st, op); });
      },
      &state);
  return state.seq;
}

/// As above for a copy or memset that `simple` describes: a capture may record it as a copy or
/// memset node of its own.
template <class Work>
requires std::is_invocable_v<Work&, Stream&, const OpInfo&> std::uint64_t issue_tracked(
    ContextImpl& ctx, const AccessList& accesses, std::string_view what, std::source_location where,
    const SimpleOp& simple, Work&& work) {
  struct State {
    ContextImpl& ctx;
    std::string_view what;
    std::source_location where;
    const SimpleOp& simple;
    Work& work;
    std::uint64_t seq = 0;
  } state{ctx, what, where, simple, work};
  issue_tracked_raw(
      ctx, accesses, what, where,
      [](void* p) {
        auto& s = *static_cast<State*>(p);
        s.seq = s.ctx.enqueue(s.what, s.where, s.simple,
                              [&s](Stream& st, const OpInfo& op) { s.work(st, op); });
      },
      &state);
  return state.seq;
}

/// The general form: `enqueue()` issues at most one operation on ctx itself (for callers that
/// must do more inside the context's issue order, such as deferring an event point).
template <class Enqueue>
requires std::is_invocable_v<Enqueue&>
void issue_tracked(ContextImpl& ctx, const AccessList& accesses, std::string_view what,
                   std::source_location where, Enqueue&& enqueue) {
  issue_tracked_raw(
      ctx, accesses, what, where,
      [](void* p) { (*static_cast<std::remove_reference_t<Enqueue>*>(p))(); },
      const_cast<void*>(static_cast<const void*>(std::addressof(enqueue))));
}

}  // namespace sluice::detail
