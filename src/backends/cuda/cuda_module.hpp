#pragma once
// The cuda module (libsluice-cuda.so): the cuda backend and the cuda extensions of every layer,
// loaded by libsluice at run time (sluice/ext/plugin.hpp). Each layer's cuda/ folder registers
// its extensions here with one `ModuleRegistration` object; the module runs them all once
// libsluice has accepted it, before it registers the backend itself.

namespace sluice::detail::cuda {

/// Adds `fn` to what the module registers when it is loaded. Define one at namespace scope:
/// `const ModuleRegistration registration{[] { register_extension<X>("cuda", ...); }};`
/// (static initialization inside the module only collects; nothing runs before the ABI check).
struct ModuleRegistration {
  explicit ModuleRegistration(void (*fn)()) noexcept;
};

}  // namespace sluice::detail::cuda
