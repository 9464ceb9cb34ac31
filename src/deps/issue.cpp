#include "deps/issue.hpp"

#include "deps/tracker.hpp"

namespace sluice::detail {

void issue_tracked_raw(ContextImpl& ctx, const AccessList& accesses, std::string_view what,
                       std::source_location where, void (*enqueue)(void*), void* state) {
  if (accesses.empty()) {
    enqueue(state);
    ctx.finish_if_blocking();
    return;
  }
  // A one-pointer lambda: std::function keeps it without allocating.
  struct Call {
    void (*f)(void*);
    void* state;
  } call{enqueue, state};
  Tracker::instance().run(ctx, accesses, what, where, [&call] { call.f(call.state); });
}

std::uint64_t issue_expected(ContextImpl& ctx, std::string_view what, std::source_location where,
                             const SimpleOp& simple) {
  return Tracker::instance().run_expected(ctx, what, where, simple);
}

}  // namespace sluice::detail
