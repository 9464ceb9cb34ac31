#pragma once
// A generated module's source divided into chunks that compile apart (lazy_unit_mark): the cuda
// backend compiles them at once on several threads, since NVRTC takes about 80 ms a kernel and a
// tuning request builds 36 to 44 candidates for the DG right-hand side (3.5 s as one module).
// Header-only: the backend modules use it without calling into the library.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/ext/lazy_kernels.hpp"

namespace sluice::lazy::detail {

/// One chunk: the prelude and some units, and the kernels those units define.
struct ModuleChunk {
  std::string source;
  std::vector<std::string> names;
};

/// Chunks of `source` of at least `min_units` units each (so the prelude, compiled once per
/// chunk, stays a small share), at most `max_chunks`, consecutive units in order, the counts as
/// even as they can be. The chunking depends on the source alone (each chunk's disk cache entry
/// is then the same on every machine). A source without units is one chunk of `names`.
[[nodiscard]] inline std::vector<ModuleChunk> module_chunks(const std::string& source,
                                                            const std::vector<std::string>& names,
                                                            std::size_t max_chunks = 8,
                                                            std::size_t min_units = 3) {
  const std::size_t first = source.find(lazy_unit_mark);
  if (first == std::string::npos) return {{source, names}};
  struct Unit {
    std::string name;
    std::string_view text;  // from its mark to the next
  };
  std::vector<Unit> units;
  for (std::size_t at = first; at != std::string::npos;) {
    const std::size_t name_at = at + lazy_unit_mark.size();
    const std::size_t eol = source.find('\n', name_at);
    const std::size_t next = source.find(lazy_unit_mark, name_at);
    units.push_back({source.substr(name_at, std::min(eol, next) - name_at),
                     std::string_view(source).substr(
                         at, next == std::string::npos ? std::string::npos : next - at)});
    at = next;
  }
  const std::size_t count = std::clamp<std::size_t>(
      units.size() / std::max<std::size_t>(min_units, 1), 1, std::max<std::size_t>(max_chunks, 1));
  if (count == 1) return {{source, names}};
  const std::string_view prelude = std::string_view(source).substr(0, first);
  std::vector<ModuleChunk> chunks(count);
  for (std::size_t c = 0; c < count; ++c) {
    chunks[c].source = prelude;
    for (std::size_t u = c * units.size() / count; u < (c + 1) * units.size() / count; ++u) {
      chunks[c].source += units[u].text;
      chunks[c].names.push_back(units[u].name);
    }
  }
  return chunks;
}

}  // namespace sluice::lazy::detail
