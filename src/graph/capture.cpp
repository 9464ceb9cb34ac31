// Capture and Replay: recording work issued on contexts into a Graph, and replaying it.
#include <chrono>
#include <map>
#include <mutex>

#include "graph/capture_state.hpp"
#include "graph/graph_exec_impl.hpp"
#include "graph/graph_stats.hpp"
#include "graph/replay_policy.hpp"
#include "sluice/error.hpp"
#include "sluice/graph.hpp"

namespace sluice {

Capture::Capture(const Context& ctx, std::string name, std::source_location loc)
    : state_(std::make_shared<detail::CaptureState>(ctx.shared_impl(), std::move(name), loc)) {
  state_->start();
}

Capture::~Capture() {
  if (state_) {
    state_->discard();
    state_->release_members();
  }
}

Graph Capture::end(std::source_location loc) {
  if (!state_) throw Error(Errc::invalid_state, "Capture::end called twice", loc);
  auto state = std::move(state_);
  return Graph(state->finish(loc));
}

bool Capture::active() const noexcept {
  return state_ && state_->active();
}

struct Replay::Impl {
  struct Entry {
    std::unique_ptr<detail::GraphExecImpl> exec;
    detail::ReplayPolicy policy;  // replay or issue eagerly, whichever costs less host time
  };
  std::mutex mutex;  // one replay at a time per cache
  std::map<std::string, Entry> cache;
  Callback callback;
  ReplayOptions options;

  void report(ReplayEvent::Kind kind, const std::string& key, std::string reason) {
    if (callback) callback({kind, key, std::move(reason)});
  }
};

Replay::Replay() : impl_(std::make_unique<Impl>()) {}
Replay::Replay(ReplayOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
Replay::~Replay() = default;
void Replay::on_event(Callback callback) {
  std::lock_guard lock(impl_->mutex);
  impl_->callback = std::move(callback);
}
std::size_t Replay::size() const noexcept {
  return impl_->cache.size();
}

void Replay::run(const Context& ctx, const std::string& key, const std::function<void()>& body,
                 std::source_location loc) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  std::lock_guard lock(impl_->mutex);
  auto found = impl_->cache.find(key);
  if (impl_->options.eager_when_cheaper && found != impl_->cache.end() && found->second.exec &&
      found->second.exec->device() == ctx.device() &&
      found->second.policy.next() == detail::ReplayPolicy::Choice::eager) {
    // Issuing the body as it is costs less host time than its recent replays did (or this run
    // measures that again): the same operations, run eagerly.
    auto& policy = found->second.policy;
    const bool was_ahead = policy.eager_ahead();
    const auto start = Clock::now();
    body();
    policy.ran_eagerly(seconds_since(start));
    detail::graph_stats().eager_cheaper.fetch_add(1, std::memory_order_relaxed);
    if (policy.eager_ahead() && !was_ahead) {
      impl_->report(ReplayEvent::Kind::eager_cheaper, key,
                    "a replay took " + std::to_string(policy.replay_seconds() * 1e6) +
                        " us of host time, issuing the body eagerly " +
                        std::to_string(policy.eager_seconds() * 1e6) + " us");
    }
    return;
  }
  const auto start = Clock::now();
  std::shared_ptr<detail::GraphData> graph;
  bool unchanged = false;
  try {
    Capture cap(ctx, key, loc);
    const auto state = cap.state_;
    if (found != impl_->cache.end() && found->second.exec) {
      const auto& exec = *found->second.exec;
      const auto& last = exec.graph();
      // A body that recorded on ctx alone last time is recorded without the tracker's marks:
      // the launch below orders the whole replay by the union of its accesses. A context that
      // joins makes the rest of the capture tracked again. Each operation is compared with
      // the last recording as it is recorded; if all of it matched, the capture hands that
      // recording back and the executable is launched as it is.
      if (last->single_context) state->set_untracked();
      if (last->single_context && exec.device() == ctx.device() && last->external_waits.empty() &&
          !last->has_events()) {
        state->expect(last);
      } else {
        state->reserve(last->ir.nodes.size());
      }
    }
    body();
    graph = cap.end(loc).data();
    unchanged = state->matched_previous();
  } catch (const Error& e) {
    if (e.code() != Errc::invalid_state) throw;
    // The capture guard (or an unjoined context): run the region as ordinary work instead.
    detail::graph_stats().eager_fallbacks.fetch_add(1, std::memory_order_relaxed);
    impl_->report(ReplayEvent::Kind::eager, key, e.what());
    body();
    return;
  }
  auto& entry = impl_->cache[key];
  bool instantiated = true;
  if (unchanged) {
    // The body recorded exactly the executable's graph: nothing to compare or update.
    detail::graph_stats().unchanged.fetch_add(1, std::memory_order_relaxed);
    instantiated = false;
  } else if (!entry.exec) {
    entry.exec = std::make_unique<detail::GraphExecImpl>(std::move(graph), ctx.device(), loc);
    impl_->report(ReplayEvent::Kind::instantiated, key, "first run");
  } else {
    std::string diff;
    if (entry.exec->device() != ctx.device()) {
      diff =
          "device " + ctx.device().to_string() + " instead of " + entry.exec->device().to_string();
    } else {
      diff = detail::topology_difference(entry.exec->graph()->ir, graph->ir);
    }
    if (diff.empty()) {
      diff = entry.exec->update(graph, loc);
      if (diff.empty()) {
        detail::graph_stats().updates.fetch_add(1, std::memory_order_relaxed);
        instantiated = false;
      } else {
        diff = "the backend could not update in place: " + diff;
        detail::graph_stats().reinstantiations.fetch_add(1, std::memory_order_relaxed);
        impl_->report(ReplayEvent::Kind::reinstantiated, key, diff);
      }
    } else {
      entry.exec = std::make_unique<detail::GraphExecImpl>(std::move(graph), ctx.device(), loc);
      detail::graph_stats().reinstantiations.fetch_add(1, std::memory_order_relaxed);
      impl_->report(ReplayEvent::Kind::reinstantiated, key, diff);
    }
  }
  entry.exec->launch(ctx, loc);
  entry.policy.replayed(seconds_since(start), instantiated);
}

void replay(const Context& ctx, const std::string& key, const std::function<void()>& body,
            std::source_location loc) {
  static Replay cache;
  cache.run(ctx, key, body, loc);
}

}  // namespace sluice
