// The IR built into a cudaGraph_t (kernel, memcpy, memset, host, empty, child and conditional
// nodes), instantiated once, launched with cudaGraphLaunch and updated with cudaGraphExecUpdate.
#include "backends/cuda/cuda_graph.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <list>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_event.hpp"
#include "backends/cuda/cuda_graph_batch.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "backends/cuda/cuda_reaper.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/graph_batches.hpp"
#include "sluice/ext/graph_ir.hpp"

namespace sluice::detail::cuda {

CudaRecording::~CudaRecording() {
  if (graph != nullptr && cudaGraphDestroy(graph) != cudaSuccess) clear_error();
}

namespace {

using ir::Graph;

/// The lower-case name of a node's kind, for messages.
const char* kind_name(const ir::Node& n) noexcept {
  static constexpr const char* names[] = {
      "empty", "kernel", "copy",  "memset",   "host",         "alloc",     "free",
      "child", "if",     "while", "captured", "event record", "event wait"};
  static_assert(std::size(names) == std::variant_size_v<ir::Params>);
  return names[n.params.index()];
}

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
  const ir::Node* node;
  HostErrors* errors;
};
using HostCalls = std::deque<HostNodeCall>;

// An exception cannot cross CUDA's thread: it is kept for the check that follows the launch on
// its context's stream, which reports it as a failure of the launch (as a failed host task).
void run_host_node(void* raw) noexcept {
  HostCallbackScope scope;
  const auto* call = static_cast<const HostNodeCall*>(raw);
  const ir::Node& n = *call->node;
  try {
    try {
      std::get<ir::Host>(n.params).fn();
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
  // Top level: memset and copy nodes run as one batched kernel node each batch (the plan is
  // made once, at instantiation; `nodes` names a member's batched node).
  ir::Batches plan;
  std::vector<cudaGraphNode_t> batch_nodes;
};

/// Whether instantiations batch small memsets and copies: SLUICE_GRAPH_COALESCE=0 (or off) turns
/// it off, for benchmarks and bisecting. Read at every instantiation.
bool coalescing_enabled() {
  const char* v = std::getenv("SLUICE_GRAPH_COALESCE");
  if (v == nullptr) return true;
  const std::string s(v);
  return !(s == "0" || s == "off" || s == "OFF" || s == "false");
}

/// The batches of `g` on `device`: small memsets and copies whose memory a kernel on the device
/// reaches (sluice/ext/graph_batches.hpp says which runs of them merge).
ir::Batches plan_cuda_batches(const Graph& g, int device) {
  if (!coalescing_enabled()) return {};
  return ir::plan_batches(g, kBatchCapacity, [device](const ir::Node& n) {
    if (const auto* m = std::get_if<ir::Memset>(&n.params)) {
      return m->bytes != 0 && m->bytes <= kBatchMemsetLimit && kernel_reaches(m->dst, device);
    }
    const auto& c = std::get<ir::Copy>(n.params);
    return c.bytes != 0 && c.bytes <= kBatchCopyLimit && kernel_reaches(c.dst, device) &&
           kernel_reaches(c.src, device);
  });
}

[[noreturn]] void unsupported(const ir::Node& n, const std::string& why) {
  throw Error(Errc::unsupported, "node '" + n.name + "' (" + kind_name(n) + "): " + why);
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

cudaMemsetParams memset_params(const ir::Memset& n) {
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

std::vector<std::uint32_t> topological_order(const Graph& g) {
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

/// Adds batch `b`'s kernel node when its first member is built: after every predecessor of its
/// members outside it (all built by then: the plan merges only members whose outside
/// predecessors are the first member's).
void add_batch_node(cudaGraph_t target, const Graph& g, const ir::Batches& plan,
                    const std::vector<std::vector<std::uint32_t>>& pred,
                    const std::vector<cudaGraphNode_t>& last,
                    const std::vector<cudaGraphNode_t>& starts, std::int32_t b, Built& out) {
  if (out.batch_nodes[b] != nullptr) return;
  std::vector<cudaGraphNode_t> deps;
  for (auto m : plan.members[b]) {
    for (auto p : pred[m]) {
      const auto pb = plan.batch_of[p];
      if (pb == b) continue;
      cudaGraphNode_t d = pb >= 0 ? out.batch_nodes[pb] : last[p];
      if (d == nullptr) {
        throw Error(Errc::backend_failure, "graph '" + g.name + "': the batch of node '" +
                                               g.nodes[m].name + "' came before its predecessor '" +
                                               g.nodes[p].name + "' (a sluice bug)");
      }
      if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
    }
  }
  if (deps.empty()) deps = starts;
  auto table = std::make_unique<BatchTable>();
  if (auto why = make_batch_table(g, plan.members[b], *table); !why.empty()) {
    throw Error(Errc::backend_failure, "graph '" + g.name + "': " + why + " (a sluice bug)");
  }
  void* arg = nullptr;
  const auto p = batch_params(*table, arg);
  check(cudaGraphAddKernelNode(&out.batch_nodes[b], target, deps.empty() ? nullptr : deps.data(),
                               deps.size(), &p),
        "cudaGraphAddKernelNode (batched memsets and copies)");
}

/// Builds `g` into `target` (in a conditional body when `in_conditional`); `top` when `g` is the
/// launched graph itself (its CUDA nodes are then kept in `out` for in-place updates).
void build(cudaGraph_t target, const Graph& g, bool in_conditional, Built& out, bool top) {
  const auto pred = ir::predecessors(g);
  std::vector<cudaGraphNode_t> last(g.nodes.size());  // where edges out of node i attach
  // Conditional defaults are assigned first: every node without a predecessor runs after them.
  std::vector<cudaGraphNode_t> starts;
  if (top) out.assign_nodes.assign(g.nodes.size(), nullptr);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const auto* c = ir::condition(g.nodes[i]);
    if (c == nullptr || !c->initial) continue;
    AssignDefault a;  // CUDA copies the arguments
    a.cell = c->value;
    a.value = *c->initial;
    a.bytes = static_cast<int>(c->bytes);
    const auto p = assign_default_params(a);
    cudaGraphNode_t node = nullptr;
    check(cudaGraphAddKernelNode(&node, target, nullptr, 0, &p),
          "cudaGraphAddKernelNode (a conditional node's default)");
    starts.push_back(node);
    if (top) out.assign_nodes[i] = node;
  }
  const ir::Batches* plan = top && !out.plan.members.empty() ? &out.plan : nullptr;
  if (plan != nullptr) out.batch_nodes.assign(plan->members.size(), nullptr);
  for (auto i : topological_order(g)) {
    const ir::Node& n = g.nodes[i];
    if (plan != nullptr && plan->batch_of[i] >= 0) {
      add_batch_node(target, g, *plan, pred, last, starts, plan->batch_of[i], out);
      last[i] = out.batch_nodes[plan->batch_of[i]];
      continue;
    }
    std::vector<cudaGraphNode_t> deps;
    for (auto p : pred[i]) {
      // Members of one batch share their node: each dependency once.
      if (std::find(deps.begin(), deps.end(), last[p]) == deps.end()) deps.push_back(last[p]);
    }
    if (pred[i].empty()) deps = starts;
    const auto* d = deps.empty() ? nullptr : deps.data();
    cudaGraphNode_t node = nullptr;
    auto add_empty = [&] {
      check(cudaGraphAddEmptyNode(&node, target, d, deps.size()), "cudaGraphAddEmptyNode");
    };
    // A conditional node: its condition read on the device right before it, and again at the
    // end of each trip of a loop (the host never sees it).
    auto add_conditional = [&](const ir::Condition& c, bool loop,
                               const std::vector<ir::GraphPtr>& bodies) {
      const int bytes = static_cast<int>(c.bytes);
      cudaGraphConditionalHandle handle{};
      check(cudaGraphConditionalHandleCreate(&handle, target, 0, 0),
            "cudaGraphConditionalHandleCreate");
      cudaGraphNode_t set = add_set_condition_node(target, d, deps.size(), handle, c.value, bytes);
      cudaGraphNodeParams p{};
      p.type = cudaGraphNodeTypeConditional;
      p.conditional.handle = handle;
      p.conditional.type = loop ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf;
      p.conditional.size = static_cast<unsigned>(bodies.size());
      check(cudaGraphAddNode(&node, target, &set, nullptr, 1, &p),
            "cudaGraphAddNode (conditional)");
      for (std::size_t k = 0; k < bodies.size(); ++k) {
        cudaGraph_t body = p.conditional.phGraph_out[k];
        cudaGraph_t inner = nullptr;
        check(cudaGraphCreate(&inner, 0), "cudaGraphCreate");
        cudaGraphNode_t child = nullptr;
        try {
          build(inner, *bodies[k], true, out, false);
          check(cudaGraphAddChildGraphNode(&child, body, nullptr, 0, inner),
                "cudaGraphAddChildGraphNode (conditional body)");
        } catch (...) {
          (void)cudaGraphDestroy(inner);
          throw;
        }
        (void)cudaGraphDestroy(inner);
        if (loop) (void)add_set_condition_node(body, &child, 1, handle, c.value, bytes);
      }
    };
    std::visit(
        [&](const auto& p) {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, ir::Empty> || std::is_same_v<P, ir::Alloc> ||
                        std::is_same_v<P, ir::Free>) {
            add_empty();
          } else if constexpr (std::is_same_v<P, ir::Kernel>) {
            if (!p.work.device) {
              unsupported(n, "no cuda kernel (only a host function); give it KernelWork::device");
            }
            std::vector<void*> args;
            const auto k = kernel_params(*p.work.device, args);
            check(cudaGraphAddKernelNode(&node, target, d, deps.size(), &k),
                  "cudaGraphAddKernelNode");
          } else if constexpr (std::is_same_v<P, ir::Copy>) {
            if (p.bytes == 0) {
              add_empty();
            } else {
              check(cudaGraphAddMemcpyNode1D(&node, target, d, deps.size(), p.dst, p.src, p.bytes,
                                             cudaMemcpyDefault),
                    "cudaGraphAddMemcpyNode1D");
            }
          } else if constexpr (std::is_same_v<P, ir::Memset>) {
            if (p.bytes == 0) {
              add_empty();
            } else {
              const auto m = memset_params(p);
              check(cudaGraphAddMemsetNode(&node, target, d, deps.size(), &m),
                    "cudaGraphAddMemsetNode");
            }
          } else if constexpr (std::is_same_v<P, ir::Host>) {
            if (in_conditional)
              unsupported(n, "CUDA allows no host node inside a conditional body");
            cudaHostNodeParams h{};
            h.fn = &run_host_node;
            h.userData = &out.calls->emplace_back(HostNodeCall{&n, out.errors});
            check(cudaGraphAddHostNode(&node, target, d, deps.size(), &h), "cudaGraphAddHostNode");
          } else if constexpr (std::is_same_v<P, ir::Child>) {
            cudaGraph_t child = nullptr;
            check(cudaGraphCreate(&child, 0), "cudaGraphCreate");
            try {
              build(child, *p.graph, in_conditional, out, false);
              check(cudaGraphAddChildGraphNode(&node, target, d, deps.size(), child),
                    "cudaGraphAddChildGraphNode");
            } catch (...) {
              (void)cudaGraphDestroy(child);
              throw;
            }
            (void)cudaGraphDestroy(child);  // the node holds a clone
          } else if constexpr (std::is_same_v<P, ir::EventRecord>) {
            check(cudaGraphAddEventRecordNode(&node, target, d, deps.size(), out.scratch),
                  "cudaGraphAddEventRecordNode");
          } else if constexpr (std::is_same_v<P, ir::EventWait>) {
            check(cudaGraphAddEventWaitNode(&node, target, d, deps.size(), out.unrecorded),
                  "cudaGraphAddEventWaitNode");
          } else if constexpr (std::is_same_v<P, ir::Captured>) {
            const auto* r = static_cast<const CudaRecording*>(p.recording.get());
            if (r == nullptr || r->graph == nullptr) {
              unsupported(n, "not recorded by the cuda backend");
            }
            check(cudaGraphAddChildGraphNode(&node, target, d, deps.size(), r->graph),
                  "cudaGraphAddChildGraphNode (a captured operation)");
          } else if constexpr (std::is_same_v<P, ir::If>) {
            add_conditional(p.cond, false, ir::nested(n));
          } else {
            static_assert(std::is_same_v<P, ir::While>, "every node kind is built");
            add_conditional(p.cond, true, ir::nested(n));
          }
        },
        n.params);
    last[i] = node;
  }
  if (top) out.nodes = std::move(last);
}

cudaGraph_t build_graph(const Graph& g, Built& out) {
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

/// A launch not yet known complete, and what its host nodes point at.
struct InFlight {
  cudaEvent_t done;
  ir::GraphPtr graph;
  std::shared_ptr<HostCalls> calls;
  std::vector<std::shared_ptr<EventImpl>> events;  // of its event nodes
};

/// Launches of executables destroyed before they completed, and what they use: freed by the
/// next `reap` that finds them complete (any graph's launch or destruction).
class Orphans {
 public:
  void adopt(std::deque<InFlight> launches, std::shared_ptr<HostErrors> errors) noexcept {
    if (launches.empty()) return;
    try {
      std::lock_guard lock(mutex_);
      for (auto& f : launches) list_.push_back({std::move(f), errors});
    } catch (...) {
      // Out of memory: wait for them here rather than free what they use under them.
      for (auto& f : launches) (void)cudaEventSynchronize(f.done);
      for (auto& f : launches) (void)cudaEventDestroy(f.done);
    }
  }
  void reap() noexcept {
    std::vector<Orphan> done;
    {
      std::lock_guard lock(mutex_);
      if (list_.empty()) return;
      for (auto it = list_.begin(); it != list_.end();) {
        const auto err = cudaEventQuery(it->launch.done);
        if (err == cudaErrorNotReady) {
          ++it;
          continue;
        }
        if (err != cudaSuccess) clear_error();
        done.push_back(std::move(*it));
        it = list_.erase(it);
      }
    }
    for (auto& o : done) (void)cudaEventDestroy(o.launch.done);
  }

 private:
  struct Orphan {
    InFlight launch;
    std::shared_ptr<HostErrors> errors;  // what its host nodes report into
  };
  std::mutex mutex_;
  std::list<Orphan> list_;
};

/// Never destroyed: orphans left at exit are the driver's to free.
Orphans& orphans() {
  static auto* o = new Orphans;
  return *o;
}

class CudaGraph final : public GraphExecutable {
 public:
  CudaGraph(ir::GraphPtr g, int device) : graph_(std::move(g)), device_(device) {
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
      built_.plan = plan_cuda_batches(*graph_, device_);
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
    holds_ir_ = launch_reads_ir(*graph_);
    has_host_ = std::any_of(graph_->nodes.begin(), graph_->nodes.end(), [](const ir::Node& n) {
      return std::holds_alternative<ir::Host>(n.params);
    });
  }
  ~CudaGraph() override {
    DeviceGuard guard(device_, std::nothrow);
    // Never waits for launches in flight (the backend contract): a host node of one may need
    // what the destroying thread holds (a lock, Python's GIL). What they use is kept by the
    // orphans and freed once they completed; CUDA frees the executable itself after its last
    // run, and events once their work completed. The executable goes to the reaper: its destroy
    // can wait for other streams' work (cuda_reaper.hpp).
    retire_completed();
    orphans().adopt(std::move(in_flight_), errors_);
    for (auto e : spare_) (void)cudaEventDestroy(e);
    destroy_exec_later({device_, exec_, source_, {unrecorded_, scratch_}});
    clear_error();
  }

  void launch(Stream& stream, const OpInfo& op, const std::shared_ptr<FailureState>& failures,
              ir::LaunchEvents& launch_events) override {
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
      const ir::Node& n = nodes[i];
      if (std::holds_alternative<ir::EventRecord>(n.params)) {
        auto p = std::make_shared<CudaEvent>(device_, false);
        p->failures = failures;
        p->seq = op.seq - 1;  // complete means at least all earlier work of the context is
        p->device = Device{"cuda", device_};
        check(cudaGraphExecEventRecordNodeSetEvent(exec_, built_.nodes[i], p->handle()),
              "cudaGraphExecEventRecordNodeSetEvent", op.where);
        records.emplace_back(i, std::move(p));
      } else if (std::holds_alternative<ir::EventWait>(n.params)) {
        auto p = launch_events.waits.at(i);
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
      launch_events.records.at(i) = p;
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
    in_flight_.push_back({e, holds_ir_ ? graph_ : nullptr, built_.calls, std::move(points)});
  }

  [[nodiscard]] Batching batching() const noexcept override {
    return {built_.plan.merged(), built_.plan.members.size()};
  }

  std::string update(const ir::GraphPtr& next) override { return update_with(next, nullptr); }

  std::string update_changed(const ir::GraphPtr& next,
                             std::span<const std::uint32_t> changed) override {
    return update_with(next, has_host_ ? nullptr : &changed);
  }

 private:
  /// update(), looking only at the nodes at `*only` where it is given.
  std::string update_with(const ir::GraphPtr& next, const std::span<const std::uint32_t>* only) {
    DeviceGuard guard(device_);
    // A batch whose members now overlap, or whose memory its kernel does not reach, needs
    // another plan: a new instantiation.
    if (auto why = batches_still_hold(*next); !why.empty()) return why;
    // Many changed nodes: one whole-graph update may cost less than a SetParams call per node
    // (decided by count, see whole_update_from).
    const std::size_t whole = whole_update_from();
    if ((whole == 0 || changed_nodes(*next) < whole) && update_in_place(*next, only)) {
      graph_ = next;
      return {};
    }
    // Something the node-by-node path does not handle (a nested graph changed, a parameter CUDA
    // refused in place), or enough changed nodes: the whole graph rebuilt and applied at once.
    Built rebuilt;
    rebuilt.errors = errors_.get();
    rebuilt.unrecorded = unrecorded_;
    rebuilt.scratch = scratch_;
    rebuilt.plan = built_.plan;
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

  /// Whether a launch reads its IR after cudaGraphLaunch returned: host nodes and captured host
  /// tasks call into it, nested graphs, alloc and free nodes and the graph's own keep-alives own
  /// memory the launch uses. CUDA copied the parameters of kernel, copy and memset nodes when they
  /// were set, so a launch of a graph of those alone need not keep its version of the IR (the
  /// core's batched updates then reuse versions no launch holds instead of copying the IR).
  static bool launch_reads_ir(const Graph& g) {
    if (!g.keep_alive.empty()) return true;
    return !std::all_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) {
      return std::holds_alternative<ir::Empty>(n.params) ||
             std::holds_alternative<ir::Kernel>(n.params) ||
             std::holds_alternative<ir::Copy>(n.params) ||
             std::holds_alternative<ir::Memset>(n.params) ||
             std::holds_alternative<ir::EventRecord>(n.params) ||
             std::holds_alternative<ir::EventWait>(n.params);
    });
  }

  /// Compares `next` with the current IR node by node (only the nodes at `*only` where given: the
  /// others are the same) and applies only the parameters that changed. False if some node needs
  /// the whole-graph path (CUDA's error cleared).
  bool update_in_place(const Graph& next, const std::span<const std::uint32_t>* only) {
    const Graph& cur = *graph_;
    if (next.nodes.size() != built_.nodes.size()) return false;
    auto ok = [](cudaError_t err) {
      if (err == cudaSuccess) return true;
      clear_error();
      return false;
    };
    std::vector<void*>& args = args_;
    auto calls = built_.calls;  // replaced only if a host node is updated
    const auto& plan = built_.plan;
    std::vector<char> dirty(plan.members.size(), 0);  // batches with a changed member
    // One node; false: the whole-graph path.
    auto node = [&](std::size_t i) -> bool {
      const ir::Params& pa = cur.nodes[i].params;
      const ir::Params& pb = next.nodes[i].params;
      if (pa.index() != pb.index()) return false;
      if (!plan.members.empty() && plan.batch_of[i] >= 0) {
        dirty[plan.batch_of[i]] |= member_changed(cur.nodes[i], next.nodes[i], true);
        return true;
      }
      cudaGraphNode_t h = built_.nodes[i];
      if (const auto* b = std::get_if<ir::Copy>(&pb)) {
        const auto& a = std::get<ir::Copy>(pa);
        if ((a.bytes == 0) != (b->bytes == 0)) return false;  // an empty node stands for it
        if (b->bytes != 0 && (a.dst != b->dst || a.src != b->src || a.bytes != b->bytes) &&
            !ok(cudaGraphExecMemcpyNodeSetParams1D(exec_, h, b->dst, b->src, b->bytes,
                                                   cudaMemcpyDefault))) {
          return false;
        }
      } else if (const auto* b = std::get_if<ir::Memset>(&pb)) {
        const auto& a = std::get<ir::Memset>(pa);
        if ((a.bytes == 0) != (b->bytes == 0)) return false;
        if (b->bytes == 0 || (a.dst == b->dst && a.value == b->value && a.bytes == b->bytes)) {
          return true;
        }
        const auto p = memset_params(*b);
        if (!ok(cudaGraphExecMemsetNodeSetParams(exec_, h, &p))) return false;
      } else if (const auto* b = std::get_if<ir::Kernel>(&pb)) {
        const auto& a = std::get<ir::Kernel>(pa);
        if (same_kernel(*a.work.device, *b->work.device)) return true;
        const auto p = kernel_params(*b->work.device, args);
        if (!ok(cudaGraphExecKernelNodeSetParams(exec_, h, &p))) return false;
      } else if (std::holds_alternative<ir::Host>(pb)) {
        // Launches in flight keep the calls of their IR version; this one gets new ones.
        if (calls == built_.calls) calls = std::make_shared<HostCalls>();
        cudaHostNodeParams p{};
        p.fn = &run_host_node;
        p.userData = &calls->emplace_back(HostNodeCall{&next.nodes[i], errors_.get()});
        if (!ok(cudaGraphExecHostNodeSetParams(exec_, h, &p))) return false;
      } else if (const auto* b = std::get_if<ir::Captured>(&pb)) {
        const auto& a = std::get<ir::Captured>(pa);
        if (a.recording == b->recording) return true;
        const auto* r = static_cast<const CudaRecording*>(b->recording.get());
        if (r == nullptr || r->graph == nullptr) return false;
        if (!ok(cudaGraphExecChildGraphNodeSetParams(exec_, h, r->graph))) return false;
      } else if (!ir::nested(next.nodes[i]).empty()) {
        // A child or conditional: in place only if its graphs and condition are the same ones.
        if (ir::nested(cur.nodes[i]) != ir::nested(next.nodes[i])) return false;
        const auto* ca = ir::condition(cur.nodes[i]);
        const auto* cb = ir::condition(next.nodes[i]);
        if (cb == nullptr) return true;
        if (ca->value != cb->value || ca->bytes != cb->bytes) return false;
        if (cb->initial && *ca->initial != *cb->initial) {
          AssignDefault d;  // CUDA copies the arguments
          d.cell = cb->value;
          d.value = *cb->initial;
          d.bytes = static_cast<int>(cb->bytes);
          const auto p = assign_default_params(d);
          if (!ok(cudaGraphExecKernelNodeSetParams(exec_, built_.assign_nodes[i], &p))) {
            return false;
          }
        }
      }
      // Empty, alloc and free nodes have nothing to set; event nodes are set by each launch.
      return true;
    };
    if (only != nullptr) {
      for (auto i : *only) {
        if (!node(i)) return false;
      }
    } else {
      for (std::size_t i = 0; i < next.nodes.size(); ++i) {
        if (!node(i)) return false;
      }
    }
    // A changed batch: its whole table anew, one call.
    for (std::size_t b = 0; b < dirty.size(); ++b) {
      if (!dirty[b]) continue;
      BatchTable table;
      if (!make_batch_table(next, plan.members[b], table).empty()) return false;
      void* arg = nullptr;
      const auto p = batch_params(table, arg);
      if (!ok(cudaGraphExecKernelNodeSetParams(exec_, built_.batch_nodes[b], &p))) return false;
    }
    built_.calls = std::move(calls);
    return true;
  }

  /// Whether a batch member's parameters differ (`values`: its memset value too; else only its
  /// addresses and size).
  static bool member_changed(const ir::Node& a, const ir::Node& b, bool values) {
    if (const auto* mb = std::get_if<ir::Memset>(&b.params)) {
      const auto& ma = std::get<ir::Memset>(a.params);
      return ma.dst != mb->dst || ma.bytes != mb->bytes || (values && ma.value != mb->value);
    }
    const auto& ca = std::get<ir::Copy>(a.params);
    const auto& cb = std::get<ir::Copy>(b.params);
    return ca.dst != cb.dst || ca.src != cb.src || ca.bytes != cb.bytes;
  }

  /// Empty if every batch can take `next`'s parameters: a member moved or resized must not meet
  /// another member, must fit an entry, and its memory must be reachable by the batch's kernel.
  std::string batches_still_hold(const Graph& next) const {
    const auto& plan = built_.plan;
    if (plan.members.empty()) return {};
    const Graph& cur = *graph_;
    if (next.nodes.size() != cur.nodes.size()) return {};  // the core checked the topology
    for (std::size_t b = 0; b < plan.members.size(); ++b) {
      bool moved = false;
      for (auto i : plan.members[b]) {
        const ir::Node& a = cur.nodes[i];
        const ir::Node& n = next.nodes[i];
        if (a.params.index() != n.params.index() || !member_changed(a, n, false)) continue;
        moved = true;
        std::size_t bytes = 0;
        bool reach = true;
        if (const auto* m = std::get_if<ir::Memset>(&n.params)) {
          bytes = m->bytes;
          reach = m->dst == std::get<ir::Memset>(a.params).dst || kernel_reaches(m->dst, device_);
        } else if (const auto* c = std::get_if<ir::Copy>(&n.params)) {
          const auto& ca = std::get<ir::Copy>(a.params);
          bytes = c->bytes;
          reach = (c->dst == ca.dst || kernel_reaches(c->dst, device_)) &&
                  (c->src == ca.src || kernel_reaches(c->src, device_));
        }
        if (bytes > kBatchMaxBytes) {
          return "node '" + n.name + "' (" + std::to_string(bytes) +
                 " bytes) is too large for the batched kernel node it runs in";
        }
        if (!reach) {
          return "node '" + n.name + "' now uses memory the batched kernel node it runs in " +
                 "cannot reach";
        }
      }
      if (moved && ir::batch_conflicts(next, plan.members[b])) {
        return "the memsets and copies batched with node '" +
               next.nodes[plan.members[b].front()].name + "' now overlap";
      }
    }
    return {};
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
  std::size_t changed_nodes(const Graph& next) const {
    const Graph& cur = *graph_;
    if (next.nodes.size() != cur.nodes.size()) return 0;
    std::size_t changed = 0;
    const auto& plan = built_.plan;
    for (std::size_t i = 0; i < next.nodes.size(); ++i) {
      const ir::Params& pa = cur.nodes[i].params;
      const ir::Params& pb = next.nodes[i].params;
      if (pa.index() != pb.index()) continue;
      if (!plan.members.empty() && plan.batch_of[i] >= 0) continue;  // one call per batch
      if (const auto* b = std::get_if<ir::Copy>(&pb)) {
        const auto& a = std::get<ir::Copy>(pa);
        changed += a.dst != b->dst || a.src != b->src || a.bytes != b->bytes;
      } else if (const auto* b = std::get_if<ir::Memset>(&pb)) {
        const auto& a = std::get<ir::Memset>(pa);
        changed += a.dst != b->dst || a.value != b->value || a.bytes != b->bytes;
      } else if (const auto* b = std::get_if<ir::Kernel>(&pb)) {
        const auto& a = std::get<ir::Kernel>(pa);
        changed += a.work.device && b->work.device && !same_kernel(*a.work.device, *b->work.device);
      }
    }
    return changed;
  }

  void retire_completed() {
    orphans().reap();
    while (!in_flight_.empty()) {
      auto err = cudaEventQuery(in_flight_.front().done);
      if (err == cudaErrorNotReady) break;
      if (err != cudaSuccess) clear_error();
      spare_.push_back(in_flight_.front().done);
      in_flight_.pop_front();
    }
  }

  ir::GraphPtr graph_;
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
  std::vector<void*> args_;  // update_in_place's scratch
  bool holds_ir_ = true;     // launch_reads_ir of the graph
  // A host node's call points at its node in the IR version it was set from: every update sets
  // them all again, so a graph with host nodes is compared whole (update_with).
  bool has_host_ = false;
};

}  // namespace

std::unique_ptr<GraphExecutable> instantiate_cuda_graph(const ir::GraphPtr& graph, int device) {
  require_device(device);
  return std::make_unique<CudaGraph>(graph, device);
}

}  // namespace sluice::detail::cuda
