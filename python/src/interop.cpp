// Ordering between sluice's tracker and other libraries' streams (interop.hpp).

#include "interop.hpp"

#include <map>
#include <mutex>

namespace sluice::python::interop {

Context context(const Device& device) {
  static std::mutex mutex;
  static auto* contexts = new std::map<std::string, Context*>;  // never destroyed
  std::lock_guard lock(mutex);
  auto& slot = (*contexts)[device.to_string()];
  if (slot == nullptr) {
    slot = new Context(ContextOptions{.device = device, .name = "interop:" + device.to_string()});
  }
  return *slot;
}

void numbered_noop(const Context& ctx, std::string_view what, std::source_location loc) {
  if (ctx.device().backend == "cuda" && cuda::available()) {
    cuda::link(ctx, what, std::nullopt, std::nullopt, loc);
  } else {
    ctx.host_task([] {}, what, loc);
  }
}

void order_stream_after(const Device& device, ObjectId id, ByteRange range, Access mode,
                        std::uintptr_t stream, std::source_location loc) {
  const Context ctx = context(device);
  Intent mark(ctx, id, mode, "export to another library's stream", range, loc);
  cuda::link(ctx, "export to another library's stream", stream, std::nullopt, loc);
}

std::uintptr_t interop_stream_after(const Device& device, ObjectId id, ByteRange range, Access mode,
                                    std::source_location loc) {
  const Context ctx = context(device);
  {
    Intent mark(ctx, id, mode, "export through __cuda_array_interface__", range, loc);
    numbered_noop(ctx, "export through __cuda_array_interface__", loc);
  }
  return reinterpret_cast<std::uintptr_t>(ctx.native_handle());
}

void order_after_stream(const Context& ctx, ObjectId id, ByteRange range,
                        std::optional<std::uintptr_t> producer, std::source_location loc) {
  Intent mark(ctx, id, Access::write, "import from another library", range, loc);
  if (ctx.device().backend == "cuda") {
    cuda::link(ctx, "import from another library", std::nullopt, producer, loc);
  } else {
    numbered_noop(ctx, "import from another library", loc);
  }
}

void host_wait(ObjectId id, ByteRange range, Access mode, std::source_location loc) {
  wait_for_host_access(id, mode, range, loc);
}

#ifndef SLUICE_PYTHON_CUDA
namespace cuda {
bool available() noexcept {
  return false;
}
void link(const Context& ctx, std::string_view what, std::optional<std::uintptr_t>,
          std::optional<std::uintptr_t>, std::source_location loc) {
  throw Error(Errc::unsupported,
              std::string(what) + " on " + ctx.device().to_string() +
                  ": this sluice module was built without the cuda backend",
              loc);
}
}  // namespace cuda
#endif

}  // namespace sluice::python::interop
