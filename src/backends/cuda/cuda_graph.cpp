// The IR built into a cudaGraph_t (kernel, memcpy, memset, host, empty, child and conditional
// nodes), instantiated once, launched with cudaGraphLaunch and updated with cudaGraphExecUpdate.
#include "backends/cuda/cuda_graph.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_event.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "graph/graph_data.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {

CudaRecording::~CudaRecording() {
  if (graph != nullptr && cudaGraphDestroy(graph) != cudaSuccess) clear_error();
}

namespace {

/// What host nodes of one executable threw, until the check its launches enqueue reports it.
struct HostErrors {
  std::mutex mutex;
  std::string first;
  void add(std::string message) {
    std::lock_guard lock(mutex);
    if (first.empty()) first = std::move(message);
  }
  std::string take() {
    std::lock_guard lock(mutex);
    return std::exchange(first, {});
  }
};

/// A host node's user data: its IR node (alive while a launch of that IR version runs) and where
/// its exception goes.
struct HostNodeCall {
  const NodeData* node;
  HostErrors* errors;
};
using HostCalls = std::deque<HostNodeCall>;

// An exception cannot cross CUDA's thread: it is kept for the check that follows the launch on
// its context's stream, which reports it as a failure of the launch (as a failed host task).
void run_host_node(void* raw) noexcept {
  HostCallbackScope scope;
  const auto* call = static_cast<const HostNodeCall*>(raw);
  const NodeData& n = *call->node;
  try {
    try {
      n.host();
    } catch (const std::exception& e) {
      call->errors->add("host node '" + n.name + "' threw: " + e.what());
    } catch (...) {
      call->errors->add("host node '" + n.name +
                        "' threw an exception not derived from "
                        "std::exception");
    }
  } catch (...) {
    std::fprintf(stderr, "sluice: graph host node '%s' threw (not recorded: out of memory)\n",
                 n.name.c_str());
  }
}

/// What building an IR graph into a cudaGraph_t produces besides the graph.
struct Built {
  HostErrors* errors = nullptr;
  std::shared_ptr<HostCalls> calls = std::make_shared<HostCalls>();
  std::vector<cudaGraphNode_t> nodes;         // top level: CUDA node per IR node
  std::vector<cudaGraphNode_t> assign_nodes;  // top level: default assignment per IR node
  cudaEvent_t unrecorded = nullptr;  // what event wait nodes are built with (never recorded)
  cudaEvent_t scratch =
      nullptr;  // what event record nodes are built with (each launch sets its own)
};

[[noreturn]] void unsupported(const NodeData& n, const std::string& why) {
  throw Error(Errc::unsupported, "node '" + n.name + "' (" + to_string(n.kind) + "): " + why);
}

cudaKernelNodeParams kernel_params(const DeviceKernel& k, std::vector<void*>& args) {
  args.clear();
  for (const auto& a : k.args) args.push_back(const_cast<std::byte*>(a.data()));
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(k.function);
  p.gridDim = dim3(k.grid[0], k.grid[1], k.grid[2]);
  p.blockDim = dim3(k.block[0], k.block[1], k.block[2]);
  p.sharedMemBytes = static_cast<unsigned>(k.shared_bytes);
  p.kernelParams = args.data();
  return p;
}

cudaMemsetParams memset_params(const NodeData& n) {
  cudaMemsetParams p{};
  p.dst = n.dst;
  p.value = static_cast<unsigned>(n.value) & 0xffu;
  p.elementSize = 1;
  p.width = n.bytes;
  p.height = 1;
  return p;
}

bool same_kernel(const DeviceKernel& a, const DeviceKernel& b) {
  return a.function == b.function && std::equal(a.grid, a.grid + 3, b.grid) &&
         std::equal(a.block, a.block + 3, b.block) && a.shared_bytes == b.shared_bytes &&
         a.args == b.args;
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

/// Builds `g` into `target` (in a conditional body when `in_conditional`); `top` when `g` is the
/// launched graph itself (its CUDA nodes are then kept in `out` for in-place updates).
void build(cudaGraph_t target, const GraphData& g, bool in_conditional, Built& out, bool top) {
  const auto pred = predecessors(g);
  std::vector<cudaGraphNode_t> last(g.nodes.size());  // where edges out of node i attach
  // Conditional defaults are assigned first: every node without a predecessor runs after them.
  std::vector<cudaGraphNode_t> starts;
  if (top) out.assign_nodes.assign(g.nodes.size(), nullptr);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const NodeData& n = g.nodes[i];
    if (!n.cond_default) continue;
    AssignDefault a;  // CUDA copies the arguments
    a.cell = n.cond->buffer.data();
    a.value = *n.cond_default;
    a.bytes = static_cast<int>(n.cond_bytes);
    const auto p = assign_default_params(a);
    cudaGraphNode_t node = nullptr;
    check(cudaGraphAddKernelNode(&node, target, nullptr, 0, &p),
          "cudaGraphAddKernelNode (a conditional node's default)");
    starts.push_back(node);
    if (top) out.assign_nodes[i] = node;
  }
  for (auto i : topological_order(g)) {
    const NodeData& n = g.nodes[i];
    std::vector<cudaGraphNode_t> deps;
    for (auto p : pred[i]) deps.push_back(last[p]);
    if (pred[i].empty()) deps = starts;
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
        std::vector<void*> args;
        const auto p = kernel_params(*n.kernel.device, args);
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
        const auto p = memset_params(n);
        check(cudaGraphAddMemsetNode(&node, target, d, deps.size(), &p), "cudaGraphAddMemsetNode");
        break;
      }
      case NodeKind::host: {
        if (in_conditional) unsupported(n, "CUDA allows no host node inside a conditional body");
        cudaHostNodeParams p{};
        p.fn = &run_host_node;
        p.userData = &out.calls->emplace_back(HostNodeCall{&n, out.errors});
        check(cudaGraphAddHostNode(&node, target, d, deps.size(), &p), "cudaGraphAddHostNode");
        break;
      }
      case NodeKind::child: {
        cudaGraph_t child = nullptr;
        check(cudaGraphCreate(&child, 0), "cudaGraphCreate");
        try {
          build(child, *n.graphs[0], in_conditional, out, false);
          check(cudaGraphAddChildGraphNode(&node, target, d, deps.size(), child),
                "cudaGraphAddChildGraphNode");
        } catch (...) {
          (void)cudaGraphDestroy(child);
          throw;
        }
        (void)cudaGraphDestroy(child);  // the node holds a clone
        break;
      }
      case NodeKind::event_record:
        check(cudaGraphAddEventRecordNode(&node, target, d, deps.size(), out.scratch),
              "cudaGraphAddEventRecordNode");
        break;
      case NodeKind::event_wait:
        check(cudaGraphAddEventWaitNode(&node, target, d, deps.size(), out.unrecorded),
              "cudaGraphAddEventWaitNode");
        break;
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
            build(inner, *n.graphs[k], true, out, false);
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
  if (top) out.nodes = std::move(last);
}

cudaGraph_t build_graph(const GraphData& g, Built& out) {
  cudaGraph_t graph = nullptr;
  check(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
  try {
    build(graph, g, false, out, true);
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
    // The graph instantiated from stays alive: its nodes name the executable's nodes for the
    // in-place updates (cudaGraphExec*SetParams).
    check(cudaEventCreateWithFlags(&unrecorded_, cudaEventDisableTiming), "cudaEventCreate");
    const auto made = cudaEventCreateWithFlags(&scratch_, cudaEventDisableTiming);
    if (made != cudaSuccess) (void)cudaEventDestroy(unrecorded_);
    check(made, "cudaEventCreate");
    built_.errors = errors_.get();
    built_.unrecorded = unrecorded_;
    built_.scratch = scratch_;
    try {
      source_ = build_graph(*graph_, built_);
    } catch (...) {
      (void)cudaEventDestroy(unrecorded_);
      (void)cudaEventDestroy(scratch_);
      throw;
    }
    const auto err = cudaGraphInstantiate(&exec_, source_, 0);
    if (err != cudaSuccess) {
      (void)cudaGraphDestroy(source_);
      (void)cudaEventDestroy(unrecorded_);
      (void)cudaEventDestroy(scratch_);
      check(err, "cudaGraphInstantiate");
    }
    wait_set_.assign(graph_->nodes.size(), unrecorded_);
  }
  ~CudaGraph() override {
    DeviceGuard guard(device_, std::nothrow);
    for (auto& f : in_flight_) {
      (void)cudaEventSynchronize(f.done);
      (void)cudaEventDestroy(f.done);
    }
    for (auto e : spare_) (void)cudaEventDestroy(e);
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (source_ != nullptr) (void)cudaGraphDestroy(source_);
    (void)cudaEventDestroy(unrecorded_);
    (void)cudaEventDestroy(scratch_);
    clear_error();
  }

  void launch(Stream& stream, const OpInfo& op,
              const std::shared_ptr<FailureState>& failures) override {
    auto& s = as_cuda_stream(stream, "graph launch");
    if (s.device() != device_) {
      throw Error(Errc::invalid_argument,
                  "a graph instantiated for cuda:" + std::to_string(device_) +
                      " launched on cuda:" + std::to_string(s.device()));
    }
    DeviceGuard guard(device_, op.where);
    // Event nodes: each launch records its own events, and waits for the points the wait nodes'
    // events stand for now (kept alive with the launch).
    std::vector<std::shared_ptr<EventImpl>> points;
    std::vector<std::pair<std::size_t, std::shared_ptr<CudaEvent>>> records;
    const auto& nodes = graph_->nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const NodeData& n = nodes[i];
      if (n.kind == NodeKind::event_record) {
        auto p = std::make_shared<CudaEvent>(device_, false);
        p->failures = failures;
        p->seq = op.seq - 1;  // complete means at least all earlier work of the context is
        p->device = Device{"cuda", device_};
        check(cudaGraphExecEventRecordNodeSetEvent(exec_, built_.nodes[i], p->handle()),
              "cudaGraphExecEventRecordNodeSetEvent", op.where);
        records.emplace_back(i, std::move(p));
      } else if (n.kind == NodeKind::event_wait) {
        auto p = resolve_point(n.wait_event);
        cudaEvent_t h = unrecorded_;
        if (p) {
          const auto* ce = dynamic_cast<const CudaEvent*>(p.get());
          if (ce == nullptr) {
            throw Error(Errc::invalid_argument,
                        "event wait node '" + n.name +
                            "': its event was not recorded on a cuda context or by a cuda graph "
                            "(a cuda graph waits for cuda events only); record it on a cuda "
                            "context, or wait for it with Context::wait before the launch",
                        op.where);
          }
          h = ce->handle();
          points.push_back(std::move(p));
        }
        if (h != wait_set_[i]) {
          check(cudaGraphExecEventWaitNodeSetEvent(exec_, built_.nodes[i], h),
                "cudaGraphExecEventWaitNodeSetEvent", op.where);
          wait_set_[i] = h;
        }
      }
    }
    check(cudaGraphLaunch(exec_, s.handle()), "cudaGraphLaunch", op.where);
    for (auto& [i, p] : records) {
      nodes[i].record_event->set(p);
      points.push_back(std::move(p));
    }
    if (!built_.calls->empty()) {
      // What a host node threw becomes a failure of this launch on its context, reported by the
      // context's next wait (as a failed host task). Enqueued only for graphs with host nodes.
      s.host_task(
          [errors = errors_] {
            if (auto m = errors->take(); !m.empty()) throw Error(Errc::work_failed, m);
          },
          op);
    }
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
    in_flight_.push_back({e, graph_, built_.calls, std::move(points)});
  }

  std::string update(const std::shared_ptr<const GraphData>& next) override {
    DeviceGuard guard(device_);
    // Many changed nodes: one whole-graph update may cost less than a SetParams call per node
    // (decided by count, see whole_update_from).
    const std::size_t whole = whole_update_from();
    if ((whole == 0 || changed_nodes(*next) < whole) && update_in_place(*next)) {
      graph_ = next;
      return {};
    }
    // Something the node-by-node path does not handle (a nested graph changed, a parameter CUDA
    // refused in place), or enough changed nodes: the whole graph rebuilt and applied at once.
    Built rebuilt;
    rebuilt.errors = errors_.get();
    rebuilt.unrecorded = unrecorded_;
    rebuilt.scratch = scratch_;
    cudaGraph_t graph = build_graph(*next, rebuilt);
    cudaGraphExecUpdateResultInfo info{};
    const auto err = cudaGraphExecUpdate(exec_, graph, &info);
    (void)cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
      clear_error();
      return "cudaGraphExecUpdate refused the new parameters (" + describe(err) +
             ", update result " + std::to_string(static_cast<int>(info.result)) + ")";
    }
    graph_ = next;
    // The executable's nodes are still named by source_'s; what host nodes point at is new.
    built_.calls = std::move(rebuilt.calls);
    wait_set_.assign(next->nodes.size(), unrecorded_);  // as rebuilt
    return {};
  }

