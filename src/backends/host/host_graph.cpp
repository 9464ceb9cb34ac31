// Host graphs run as task DAGs on oneTBB: independent nodes run at once on its work-stealing
// pool, a node starts when its last predecessor finished, kernel nodes split their range with
// parallel_for, and conditional nodes read their device integer (host memory here) when they
// start, as a cuda conditional node does on the device.
#include "backends/host/host_graph.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>

#include <atomic>
#include <cstring>

#include "graph/graph_data.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::host {
namespace {

struct Recording {
  std::vector<std::function<void()>> ops;
};

bool condition(const NodeData& n) {
  const void* p = n.cond->buffer.data();
  if (n.cond_bytes == 8) {
    std::int64_t v;
    std::memcpy(&v, p, 8);
    return v != 0;
  }
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v != 0;
}

void run_graph(const GraphData& g);

void run_node(const GraphData& g, std::uint32_t i) {
  const NodeData& n = g.nodes[i];
  try {
    switch (n.kind) {
      case NodeKind::empty:
      case NodeKind::alloc:
      case NodeKind::free:
        break;
      case NodeKind::kernel: {
        const auto& k = n.kernel;
        // Grain: big enough that a chunk outweighs a task's cost, small enough to share.
        tbb::parallel_for(
            tbb::blocked_range<std::size_t>(0, k.range, 4096),
            [&](const tbb::blocked_range<std::size_t>& r) { k.host(r.begin(), r.end()); });
        break;
      }
      case NodeKind::copy:
        if (n.bytes != 0) std::memmove(n.dst, n.src, n.bytes);
        break;
      case NodeKind::memset:
        if (n.bytes != 0) std::memset(n.dst, n.value, n.bytes);
        break;
      case NodeKind::host:
        n.host();
        break;
      case NodeKind::child:
        run_graph(*n.graphs[0]);
        break;
      case NodeKind::if_then:
        if (condition(n)) {
          run_graph(*n.graphs[0]);
        } else if (n.graphs.size() > 1) {
          run_graph(*n.graphs[1]);
        }
        break;
      case NodeKind::while_loop:
        while (condition(n)) run_graph(*n.graphs[0]);
        break;
      case NodeKind::captured:
        for (const auto& op : static_cast<const Recording*>(n.payload.get())->ops) op();
        break;
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Errc::work_failed, "graph '" + g.name + "' node " + std::to_string(i) + " '" +
                                       n.name + "': " + e.what());
  }
}

void run_graph(const GraphData& g) {
  const auto count = g.nodes.size();
  if (count == 0) return;

  std::vector<std::vector<std::uint32_t>> succ(count);
  std::unique_ptr<std::atomic<std::uint32_t>[]> pending(new std::atomic<std::uint32_t>[count]);
  for (std::size_t i = 0; i < count; ++i) pending[i].store(0, std::memory_order_relaxed);
  for (auto [a, b] : g.edges) {
    succ[a].push_back(b);
    pending[b].fetch_add(1, std::memory_order_relaxed);
  }
  tbb::task_group tasks;
  std::function<void(std::uint32_t)> start = [&](std::uint32_t i) {
    tasks.run([&, i] {
      run_node(g, i);
      for (auto s : succ[i]) {
        if (pending[s].fetch_sub(1, std::memory_order_acq_rel) == 1) start(s);
      }
    });
  };
  // Roots first, then start them: a started root may already have released a later node.
  std::vector<std::uint32_t> roots;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (pending[i].load(std::memory_order_relaxed) == 0) roots.push_back(i);
  }
  for (auto r : roots) start(r);
  tasks.wait();  // rethrows the first failure of a node
}

void check(const GraphData& g) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    if (n.kind == NodeKind::kernel && !n.kernel.host) {
      throw Error(Errc::unsupported,
                  "kernel node " + std::to_string(i) + " '" + n.name +
                      "' has no host function (only a cuda kernel); give it KernelWork::host to "
                      "run on the host backend");
    }
    if (n.kind == NodeKind::captured && n.payload == nullptr) {
      throw Error(Errc::unsupported, "captured node '" + n.name + "' has no recording");
    }
    for (const auto& child : n.graphs) check(*child);
  }
}

class HostGraph final : public GraphExecutable {
 public:
  explicit HostGraph(std::shared_ptr<const GraphData> g) : graph_(std::move(g)) { check(*graph_); }

  void launch(Stream& stream, const OpInfo& op) override {
    // The launch is one task of the context's queue; its nodes fan out on the TBB pool. Each
    // launch keeps the parameters it was issued with (updates make a new GraphData).
    stream.host_task([g = graph_] { run_graph(*g); }, op);
  }

  std::string update(const std::shared_ptr<const GraphData>& graph) override {
    check(*graph);
    graph_ = graph;
    return {};
  }

 private:
  std::shared_ptr<const GraphData> graph_;
};

}  // namespace

std::shared_ptr<void> make_recording(std::vector<std::function<void()>> ops) {
  auto r = std::make_shared<Recording>();
  r->ops = std::move(ops);
  return r;
}

std::unique_ptr<GraphExecutable> instantiate_host_graph(
    const std::shared_ptr<const GraphData>& graph) {
  return std::make_unique<HostGraph>(graph);
}

}  // namespace sluice::detail::host
