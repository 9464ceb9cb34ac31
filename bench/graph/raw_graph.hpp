#pragma once
// A raw CUDA graph of empty kernels (chain or fan-out), the baseline of bench_graph. No CUDA
// header: bench_graph.cpp is plain C++.

struct RawGraph;
/// Builds and instantiates `nodes` empty-kernel nodes, each after the previous (chain) or all
/// independent (fan-out), with its own stream.
RawGraph* raw_graph_create(int nodes, bool chain);
/// One launch, then a stream synchronize.
void raw_graph_launch_sync(RawGraph* g);
void raw_graph_destroy(RawGraph* g);
