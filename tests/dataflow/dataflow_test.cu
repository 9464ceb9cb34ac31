// The dataflow conformance cases compiled by nvcc: the same kernels run on the host and cuda
// backends.
#include "sluice/dataflow_cuda.cuh"

#include "dataflow_cases.hpp"
#include "dataflow_hold_cases.hpp"
#include "dataflow_submit_cases.hpp"
