#pragma once
// Test kernels for graph nodes on cuda (tests/graph/graph_test_kernels.cu). Declared without CUDA
// headers: a __global__ function's host stub has this signature, so plain C++ can name it.

/// x[i] += v for i < n.
void graph_test_add(int* x, int n, int v);
/// One thread: ++*trips; --*counter (a while loop's body).
void graph_test_countdown(int* counter, int* trips);
