// The IR built into a cudaGraph_t (kernel, memcpy, memset, host, empty, child and conditional
// nodes), instantiated once, launched with cudaGraphLaunch and updated with cudaGraphExecUpdate.
#include "backends/cuda/cuda_graph.hpp"

#include <cstdio>
#include <deque>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "graph/graph_data.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {

CudaRecording::~CudaRecording() {
  if (graph != nullptr && cudaGraphDestroy(graph) != cudaSuccess) clear_error();
}

namespace {

// Host nodes of an explicit graph: the function lives in the GraphData that every launch keeps
// alive until it completed. An exception cannot cross CUDA's thread; it is written to stderr.
void run_host_node(void* raw) noexcept {
  const auto* n = static_cast<const NodeData*>(raw);
  try {
    n->host();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: graph host node '%s' threw: %s\n", n->name.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "sluice: graph host node '%s' threw\n", n->name.c_str());
  }
}

[[noreturn]] void unsupported(const NodeData& n, const std::string& why) {
  throw Error(Errc::unsupported, "node '" + n.name + "' (" + to_string(n.kind) + "): " + why);
}

std::vector<std::uint32_t> topological_order(const GraphData& g) {
  std::vector<std::uint32_t> indegree(g.nodes.size(), 0);
  std::vector<std::vector<std::uint32_t>> succ(g.nodes.size());
  for (auto [a, b] : g.edges) {
    succ[a].push_back(b);
    ++indegree[b];
  }
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (indegree[i] == 0) order.push_back(i);
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (auto s : succ[order[k]]) {
      if (--indegree[s] == 0) order.push_back(s);
    }
  }
  return order;
}

/// Builds `g` into `target` (in a conditional body when `in_conditional`).
void build(cudaGraph_t target, const GraphData& g, bool in_conditional) {
  const auto pred = predecessors(g);
  std::vector<cudaGraphNode_t> last(g.nodes.size());  // where edges out of node i attach
  for (auto i : topological_order(g)) {
    const NodeData& n = g.nodes[i];
    std::vector<cudaGraphNode_t> deps;
    for (auto p : pred[i]) deps.push_back(last[p]);
    const auto* d = deps.empty() ? nullptr : deps.data();
    cudaGraphNode_t node = nullptr;
    switch (n.kind) {
      case NodeKind::empty:
      case NodeKind::alloc:
      case NodeKind::free:
        check(cudaGraphAddEmptyNode(&node, target, d, deps.size()), "cudaGraphAddEmptyNode");
        break;
      case NodeKind::kernel: {
        if (!n.kernel.device) {
          unsupported(n, "no cuda kernel (only a host function); give it KernelWork::device");
        }
        const auto& k = *n.kernel.device;
        std::vector<void*> args;
        for (const auto& a : k.args) args.push_back(const_cast<std::byte*>(a.data()));
        cudaKernelNodeParams p{};
        p.func = const_cast<void*>(k.function);
        p.gridDim = dim3(k.grid[0], k.grid[1], k.grid[2]);
        p.blockDim = dim3(k.block[0], k.block[1], k.block[2]);
        p.sharedMemBytes = static_cast<unsigned>(k.shared_bytes);
        p.kernelParams = args.data();
        check(cudaGraphAddKernelNode(&node, target, d, deps.size(), &p), "cudaGraphAddKernelNode");
        break;
      }
      case NodeKind::copy:
        if (n.bytes == 0) {
          check(cudaGraphAddEmptyNode(&node, target, d, deps.size()), "cudaGraphAddEmptyNode");
        } else {
          check(cudaGraphAddMemcpyNode1D(&node, target, d, deps.size(), n.dst, n.src, n.bytes,
                                         cudaMemcpyDefault),
                "cudaGraphAddMemcpyNode1D");
        }
        break;
      case NodeKind::memset: {
        if (n.bytes == 0) {
          check(cudaGraphAddEmptyNode(&node, target, d, deps.size()), "cudaGraphAddEmptyNode");
          break;
        }
        cudaMemsetParams p{};
        p.dst = n.dst;
        p.value = static_cast<unsigned>(n.value) & 0xffu;
        p.elementSize = 1;
        p.width = n.bytes;
        p.height = 1;
        check(cudaGraphAddMemsetNode(&node, target, d, deps.size(), &p), "cudaGraphAddMemsetNode");
        break;
      }
      case NodeKind::host: {
        if (in_conditional) unsupported(n, "CUDA allows no host node inside a conditional body");
        cudaHostNodeParams p{};
        p.fn = &run_host_node;
        p.userData = const_cast<NodeData*>(&n);
        check(cudaGraphAddHostNode(&node, target, d, deps.size(), &p), "cudaGraphAddHostNode");
        break;
      }
      case NodeKind::child: {
        cudaGraph_t child = nullptr;
        check(cudaGraphCreate(&child, 0), "cudaGraphCreate");
        try {
          build(child, *n.graphs[0], in_conditional);
          check(cudaGraphAddChildGraphNode(&node, target, d, deps.size(), child),
                "cudaGraphAddChildGraphNode");
        } catch (...) {
          (void)cudaGraphDestroy(child);
          throw;
        }
        (void)cudaGraphDestroy(child);  // the node holds a clone
        break;
      }
      case NodeKind::captured: {
        const auto* r = static_cast<const CudaRecording*>(n.payload.get());
        if (r == nullptr || r->graph == nullptr) unsupported(n, "not recorded by the cuda backend");
        check(cudaGraphAddChildGraphNode(&node, target, d, deps.size(), r->graph),
              "cudaGraphAddChildGraphNode (a captured operation)");
        break;
      }
      case NodeKind::if_then:
      case NodeKind::while_loop: {
        const bool loop = n.kind == NodeKind::while_loop;
        const void* value = n.cond->buffer.data();
        const int bytes = static_cast<int>(n.cond_bytes);
        cudaGraphConditionalHandle handle{};
        check(cudaGraphConditionalHandleCreate(&handle, target, 0, 0),
              "cudaGraphConditionalHandleCreate");
        // The condition is read on the device right before the node, and again at the end of
        // each trip of a loop: the host never sees it.
        cudaGraphNode_t set = add_set_condition_node(target, d, deps.size(), handle, value, bytes);
        cudaGraphNodeParams p{};
        p.type = cudaGraphNodeTypeConditional;
        p.conditional.handle = handle;
        p.conditional.type = loop ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf;
        p.conditional.size = static_cast<unsigned>(n.graphs.size());
        check(cudaGraphAddNode(&node, target, &set, nullptr, 1, &p),
              "cudaGraphAddNode (conditional)");
        for (std::size_t k = 0; k < n.graphs.size(); ++k) {
          cudaGraph_t body = p.conditional.phGraph_out[k];
          cudaGraph_t inner = nullptr;
          check(cudaGraphCreate(&inner, 0), "cudaGraphCreate");
          cudaGraphNode_t child = nullptr;
          try {
            build(inner, *n.graphs[k], true);
            check(cudaGraphAddChildGraphNode(&child, body, nullptr, 0, inner),
                  "cudaGraphAddChildGraphNode (conditional body)");
          } catch (...) {
            (void)cudaGraphDestroy(inner);
            throw;
          }
          (void)cudaGraphDestroy(inner);
          if (loop) (void)add_set_condition_node(body, &child, 1, handle, value, bytes);
        }
        last[i] = node;
        continue;
      }
    }
    last[i] = node;
  }
}

