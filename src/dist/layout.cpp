// dist::Layout: contiguous blocks of rows in rank order (sluice/dist.hpp).

#include <algorithm>
#include <string>

#include "sluice/dist.hpp"
#include "sluice/error.hpp"

namespace sluice::dist {

Layout Layout::split(int ranks, std::int64_t global, std::size_t halo) {
  if (ranks < 1 || global < 0) {
    throw Error(Errc::invalid_argument, "dist::Layout::split: " + std::to_string(global) +
                                            " rows over " + std::to_string(ranks) +
                                            " ranks; both must be positive");
  }
  std::vector<std::int64_t> starts(static_cast<std::size_t>(ranks) + 1, 0);
  const std::int64_t each = global / ranks, extra = global % ranks;
  for (int r = 0; r < ranks; ++r) {
    starts[static_cast<std::size_t>(r) + 1] =
        starts[static_cast<std::size_t>(r)] + each + (r < extra ? 1 : 0);
  }
  return from_starts(std::move(starts), halo);
}

Layout Layout::from_starts(std::vector<std::int64_t> starts, std::size_t halo) {
  if (starts.size() < 2 || starts.front() != 0 || !std::is_sorted(starts.begin(), starts.end())) {
    throw Error(Errc::invalid_argument,
                "dist::Layout::from_starts: give each rank's first row from 0 up, and the "
                "global size last (ranks + 1 entries, never decreasing)");
  }
  Layout l;
  l.starts_ = std::move(starts);
  l.halo_ = halo;
  return l;
}

int Layout::owner(std::int64_t row) const {
  if (row < 0 || row >= size()) {
    throw Error(Errc::invalid_argument, "dist::Layout::owner: row " + std::to_string(row) +
                                            " is outside [0, " + std::to_string(size()) + ")");
  }
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), row);
  return static_cast<int>(it - starts_.begin()) - 1;
}

}  // namespace sluice::dist
