#include "pdl_chain.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace {

__global__ void __launch_bounds__(256)
    update_kernel(const double* x, double* y, long long n, int pdl) {
  if (pdl != 0) {  // sluice's stream_order_prologue
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    y[i] = 1.000001 * x[i] + y[i];
  }
}

__global__ void stop_loop(cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, 0);
}

struct Probe {
  PdlChainTimes out;
  bool ok(cudaError_t err, const char* what) {
    if (err != cudaSuccess && out.error.empty()) {
      out.error = std::string(what) + ": " + cudaGetErrorString(err);
    }
    return err == cudaSuccess;
  }
};

}  // namespace

PdlChainTimes run_pdl_chain(int kernels, long long doubles, int repeats) {
  Probe p;
  int sms = 0, per_sm = 0;
  double *x = nullptr, *y = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  if (!p.ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute") ||
      !p.ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, update_kernel, 256, 0),
            "occupancy") ||
      !p.ok(cudaMalloc(&x, sizeof(double) * doubles), "cudaMalloc") ||
      !p.ok(cudaMalloc(&y, sizeof(double) * doubles), "cudaMalloc") ||
      !p.ok(cudaMemset(x, 0, sizeof(double) * doubles), "cudaMemset") ||
      !p.ok(cudaMemset(y, 0, sizeof(double) * doubles), "cudaMemset") ||
      !p.ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream") ||
      !p.ok(cudaEventCreate(&a), "event") || !p.ok(cudaEventCreate(&b), "event")) {
    return p.out;
  }
  const unsigned grid = static_cast<unsigned>(sms * per_sm);
  auto issue = [&](bool pdl) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c{};
    c.gridDim = grid;
    c.blockDim = 256;
    c.stream = s;
    c.attrs = pdl ? &attr : nullptr;
    c.numAttrs = pdl ? 1 : 0;
    const int flag = pdl ? 1 : 0;
    for (int k = 0; k < kernels; ++k) {
      if (!p.ok(cudaLaunchKernelEx(&c, update_kernel, x, y, doubles, flag), "launch")) return;
    }
  };
  // Median microseconds per kernel of `run` (which enqueues the whole chain on s).
  auto time = [&](auto&& run) {
    std::vector<float> ms;
    run();  // warm-up
    p.ok(cudaStreamSynchronize(s), "sync");
    for (int r = 0; r < repeats; ++r) {
      float t = 0;
      p.ok(cudaEventRecord(a, s), "record");
      run();
      p.ok(cudaEventRecord(b, s), "record");
      p.ok(cudaEventSynchronize(b), "sync");
      p.ok(cudaEventElapsedTime(&t, a, b), "elapsed");
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms.empty() ? 0.0 : ms[ms.size() / 2] * 1000.0 / kernels;
  };
  auto capture = [&](bool pdl) {
    cudaGraph_t g = nullptr;
    if (p.ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture")) {
      issue(pdl);
      p.ok(cudaStreamEndCapture(s, &g), "end capture");
    }
    return g;
  };
  auto launch_of = [&](cudaGraph_t g) {
    cudaGraphExec_t e = nullptr;
    p.ok(cudaGraphInstantiate(&e, g, 0), "instantiate");
    return e;
  };
  p.out.stream_pdl = time([&] { issue(true); });
  p.out.stream_plain = time([&] { issue(false); });
  cudaGraph_t pdl_graph = capture(true), plain_graph = capture(false);
  if (pdl_graph != nullptr) {
    std::size_t n = 0;
    if (p.ok(cudaGraphGetEdges(pdl_graph, nullptr, nullptr, nullptr, &n), "edges")) {
      std::vector<cudaGraphNode_t> from(n), to(n);
      std::vector<cudaGraphEdgeData> data(n);
      if (p.ok(cudaGraphGetEdges(pdl_graph, from.data(), to.data(), data.data(), &n), "edges")) {
        p.out.edges = static_cast<int>(n);
        for (const auto& d : data) {
          p.out.programmatic_edges += d.type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
        }
      }
    }
  }
  cudaGraphExec_t pdl_exec = pdl_graph ? launch_of(pdl_graph) : nullptr;
  cudaGraphExec_t plain_exec = plain_graph ? launch_of(plain_graph) : nullptr;
  if (pdl_exec != nullptr)
    p.out.graph_pdl = time([&] { p.ok(cudaGraphLaunch(pdl_exec, s), "launch"); });
  if (plain_exec != nullptr) {
    p.out.graph_plain = time([&] { p.ok(cudaGraphLaunch(plain_exec, s), "launch"); });
  }
  // The captured PDL graph nested: as a child node, and as a child node in a while body.
  cudaGraph_t parent = nullptr, looping = nullptr;
  cudaGraphExec_t parent_exec = nullptr, loop_exec = nullptr;
  if (pdl_graph != nullptr && p.ok(cudaGraphCreate(&parent, 0), "graph create")) {
    cudaGraphNode_t child = nullptr;
    if (p.ok(cudaGraphAddChildGraphNode(&child, parent, nullptr, 0, pdl_graph), "child")) {
      parent_exec = launch_of(parent);
    }
  }
  if (pdl_graph != nullptr && p.ok(cudaGraphCreate(&looping, 0), "graph create")) {
    cudaGraphConditionalHandle h{};
    if (p.ok(cudaGraphConditionalHandleCreate(&h, looping, 1, cudaGraphCondAssignDefault),
             "conditional handle")) {
      cudaGraphNodeParams np{};
      np.type = cudaGraphNodeTypeConditional;
      np.conditional.handle = h;
      np.conditional.type = cudaGraphCondTypeWhile;
      np.conditional.size = 1;
      cudaGraphNode_t loop = nullptr;
      if (p.ok(cudaGraphAddNode(&loop, looping, nullptr, nullptr, 0, &np), "while node")) {
        cudaGraph_t body = np.conditional.phGraph_out[0];
        cudaGraphNode_t child = nullptr, stop = nullptr;
        void* args[] = {&h};
        cudaKernelNodeParams kp{};
        kp.func = reinterpret_cast<void*>(&stop_loop);
        kp.gridDim = 1;
        kp.blockDim = 1;
        kp.kernelParams = args;
        if (p.ok(cudaGraphAddChildGraphNode(&child, body, nullptr, 0, pdl_graph), "body child") &&
            p.ok(cudaGraphAddKernelNode(&stop, body, &child, 1, &kp), "body stop")) {
          loop_exec = launch_of(looping);
        }
      }
    }
  }
  if (parent_exec != nullptr) {
    p.out.child_pdl = time([&] { p.ok(cudaGraphLaunch(parent_exec, s), "launch"); });
  }
  if (loop_exec != nullptr) {
    p.out.while_pdl = time([&] { p.ok(cudaGraphLaunch(loop_exec, s), "launch"); });
  }
  for (cudaGraphExec_t e : {pdl_exec, plain_exec, parent_exec, loop_exec}) {
    if (e != nullptr) cudaGraphExecDestroy(e);
  }
  for (cudaGraph_t g : {pdl_graph, plain_graph, parent, looping}) {
    if (g != nullptr) cudaGraphDestroy(g);
  }
  cudaFree(x);
  cudaFree(y);
  cudaStreamDestroy(s);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return p.out;
}
