// Host graphs run as task DAGs on the host backend's shared pool (host_parallel.hpp): a node
// becomes ready when its last predecessor finished, ready nodes are taken by whichever worker is
// free (the launching context's thread among them), kernel nodes split their range into chunks
// over the same pool, and conditional nodes read their device integer (host memory here) when
// they start, as a cuda conditional node does on the device. Not oneTBB: its runtime is not
// instrumented for ThreadSanitizer, which then reports its task handoffs as races, and every
// graph test runs under TSan in CI (docs/graph.md).
#include "backends/host/host_graph.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <type_traits>
#include <variant>

#include "backends/host/host_parallel.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/graph_ir.hpp"

namespace sluice::detail::host {
namespace {

using ir::Graph;

struct Recording {
  std::vector<std::function<void()>> ops;
};

/// The point of an event record node in one launch: complete once the node ran (or the launch
/// ended without running it, after a failure).
class NodePoint final : public EventImpl {
 public:
  bool query() override {
    std::lock_guard lock(mutex_);
    return done_;
  }
  void synchronize() override {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
  }
  double elapsed_ms_since(const EventImpl&) override {
    throw Error(Errc::invalid_argument, "an event recorded by a graph node has no time");
  }
  void fire() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

/// The event points of one launch, by node index of the launched graph.
struct LaunchPoints {
  std::vector<std::shared_ptr<NodePoint>> records;
  std::vector<std::shared_ptr<EventImpl>> waits;
  LaunchPoints() = default;
  LaunchPoints(const LaunchPoints&) = delete;
  LaunchPoints& operator=(const LaunchPoints&) = delete;
  ~LaunchPoints() {
    for (auto& r : records) {
      if (r) r->fire();  // a launch that failed first must not leave waiters hanging
    }
  }
};

/// What running a graph needs besides its nodes, from its topology alone: made once per
/// instantiation for the launched graph (an update keeps the topology), per run for nested ones.
struct Schedule {
  std::vector<std::vector<std::uint32_t>> succ;
  std::vector<std::uint32_t> pending;  // predecessors per node
  std::vector<std::uint32_t> chain;    // the nodes in order, when never two are ready at once
  bool defaults = false;               // some conditional node has a default to assign
};

Schedule schedule_of(const Graph& g) {
  const auto count = g.nodes.size();
  Schedule s;
  s.succ.resize(count);
  s.pending.assign(count, 0);
  for (auto [a, b] : g.edges) {
    s.succ[a].push_back(b);
    ++s.pending[b];
  }
  for (const auto& n : g.nodes) {
    if (const auto* c = ir::condition(n); c && c->initial) s.defaults = true;
  }
  // A chain (never two nodes ready at once: a capture of one context, a solver's loop) runs on
  // the calling thread, node after node, so that a node's own data-parallel loops have the
  // whole pool. Handing a chain to the pool's workers gains nothing and, with the workers
  // parked on the graph, leaves those loops one thread (measured on 2 cores: graph-mode CG
  // twice as slow as async mode from 3e5 nonzeros).
  std::vector<std::uint32_t> ready, left = s.pending;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (left[i] == 0) ready.push_back(i);
  }
  std::vector<std::uint32_t> order;
  order.reserve(count);
  while (ready.size() == 1) {
    const auto i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (auto n : s.succ[i]) {
      if (--left[n] == 0) ready.push_back(n);
    }
  }
  if (order.size() == count) s.chain = std::move(order);
  return s;
}

void run_graph(const Graph& g, LaunchPoints* events = nullptr, const Schedule* schedule = nullptr);

void run_node(const Graph& g, std::uint32_t i, LaunchPoints* events) {
  const ir::Node& n = g.nodes[i];
  try {
    // Kernels' ranges split into chunks of kGrain: big enough that a chunk outweighs its
    // scheduling, small enough to share.
    constexpr std::size_t kGrain = 4096;
    std::visit(
        [&](const auto& p) {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, ir::Kernel>) {
            const auto& k = p.work;
            auto chunk = [&](std::size_t c) {
              k.host(c * kGrain, std::min(k.range, (c + 1) * kGrain));
            };
            parallel_chunks((k.range + kGrain - 1) / kGrain, chunk);
          } else if constexpr (std::is_same_v<P, ir::Copy>) {
            if (p.bytes != 0) std::memmove(p.dst, p.src, p.bytes);
          } else if constexpr (std::is_same_v<P, ir::Memset>) {
            if (p.bytes != 0) std::memset(p.dst, p.value, p.bytes);
          } else if constexpr (std::is_same_v<P, ir::Host>) {
            p.fn();
          } else if constexpr (std::is_same_v<P, ir::Child>) {
            run_graph(*p.graph);
          } else if constexpr (std::is_same_v<P, ir::If>) {
            if (p.cond.read()) {
              run_graph(*p.then_graph);
            } else if (p.else_graph) {
              run_graph(*p.else_graph);
            }
          } else if constexpr (std::is_same_v<P, ir::While>) {
            while (p.cond.read()) run_graph(*p.body);
          } else if constexpr (std::is_same_v<P, ir::Captured>) {
            for (const auto& op : static_cast<const Recording*>(p.recording.get())->ops) op();
          } else if constexpr (std::is_same_v<P, ir::EventRecord>) {
            events->records[i]->fire();
          } else if constexpr (std::is_same_v<P, ir::EventWait>) {
            if (const auto& w = events->waits[i]) {
              w->synchronize();
              if (w->failures) {
                if (auto f = w->failures->at_or_before(w->seq)) {
                  throw Error(Errc::work_failed, "graph '" + g.name + "' node " +
                                                     std::to_string(i) + " '" + n.name +
                                                     "' waited for failed work ('" + f->operation +
                                                     "': " + f->cause + ")");
                }
              }
            }
          } else {
            static_assert(std::is_same_v<P, ir::Empty> || std::is_same_v<P, ir::Alloc> ||
                              std::is_same_v<P, ir::Free>,
                          "every node kind is run or known to do nothing");
          }
        },
        n.params);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Errc::work_failed, "graph '" + g.name + "' node " + std::to_string(i) + " '" +
                                       n.name + "': " + e.what());
  }
}

