#pragma once
/// @file
/// The extension registry: per-backend implementations of interfaces that the layers above the
/// runtime define (`LaKernels`, `ScalarKernels`, canned BLAS / RNG / FFT, ...), looked up by type.
///
/// A backend (`sluice/backend.hpp`) is the runtime only: streams, events, memory. Everything a
/// layer needs per backend is an *extension*: an interface with a name, implemented per backend
/// and registered here under the backend's name. A platform may provide an extension or leave it
/// out; asking for a missing one throws `Error(unsupported)` naming the backend and the extension.
///
/// An extension interface is a class with a `static constexpr std::string_view extension_name`.
/// It may also declare `static void register_builtins()`, which the registry calls once, before
/// the first lookup or registration of that interface, so that the layer that defines an
/// interface registers its own built-in implementations (no static-initialization order to rely
/// on); it registers them with `register_extension` like anybody else.
///
/// Thread safety: registration and lookup may happen from any thread at any time.
///
/// @code
/// struct Fft {
///   static constexpr std::string_view extension_name = "Fft";
///   virtual ~Fft() = default;
///   virtual void forward(sluice::Stream&, ...) = 0;
/// };
/// sluice::register_extension<Fft>("mybackend", std::make_shared<MyFft>());
/// Fft& fft = sluice::extension<Fft>(ctx);  // throws "mybackend has no Fft: ..." if absent
/// @endcode

#include <atomic>
#include <concepts>
#include <cstddef>
#include <memory>
#include <source_location>
#include <string_view>
#include <typeindex>

namespace sluice {

class Context;

/// An extension interface: a type that names itself.
template <class Ext>
concept ExtensionInterface = requires {
  { Ext::extension_name } -> std::convertible_to<std::string_view>;
};

namespace detail {

void register_extension(std::type_index type, std::string_view extension_name,
                        std::string_view backend, std::shared_ptr<void> impl);
[[nodiscard]] void* find_extension(std::type_index type, std::string_view backend) noexcept;
[[noreturn]] void throw_missing_extension(std::string_view extension_name, std::string_view backend,
                                          std::source_location loc);
/// A process-wide small number for each extension interface (context-side lookup caches).
[[nodiscard]] std::size_t next_extension_slot() noexcept;
/// The cache slot of the context's backend for `slot`; null when the slot is beyond the cache.
[[nodiscard]] void** context_extension_slot(const Context& ctx, std::size_t slot) noexcept;
[[nodiscard]] std::string_view context_backend(const Context& ctx) noexcept;

template <class Ext>
void ensure_builtins() {
  if constexpr (requires { Ext::register_builtins(); }) {
    // register_builtins itself calls register_extension, which comes back here: on that thread
    // the registration under way must not wait for its own once-guard.
    thread_local bool registering = false;
    if (registering) return;
    registering = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{registering};
    static const bool once = (Ext::register_builtins(), true);
    (void)once;
  }
}

template <class Ext>
std::size_t extension_slot() noexcept {
  static const std::size_t slot = next_extension_slot();
  return slot;
}

}  // namespace detail

/// Registers `impl` as backend `backend`'s implementation of `Ext`. Throws
/// `Error(invalid_argument)` if `impl` is null or `backend` already has one (extensions are
/// never replaced, so a pointer handed out stays valid for the life of the process).
template <ExtensionInterface Ext>
void register_extension(std::string_view backend, std::shared_ptr<Ext> impl) {
  detail::ensure_builtins<Ext>();
  detail::register_extension(typeid(Ext), Ext::extension_name, backend, std::move(impl));
}

/// Backend `backend`'s implementation of `Ext`, or nullptr if it has none.
template <ExtensionInterface Ext>
[[nodiscard]] Ext* find_extension(std::string_view backend) {
  detail::ensure_builtins<Ext>();
  return static_cast<Ext*>(detail::find_extension(typeid(Ext), backend));
}

/// Backend `backend`'s implementation of `Ext`; throws `Error(unsupported)` ("cuda has no Fft:
/// ...") if it has none.
template <ExtensionInterface Ext>
[[nodiscard]] Ext& extension(std::string_view backend,
                             std::source_location loc = std::source_location::current()) {
  if (Ext* e = find_extension<Ext>(backend)) return *e;
  detail::throw_missing_extension(Ext::extension_name, backend, loc);
}

namespace detail {
/// `extension<Ext>(backend)`, remembered in `slot` (a context's cache; may be null).
template <ExtensionInterface Ext>
[[nodiscard]] Ext& cached_extension(void** slot, std::string_view backend,
                                    std::source_location loc) {
  if (slot != nullptr) {
    if (void* p = std::atomic_ref<void*>(*slot).load(std::memory_order_acquire)) {
      return *static_cast<Ext*>(p);
    }
  }
  Ext& e = extension<Ext>(backend, loc);
  if (slot != nullptr) {
    std::atomic_ref<void*>(*slot).store(static_cast<void*>(&e), std::memory_order_release);
  }
  return e;
}
}  // namespace detail

/// The implementation of `Ext` for `ctx`'s backend, as `extension(backend)`; the answer is cached
/// in the context, so a hot path pays one load after the first call.
template <ExtensionInterface Ext>
[[nodiscard]] Ext& extension(const Context& ctx,
                             std::source_location loc = std::source_location::current()) {
  return detail::cached_extension<Ext>(
      detail::context_extension_slot(ctx, detail::extension_slot<Ext>()),
      detail::context_backend(ctx), loc);
}

}  // namespace sluice
