#include "core/plugin_loader.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "sluice/ext/plugin.hpp"

// The modules this build made (CMake: "cuda" with the cuda backend), comma-separated, and the
// library directory of the install it was configured for.
#ifndef SLUICE_BUILT_PLUGINS
#define SLUICE_BUILT_PLUGINS ""
#endif
#ifndef SLUICE_INSTALL_LIBDIR
#define SLUICE_INSTALL_LIBDIR ""
#endif

namespace sluice::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPathVariable = "SLUICE_PLUGIN_PATH";

std::string file_name(std::string_view name) {
  return "libsluice-" + std::string(name) + ".so";
}

// A backend name a module file may carry: what `Device::parse` accepts before the colon.
bool valid_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto end = text.find(sep);
    if (auto part = text.substr(0, end); !part.empty()) out.emplace_back(part);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

// The object that holds libsluice: libsluice.so, or the program (or library) it was linked into
// statically.
struct Self {
  std::string dir;
  std::string path;
  bool main_program = false;
};

const char kAnchor = 0;

Self locate_self() {
  Self self;
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(&kAnchor, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return self;
  }
  link_map* main_map = nullptr;
  if (void* main_handle = dlopen(nullptr, RTLD_LAZY)) {
    (void)dlinfo(main_handle, RTLD_DI_LINKMAP, &main_map);
  }
  std::error_code ec;
  if (map == main_map || map->l_name == nullptr || *map->l_name == '\0') {
    self.main_program = true;
    self.path = fs::read_symlink("/proc/self/exe", ec).string();
  } else {
    self.path = fs::absolute(map->l_name, ec).string();
  }
  if (!self.path.empty()) self.dir = fs::path(self.path).parent_path().string();
  return self;
}

struct Search {
  std::vector<std::string> dirs;
  bool from_environment = false;
};

Search search_path(const Self& self) {
  Search s;
  if (const char* env = std::getenv(kPathVariable.data()); env != nullptr && *env != '\0') {
    s.dirs = split(env, ':');
    s.from_environment = true;
    return s;
  }
  if (!self.dir.empty()) s.dirs.push_back(self.dir);
  const std::string install = SLUICE_INSTALL_LIBDIR;
  if (!install.empty() && std::find(s.dirs.begin(), s.dirs.end(), install) == s.dirs.end()) {
    s.dirs.push_back(install);
  }
  return s;
}

std::string joined(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ", ") + d;
  return out.empty() ? "no directory" : out;
}

std::string last_dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dynamic-linker error";
}

class Loader {
 public:
  const PluginOutcome* load(std::string_view name) {
    std::lock_guard lock(mutex_);
    if (auto it = outcomes_.find(name); it != outcomes_.end()) {
      return it->second ? &*it->second : nullptr;  // empty while it is being loaded
    }
    if (!valid_name(name) || is_builtin(name) || absent_.contains(name)) return nullptr;
    auto& slot = outcomes_[std::string(name)];  // empty: being loaded (a re-entrant call sees it)
    std::optional<PluginOutcome> outcome = attempt(name);
    if (!outcome) {
      outcomes_.erase(std::string(name));
      absent_.emplace(name);
      return nullptr;
    }
    slot = std::move(outcome);
    order_.emplace_back(name);
    return &*slot;
  }

  std::vector<PluginOutcome> load_all() {
    std::lock_guard lock(mutex_);
    for (const auto& name : split(SLUICE_BUILT_PLUGINS, ',')) (void)load(name);
    for (const auto& name : discovered()) (void)load(name);
    std::vector<PluginOutcome> out;
    for (const auto& name : order_) {
      if (const auto& o = outcomes_.at(name)) out.push_back(*o);
    }
    return out;
  }

 private:
  static bool is_builtin(std::string_view name) { return name == "host"; }

  static bool is_known(std::string_view name) {
    const auto built = split(SLUICE_BUILT_PLUGINS, ',');
    return std::find(built.begin(), built.end(), name) != built.end();
  }

  void prepare() {
    if (prepared_) return;
    prepared_ = true;
    self_ = locate_self();
    search_ = search_path(self_);
    // A module resolves libsluice's symbols from the global scope; a libsluice.so that was
    // loaded privately (by a Python extension, say) is promoted to it first. Never closed.
    if (!self_.main_program && !self_.path.empty()) {
      (void)dlopen(self_.path.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
    }
  }

  // Names of the modules in the directories searched first.
  std::vector<std::string> discovered() {
    prepare();
    std::set<std::string> names;
    constexpr std::string_view prefix = "libsluice-", suffix = ".so";
    for (const auto& dir : search_.dirs) {
      if (!search_.from_environment && dir != self_.dir) continue;  // not the install's libdir
      std::error_code ec;
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string f = it->path().filename().string();
        if (f.size() <= prefix.size() + suffix.size() || !f.starts_with(prefix) ||
            !f.ends_with(suffix)) {
          continue;
        }
        std::string name = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
        if (valid_name(name)) names.insert(std::move(name));
      }
    }
    return {names.begin(), names.end()};
  }

