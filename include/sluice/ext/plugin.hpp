#pragma once
/// @file
/// The entry point of a backend module: a shared library `libsluice-<name>.so` that the backend
/// registry (sluice/backend.hpp) loads at run time, the first time backend `<name>` is asked for
/// or the backends are listed. The cuda backend is such a module, so a program that only uses
/// the host loads no CUDA library.
///
/// A module is built against the headers of the libsluice that loads it and shares its C++ types
/// (`Backend`, the extension interfaces), so libsluice checks, before it calls any of the
/// module's C++, that both come from the same headers: it looks up the one C symbol
/// `sluice_plugin`, compares the entry version and the ABI tag (a hash of sluice's headers, its
/// version and compiler, `SLUICE_PLUGIN_ABI_TAG`) and refuses a module that differs, saying
/// why. Only then does it call `register_all`, which registers the module's backend and its
/// extensions with `register_backend` and `register_extension`.
///
/// Where libsluice looks, in order: the directories of `SLUICE_PLUGIN_PATH` (colon-separated;
/// when set, nowhere else), else the directory that holds libsluice (for a static libsluice,
/// the program's), the install's library directory, and the dynamic linker's search path. The
/// first file found is the module; if it fails, the backend is listed with the reason and no
/// devices.
///
/// @code
/// // mybackend.cpp, linked into libsluice-mybackend.so
/// namespace {
/// int register_all(char* why, std::size_t why_size) noexcept {
///   return sluice::plugin_register(why, why_size, [] {
///     sluice::register_backend(std::make_shared<MyBackend>());
///   });
/// }
/// }  // namespace
/// SLUICE_PLUGIN_DEFINE("mybackend", register_all)
/// @endcode

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>

#include "sluice/ext/plugin_abi_tag.hpp"  // generated: SLUICE_PLUGIN_ABI_TAG

/// Changes when the layout of `SluicePlugin` or the meaning of its fields changes.
#define SLUICE_PLUGIN_ENTRY_VERSION 1u

extern "C" {

/// What a module's `sluice_plugin()` returns: plain C, readable before the module is trusted.
struct SluicePlugin {
  std::uint32_t entry_version;  ///< SLUICE_PLUGIN_ENTRY_VERSION of the module's headers
  const char* abi_tag;          ///< SLUICE_PLUGIN_ABI_TAG of the module's headers
  const char* backend;          ///< the backend it registers; the file is libsluice-<backend>.so
  /// Registers the backend and its extensions. Returns 0, or non-zero with a message in `why`
  /// (`why_size` bytes, terminated). Called once, after the checks.
  int (*register_all)(char* why, std::size_t why_size) noexcept;
};

/// The name libsluice looks up in a module.
using SluicePluginEntry = const SluicePlugin* (*)();
}

namespace sluice {

/// Runs `registration`, turning an exception into `register_all`'s return value and message.
template <class F>
int plugin_register(char* why, std::size_t why_size, F&& registration) noexcept {
  const char* message = "unknown exception";
  try {
    registration();
    return 0;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
  }
  if (why != nullptr && why_size > 0) {
    std::strncpy(why, message, why_size - 1);
    why[why_size - 1] = '\0';
  }
  return 1;
}

}  // namespace sluice

/// Defines the module's entry point for backend `backend` (a string literal) with `register_fn`
/// as its `register_all`. Use once per module, at namespace scope.
#define SLUICE_PLUGIN_DEFINE(backend, register_fn)                                                \
  extern "C" __attribute__((visibility("default"))) const SluicePlugin* sluice_plugin() {         \
    static const SluicePlugin plugin{SLUICE_PLUGIN_ENTRY_VERSION, SLUICE_PLUGIN_ABI_TAG, backend, \
                                     &register_fn};                                               \
    return &plugin;                                                                               \
  }