 private:
  /// Compares `next` with the current IR node by node and applies only the parameters that
  /// changed. False if some node needs the whole-graph path (CUDA's error cleared).
  bool update_in_place(const GraphData& next) {
    const GraphData& cur = *graph_;
    if (next.nodes.size() != built_.nodes.size()) return false;
    auto ok = [](cudaError_t err) {
      if (err == cudaSuccess) return true;
      clear_error();
      return false;
    };
    std::vector<void*> args;
    auto calls = built_.calls;  // replaced only if a host node is updated
    for (std::size_t i = 0; i < next.nodes.size(); ++i) {
      const NodeData& a = cur.nodes[i];
      const NodeData& b = next.nodes[i];
      cudaGraphNode_t h = built_.nodes[i];
      switch (b.kind) {
        case NodeKind::copy:
          if ((a.bytes == 0) != (b.bytes == 0)) return false;  // an empty node stands for it
          if (b.bytes != 0 && (a.dst != b.dst || a.src != b.src || a.bytes != b.bytes) &&
              !ok(cudaGraphExecMemcpyNodeSetParams1D(exec_, h, b.dst, b.src, b.bytes,
                                                     cudaMemcpyDefault))) {
            return false;
          }
          break;
        case NodeKind::memset: {
          if ((a.bytes == 0) != (b.bytes == 0)) return false;
          if (b.bytes == 0 || (a.dst == b.dst && a.value == b.value && a.bytes == b.bytes)) break;
          const auto p = memset_params(b);
          if (!ok(cudaGraphExecMemsetNodeSetParams(exec_, h, &p))) return false;
          break;
        }
        case NodeKind::kernel: {
          if (same_kernel(*a.kernel.device, *b.kernel.device)) break;
          const auto p = kernel_params(*b.kernel.device, args);
          if (!ok(cudaGraphExecKernelNodeSetParams(exec_, h, &p))) return false;
          break;
        }
        case NodeKind::host: {
          // Launches in flight keep the calls of their IR version; this one gets new ones.
          if (calls == built_.calls) calls = std::make_shared<HostCalls>();
          cudaHostNodeParams p{};
          p.fn = &run_host_node;
          p.userData = &calls->emplace_back(HostNodeCall{&b, errors_.get()});
          if (!ok(cudaGraphExecHostNodeSetParams(exec_, h, &p))) return false;
          break;
        }
        case NodeKind::captured: {
          if (a.payload == b.payload) break;
          const auto* r = static_cast<const CudaRecording*>(b.payload.get());
          if (r == nullptr || r->graph == nullptr) return false;
          if (!ok(cudaGraphExecChildGraphNodeSetParams(exec_, h, r->graph))) return false;
          break;
        }
        case NodeKind::child:
        case NodeKind::if_then:
        case NodeKind::while_loop:
          if (a.graphs != b.graphs || a.cond != b.cond) return false;
          if (b.cond_default && *a.cond_default != *b.cond_default) {
            AssignDefault d;  // CUDA copies the arguments
            d.cell = b.cond->buffer.data();
            d.value = *b.cond_default;
            d.bytes = static_cast<int>(b.cond_bytes);
            const auto p = assign_default_params(d);
            if (!ok(cudaGraphExecKernelNodeSetParams(exec_, built_.assign_nodes[i], &p))) {
              return false;
            }
          }
          break;
        case NodeKind::empty:
        case NodeKind::alloc:
        case NodeKind::free:
        case NodeKind::event_record:  // events are set by each launch
        case NodeKind::event_wait:
          break;
      }
    }
    built_.calls = std::move(calls);
    return true;
  }

