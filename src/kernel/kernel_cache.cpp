// The NVRTC cache: in memory for the process, on disk for later processes.

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <unordered_map>

#include "core/plugin_loader.hpp"
#include "kernel/nvrtc.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"
#include "sluice/kernel.hpp"

namespace sluice::kernel_cache {
namespace {

constexpr std::string_view kMagic = "sluice-kernel-cache 1\n";

struct State {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const Compiled>> memory;  // by full key
  std::optional<std::filesystem::path> directory;
  std::atomic<std::uint64_t> compiles{0}, memory_hits{0}, disk_hits{0}, disk_writes{0};
};

State& state() {
  static State s;
  return s;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

void put(std::string& out, std::string_view field) {
  const std::uint64_t n = field.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(field);
}

bool take(std::string_view& in, std::string_view& field) {
  std::uint64_t n = 0;
  if (in.size() < sizeof n) return false;
  std::memcpy(&n, in.data(), sizeof n);
  in.remove_prefix(sizeof n);
  if (in.size() < n) return false;
  field = in.substr(0, n);
  in.remove_prefix(n);
  return true;
}

std::filesystem::path entry_path(const std::string& key) {
  return directory() / (hex(fnv1a(key)) + ".kcache");
}

// The whole key is stored and compared, so a hash collision or a truncated file is a miss.
std::optional<Compiled> read_disk(const std::string& key) {
  std::ifstream in(entry_path(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string_view rest(data);
  if (!rest.starts_with(kMagic)) return std::nullopt;
  rest.remove_prefix(kMagic.size());
  std::string_view stored_key, name, image;
  if (!take(rest, stored_key) || !take(rest, name) || !take(rest, image) || !rest.empty() ||
      stored_key != key) {
    return std::nullopt;
  }
  return Compiled{std::string(image), std::string(name), Origin::disk};
}

// Best-effort: written to a temporary name and renamed, so a reader sees all of it or nothing.
void write_disk(const std::string& key, const Compiled& c) {
  std::error_code ec;
  const auto path = entry_path(key);
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return;
  std::string data(kMagic);
  put(data, key);
  put(data, c.lowered_name);
  put(data, c.image);
  std::random_device rd;
  auto tmp = path;
  tmp += ".tmp" + hex((std::uint64_t{rd()} << 32) | rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return;
  }
  state().disk_writes.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::filesystem::path directory() {
  {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    if (s.directory) return *s.directory;
  }
  if (const char* env = std::getenv("SLUICE_KERNEL_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::filesystem::path(xdg) / "sluice" / "kernels";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".cache" / "sluice" / "kernels";
  }
  return std::filesystem::temp_directory_path() / "sluice-kernels";
}

void set_directory(std::filesystem::path dir) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (dir.empty()) {
    s.directory.reset();
  } else {
    s.directory = std::move(dir);
  }
}

void clear_memory() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.memory.clear();
}

Stats stats() {
  auto& s = state();
  return {s.compiles.load(), s.memory_hits.load(), s.disk_hits.load(), s.disk_writes.load()};
}

Compiled compile(std::string_view source, std::string_view kernel_name,
                 std::span<const std::string> options, int arch, std::source_location loc) {
  // NVRTC comes with the cuda module; asking for it loads the module.
  auto* nvrtc = find_extension<detail::Nvrtc>("cuda");
  if (nvrtc == nullptr) {
    const auto* why = detail::load_plugin("cuda");
    throw Error(Errc::unsupported,
                "kernel_cache::compile: NVRTC comes with the cuda backend module, which is not "
                "available" +
                    (why != nullptr && !why->loaded ? ": " + why->reason
                                                    : std::string(" (sluice was built without the "
                                                                  "cuda backend; rebuild with "
                                                                  "SLUICE_CUDA=ON)")),
                loc);
  }
  if (arch < 10) {
    throw Error(Errc::invalid_argument,
                "kernel_cache::compile: arch " + std::to_string(arch) +
                    " is not an SM architecture; pass e.g. 90 for sm_90",
                loc);
  }
  std::string key = "nvrtc " + nvrtc->version() + "\nsm_" + std::to_string(arch) + "\n";
  key += kernel_name;
  key += '\n';
  for (const auto& o : options) {
    key += o;
    key += '\0';
  }
  key += '\n';
  key += source;

  auto& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (auto it = s.memory.find(key); it != s.memory.end()) {
      s.memory_hits.fetch_add(1, std::memory_order_relaxed);
      Compiled c = *it->second;
      c.origin = Origin::memory;
      return c;
    }
  }
  std::optional<Compiled> found = read_disk(key);
  if (found) {
    s.disk_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    auto out = nvrtc->compile(source, kernel_name, options, arch, loc);
    s.compiles.fetch_add(1, std::memory_order_relaxed);
    found = Compiled{std::move(out.image), std::move(out.lowered_name), Origin::compiled};
    write_disk(key, *found);
  }
  {
    std::lock_guard lock(s.mutex);
    s.memory.emplace(std::move(key), std::make_shared<const Compiled>(*found));
  }
  return std::move(*found);
}

}  // namespace sluice::kernel_cache
