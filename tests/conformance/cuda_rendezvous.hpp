#pragma once
// A test-only kernel that proves two contexts run concurrently on the GPU without timing
// anything: each party's kernel announces itself, then waits (bounded) for all the others. If the
// kernels were serialized, the first one could never see the second and would time out.
//
// Usage: zero 2 * parties ints of device memory, launch one rendezvous per context (me = 0, 1,
// ...), synchronize, copy the flags back. Overlap is proven when flags[parties + me] == 0 for
// every party; -1 there means party `me` gave up after `timeout_ns`.
// No CUDA header here: tests are compiled by the host compiler.

/// True if the CUDA runtime sees at least one device (never throws).
bool cuda_available_for_tests();

/// Enqueues the rendezvous kernel (one thread) on `stream` (a cudaStream_t). `flags_device` holds
/// 2 * `parties` ints in device memory: [0, parties) are the arrival flags, [parties, 2 * parties)
/// the timeout markers. Throws std::runtime_error if the launch fails.
void launch_rendezvous(void* stream, int* flags_device, int me, int parties, long long timeout_ns);

/// Enqueues a one-thread kernel that holds `stream` until `*flag_pinned` (pinned, mapped host
/// memory) becomes non-zero or `timeout_ns` passes. A gate must be a kernel on cuda: host tasks of
/// all cuda contexts share CUDA's one host-function thread, so a blocked host task would also
/// hold back every other context's host tasks.
void launch_gate(void* stream, const volatile int* flag_pinned, long long timeout_ns);
