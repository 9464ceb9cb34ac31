// Choosing cuda kernel shapes by measurement (see tune.hpp).

#include "lazy/tune.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

namespace sluice::lazy::detail {
namespace {

/// A candidate is kept over the size rule's only if its median is at least this much lower
/// (timing noise does not flip the choice between processes).
constexpr double kMargin = 0.97;

struct Choice {
  int index = 0;
  std::string label;
  std::vector<double> us;  // medians, where timed in this process
};

struct Memory {
  std::mutex mutex;
  std::unordered_map<std::string, Choice> choices;
  TuneTimer timer;
};
Memory& memory() {
  static Memory* m = new Memory;  // never destroyed: used from static destructors' programs
  return *m;
}

std::uint64_t fnv(const std::string& s, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

/// The group's key: the device, a hash of every candidate's source, and the size rule's
/// parameters (the sizes; the source alone is the same for every size).
std::string key_of(const std::string& device, const std::vector<KernelCode>& codes) {
  std::uint64_t h = fnv(device);
  for (const auto& c : codes) h = fnv(c.text, h);
  std::string k = device + "|" + hex(h) + "|" + std::to_string(codes.front().elements);
  for (auto p : codes.front().params) k += "," + std::to_string(p);
  return k;
}

std::filesystem::path disk_path(const std::string& key) {
  return kernel_cache::directory() / "lazy-tune" / (hex(fnv(key)) + ".txt");
}

/// A choice on disk, if its key and label still match the candidates.
std::optional<Choice> read_disk(const std::string& key, const std::vector<std::string>& labels) {
  std::ifstream f(disk_path(key));
  if (!f) return std::nullopt;
  std::string stored, label;
  int index = -1;
  if (!std::getline(f, stored) || stored != key || !(f >> index >> label)) return std::nullopt;
  if (index < 0 || static_cast<std::size_t>(index) >= labels.size() ||
      labels[static_cast<std::size_t>(index)] != label) {
    return std::nullopt;
  }
  return Choice{index, label, {}};
}

/// Best effort, written atomically (a reader never sees half a file).
void write_disk(const std::string& key, const Choice& c, const std::vector<std::string>& labels) {
  std::error_code ec;
  const auto path = disk_path(key);
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return;
  const auto tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return;
    f << key << "\n" << c.index << " " << c.label << "\n";
    for (std::size_t i = 0; i < labels.size() && i < c.us.size(); ++i) {
      f << labels[i] << " " << c.us[i] << " us\n";
    }
    if (!f) return;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

namespace {

/// The names of an option's modes (environment excepted), in the order an error lists them.
template <class E>
struct Named {
  const char* name;
  E mode;
};

/// `option`, or where it is `environment` the mode the variable `var` names (`unset` when it is
/// unset or empty); an unknown name is an Error listing the names.
template <class E, std::size_t N>
E from_environment(E option, const char* var, E unset, const Named<E> (&names)[N],
                   std::source_location loc) {
  if (option != E::environment) return option;
  const char* e = std::getenv(var);
  if (e == nullptr || *e == 0) return unset;
  const std::string v = e;
  std::string list;
  for (std::size_t i = 0; i < N; ++i) {
    if (v == names[i].name) return names[i].mode;
    list += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i].name);
  }
  throw Error(Errc::invalid_argument,
              std::string("sluice::lazy: ") + var + " is '" + v + "'; set it to " + list, loc);
}

template <class E, std::size_t N>
const char* name_of(E mode, const Named<E> (&names)[N]) noexcept {
  for (const auto& n : names) {
    if (n.mode == mode) return n.name;
  }
  return "environment";
}

constexpr Named<Tune> kTunes[] = {{"off", Tune::off}, {"on", Tune::on}, {"cached", Tune::cached}};
constexpr Named<Gemm> kGemms[] = {
    {"auto", Gemm::automatic}, {"blas", Gemm::blas}, {"generated", Gemm::generated}};
constexpr Named<Tile> kTiles[] = {{"auto", Tile::automatic}, {"off", Tile::off}, {"on", Tile::on}};
constexpr Named<Binding> kBindings[] = {
    {"auto", Binding::automatic}, {"arguments", Binding::arguments}, {"table", Binding::table}};

}  // namespace

Tune resolve_tune(Tune option, std::source_location loc) {
  return from_environment(option, "SLUICE_LAZY_TUNE", Tune::on, kTunes, loc);
}
const char* tune_name(Tune mode) noexcept {
  return name_of(mode, kTunes);
}
Gemm resolve_gemm(Gemm option, std::source_location loc) {
  return from_environment(option, "SLUICE_LAZY_GEMM", Gemm::automatic, kGemms, loc);
}
const char* gemm_name(Gemm mode) noexcept {
  return name_of(mode, kGemms);
}
Tile resolve_tile(Tile option, std::source_location loc) {
  return from_environment(option, "SLUICE_LAZY_TILE", Tile::automatic, kTiles, loc);
}
const char* tile_name(Tile mode) noexcept {
  return name_of(mode, kTiles);
}
Binding resolve_binding(Binding option, std::source_location loc) {
  return from_environment(option, "SLUICE_LAZY_BINDING", Binding::automatic, kBindings, loc);
}
const char* binding_name(Binding mode) noexcept {
  return name_of(mode, kBindings);
}

TuneReport tune_instance(InstanceDesc& d, LazyDialect dialect, bool debug, Tune mode,
                         const std::string& device_name, const TuneTimer& timer) {
  TuneReport report;
  if (dialect != LazyDialect::cuda || mode == Tune::off) return report;
  const auto start = std::chrono::steady_clock::now();
  const Lowered& L = d.lowered;
  struct Pending {
    int code;
    std::vector<CudaShape> shapes;
    std::vector<KernelCode> codes;
    std::vector<std::string> labels;
    std::string key;
  };
  std::vector<Pending> pending;
  bool changed = false;
  for (std::size_t ci = 0; ci < d.codes.size(); ++ci) {
    auto& code = d.codes[ci];
    if (code.kernel < 0) continue;  // an operand table
    const Kernel& k = d.fused.kernels[static_cast<std::size_t>(code.kernel)];
    auto shapes = cuda_shape_candidates(k, L);
    if (shapes.size() < 2) continue;
    ++report.groups;
    Pending p{static_cast<int>(ci), std::move(shapes), {}, {}, {}};
    for (std::size_t i = 0; i < p.shapes.size(); ++i) {
      p.codes.push_back(emit_kernel(k, L, dialect, static_cast<int>(ci), debug, &p.shapes[i],
                                    "_c" + std::to_string(i)));
      p.codes.back().kernel = code.kernel;
      p.labels.push_back(p.codes.back().shape);
    }
    p.key = key_of(device_name, p.codes);
    code.candidates = p.labels;
    std::optional<Choice> found;
    {
      std::lock_guard lock(memory().mutex);
      if (auto it = memory().choices.find(p.key); it != memory().choices.end()) found = it->second;
    }
    std::string origin = "memory";
    if (!found) {
      found = read_disk(p.key, p.labels);
      origin = "disk";
      if (found) {
        std::lock_guard lock(memory().mutex);
        memory().choices[p.key] = *found;
      }
    }
    if (found) {
      ++report.hits;
      code.choice = origin;
      code.candidate_us = found->us;
      if (found->index != 0) {
        auto again =
            emit_kernel(k, L, dialect, static_cast<int>(ci), debug,
                        &p.shapes[static_cast<std::size_t>(found->index)], {}, code.members);
        again.kernel = code.kernel;
        again.candidates = std::move(code.candidates);
        again.candidate_us = std::move(code.candidate_us);
        again.choice = origin;
        code = std::move(again);
        changed = true;
      }
      continue;
    }
    code.choice = "rule";
    if (mode == Tune::on && timer) pending.push_back(std::move(p));
  }

  if (!pending.empty()) {
    TuneRequest req;
    req.desc = &d;
    req.source = prelude(dialect);
    for (auto& p : pending) {
      for (const auto& c : p.codes) {
        req.source += unit_text(c);
        req.names.push_back(c.name);
      }
      req.groups.push_back({p.code, p.codes});
    }
    const auto times = timer(req);
    // A backend that cannot time (none of its kernels has alternatives) answers nothing: the
    // size rule stays, and nothing is remembered.
    if (times.empty()) pending.clear();
    if (!times.empty() && times.size() != pending.size()) {
      throw Error(Errc::invalid_state, "sluice::lazy: the kernel timer answered " +
                                           std::to_string(times.size()) + " groups of " +
                                           std::to_string(pending.size()));
    }
    for (std::size_t g = 0; g < pending.size(); ++g) {
      auto& p = pending[g];
      Choice c;
      for (std::size_t i = 0; i < p.codes.size(); ++i) {
        c.us.push_back(i < times[g].size() ? median(times[g][i]) * 1000 : 0);
      }
      report.candidates += p.codes.size();
      ++report.timed;
      for (std::size_t i = 1; i < c.us.size(); ++i) {
        const double best = c.us[static_cast<std::size_t>(c.index)];
        if (c.us[i] < best && (c.index != 0 || c.us[i] < kMargin * best)) {
          c.index = static_cast<int>(i);
        }
      }
      c.label = p.labels[static_cast<std::size_t>(c.index)];
      {
        std::lock_guard lock(memory().mutex);
        memory().choices[p.key] = c;
      }
      write_disk(p.key, c, p.labels);
      auto& code = d.codes[static_cast<std::size_t>(p.code)];
      const Kernel& k = d.fused.kernels[static_cast<std::size_t>(code.kernel)];
      auto chosen = emit_kernel(k, L, dialect, p.code, debug,
                                &p.shapes[static_cast<std::size_t>(c.index)], {}, code.members);
      chosen.kernel = code.kernel;
      chosen.candidates = std::move(p.labels);
      chosen.candidate_us = std::move(c.us);
      chosen.choice = "timed";
      code = std::move(chosen);
      changed = true;
    }
  }
  if (changed) d.source = assemble_source(d, dialect);
  report.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return report;
}

TuneTimer set_tune_timer(TuneTimer timer) {
  std::lock_guard lock(memory().mutex);
  return std::exchange(memory().timer, std::move(timer));
}

TuneTimer tune_timer_override() {
  std::lock_guard lock(memory().mutex);
  return memory().timer;
}

void forget_tune_memory() {
  std::lock_guard lock(memory().mutex);
  memory().choices.clear();
}

}  // namespace sluice::lazy::detail
