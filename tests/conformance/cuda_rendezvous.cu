#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_rendezvous.hpp"

namespace {

// Nanoseconds since an arbitrary origin, the same clock on every SM (unlike clock64).
__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void rendezvous(int* flags, int me, int parties, long long timeout_ns) {
  atomicExch(&flags[me], 1);
  __threadfence();  // make the arrival visible to the other parties' SMs before waiting
  const unsigned long long start = global_ns();
  volatile int* seen = flags;
  for (;;) {
    bool all = true;
    for (int i = 0; i < parties; ++i) {
      if (seen[i] != 1) {
        all = false;
        break;
      }
    }
    if (all) return;
    if (static_cast<long long>(global_ns() - start) > timeout_ns) {
      seen[parties + me] = -1;  // timed out: the others never ran alongside this kernel
      __threadfence();
      return;
    }
    __nanosleep(500);  // spin politely: leave the memory system to the other parties
  }
}

// Holds its stream until the host sets *flag (pinned, mapped memory) or the timeout passes.
__global__ void gate(const volatile int* flag, long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (*flag == 0) {
    if (static_cast<long long>(global_ns() - start) > timeout_ns) return;
    __nanosleep(1000);
  }
}

}  // namespace

void launch_gate(void* stream, const volatile int* flag_pinned, long long timeout_ns) {
  gate<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag_pinned, timeout_ns);
  if (auto err = cudaGetLastError(); err != cudaSuccess) {
    throw std::runtime_error(std::string("launch_gate: launch failed: ") + cudaGetErrorName(err));
  }
}

bool cuda_available_for_tests() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

void launch_rendezvous(void* stream, int* flags_device, int me, int parties, long long timeout_ns) {
  if (me < 0 || me >= parties) throw std::runtime_error("launch_rendezvous: me out of range");
  rendezvous<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flags_device, me, parties, timeout_ns);
  if (auto err = cudaGetLastError(); err != cudaSuccess) {
    throw std::runtime_error(std::string("launch_rendezvous: launch failed: ") +
                             cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}
