#pragma once
// The accesses of one operation, built the same way by every layer and handed with the work to
// issue_tracked (deps/issue.hpp). Marking a buffer returns the pointer the work may use, so the
// work cannot touch a buffer it did not mark.

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/deps.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {

/// Something the tracker knows: a buffer with `object_id()` and `data()`.
template <class B>
concept MarkableBuffer = requires(const B& b) {
  { b.object_id() } -> std::convertible_to<ObjectId>;
  b.data();
};

/// One pointer an operation touches, resolved by the tracker to the registered region containing
/// it (copies and memsets of arbitrary memory); memory sluice does not track is left out.
struct RawUse {
  const void* ptr = nullptr;
  std::size_t bytes = 0;
  Access mode = Access::read;
};

class AccessList {
 public:
  AccessList() = default;
  AccessList(std::initializer_list<Use> uses) {
    for (const auto& u : uses) add(u);
  }

  /// Adds an access; id 0 (an empty object) is left out. The one merge rule: an access to an
  /// object already listed whose byte range overlaps the new one, or touches it in the same
  /// mode, becomes one access over both ranges, `read_write` if the modes differ; disjoint
  /// ranges of one object stay apart, and so do touching ranges of different modes (an exchange
  /// that writes ghost values beside the values it reads must not become a write of both, or
  /// work reading those values could not overlap it).
  AccessList& add(ObjectId id, ByteRange range, Access mode);
  AccessList& add(const Use& u) { return add(u.id, u.range, u.mode); }
  AccessList& read(ObjectId id, ByteRange r = {}) { return add(id, r, Access::read); }
  AccessList& write(ObjectId id, ByteRange r = {}) { return add(id, r, Access::write); }
  AccessList& read_write(ObjectId id, ByteRange r = {}) { return add(id, r, Access::read_write); }

  /// Marks buffer `b` as read and returns the pointer (to const) the work may read through.
  /// Buffers are handles: marking a const handle as written is allowed.
  template <MarkableBuffer B>
  [[nodiscard]] auto read(const B& b, ByteRange r = {}) {
    add(b.object_id(), r, Access::read);
    using T = std::remove_pointer_t<decltype(b.data())>;
    return static_cast<const T*>(b.data());
  }
  /// Marks buffer `b` as written and returns the pointer the work may write through.
  template <MarkableBuffer B>
  [[nodiscard]] auto write(const B& b, ByteRange r = {}) {
    add(b.object_id(), r, Access::write);
    return b.data();
  }
  /// Marks buffer `b` as read and written and returns the pointer the work may use.
  template <MarkableBuffer B>
  [[nodiscard]] auto read_write(const B& b, ByteRange r = {}) {
    add(b.object_id(), r, Access::read_write);
    return b.data();
  }

  /// An access by pointer (at most two: a copy's destination and source), resolved to the
  /// registered region containing it when the operation is issued.
  AccessList& raw(const void* ptr, std::size_t bytes, Access mode);

  [[nodiscard]] std::span<const Use> uses() const noexcept {
    return heap_.empty() ? std::span<const Use>(inline_.data(), n_) : std::span<const Use>(heap_);
  }
  [[nodiscard]] std::span<const RawUse> raw_uses() const noexcept {
    return {raw_.data(), raw_count_};
  }
  [[nodiscard]] bool empty() const noexcept { return n_ == 0 && raw_count_ == 0; }
  /// Gives every access the object `to(id)` names instead (ranges and modes kept). Merging is by
  /// object, so the list stays what adding the renamed accesses would give when `to` is one to
  /// one on the objects listed.
  template <class F>
  void rename(F&& to) {
    Use* items = data();
    for (std::size_t k = 0; k < n_; ++k) items[k].id = to(items[k].id);
  }
  void clear() noexcept {
    n_ = 0;
    raw_count_ = 0;
    heap_.clear();
  }

 private:
  void erase(std::size_t k) {
    if (heap_.empty()) {
      std::move(inline_.begin() + static_cast<std::ptrdiff_t>(k) + 1,
                inline_.begin() + static_cast<std::ptrdiff_t>(n_),
                inline_.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      heap_.erase(heap_.begin() + static_cast<std::ptrdiff_t>(k));
    }
    --n_;
  }
  Use* data() noexcept { return heap_.empty() ? inline_.data() : heap_.data(); }
  static constexpr std::size_t kInline = 12;
  std::array<Use, kInline> inline_{};
  std::vector<Use> heap_;  // used once more than kInline accesses are listed
  std::size_t n_ = 0;
  std::array<RawUse, 2> raw_{};  // a copy's destination and source
  std::size_t raw_count_ = 0;
};

/// [lo, hi) of a byte range; `whole` stays open-ended.
[[nodiscard]] inline std::pair<std::size_t, std::size_t> range_bounds(ByteRange r) noexcept {
  constexpr auto open = std::numeric_limits<std::size_t>::max();
  return {r.offset, r.size == open ? open : r.offset + r.size};
}

/// Whether accesses to [lo, hi) and [ulo, uhi) of one object merge: they overlap, or they touch
/// and have the same mode.
[[nodiscard]] inline bool accesses_join(std::size_t lo, std::size_t hi, std::size_t ulo,
                                        std::size_t uhi, bool same_mode) noexcept {
  return same_mode ? !(hi < ulo || uhi < lo) : (lo < uhi && ulo < hi);
}

inline AccessList& AccessList::raw(const void* ptr, std::size_t bytes, Access mode) {
  if (ptr == nullptr || bytes == 0) return *this;
  if (raw_count_ == raw_.size()) {
    throw Error(Errc::invalid_argument, "AccessList: more than two accesses by pointer");
  }
  raw_[raw_count_++] = {ptr, bytes, mode};
  return *this;
}

inline AccessList& AccessList::add(ObjectId id, ByteRange range, Access mode) {
  if (id == 0) return *this;
  constexpr auto open = std::numeric_limits<std::size_t>::max();
  auto [lo, hi] = range_bounds(range);
  Use* items = data();
  for (std::size_t k = 0; k < n_; ++k) {
    Use& u = items[k];
    if (u.id != id) continue;
    auto [ulo, uhi] = range_bounds(u.range);
    if (!accesses_join(lo, hi, ulo, uhi, u.mode == mode)) continue;
    if (u.mode != mode) u.mode = Access::read_write;
    lo = std::min(lo, ulo);
    hi = std::max(hi, uhi);
    u.range = {lo, hi == open ? open : hi - lo};
    // The wider range may now reach another access of the object: fold it in too.
    for (std::size_t j = k + 1; j < n_;) {
      Use& v = items[j];
      auto [vlo, vhi] = range_bounds(v.range);
      if (v.id != id || !accesses_join(lo, hi, vlo, vhi, v.mode == u.mode)) {
        ++j;
        continue;
      }
      if (v.mode != u.mode) u.mode = Access::read_write;
      lo = std::min(lo, vlo);
      hi = std::max(hi, vhi);
      u.range = {lo, hi == open ? open : hi - lo};
      erase(j);
      items = data();
    }
    return *this;
  }
  if (n_ == kInline && heap_.empty()) heap_.assign(inline_.begin(), inline_.end());
  if (heap_.empty()) {
    inline_[n_] = {id, mode, range};
  } else {
    heap_.push_back({id, mode, range});
  }
  ++n_;
  return *this;
}

}  // namespace sluice::detail
