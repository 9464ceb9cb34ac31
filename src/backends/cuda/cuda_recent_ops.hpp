#pragma once
// The last few operations issued on a stream, so that a device fault (which CUDA reports at the
// next synchronizing call, with no hint of which kernel caused it) can name what was in flight.

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "sluice/backend.hpp"

namespace sluice::detail::cuda {

class RecentOps {
 public:
  /// Remembers `op`; forgets the oldest beyond kSize. No allocation: cheap on every enqueue.
  void add(const OpInfo& op) noexcept;
  /// Forgets everything (after a successful synchronize: nothing is in flight any more).
  void clear() noexcept;
  /// "#3 'kernel' issued at a.cpp:10; #4 'copy' issued at a.cpp:11" (oldest first), and how many
  /// older ones were not kept; "none recorded" when empty.
  [[nodiscard]] std::string describe() const;
  /// Where the newest operation was issued (default-constructed when none).
  [[nodiscard]] std::source_location newest() const noexcept;

  static constexpr std::size_t kSize = 8;

 private:
  struct Entry {
    std::uint64_t seq = 0;
    std::array<char, 32> what{};  // OpInfo::what lives only during the call: keep a copy
    std::source_location where;
  };

  mutable std::mutex mutex_;
  std::array<Entry, kSize> ring_{};
  std::uint64_t count_ = 0;  // added since the last clear
};

}  // namespace sluice::detail::cuda
