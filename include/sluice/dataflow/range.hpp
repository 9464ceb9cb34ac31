#pragma once
/// @file
/// Index-space vocabulary of the dataflow layer (reference 004; SYCL 2020 §4.9.1): `range`, `id`
/// with SYCL's arithmetic, `item`, `nd_range`. Usable in host code and, through
/// <sluice/dataflow_cuda.cuh>, in device code.

#include <cstddef>
#include <type_traits>

#if defined(__CUDACC__)
/// Marks functions callable from kernels; empty for a plain C++ compiler.
#define SLUICE_HD __host__ __device__
/// Marks a kernel lambda so that one source compiles with g++ (host) and nvcc (both):
/// `[=] SLUICE_KERNEL (sluice::dataflow::id<1> i) { ... }`.
#define SLUICE_KERNEL __host__ __device__
#else
#define SLUICE_HD
#define SLUICE_KERNEL
#endif

namespace sluice::dataflow {

namespace detail {
/// Fixed-size array of D extents or indices; dimension 0 varies slowest (row-major, as SYCL).
template <int D>
struct Extents {
  static_assert(D >= 1 && D <= 3, "dataflow ranges have 1, 2 or 3 dimensions");
  std::size_t v[D] = {};
  SLUICE_HD constexpr std::size_t& operator[](int i) noexcept { return v[i]; }
  SLUICE_HD constexpr const std::size_t& operator[](int i) const noexcept { return v[i]; }
  [[nodiscard]] static constexpr int dimensions() noexcept { return D; }
};
}  // namespace detail

/// The extents of a D-dimensional index space (or of a buffer).
template <int D = 1>
struct range : detail::Extents<D> {
  static constexpr int dimensions = D;
  constexpr range() = default;
  SLUICE_HD constexpr explicit(false) range(std::size_t n0) requires(D == 1) { this->v[0] = n0; }
  SLUICE_HD constexpr range(std::size_t n0, std::size_t n1) requires(D == 2) {
    this->v[0] = n0;
    this->v[1] = n1;
  }
  SLUICE_HD constexpr range(std::size_t n0, std::size_t n1, std::size_t n2) requires(D == 3) {
    this->v[0] = n0;
    this->v[1] = n1;
    this->v[2] = n2;
  }
  /// Product of the extents.
  [[nodiscard]] SLUICE_HD constexpr std::size_t size() const noexcept {
    std::size_t s = 1;
    for (int i = 0; i < D; ++i) s *= this->v[i];
    return s;
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get(int i) const noexcept { return this->v[i]; }
};
range(std::size_t)->range<1>;
range(std::size_t, std::size_t)->range<2>;
range(std::size_t, std::size_t, std::size_t)->range<3>;

/// A point of a D-dimensional index space.
template <int D = 1>
struct id : detail::Extents<D> {
  static constexpr int dimensions = D;
  constexpr id() = default;
  SLUICE_HD constexpr explicit(false) id(std::size_t i0) requires(D == 1) { this->v[0] = i0; }
  SLUICE_HD constexpr id(std::size_t i0, std::size_t i1) requires(D == 2) {
    this->v[0] = i0;
    this->v[1] = i1;
  }
  SLUICE_HD constexpr id(std::size_t i0, std::size_t i1, std::size_t i2) requires(D == 3) {
    this->v[0] = i0;
    this->v[1] = i1;
    this->v[2] = i2;
  }
  /// The extents of `r` as an id (SYCL: `id(const range&)`).
  SLUICE_HD constexpr explicit id(const range<D>& r) noexcept {
    for (int d = 0; d < D; ++d) this->v[d] = r[d];
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get(int i) const noexcept { return this->v[i]; }
  /// A one-dimensional id converts to its index, so `a[i]` and `p[i]` read naturally.
  SLUICE_HD constexpr operator std::size_t() const noexcept requires(D == 1) { return this->v[0]; }
};
id(std::size_t)->id<1>;
id(std::size_t, std::size_t)->id<2>;
id(std::size_t, std::size_t, std::size_t)->id<3>;

namespace detail {
template <class V>
struct is_index : std::false_type {};
template <int D>
struct is_index<range<D>> : std::true_type {};
template <int D>
struct is_index<id<D>> : std::true_type {};
/// `id<D>` and `range<D>`: the types SYCL's index arithmetic applies to.
template <class V>
concept Index = is_index<V>::value;
/// The scalars an index combines with: integers only, so that `2.0 * i` on an `id<1>` stays the
/// floating-point product of its index (through the conversion to std::size_t).
template <class S>
concept Scalar = std::is_integral_v<S>;
}  // namespace detail

// SYCL 2020 §4.9.1: element-wise arithmetic of ids and ranges with each other (of the same type)
// and with scalars on either side. Comparisons other than == and != are element-wise too and
// give an index of 0s and 1s; == and != compare whole indices.
#define SLUICE_INDEX_BINARY(op)                                                            \
  template <detail::Index V>                                                               \
  SLUICE_HD constexpr V operator op(const V& a, const V& b) noexcept {                     \
    V r;                                                                                   \
    for (int d = 0; d < V::dimensions; ++d) r[d] = static_cast<std::size_t>(a[d] op b[d]); \
    return r;                                                                              \
  }                                                                                        \
  template <detail::Index V, detail::Scalar S>                                             \
  SLUICE_HD constexpr V operator op(const V& a, S s) noexcept {                            \
    V r;                                                                                   \
    for (int d = 0; d < V::dimensions; ++d)                                                \
      r[d] = static_cast<std::size_t>(a[d] op static_cast<std::size_t>(s));                \
    return r;                                                                              \
  }                                                                                        \
  template <detail::Index V, detail::Scalar S>                                             \
  SLUICE_HD constexpr V operator op(S s, const V& a) noexcept {                            \
    V r;                                                                                   \
    for (int d = 0; d < V::dimensions; ++d)                                                \
      r[d] = static_cast<std::size_t>(static_cast<std::size_t>(s) op a[d]);                \
    return r;                                                                              \
  }
SLUICE_INDEX_BINARY(+)
SLUICE_INDEX_BINARY(-)
SLUICE_INDEX_BINARY(*)
SLUICE_INDEX_BINARY(/)
SLUICE_INDEX_BINARY(%)
SLUICE_INDEX_BINARY(<<)
SLUICE_INDEX_BINARY(>>)
SLUICE_INDEX_BINARY(&)
SLUICE_INDEX_BINARY(|)
SLUICE_INDEX_BINARY(^)
SLUICE_INDEX_BINARY(&&)
SLUICE_INDEX_BINARY(||)
SLUICE_INDEX_BINARY(<)
SLUICE_INDEX_BINARY(>)
SLUICE_INDEX_BINARY(<=)
SLUICE_INDEX_BINARY(>=)
#undef SLUICE_INDEX_BINARY

#define SLUICE_INDEX_COMPOUND(op)                                                    \
  template <detail::Index V>                                                         \
  SLUICE_HD constexpr V& operator op##=(V& a, const V& b) noexcept {                 \
    for (int d = 0; d < V::dimensions; ++d) a[d] op## = b[d];                        \
    return a;                                                                        \
  }                                                                                  \
  template <detail::Index V, detail::Scalar S>                                       \
  SLUICE_HD constexpr V& operator op##=(V& a, S s) noexcept {                        \
    for (int d = 0; d < V::dimensions; ++d) a[d] op## = static_cast<std::size_t>(s); \
    return a;                                                                        \
  }
SLUICE_INDEX_COMPOUND(+)
SLUICE_INDEX_COMPOUND(-)
SLUICE_INDEX_COMPOUND(*)
SLUICE_INDEX_COMPOUND(/)
SLUICE_INDEX_COMPOUND(%)
SLUICE_INDEX_COMPOUND(<<)
SLUICE_INDEX_COMPOUND(>>)
SLUICE_INDEX_COMPOUND(&)
SLUICE_INDEX_COMPOUND(|)
SLUICE_INDEX_COMPOUND(^)
#undef SLUICE_INDEX_COMPOUND

template <detail::Index V>
SLUICE_HD constexpr bool operator==(const V& a, const V& b) noexcept {
  for (int d = 0; d < V::dimensions; ++d)
    if (a[d] != b[d]) return false;
  return true;
}
template <detail::Index V>
SLUICE_HD constexpr bool operator!=(const V& a, const V& b) noexcept {
  return !(a == b);
}
template <detail::Index V>
SLUICE_HD constexpr V operator+(const V& a) noexcept {
  return a;
}
template <detail::Index V>
SLUICE_HD constexpr V operator-(const V& a) noexcept {
  V r;
  for (int d = 0; d < V::dimensions; ++d) r[d] = std::size_t{0} - a[d];
  return r;
}
template <detail::Index V>
SLUICE_HD constexpr V& operator++(V& a) noexcept {
  return a += 1;
}
template <detail::Index V>
SLUICE_HD constexpr V& operator--(V& a) noexcept {
  return a -= 1;
}
template <detail::Index V>
SLUICE_HD constexpr V operator++(V& a, int) noexcept {
  V old = a;
  a += 1;
  return old;
}
template <detail::Index V>
SLUICE_HD constexpr V operator--(V& a, int) noexcept {
  V old = a;
  a -= 1;
  return old;
}

namespace detail {
/// Row-major linear index of `i` in `r`.
template <int D>
SLUICE_HD constexpr std::size_t linearize(const Extents<D>& i, const Extents<D>& r) noexcept {
  std::size_t l = i[0];
  for (int d = 1; d < D; ++d) l = l * r[d] + i[d];
  return l;
}
/// The id of linear index `l` in `r`.
template <int D>
SLUICE_HD constexpr id<D> delinearize(std::size_t l, const Extents<D>& r) noexcept {
  id<D> i;
  for (int d = D - 1; d > 0; --d) {
    i[d] = l % r[d];
    l /= r[d];
  }
  i[0] = l;
  return i;
}
}  // namespace detail

/// A work-item of a plain range kernel: its id and the whole range. Converts to `id<D>` (and, in
/// one dimension, to `std::size_t`), so kernels may take either. It has no barrier: only
/// nd_range kernels synchronize work-items, which the type system enforces. Kernels here have no
/// offset (SYCL 2020 deprecated it): `get_offset()` is zero.
template <int D = 1>
class item {
 public:
  static constexpr int dimensions = D;
  SLUICE_HD constexpr item(id<D> i, range<D> r) noexcept : id_(i), range_(r) {}
  [[nodiscard]] SLUICE_HD constexpr id<D> get_id() const noexcept { return id_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_id(int d) const noexcept { return id_[d]; }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_range() const noexcept { return range_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_range(int d) const noexcept {
    return range_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr id<D> get_offset() const noexcept { return id<D>{}; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_linear_id() const noexcept {
    return detail::linearize<D>(id_, range_);
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t operator[](int d) const noexcept { return id_[d]; }
  SLUICE_HD constexpr operator id<D>() const noexcept { return id_; }
  SLUICE_HD constexpr operator std::size_t() const noexcept requires(D == 1) { return id_[0]; }

 private:
  id<D> id_;
  range<D> range_;
};

/// A global range split into work-groups of `local` work-items; each global extent must be a
/// multiple of the local one.
template <int D = 1>
struct nd_range {
  static constexpr int dimensions = D;
  range<D> global;
  range<D> local;
  SLUICE_HD constexpr nd_range(range<D> g, range<D> l) noexcept : global(g), local(l) {}
  [[nodiscard]] SLUICE_HD constexpr range<D> get_global_range() const noexcept { return global; }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_local_range() const noexcept { return local; }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_group_range() const noexcept {
    range<D> g;
    for (int d = 0; d < D; ++d) g[d] = local[d] == 0 ? 0 : global[d] / local[d];
    return g;
  }
  /// Always zero (SYCL 2020 deprecated nd_range offsets; sluice has none).
  [[nodiscard]] SLUICE_HD constexpr id<D> get_offset() const noexcept { return id<D>{}; }
};
template <int D>
nd_range(range<D>, range<D>) -> nd_range<D>;

}  // namespace sluice::dataflow
