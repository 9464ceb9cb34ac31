#pragma once
// Benchmarks of sluice's core operations (ops.cpp, one per device) and their raw host baselines
// (raw.cpp). main.cpp registers them at run time for the devices present.
//
// Every loop that queues work synchronizes every kSyncEvery iterations inside the timed loop, so
// that the queue stays bounded and the cost of draining it is counted.

#include <benchmark/benchmark.h>

#include <cstddef>

#include "sluice/platform.hpp"

namespace sluice::bench {

inline constexpr int kSyncEvery = 1024;
inline constexpr std::size_t kMemsetBytes = 256;
inline constexpr std::size_t kBufferBytes = 4096;

// Through sluice, on `device`.
void enqueue_host_task(benchmark::State& state, const Device& device);
void enqueue_memset(benchmark::State& state, const Device& device);
void event_record(benchmark::State& state, const Device& device);
void task_record_wait(benchmark::State& state, const Device& device);
void task_wait_for(benchmark::State& state, const Device& device);
void wait_for_redundant(benchmark::State& state, const Device& device);
void context_create_destroy(benchmark::State& state, const Device& device);
void buffer_alloc_free(benchmark::State& state, const Device& device);
// An empty host task issued as Context::host_task issues it, with the observer hook's check as
// the library compiles it, with the check compiled out, and with a do-nothing observer installed
// (observer_hook.hpp): what the hook costs when off, and when on.
void enqueue_hook_checked(benchmark::State& state, const Device& device);
void enqueue_hook_compiled_out(benchmark::State& state, const Device& device);
void enqueue_hook_observed(benchmark::State& state, const Device& device);

// Raw host baselines: a std::function queue (mutex + deque + condition variable) drained by one
// worker thread, the smallest thing that offers an ordered asynchronous queue.
void raw_enqueue_host_task(benchmark::State& state);
void raw_enqueue_memset(benchmark::State& state);
void raw_task_record_wait(benchmark::State& state);
void raw_queue_create_destroy(benchmark::State& state);
void raw_alloc_free(benchmark::State& state);

}  // namespace sluice::bench
