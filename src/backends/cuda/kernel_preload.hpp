#pragma once
// Every kernel of the module loaded on a device ahead of its first launch.
//
// With CUDA's lazy loading (the default since CUDA 12) a kernel's first launch, or first
// occupancy query, loads its code, and loading may wait for the kernels running on the device
// (CUDA programming guide, "Lazy Loading", concurrent execution). Where one process drives
// several GPUs with NCCL, that wait can close a cycle: a rank's thread issues its first launch of
// a kernel under the tracker's lock while its device runs an NCCL kernel, which waits for another
// rank's matching call, which that rank's thread cannot make without the lock. So the NCCL engine
// loads everything first (preload_kernels), before any NCCL kernel is in flight.
//
// Each .cu file of the module registers itself with SLUICE_CUDA_KERNEL_FILE(anchor), `anchor`
// being any __global__ function of the file: the file's module (on each device, as the runtime
// loaded it) is found through it and every function in it loaded, templates and all, so a kernel
// added to a registered file needs nothing more. A test fails on a .cu file of src/ that does not
// register (tests/layering/check_kernel_files.py); on GPUs, DistGpu checks that after a
// communicator over several GPUs every function of every registered file is loaded on each.
// A file whose work calls a vendor library (cuSPARSE) passes a warm-up as well: a small call of
// each routine it uses, run once per device on a stream of its own, loading the library's kernels.

#include <cstddef>
#include <string>
#include <vector>

struct CUstream_st;

namespace sluice::detail::cuda {

/// A small use of a vendor library's routines on `stream` (the device current); throws on failure.
using WarmUp = void (*)(CUstream_st* stream);

struct KernelFile {
  KernelFile(const char* file, const void* anchor, WarmUp warm_up = nullptr) noexcept;
  template <class... P>
  KernelFile(const char* file, void (*anchor)(P...), WarmUp warm_up = nullptr) noexcept
      : KernelFile(file, reinterpret_cast<const void*>(anchor), warm_up) {}
};

/// What preload_kernels or kernel_status found on one device.
struct PreloadReport {
  std::vector<std::string> files;  // as registered (__FILE__)
  std::size_t functions = 0;       // in the files' modules on the device
  std::size_t loaded = 0;          // of those, fully loaded
  bool lazy = false;               // the process loads modules lazily (CUDA_MODULE_LOADING)
  std::string failure;             // empty when every step worked
};

/// Loads every function of every registered file on `device` and runs the warm-ups, once per
/// device and process (later calls return the first report; devices may load at once). Never
/// throws: a step that fails is in `failure`, and every anchor is still loaded with
/// cudaFuncGetAttributes.
PreloadReport preload_kernels(int device) noexcept;

/// Counts the functions and those loaded on `device`, loading nothing.
PreloadReport kernel_status(int device) noexcept;

/// Loads every function of every registered file on `device` (no warm-ups), once per device and
/// process; the cuda backend calls it when it makes a device's first stream, so that no later
/// first launch, graph instantiation or capture of sluice's own kernels loads code while work
/// runs on the device (a load may wait for it: the host held until the device drained, or, with
/// a kernel spinning on a flag the host would set next, until that kernel gave up).
/// SLUICE_CUDA_PRELOAD=0 leaves the loading to CUDA (lazy by default). Never throws; a failure
/// leaves those kernels to load lazily.
void load_kernels_once(int device) noexcept;

}  // namespace sluice::detail::cuda

#define SLUICE_CUDA_KERNEL_FILE_CAT2(a, b) a##b
#define SLUICE_CUDA_KERNEL_FILE_CAT(a, b) SLUICE_CUDA_KERNEL_FILE_CAT2(a, b)
/// Registers this .cu file's kernels for preload_kernels: SLUICE_CUDA_KERNEL_FILE(some_kernel) or
/// SLUICE_CUDA_KERNEL_FILE(some_kernel, warm_up), once, at namespace scope.
#define SLUICE_CUDA_KERNEL_FILE(...)                                                               \
  static const ::sluice::detail::cuda::KernelFile SLUICE_CUDA_KERNEL_FILE_CAT(sluice_kernel_file_, \
                                                                              __LINE__) {          \
    __FILE__, __VA_ARGS__                                                                          \
  }
