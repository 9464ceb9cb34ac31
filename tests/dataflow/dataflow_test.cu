// The dataflow conformance cases compiled by nvcc: the same kernels run on the host and cuda
// backends.
#include "sluice/dataflow_cuda.cuh"

#include "dataflow_api_command_cases.hpp"
#include "dataflow_api_kernels_cases.hpp"
#include "dataflow_api_reduction_cases.hpp"
#include "dataflow_cases.hpp"
#include "dataflow_hold_cases.hpp"
#include "dataflow_submit_cases.hpp"