  /// The number of changed nodes from which update() rebuilds the graph and applies it with one
  /// cudaGraphExecUpdate instead of a cudaGraphExec*SetParams call per changed node; 0: never.
  /// SLUICE_CUDA_GRAPH_WHOLE_UPDATE sets it (read at every update, to measure both in one run).
  /// Never by default: on an H100 the whole path took 1.24 us per node of a 100-memset graph,
  /// the node-by-node one 0.55 us per changed node (docs/graph.md).
  static std::size_t whole_update_from() {
    const char* v = std::getenv("SLUICE_CUDA_GRAPH_WHOLE_UPDATE");
    return v == nullptr ? 0 : static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
  }

  /// How many copy, memset and kernel nodes of `next` differ from the current IR (a first pass
  /// over the parameters; the other kinds are left to update_in_place).
  std::size_t changed_nodes(const GraphData& next) const {
    const GraphData& cur = *graph_;
    if (next.nodes.size() != cur.nodes.size()) return 0;
    std::size_t changed = 0;
    for (std::size_t i = 0; i < next.nodes.size(); ++i) {
      const NodeData& a = cur.nodes[i];
      const NodeData& b = next.nodes[i];
      switch (b.kind) {
        case NodeKind::copy:
        case NodeKind::memset:
          changed += a.dst != b.dst || a.src != b.src || a.bytes != b.bytes || a.value != b.value;
          break;
        case NodeKind::kernel:
          changed += a.kernel.device && b.kernel.device &&
                     !same_kernel(*a.kernel.device, *b.kernel.device);
          break;
        default:
          break;
      }
    }
    return changed;
  }

