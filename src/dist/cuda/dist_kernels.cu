// The cuda backend's DistKernels: the distributed solvers' finalize step and the packing of
// ghost values as kernels on the context's stream, the peer reductions' fused gather (its set-up
// in peer_reduce.cpp), and the NCCL engine (nccl_engine.cpp).
// Compiled with --fmad=false like la's kernels: the solver logic must round as the host's does.

#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "dist/combine.hpp"
#include "dist/cuda/dist_kernels.hpp"
#include "dist/cuda/nccl_engine.hpp"
#include "la/ksp_logic.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::detail::dist {
namespace {

using sluice::detail::cuda::CudaStream;

/// One thread: the solver state is one small struct, the gathered sums a few doubles a rank.
__global__ void finalize_kernel(DistFinalizeArgs a) {
  if (!ksp_logic::guard_runs(a.state, a.tf_dx)) return;
  double sums[la_math::kMaxSums];
  dist_math::combine(a.gathered, a.ranks, a.parts, sums, a.split);
  ksp_logic::finalize(a.finalize, *a.state, sums);
}

__global__ void gather_kernel(double* dst, const double* src, const std::int32_t* index,
                              std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[index[i]];
  }
}

// ---- the fused gather of peer reductions ----
//
// Every rank's device holds a mailbox (dist_kernels.hpp: flags[2][size], slots[2][size][cap]) that
// every other rank's device can store into (peer access, or CUDA IPC between processes). A rank's
// k-th fused gather (its epoch e = k, counted on the device by the kernel itself, so graph
// replays need no host) uses parity p = e % 2:
//  1. it stores its sums into slot [p][rank] of every rank's mailbox (its own included), fences
//     them (each storing thread's __threadfence_system, then the block's barrier) and stores e
//     into flag [p][rank] of every mailbox with a release at system scope;
//  2. it waits until flag [p][q] of its own mailbox holds e for every rank q (acquire loads at
//     system scope), giving up where the communicator failed (`abort`, set by the engine's
//     watchdog) or its deadline passed (SLUICE_DIST_TIMEOUT; the watchdog then reports it);
//  3. it copies the slots [p][0..size) into `recv` in rank order (loads that bypass L1, which
//     does not see a peer's stores) and, after the block's barrier, one thread adds them up and
//     runs the finalize exactly as finalize_kernel does after an ncclAllGather: the same bits.
// Why a slot is never overwritten before it is read: rank q stores epoch e + 2 (the same parity)
// only inside its gather e + 2, which starts after its gather e + 1 ended, which waited for
// every rank's flag of e + 1, which rank r stores only in its gather e + 1, which starts after
// its gather e ended, after it read slot [p][q]. So one mailbox per rank, two slots per peer.
// Flags only grow, so a flag read in gather e holds e - 2 (not yet) or e, never more.
// Deadlock: see peer_reduce.cpp (the kernel waits for exactly what an ncclAllGather of the same
// reduction would, and nothing a peer needs is ordered after it on this device).

constexpr unsigned kPeerThreads = 32;

__device__ std::uint64_t* peer_flag(char* box, int size, int parity, int rank) {
  return reinterpret_cast<std::uint64_t*>(box) + static_cast<std::size_t>(parity) * size + rank;
}

__device__ double* peer_slot(char* box, int size, int parity, int rank) {
  return reinterpret_cast<double*>(box + peer_slots_offset(size)) +
         (static_cast<std::size_t>(parity) * size + rank) * kPeerCapacity;
}

