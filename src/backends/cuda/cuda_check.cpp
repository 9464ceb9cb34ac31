#include "backends/cuda/cuda_check.hpp"

#include "sluice/error.hpp"

namespace sluice::detail::cuda {

const char* advice(cudaError_t err) noexcept {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return "free buffers, call sluice::trim_pool(), or use smaller sizes";
    case cudaErrorInsufficientDriver:
      return "install or update the NVIDIA driver, or use the host backend (SLUICE_DEVICE=host)";
    case cudaErrorNoDevice:
      return "no GPU is visible: check CUDA_VISIBLE_DEVICES, or use the host backend";
    case cudaErrorInvalidDevice:
      return "the device index is out of range: `sluice devices` lists the devices";
    case cudaErrorInvalidValue:
      return "a bad argument: check sizes, pointers and launch dimensions";
    case cudaErrorInvalidResourceHandle:
      return "a stream or event that was destroyed, or belongs to another device";
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorNoKernelImageForDevice:
      return "the kernel was not compiled for this GPU: set CMAKE_CUDA_ARCHITECTURES to include it";
    case cudaErrorLaunchOutOfResources:
      return "too many threads or registers per block: use smaller blocks";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
      return "a kernel faulted; the error is sticky, so every later CUDA call fails and the "
             "process must restart. compute-sanitizer --tool memcheck finds the faulting access";
    case cudaErrorNotPermitted:
      return "CUDA calls are not allowed here (inside a host task or stream callback)";
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
      return "the operation is not allowed while the stream is being captured into a graph";
    default:
      return "";
  }
}

std::string describe(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

void throw_error(cudaError_t err, const char* what, std::source_location where, std::size_t bytes) {
  clear_error();
  std::string message = std::string("cuda: ") + what + " failed: " + describe(err);
  if (const char* h = advice(err); *h != '\0') message += "; " + std::string(h);
  if (err == cudaErrorMemoryAllocation) throw OutOfMemory(bytes, message, where);
  throw Error(means_no_device(err) ? Errc::no_device : Errc::backend_failure, message, where);
}

void clear_error() noexcept {
  (void)cudaGetLastError();
}

bool means_no_device(cudaError_t err) noexcept {
  return err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
}

}  // namespace sluice::detail::cuda
