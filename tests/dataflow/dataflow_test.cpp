// The dataflow conformance cases on a build without the cuda backend (host compiler).
#include "sluice/dataflow.hpp"

#include "dataflow_api_command_cases.hpp"
#include "dataflow_api_kernels_cases.hpp"
#include "dataflow_api_reduction_cases.hpp"
#include "dataflow_cases.hpp"
#include "dataflow_hold_cases.hpp"
#include "dataflow_submit_cases.hpp"
