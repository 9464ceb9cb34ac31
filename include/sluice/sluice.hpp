#pragma once
/// @file
/// Every layer's public API for users, in one include. Left out: `sluice/cuda.hpp` (native cuda
/// handles and launches), `sluice/dataflow_cuda.cuh` (kernels compiled by nvcc), `sluice/host.hpp`
/// (fault injection for tests), and the interfaces for backend and extension authors
/// (`sluice/backend.hpp`, `sluice/extension.hpp`, `sluice/ext/`).

#include "sluice/access.hpp"
#include "sluice/blas.hpp"
#include "sluice/context.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/deps.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/event.hpp"
#include "sluice/fft.hpp"
#include "sluice/graph.hpp"
#include "sluice/kernel.hpp"
#include "sluice/la.hpp"
#include "sluice/memory.hpp"
#include "sluice/observe.hpp"
#include "sluice/platform.hpp"
#include "sluice/rng.hpp"
#include "sluice/scalar.hpp"