__device__ void store_release_system(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ std::uint64_t load_acquire_system(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kPeerThreads) peer_gather_kernel(PeerGatherArgs a) {
  __shared__ volatile int stop;
  const unsigned t = threadIdx.x;
  const std::uint64_t e = *a.epoch + 1;  // written by the previous gather's thread 0
  const int p = static_cast<int>(e & 1);
  if (t == 0) stop = *static_cast<const volatile std::int32_t*>(a.abort);
  __syncthreads();
  if (stop != 0) return;  // the communicator failed: store into no peer
  // 1. This rank's sums into its slot of every mailbox, then its flag there.
  for (int q = 0; q < a.size; ++q) {
    double* slot = peer_slot(a.mail[q], a.size, p, a.rank);
    for (int i = static_cast<int>(t); i < a.count; i += kPeerThreads) slot[i] = a.send[i];
  }
  __threadfence_system();
  __syncthreads();
  for (int q = static_cast<int>(t); q < a.size; q += kPeerThreads)
    store_release_system(peer_flag(a.mail[q], a.size, p, a.rank), e);
  // 2. Every rank's flag of this epoch in this rank's mailbox.
  char* own = a.mail[a.rank];
  for (int q = static_cast<int>(t); q < a.size; q += kPeerThreads) {
    const std::uint64_t* f = peer_flag(own, a.size, p, q);
    const std::uint64_t start = global_ns();
    for (unsigned spin = 1; load_acquire_system(f) != e; ++spin) {
      if ((spin & 255) != 0) continue;
      if (stop != 0 || *static_cast<const volatile std::int32_t*>(a.abort) != 0) {
        stop = 1;
        break;
      }
      if (a.timeout_ns > 0 && global_ns() - start > static_cast<std::uint64_t>(a.timeout_ns)) {
        volatile PeerStatus* s = a.status;
        s->epoch = e;
        s->peer = q;
        __threadfence_system();
        s->reason = kPeerDeadline;
        // Stay until the engine's watchdog has read that and failed the contexts (it sets
        // `abort` after): ending first would let the stream's later work, and a synchronize,
        // run as if the gather had succeeded. A second deadline's grace, should no watchdog come.
        const std::uint64_t gave_up = global_ns();
        while (*static_cast<const volatile std::int32_t*>(a.abort) == 0 &&
               global_ns() - gave_up < static_cast<std::uint64_t>(a.timeout_ns)) {
        }
        stop = 1;
        break;
      }
    }
  }
  __syncthreads();
  if (stop != 0) {
    if (t == 0) *a.epoch = e;
    return;
  }
  // 3. Every rank's sums in rank order, then (one thread) the finalize on them.
  const int n = a.size * a.count;
  for (int i = static_cast<int>(t); i < n; i += kPeerThreads) {
    const int q = i / a.count;
    a.recv[i] = __ldcv(peer_slot(own, a.size, p, q) + (i - q * a.count));
  }
  __syncthreads();
  if (t != 0) return;
  *a.epoch = e;
  if (!a.finalize || !ksp_logic::guard_runs(a.fin.state, a.fin.tf_dx)) return;
  double sums[la_math::kMaxSums];
  dist_math::combine(a.recv, a.fin.ranks, a.fin.parts, sums, a.fin.split);
  ksp_logic::finalize(a.fin.finalize, *a.fin.state, sums);
}

__global__ void signature_kernel(std::uint64_t* dst, SignatureWords words) {
  for (std::size_t i = 0; i < kSignatureWords; ++i) dst[i] = words.w[i];
}

/// Runs `f(stream)` as operation `op` on `s`, its device current.
template <class F>
void run_on(Stream& s, const OpInfo& op, F&& f) {
  auto call = [](void* state, CUstream_st* stream) { (*static_cast<F*>(state))(stream); };
  static_cast<CudaStream&>(s).run_user(call, static_cast<void*>(&f), op);
}

void check_launch(const OpInfo& op) {
  cuda::check(cudaGetLastError(), "kernel launch", op.where);
}

class CudaDistKernels final : public DistKernels {
 public:
  void finalize(Stream& stream, const DistFinalizeArgs& args, const OpInfo& op) override {
    run_on(stream, op, [&](cudaStream_t s) {
      finalize_kernel<<<1, 1, 0, s>>>(args);
      check_launch(op);
    });
  }

  void gather(Stream& stream, double* dst, const double* src, const std::int32_t* index,
              std::size_t n, const OpInfo& op) override {
    if (n == 0) return;
    run_on(stream, op, [&](cudaStream_t s) {
      constexpr unsigned kThreads = 256;
      const auto blocks =
          static_cast<unsigned>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 4096));
      gather_kernel<<<blocks, kThreads, 0, s>>>(dst, src, index, n);
      check_launch(op);
    });
  }

  std::vector<std::byte> unique_id() override { return nccl_unique_id(); }

  std::shared_ptr<DistEngine> create_engine(const DistEngineConfig& config) override {
    return make_nccl_engine(config);
  }
};

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(finalize_kernel);

}  // namespace

void write_signature(cudaStream_t stream, std::uint64_t* dst, const SignatureWords& words) {
  signature_kernel<<<1, 1, 0, stream>>>(dst, words);
  cuda::check(cudaGetLastError(), "kernel launch (dist signature)",
              std::source_location::current());
}

void launch_peer_gather(cudaStream_t stream, const PeerGatherArgs& args) {
  peer_gather_kernel<<<1, kPeerThreads, 0, stream>>>(args);
  cuda::check(cudaGetLastError(), "kernel launch (dist peer gather)",
              std::source_location::current());
}

DistKernels& cuda_dist_kernels() {
  static CudaDistKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::dist
