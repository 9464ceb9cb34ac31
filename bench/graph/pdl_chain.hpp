#pragma once
// Does a chain of kernels launched with programmatic stream serialization (Hopper's programmatic
// dependent launch, as every sluice la kernel is) keep its overlap when captured into a graph,
// nested as a child graph, and run inside a while node's body, as graph-mode CG runs its step
// kernels (docs/la.md: graph mode 7 to 12% slower than async at 1e8 nonzeros)? Plain CUDA, no
// sluice: the probe isolates CUDA's behaviour. No CUDA header: the benchmark is plain C++.

#include <string>

struct PdlChainTimes {
  double stream_pdl = 0;       // us per kernel: launched on a stream with the PDL attribute
  double stream_plain = 0;     // on a stream without it
  double graph_pdl = 0;        // the PDL chain stream-captured into a graph, launched
  double graph_plain = 0;      // the plain chain captured
  double child_pdl = 0;        // the captured PDL graph as a child node of another graph
  double while_pdl = 0;        // that child graph as the body of a while node running once
  int programmatic_edges = 0;  // edges of the captured PDL graph CUDA typed programmatic
  int edges = 0;               // all its edges
  std::string error;
};

/// `kernels` kernels in a chain, each a streaming update y = a x + y over `doubles` elements on
/// the resident grid (the shape of the la step kernels); median of `repeats` timed launches.
PdlChainTimes run_pdl_chain(int kernels, long long doubles, int repeats);
