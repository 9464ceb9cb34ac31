#include "backends/cuda/cuda_recent_ops.hpp"

#include <algorithm>

namespace sluice::detail::cuda {

void RecentOps::add(const OpInfo& op) noexcept {
  std::lock_guard lock(mutex_);
  auto& e = ring_[count_ % kSize];
  e.seq = op.seq;
  const auto n = std::min(op.what.size(), e.what.size() - 1);
  std::copy_n(op.what.data(), n, e.what.data());
  e.what[n] = '\0';
  e.where = op.where;
  ++count_;
}

void RecentOps::clear() noexcept {
  std::lock_guard lock(mutex_);
  count_ = 0;
}

std::string RecentOps::describe() const {
  std::lock_guard lock(mutex_);
  if (count_ == 0) return "none recorded";
  // Appends only: GCC 12 at -O3 reports a false -Wrestrict on `"literal" + std::string`.
  std::string out;
  const std::uint64_t first = count_ > kSize ? count_ - kSize : 0;
  if (first > 0) out.append(std::to_string(first)).append(" older not kept; ");
  for (std::uint64_t i = first; i < count_; ++i) {
    const auto& e = ring_[i % kSize];
    if (i != first) out.append("; ");
    out.append("#").append(std::to_string(e.seq)).append(" '").append(e.what.data());
    out.append("' issued at ").append(e.where.file_name()).append(":");
    out.append(std::to_string(e.where.line()));
  }
  return out;
}

std::source_location RecentOps::newest() const noexcept {
  std::lock_guard lock(mutex_);
  return count_ == 0 ? std::source_location{} : ring_[(count_ - 1) % kSize].where;
}

}  // namespace sluice::detail::cuda
