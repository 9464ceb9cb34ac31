#include <cstdio>
#include <cstdlib>
#include <vector>

#include "empty_kernel.hpp"
#include "raw_graph.hpp"

struct RawGraph {
  cudaGraphExec_t exec = nullptr;
  cudaStream_t stream = nullptr;
};

namespace {
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::abort();
  }
}
}  // namespace

RawGraph* raw_graph_create(int nodes, bool chain) {
  auto* r = new RawGraph;
  ok(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaGraph_t g = nullptr;
  ok(cudaGraphCreate(&g, 0), "cudaGraphCreate");
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(empty_kernel_ptr());
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = nullptr;
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < nodes; ++i) {
    cudaGraphNode_t n = nullptr;
    const bool dep = chain && prev != nullptr;
    ok(cudaGraphAddKernelNode(&n, g, dep ? &prev : nullptr, dep ? 1 : 0, &p), "add node");
    prev = n;
  }
  ok(cudaGraphInstantiate(&r->exec, g, 0), "cudaGraphInstantiate");
  ok(cudaGraphDestroy(g), "cudaGraphDestroy");
  return r;
}

void raw_graph_launch_sync(RawGraph* r) {
  ok(cudaGraphLaunch(r->exec, r->stream), "cudaGraphLaunch");
  ok(cudaStreamSynchronize(r->stream), "cudaStreamSynchronize");
}

void raw_graph_destroy(RawGraph* r) {
  (void)cudaGraphExecDestroy(r->exec);
  (void)cudaStreamDestroy(r->stream);
  delete r;
}

struct RawCaptureProbe {
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;
};

RawCaptureProbe* raw_capture_probe_create() {
  auto* p = new RawCaptureProbe;
  ok(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  ok(cudaMalloc(&p->scratch, 256), "cudaMalloc");
  return p;
}

namespace {
std::size_t scratch_capture(RawCaptureProbe* p, bool foreign) {
  ok(cudaStreamBeginCapture(p->stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  if (foreign) ok(cudaMemsetAsync(p->scratch, 0, 256, p->stream), "cudaMemsetAsync");
  cudaGraph_t g = nullptr;
  ok(cudaStreamEndCapture(p->stream, &g), "cudaStreamEndCapture");
  std::size_t n = 0;
  ok(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
  ok(cudaGraphDestroy(g), "cudaGraphDestroy");
  return n;
}
}  // namespace

void raw_capture_probe_empty(RawCaptureProbe* p) {
  (void)scratch_capture(p, false);
}

bool raw_capture_probe_detects_foreign(RawCaptureProbe* p) {
  return scratch_capture(p, false) == 0 && scratch_capture(p, true) == 1;
}

void raw_capture_probe_destroy(RawCaptureProbe* p) {
  (void)cudaFree(p->scratch);
  (void)cudaStreamDestroy(p->stream);
  delete p;
}