cudaGraph_t build_graph(const GraphData& g) {
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  try {
    build(graph, g, false);
  } catch (...) {
    (void)cudaGraphDestroy(graph);
    throw;
  }
  return graph;
}

class CudaGraph final : public GraphExecutable {
 public:
  CudaGraph(std::shared_ptr<const GraphData> g, int device)
      : graph_(std::move(g)), device_(device) {
    DeviceGuard guard(device_);
    cudaGraph_t graph = build_graph(*graph_);
    const auto err = cudaGraphInstantiate(&exec_, graph, 0);
    (void)cudaGraphDestroy(graph);
    check(err, "cudaGraphInstantiate");
  }
  ~CudaGraph() override {
    DeviceGuard guard(device_, std::nothrow);
    for (auto& [e, g] : in_flight_) {
      (void)cudaEventSynchronize(e);
      (void)cudaEventDestroy(e);
    }
    for (auto e : spare_) (void)cudaEventDestroy(e);
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    clear_error();
  }

  void launch(Stream& stream, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "graph launch");
    if (s.device() != device_) {
      throw Error(Errc::invalid_argument,
                  "a graph instantiated for cuda:" + std::to_string(device_) +
                      " launched on cuda:" + std::to_string(s.device()));
    }
    DeviceGuard guard(device_, op.where);
    check(cudaGraphLaunch(exec_, s.handle()), "cudaGraphLaunch", op.where);
    // Host nodes and captured host tasks point into the IR: keep this version of it alive until
    // the launch completed (an update may replace it meanwhile).
    retire_completed();
    cudaEvent_t e = nullptr;
    if (!spare_.empty()) {
      e = spare_.back();
      spare_.pop_back();
    } else {
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    check(cudaEventRecord(e, s.handle()), "cudaEventRecord", op.where);
    in_flight_.emplace_back(e, graph_);
  }

  std::string update(const std::shared_ptr<const GraphData>& next) override {
    DeviceGuard guard(device_);
    cudaGraph_t graph = build_graph(*next);
    cudaGraphExecUpdateResultInfo info{};
    const auto err = cudaGraphExecUpdate(exec_, graph, &info);
    (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
      clear_error();
      return "cudaGraphExecUpdate refused the new parameters (" + describe(err) +
             ", update result " + std::to_string(static_cast<int>(info.result)) + ")";
    }
    graph_ = next;
    return {};
  }

 private:
  void retire_completed() {
    while (!in_flight_.empty()) {
      auto err = cudaEventQuery(in_flight_.front().first);
      if (err == cudaErrorNotReady) break;
      if (err != cudaSuccess) clear_error();
      spare_.push_back(in_flight_.front().first);
      in_flight_.pop_front();
    }
  }

  std::shared_ptr<const GraphData> graph_;
  int device_;
  cudaGraphExec_t exec_ = nullptr;
  std::deque<std::pair<cudaEvent_t, std::shared_ptr<const GraphData>>> in_flight_;
  std::vector<cudaEvent_t> spare_;
};

}  // namespace

std::unique_ptr<GraphExecutable> instantiate_cuda_graph(
    const std::shared_ptr<const GraphData>& graph, int device) {
  require_device(device);
  return std::make_unique<CudaGraph>(graph, device);
}

}  // namespace sluice::detail::cuda
