#pragma once
// The raw `<<<>>>` launch the typed launch is measured against; in a .cu file so that the
// benchmark itself stays plain C++.

struct CUstream_st;

/// `empty_args<<<1, 1, 0, stream>>>(x, y)` for `__global__ void empty_args(float, float*)`.
void raw_launch(CUstream_st* stream, float x, float* y);
/// The same kernel's host stub, for sluice::cuda::launch.
using EmptyArgsKernel = void (*)(float, float*);
EmptyArgsKernel empty_args_ptr();
