// The current device and context of a thread (ScopedContext, ScopedDevice; Warp's ScopedStream
// and ScopedDevice), and each device's default context.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/error.hpp"

namespace sluice {
namespace {

/// One open scope: a context (and its device), or a device alone.
struct Frame {
  std::optional<Context> context;
  Device device;
  std::optional<Context> previous;  // the context it replaced, for sync_exit
  bool sync_exit = false;
  std::source_location where;
};

thread_local std::vector<Frame> t_frames;

/// The default context of each device: made on first use, never destroyed. Destroying contexts
/// during static destruction would race the backends' own teardown, so, like CUDA's primary
/// context, a default context lives as long as the process.
struct Defaults {
  std::mutex mutex;
  std::map<std::string, Context> by_device;
};
Defaults& defaults() {
  static auto* d = new Defaults;
  return *d;
}

/// The default context of `d`, made if `make`; else empty when not made yet.
std::optional<Context> default_context(const Device& d, bool make) {
  auto& all = defaults();
  std::lock_guard lock(all.mutex);
  const std::string key = d.to_string();
  if (auto it = all.by_device.find(key); it != all.by_device.end()) return it->second;
  if (!make) return std::nullopt;
  Context c(ContextOptions{.device = d, .name = "default(" + key + ")"});
  all.by_device.emplace(key, c);
  return c;
}

/// The innermost scope's context of device `d` on this thread, if any.
std::optional<Context> scoped_context(const Device& d) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if (it->context && it->device == d) return it->context;
  }
  return std::nullopt;
}

void pop_frame(std::size_t depth) noexcept {
  // Scopes end in reverse order; one ended out of order takes the ones opened after it along.
  if (depth >= t_frames.size()) return;
  Frame f = std::move(t_frames[depth]);
  t_frames.resize(depth);
  if (f.sync_exit && f.previous && f.context) {
    try {
      f.previous->wait_for(*f.context, f.where);
    } catch (...) {
      // Destructors never throw; the wait only orders later work and issues nothing that fails.
    }
  }
}

}  // namespace

Device current_device() {
  if (!t_frames.empty()) return t_frames.back().device;
  return default_device();
}

Context current_context() {
  const Device d = current_device();
  if (auto c = scoped_context(d)) return *c;
  return *default_context(d, true);
}

ScopedContext::ScopedContext(const Context& ctx, ScopeOptions options, std::source_location loc)
    : depth_(t_frames.size()) {
  const Device& d = ctx.device();
  std::optional<Context> previous = scoped_context(d);
  // Without a scope the previous current context is the default one: waiting for it only makes
  // sense once it exists (before, nothing was issued there), but leaving must find it.
  if (!previous) previous = default_context(d, options.sync_exit);
  if (options.sync_enter && previous && !(*previous == ctx)) ctx.wait_for(*previous, loc);
  t_frames.push_back(
      Frame{ctx, d, previous, options.sync_exit && previous && !(*previous == ctx), loc});
}

ScopedContext::~ScopedContext() {
  pop_frame(depth_);
}

ScopedDevice::ScopedDevice(const Device& device) : depth_(t_frames.size()) {
  (void)device_info(device);  // an unknown device is an Error here
  t_frames.push_back(Frame{std::nullopt, device, std::nullopt, false, {}});
}

ScopedDevice::~ScopedDevice() {
  pop_frame(depth_);
}

}  // namespace sluice