  std::optional<PluginOutcome> attempt(std::string_view name) {
    prepare();
    const std::string file = file_name(name);
    PluginOutcome o{std::string(name), {}, false, {}};
    for (const auto& dir : search_.dirs) {
      std::error_code ec;
      const fs::path candidate = fs::path(dir) / file;
      if (!fs::is_regular_file(candidate, ec)) continue;
      o.path = candidate.string();
      void* handle = dlopen(o.path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        o.reason = "module " + o.path + " failed to load: " + last_dl_error();
        return o;
      }
      accept(o, handle);
      return o;
    }
    if (!search_.from_environment) {
      // The dynamic linker's own search: LD_LIBRARY_PATH, the RUNPATH of the object holding
      // libsluice (a static program linked against an install has one), ld.so.cache.
      (void)dlerror();
      if (void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        link_map* map = nullptr;
        o.path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr ? map->l_name : file;
        accept(o, handle);
        return o;
      }
      const std::string error = last_dl_error();
      if (!error.starts_with(file + ":") ||
          error.find("cannot open shared object file") == std::string::npos) {
        o.path = file;
        o.reason = "module " + file + " failed to load: " + error;
        return o;
      }
    }
    if (!is_known(name)) return std::nullopt;
    o.reason = "module " + file + " not found in " + joined(search_.dirs);
    if (search_.from_environment) {
      o.reason += " (" + std::string(kPathVariable) + ")";
    } else {
      o.reason +=
          " or on the dynamic linker's path; install it beside libsluice, or name its "
          "directory in " +
          std::string(kPathVariable);
    }
    return o;
  }

  // Checks the module's entry point and lets it register. The handle stays open once the module
  // ran any of its C++ (what it registered points into it).
  static void accept(PluginOutcome& o, void* handle) {
    const std::string module = "module " + o.path;
    (void)dlerror();
    auto entry = reinterpret_cast<SluicePluginEntry>(dlsym(handle, "sluice_plugin"));
    if (entry == nullptr) {
      o.reason = module + " is not a sluice backend module: " + last_dl_error();
      dlclose(handle);
      return;
    }
    const SluicePlugin* plugin = entry();
    if (plugin == nullptr || plugin->entry_version != SLUICE_PLUGIN_ENTRY_VERSION) {
      o.reason = module + " refused: its entry point is version " +
                 (plugin == nullptr ? "(none)" : std::to_string(plugin->entry_version)) +
                 ", this libsluice reads version " + std::to_string(SLUICE_PLUGIN_ENTRY_VERSION) +
                 "; rebuild or reinstall the module with this libsluice";
      dlclose(handle);
      return;
    }
    const std::string tag = plugin->abi_tag != nullptr ? plugin->abi_tag : "(none)";
    if (tag != SLUICE_PLUGIN_ABI_TAG) {
      o.reason = module + " refused: it was built for '" + tag + "', this libsluice is '" +
                 SLUICE_PLUGIN_ABI_TAG + "'; rebuild or reinstall the module with this libsluice";
      dlclose(handle);
      return;
    }
    if (plugin->backend == nullptr || o.name != plugin->backend) {
      o.reason = module + " refused: it registers backend '" +
                 (plugin->backend != nullptr ? plugin->backend : "") +
                 "', not the one its file name says";
      dlclose(handle);
      return;
    }
    char why[1024] = {};
    if (plugin->register_all(why, sizeof why) != 0) {
      o.reason = module + " failed to register: " + why;
      return;
    }
    o.loaded = true;
  }

  std::recursive_mutex mutex_;
  std::map<std::string, std::optional<PluginOutcome>, std::less<>> outcomes_;
  std::set<std::string, std::less<>> absent_;
  std::vector<std::string> order_;
  bool prepared_ = false;
  Self self_;
  Search search_;
};

Loader& loader() {
  static Loader l;  // the modules it loaded are never closed: what they registered lives on
  return l;
}

}  // namespace

const PluginOutcome* load_plugin(std::string_view name) noexcept {
  try {
    return loader().load(name);
  } catch (...) {
    return nullptr;  // out of memory while building a message: the backend stays unknown
  }
}

std::vector<PluginOutcome> load_all_plugins() noexcept {
  try {
    return loader().load_all();
  } catch (...) {
    return {};
  }
}

}  // namespace sluice::detail
