#pragma once
// Backend modules (sluice/ext/plugin.hpp): finding libsluice-<name>.so, loading it, checking its
// ABI tag and letting it register its backend and extensions. Each name is tried once per
// process; the outcome is kept, so a failed module is reported, never retried.

#include <string>
#include <string_view>
#include <vector>

namespace sluice::detail {

struct PluginOutcome {
  std::string name;     // the backend, e.g. "cuda"
  std::string path;     // the file tried; empty when none was found
  bool loaded = false;  // registered its backend and extensions
  std::string reason;   // why not, when !loaded
};

/// Loads the module of backend `name` unless tried before. Returns its outcome, or nullptr when
/// `name` is no module this build knows of and no libsluice-<name>.so was found. Never throws.
/// Re-entrant: a module that looks up its own backend while registering finds it being loaded.
[[nodiscard]] const PluginOutcome* load_plugin(std::string_view name) noexcept;

/// Loads every module this build knows of and every libsluice-<name>.so in the directories
/// searched first (SLUICE_PLUGIN_PATH, or libsluice's own); their outcomes, in load order.
[[nodiscard]] std::vector<PluginOutcome> load_all_plugins() noexcept;

}  // namespace sluice::detail
