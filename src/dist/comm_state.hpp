#pragma once
// A communicator's shared state (sluice/dist.hpp's Comm and Rank are handles to it), and the one
// way the dist layer issues communication: a tracked operation of a context (deps/issue.hpp)
// whose accesses are the buffers it reads and writes plus the rank's ordering object.

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "deps/access_list.hpp"
#include "dist/process.hpp"
#include "sluice/dist.hpp"

namespace sluice::dist::detail {

using sluice::detail::AccessList;
using sluice::detail::dist::ProcComm;
using sluice::detail::dist::RankMap;

struct CommState {
  std::string name;
  std::shared_ptr<ProcComm> procs;
  RankMap map;
  std::vector<Context> contexts;  // this process's ranks
  std::vector<int> ranks;         // their ranks
  /// Per local rank: the tracked object every one of its communication operations reads and
  /// writes, so that they run in issue order whichever of the rank's contexts issued them.
  std::vector<ObjectId> order;
  std::shared_ptr<DistEngine> engine;
  DistKernels* kernels = nullptr;
  /// for_each_local runs ranks on threads of their own (an engine that needs a thread per device).
  bool threads = false;

  CommState() = default;
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  ~CommState();

  [[nodiscard]] int size() const noexcept { return map.size(); }
  [[nodiscard]] int locals() const noexcept { return static_cast<int>(contexts.size()); }

  /// Throws Error naming `what` unless ctx is on local rank `local`'s device.
  void check_context(int local, const Context& ctx, std::string_view what,
                     std::source_location loc) const;
  /// Throws Error unless `rank` is a rank of this communicator.
  void check_rank(int rank, std::string_view what, std::source_location loc) const;

  /// Issues `work(Stream&, const OpInfo&)` on ctx as local rank `local`'s communication:
  /// ordered after its earlier communication and by `acc`.
  template <class Work>
  void issue(int local, const Context& ctx, AccessList& acc, std::string_view what,
             std::source_location loc, Work&& work) const;

  /// Runs fn(local) for every local rank (on threads when `threads` or `on_threads`),
  /// rethrowing the first exception after all returned. Work that waits on the host for other
  /// ranks (a solve) needs threads whatever the engine.
  void each(const std::function<void(int)>& fn, bool on_threads = false) const;

  /// Reduces local rank `local`'s device value in place across ranks, on ctx (unchecked: the
  /// dist layer's own reductions).
  void allreduce_value(int local, Managed<double>& v, DistOp op, const Context& ctx,
                       std::source_location loc) const;
};

}  // namespace sluice::dist::detail

#include "deps/issue.hpp"

namespace sluice::dist::detail {

template <class Work>
void CommState::issue(int local, const Context& ctx, AccessList& acc, std::string_view what,
                      std::source_location loc, Work&& work) const {
  acc.read_write(order[static_cast<std::size_t>(local)]);
  sluice::detail::issue_tracked(ctx.impl(), acc, what, loc, std::forward<Work>(work));
}

}  // namespace sluice::dist::detail
