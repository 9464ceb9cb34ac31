#pragma once
// Ordering between sluice's dependency tracker and the streams of other libraries (PyTorch,
// CuPy, JAX, NumPy), and the release of imported memory once sluice's work on it is done.
//
// - Export to a stream S (DLPack): a context wrapping S marks an access to the bytes, which makes
//   S itself wait (event waits) for sluice's pending conflicting work on them; when the consumer
//   lets go, the same context marks a write around one numbered operation, so sluice's later work
//   follows S's work until then. For __cuda_array_interface__ (no consumer stream is named) a
//   stream of the module does the waiting and is handed out. Never a host wait.
// - Import from a stream P: the importing context marks a write of the bytes around one numbered
//   operation that makes its stream wait for P's current work (P known: the CUDA array
//   interface's "stream", PyTorch's and CuPy's current stream, a registered producer's; for
//   other DLPack producers, after the producer made that stream wait itself); sluice's later work
//   on the bytes, on any context, is ordered after that operation by the tracker.
// - On the host backend the consumer's "stream" is the host: export waits on the host for the
//   pending work on those bytes only (writers; and readers too when the consumer may write).

#include <cstdint>
#include <optional>
#include <source_location>
#include <string_view>

#include "common.hpp"
#include "sluice/deps.hpp"
#include "sluice/kernel.hpp"

namespace sluice::python::interop {

/// The module's context for the releases of imported memory on `device` (async; never
/// destroyed).
[[nodiscard]] Context context(const Device& device);

/// Stream handles as the DLPack and CUDA array interface protocols pass them.
inline constexpr std::uintptr_t kLegacyDefaultStream = 1;  // cudaStreamLegacy
inline constexpr std::uintptr_t kPerThreadStream = 2;      // cudaStreamPerThread

/// Makes `stream` (a cudaStream_t of `device`'s backend) wait for sluice's pending work on
/// `range` of `id`: writers, and readers as well unless `mode` is read. The waits are put on the
/// consumer's stream itself (through a context wrapping it), so it waits for nothing else.
/// Returns that context, for `order_after_consumer` (none where the runtime would not wrap the
/// stream and a stream of the module stood between).
[[nodiscard]] std::optional<Context> order_stream_after(const Device& device, ObjectId id,
                                                        ByteRange range, Access mode,
                                                        std::uintptr_t stream,
                                                        std::source_location loc);
/// When a consumer lets go of an export: sluice's later work on the bytes (their release
/// included) waits for what the consumer queued on `stream` until now. `consumer`: what
/// `order_stream_after` returned for that export (so the stream is not looked up again).
void order_after_consumer(const Device& device, ObjectId id, ByteRange range, std::uintptr_t stream,
                          const std::optional<Context>& consumer, std::source_location loc);
/// Orders sluice's pending work on `range` of `id` (as `order_stream_after`) before the current
/// end of the module's interop stream of `device`, and returns that stream: what the CUDA array
/// interface's "stream" entry hands a consumer.
[[nodiscard]] std::uintptr_t interop_stream_after(const Device& device, ObjectId id,
                                                  ByteRange range, Access mode,
                                                  std::source_location loc);
/// Where a producer's pending work is: a stream of another library (a cudaStream_t; 1 and 2 are
/// the default streams), and/or a sluice context (whose work sluice knows: an event recorded on
/// it is its current point). Neither: the producer already ordered the importing stream itself.
struct Producer {
  std::optional<std::uintptr_t> stream;
  std::optional<Context> context;
};
/// Marks a write of `range` of `id` on `ctx` around one numbered operation that waits for
/// `producer`'s current work (an event recorded on its stream or context, waited for on ctx's).
void order_after_stream(const Context& ctx, ObjectId id, ByteRange range, const Producer& producer,
                        std::source_location loc);
/// Blocks the calling thread (GIL released) until sluice's pending work on the bytes completed.
void host_wait(ObjectId id, ByteRange range, Access mode, std::source_location loc);

/// The cuda part (interop_cuda.cpp); `available()` is false where the module was built without
/// it, and the others then throw Error(unsupported).
namespace cuda {
[[nodiscard]] bool available() noexcept;
/// One numbered operation of `ctx` (a cuda context): if `producer` is set, ctx's stream waits
/// for its current work; if `waiter` is set, it waits for ctx's stream (an event recorded on one,
/// waited for on the other); with neither it does nothing but take a number.
void link(const Context& ctx, std::string_view what, std::optional<std::uintptr_t> producer,
          std::optional<std::uintptr_t> waiter, std::source_location loc);
/// The function handle of `spec`'s kernel for `device`, loaded with the CUDA runtime's library
/// API (a cubin of the device's architecture, else a fatbin, else PTX, else the source through
/// the kernel layer's NVRTC cache), cached per spec and device: for launches on a raw stream
/// (dataflow command groups).
[[nodiscard]] const void* native_kernel(const KernelSpec& spec, const Device& device,
                                        std::source_location loc);
/// The index of the cuda device `ptr` (device or managed memory) belongs to; -1 for other memory.
[[nodiscard]] int device_of(const void* ptr, std::source_location loc);
/// A context wrapping another library's stream, made once per stream (cached by device, handle
/// and CUDA's stream id, so a handle reused for a new stream gets a new context) and never
/// destroyed (destroying a wrapped context would wait for that library's stream). 1 and 2 are
/// the legacy and per-thread default streams.
[[nodiscard]] Context consumer(const Device& device, std::uintptr_t stream,
                               std::source_location loc);
/// Launches `kernel` on `stream`; returns null, or the name of the CUDA error.
const char* launch_native(void* stream, const void* kernel, const Dims& grid, const Dims& block,
                          std::size_t shared, void** args);
}  // namespace cuda

/// One numbered operation of `ctx` that does nothing: marks around it land after everything its
/// stream already holds (work other libraries put there included).
void numbered_noop(const Context& ctx, std::string_view what, std::source_location loc);

}  // namespace sluice::python::interop
