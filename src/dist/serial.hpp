#pragma once
// Plain values packed into bytes for the set-up messages between processes (matrix rows, ghost
// requests). Both ends are the same program, so the layout is the machine's.

#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "sluice/error.hpp"

namespace sluice::dist::detail::serial {

class Writer {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof v);
  }
  [[nodiscard]] std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  [[nodiscard]] T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (at_ + sizeof(T) > bytes_.size()) {
      throw Error(Errc::invalid_state, "dist: a set-up message ended early");
    }
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  [[nodiscard]] bool done() const noexcept { return at_ >= bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

}  // namespace sluice::dist::detail::serial