  void retire_completed() {
    while (!in_flight_.empty()) {
      auto err = cudaEventQuery(in_flight_.front().done);
      if (err == cudaErrorNotReady) break;
      if (err != cudaSuccess) clear_error();
      spare_.push_back(in_flight_.front().done);
      in_flight_.pop_front();
    }
  }

  /// A launch not yet known complete, and what its host nodes point at.
  struct InFlight {
    cudaEvent_t done;
    std::shared_ptr<const GraphData> graph;
    std::shared_ptr<HostCalls> calls;
    std::vector<std::shared_ptr<EventImpl>> events;  // of its event nodes
  };

  std::shared_ptr<const GraphData> graph_;
  int device_;
  std::shared_ptr<HostErrors> errors_ = std::make_shared<HostErrors>();
  Built built_;
  cudaGraph_t source_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t unrecorded_ = nullptr;
  cudaEvent_t scratch_ = nullptr;
  std::vector<cudaEvent_t> wait_set_;  // the event each wait node waits for now
  std::deque<InFlight> in_flight_;
  std::vector<cudaEvent_t> spare_;
};

}  // namespace

std::unique_ptr<GraphExecutable> instantiate_cuda_graph(
    const std::shared_ptr<const GraphData>& graph, int device) {
  require_device(device);
  return std::make_unique<CudaGraph>(graph, device);
}

}  // namespace sluice::detail::cuda
