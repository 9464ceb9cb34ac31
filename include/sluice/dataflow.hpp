#pragma once
/// @file
/// The dataflow layer: SYCL-style queues, buffers and accessors that build the task graph,
/// events and `depends_on`, USM, copy and fill commands, parallel kernels with work-group local
/// memory, group algorithms, atomics and reductions (reference 004; SYCL 2020; docs/dataflow.md).
///
/// Plain C++20: kernels written here run on the host backend's CPU pool. To run them on a cuda
/// device, compile the file with nvcc (`--extended-lambda`), include
/// <sluice/dataflow_cuda.cuh> instead, and mark kernel lambdas `SLUICE_KERNEL`.

#include "sluice/dataflow/access.hpp"
#include "sluice/dataflow/atomic.hpp"
#include "sluice/dataflow/buffer.hpp"
#include "sluice/dataflow/functional.hpp"
#include "sluice/dataflow/group.hpp"
#include "sluice/dataflow/group_algorithms.hpp"
#include "sluice/dataflow/handler.hpp"
#include "sluice/dataflow/info.hpp"
#include "sluice/dataflow/kernel.hpp"
#include "sluice/dataflow/queue.hpp"
#include "sluice/dataflow/range.hpp"
#include "sluice/dataflow/reduction.hpp"
#include "sluice/dataflow/usm.hpp"
