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

/// The probe behind docs/graph.md's note on foreign work between captured operations: one
/// relaxed stream capture begun and ended around nothing (what keeping a captured context's
/// stream in a scratch capture between sluice operations would add to each operation), then a
/// check. Returns false if an ended scratch capture did not show a foreign cudaMemsetAsync as a
/// node (the detection would not work).
struct RawCaptureProbe;
RawCaptureProbe* raw_capture_probe_create();
/// Begin + end of an empty relaxed capture, with the node count read back.
void raw_capture_probe_empty(RawCaptureProbe* p);
/// True if a foreign memset issued inside a scratch capture shows as one node.
bool raw_capture_probe_detects_foreign(RawCaptureProbe* p);
void raw_capture_probe_destroy(RawCaptureProbe* p);