void run_graph(const Graph& g, LaunchPoints* events, const Schedule* schedule) {
  const auto count = g.nodes.size();
  if (count == 0) return;
  std::optional<Schedule> own;
  if (schedule == nullptr) schedule = &own.emplace(schedule_of(g));
  // Conditional defaults are assigned as the graph starts, before any of its nodes (as CUDA's
  // cudaGraphCondAssignDefault).
  if (schedule->defaults) {
    for (const auto& n : g.nodes) {
      if (const auto* c = ir::condition(n); c && c->initial) c->assign_initial();
    }
  }
  if (!schedule->chain.empty()) {
    for (auto i : schedule->chain) run_node(g, i, events);
    return;
  }
  const auto& succ = schedule->succ;
  std::vector<std::uint32_t> pending = schedule->pending;
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::uint32_t> ready;
    std::size_t done = 0;
    std::exception_ptr error;
  } st;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (pending[i] == 0) st.ready.push_back(i);
  }
  // Every worker takes ready nodes until the graph is done; the calling thread is one of them,
  // so the graph progresses even when every pool thread is busy elsewhere.
  auto worker = [&](std::size_t) {
    for (;;) {
      std::uint32_t i;
      {
        std::unique_lock lock(st.mutex);
        st.cv.wait(lock, [&] { return !st.ready.empty() || st.done == count || st.error; });
        if (st.done == count || st.error) return;
        i = st.ready.front();
        st.ready.pop_front();
      }
      std::exception_ptr error;
      try {
        run_node(g, i, events);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock(st.mutex);
        ++st.done;
        if (error && !st.error) st.error = error;
        for (auto s : succ[i]) {
          if (--pending[s] == 0) st.ready.push_back(s);
        }
      }
      st.cv.notify_all();
    }
  };
  const std::size_t workers = std::min<std::size_t>(count, parallel_threads() + 1);
  parallel_chunks(workers, worker);
  if (st.error) std::rethrow_exception(st.error);
}

void check(const Graph& g) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    if (const auto* k = std::get_if<ir::Kernel>(&n.params); k && !k->work.host) {
      throw Error(Errc::unsupported,
                  "kernel node " + std::to_string(i) + " '" + n.name +
                      "' has no host function (only a cuda kernel); give it KernelWork::host to "
                      "run on the host backend");
    }
    if (const auto* c = std::get_if<ir::Captured>(&n.params); c && c->recording == nullptr) {
      throw Error(Errc::unsupported, "captured node '" + n.name + "' has no recording");
    }
    for (const auto& child : ir::nested(n)) check(*child);
  }
}

class HostGraph final : public GraphExecutable {
 public:
  explicit HostGraph(ir::GraphPtr g) {
    check(*g);
    schedule_ = std::make_shared<const Schedule>(schedule_of(*g));
    graph_ = std::move(g);
  }

  void launch(Stream& stream, const OpInfo& op, const std::shared_ptr<FailureState>& failures,
              ir::LaunchEvents& points) override {
    // The launch is one task of the context's queue; its nodes fan out on the shared pool. Each
    // launch keeps the parameters it was issued with (updates give a new graph).
    std::shared_ptr<LaunchPoints> events;
    const auto& nodes = graph_->nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const bool record = std::holds_alternative<ir::EventRecord>(nodes[i].params);
      if (!record && !std::holds_alternative<ir::EventWait>(nodes[i].params)) continue;
      if (!events) {
        events = std::make_shared<LaunchPoints>();
        events->records.resize(nodes.size());
        events->waits.resize(nodes.size());
      }
      if (!record) {
        events->waits[i] = points.waits.at(i);
        continue;
      }
      auto p = std::make_shared<NodePoint>();
      p->failures = failures;
      p->seq = op.seq - 1;  // complete means at least all earlier work of the context is
      p->device = Device{"host", 0};
      events->records[i] = std::move(p);
    }
    stream.host_task([g = graph_, s = schedule_, events] { run_graph(*g, events.get(), s.get()); },
                     op);
    if (events) {
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (events->records[i]) points.records.at(i) = events->records[i];
      }
    }
  }

  std::string update(const ir::GraphPtr& graph) override {
    check(*graph);
    // The core checked the topology is the same: the schedule stays.
    graph_ = graph;
    return {};
  }

 private:
  // Each launch keeps the version of the graph it was issued with.
  ir::GraphPtr graph_;
  std::shared_ptr<const Schedule> schedule_;
};

}  // namespace

std::shared_ptr<void> make_recording(std::vector<std::function<void()>> ops) {
  auto r = std::make_shared<Recording>();
  r->ops = std::move(ops);
  return r;
}

std::unique_ptr<GraphExecutable> instantiate_host_graph(const ir::GraphPtr& graph) {
  return std::make_unique<HostGraph>(graph);
}

}  // namespace sluice::detail::host
