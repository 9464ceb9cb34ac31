// Ordering between sluice's tracker and other libraries' streams (interop.hpp).

#include "interop.hpp"

#include <map>
#include <mutex>
#include <vector>

#include "sluice/event.hpp"

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

namespace {
/// Streams handed out by __cuda_array_interface__: a small pool per device, an idle one first, so
/// that a consumer seldom waits for the export of another array (what an export stream holds is
/// the waits for the pending work of the arrays exported through it).
Context export_stream(const Device& device) {
  constexpr std::size_t kPool = 4;
  static std::mutex mutex;
  static auto* pools = new std::map<std::string, std::vector<Context*>>;  // never destroyed
  static std::size_t next = 0;
  std::lock_guard lock(mutex);
  auto& pool = (*pools)[device.to_string()];
  for (auto* c : pool) {
    if (c->idle()) return *c;
  }
  if (pool.size() < kPool) {
    pool.push_back(new Context(ContextOptions{
        .device = device,
        .name = "export:" + device.to_string() + "#" + std::to_string(pool.size())}));
    return *pool.back();
  }
  return *pool[next++ % pool.size()];
}
}  // namespace

namespace {
/// The context wrapping the consumer's stream; none where the runtime will not wrap one of the
/// default streams (1, 2): then a stream of the module stands between (waits, then an event).
std::optional<Context> consumer_or_none(const Device& device, std::uintptr_t stream,
                                        std::source_location loc) {
  try {
    return cuda::consumer(device, stream, loc);
  } catch (const Error&) {
    if (stream != kLegacyDefaultStream && stream != kPerThreadStream) throw;
    return std::nullopt;
  }
}
}  // namespace

std::optional<Context> order_stream_after(const Device& device, ObjectId id, ByteRange range,
                                          Access mode, std::uintptr_t stream,
                                          std::source_location loc) {
  const char* what = "export to another library's stream";
  if (auto consumer = consumer_or_none(device, stream, loc)) {
    // The consumer's stream itself waits, for the conflicting work on these bytes only.
    mark_intent_begin(*consumer, id, mode, what, range, loc);
    mark_intent_end(*consumer, id, mode, what, range, loc);
    // Its latest point, so that nothing records on that stream later (it is not sluice's).
    Event tail;
    tail.record(*consumer, loc);
    return consumer;
  }
  const Context ctx = export_stream(device);
  Intent mark(ctx, id, mode, what, range, loc);
  cuda::link(ctx, what, std::nullopt, stream, loc);
  return std::nullopt;
}

void order_after_consumer(const Device& device, ObjectId id, ByteRange range, std::uintptr_t stream,
                          const std::optional<Context>& consumer, std::source_location loc) {
  const char* what = "release by another library's stream";
  if (!consumer) {
    order_after_stream(context(device), id, range, Producer{stream, std::nullopt}, loc);
    return;
  }
  mark_intent_begin(*consumer, id, Access::write, what, range, loc);
  numbered_noop(*consumer, what, loc);
  // The stream's point now, after what the consumer queued: later sluice work on the bytes waits
  // for it. Recorded before the mark ends, so that a stream that is gone leaves no mark behind.
  Event tail;
  tail.record(*consumer, loc);
  mark_intent_end(*consumer, id, Access::write, what, range, loc);
}

std::uintptr_t interop_stream_after(const Device& device, ObjectId id, ByteRange range, Access mode,
                                    std::source_location loc) {
  const Context ctx = export_stream(device);
  {
    Intent mark(ctx, id, mode, "export through __cuda_array_interface__", range, loc);
    numbered_noop(ctx, "export through __cuda_array_interface__", loc);
  }
  return reinterpret_cast<std::uintptr_t>(ctx.native_handle());
}

void order_after_stream(const Context& ctx, ObjectId id, ByteRange range, const Producer& producer,
                        std::source_location loc) {
  constexpr std::string_view what = "import from another library";
  mark_intent_begin(ctx, id, Access::write, what, range, loc);
  try {
    if (producer.context && !(*producer.context == ctx)) {
      // A sluice context: its recorded point is its current work (the tracker's own event).
      Event point;
      point.record(*producer.context, loc);
      ctx.wait(point, loc);
    }
    if (ctx.device().backend == "cuda") {
      cuda::link(ctx, what, producer.stream, std::nullopt, loc);
    } else {
      numbered_noop(ctx, what, loc);
    }
  } catch (...) {
    mark_intent_end(ctx, id, Access::write, what, range, loc);
    throw;
  }
  mark_intent_end(ctx, id, Access::write, what, range, loc);
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
int device_of(const void*, std::source_location loc) {
  throw Error(Errc::unsupported,
              "__cuda_array_interface__: this sluice module was built without the cuda backend",
              loc);
}
Context consumer(const Device& device, std::uintptr_t, std::source_location loc) {
  throw Error(Errc::unsupported,
              "a stream of " + device.to_string() +
                  ": this sluice module was built without the cuda backend",
              loc);
}
}  // namespace cuda
#endif

}  // namespace sluice::python::interop
