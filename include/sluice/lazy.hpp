#pragma once
/// @file
/// Lazily evaluated array programs (reference 001): a DAG of array operations, fused into
/// generated kernels, mapped onto a graph whose independent branches run concurrently,
/// instantiated once and rebound to new buffers at every launch.
///
/// An `Array<T>` is a reference-counted handle on a node of the DAG (copying it, or keeping it in
/// `auto`, is always safe). Its element type is fixed at compile time; its shape is known at run
/// time. Nothing is computed until the arrays are compiled into a `Program` (or evaluated once with
/// `eval`). Inputs are named placeholders; constants wrap device buffers.
///
/// @code
/// using namespace sluice;
/// auto x = lazy::placeholder<double>("x", {n});
/// auto y = lazy::placeholder<double>("y", {n});
/// auto r = lazy::where(x > y, 2 * x, lazy::sin(y)) + 1;      // Figure 1 of reference 001
/// lazy::Program p = lazy::compile({r});                      // fused, generated, built once
/// DeviceBuffer<double> xs(ctx, n), ys(ctx, n), out(ctx, n);
/// p.run(ctx, {{"x", xs}, {"y", ys}}, {out});                // one tracked launch
/// @endcode
///
/// Element types: bool, std::int32_t, std::int64_t, float, double. Binary operations follow the
/// scalar layer's rules: equal types; an integer with a wider integer or a floating-point type
/// (the integer is converted); C++ numbers take the array's type (an integer array with a
/// floating-point number is an error: cast the array). Mixing float and double is a compile
/// error: say which one you mean with `lazy::cast<T>(x)`. Shapes broadcast as in NumPy.
///
/// Thread safety: arrays are immutable and may be shared between threads. A `Program` may be run
/// from one thread at a time (calls are serialized by a mutex); its runs on different contexts
/// are ordered by the tracker like any other work.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/error.hpp"
#include "sluice/memory.hpp"
#include "sluice/scalar.hpp"

namespace sluice::lazy {

/// Element types of arrays.
enum class DType : std::uint8_t { boolean, i32, i64, f32, f64 };
/// "bool", "int32", "int64", "float32", "float64".
[[nodiscard]] const char* to_string(DType t) noexcept;
/// Bytes of one element.
[[nodiscard]] std::size_t dtype_size(DType t) noexcept;

template <class T>
inline constexpr bool is_element_v =
    std::is_same_v<T, bool> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
concept Element = is_element_v<T>;

template <Element T>
[[nodiscard]] constexpr DType dtype_of() noexcept {
  if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  if constexpr (std::is_same_v<T, double>) return DType::f64;
}

/// A shape: one extent per axis (empty for a rank-0 array).
using Shape = std::vector<std::int64_t>;
/// "(3, 4)".
[[nodiscard]] std::string to_string(const Shape& shape);
/// Number of elements of `shape`.
[[nodiscard]] std::int64_t numel(const Shape& shape) noexcept;

/// Element-wise operations (shared by arrays and the element expressions of index lambdas).
enum class Op : std::uint8_t {
  neg,
  abs,
  sqrt,
  exp,
  log,
  sin,
  cos,
  tan,
  tanh,
  floor,
  ceil,
  logical_not,
  bit_not,
  add,
  sub,
  mul,
  div,
  mod,
  pow,
  minimum,
  maximum,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  logical_and,
  logical_or,
  bit_and,
  bit_or,
  bit_xor,
};
/// Reductions.
enum class ReduceOp : std::uint8_t { sum, prod, min, max };

namespace detail {

struct Node;
using NodePtr = std::shared_ptr<const Node>;
struct Ex;
using ExPtr = std::shared_ptr<const Ex>;

/// A C++ number carried into the DAG.
struct Literal {
  DType dtype = DType::f64;
  double f = 0;
  std::int64_t i = 0;
};
template <Element T>
Literal literal(T v) {
  Literal l{dtype_of<T>(), 0, 0};
  if constexpr (std::is_floating_point_v<T>) {
    l.f = static_cast<double>(v);
  } else {
    l.i = static_cast<std::int64_t>(v);
  }
  return l;
}

// Array nodes (src/lazy/node.cpp). Each checks its operands and throws Error naming the operation
// and the shapes.
NodePtr make_placeholder(std::string name, Shape shape, DType dtype, std::source_location loc);
NodePtr make_constant(std::shared_ptr<const void> owner, const void* data, ObjectId id,
                      std::size_t bytes, Shape shape, DType dtype, std::source_location loc);
NodePtr make_fill(Literal value, Shape shape, std::source_location loc);
NodePtr make_unary(Op op, const NodePtr& a, std::source_location loc);
NodePtr make_binary(Op op, const NodePtr& a, const NodePtr& b, std::source_location loc);
NodePtr make_binary_literal(Op op, const NodePtr& a, Literal b, bool literal_first,
                            std::source_location loc);
NodePtr make_where(const NodePtr& c, const NodePtr& a, const NodePtr& b, std::source_location loc);
NodePtr make_cast(const NodePtr& a, DType to, std::source_location loc);
NodePtr make_reduce(ReduceOp op, const NodePtr& a, std::optional<std::vector<int>> axes,
                    bool keepdims, std::source_location loc);
NodePtr make_einsum(std::string_view spec, std::vector<NodePtr> operands, std::source_location loc);
NodePtr make_take(const NodePtr& a, const NodePtr& indices, std::optional<int> axis,
                  std::source_location loc);
NodePtr make_take_along_axis(const NodePtr& a, const NodePtr& indices, int axis,
                             std::source_location loc);
NodePtr make_reshape(const NodePtr& a, Shape shape, std::source_location loc);
NodePtr make_transpose(const NodePtr& a, std::optional<std::vector<int>> perm,
                       std::source_location loc);
NodePtr make_concatenate(std::vector<NodePtr> arrays, int axis, std::source_location loc);
NodePtr make_stack(std::vector<NodePtr> arrays, int axis, std::source_location loc);
NodePtr make_roll(const NodePtr& a, std::int64_t shift, std::optional<int> axis,
                  std::source_location loc);
NodePtr make_broadcast_to(const NodePtr& a, Shape shape, std::source_location loc);
NodePtr make_lambda(Shape shape, const ExPtr& body, std::source_location loc);

[[nodiscard]] const Shape& node_shape(const Node& n) noexcept;
[[nodiscard]] DType node_dtype(const Node& n) noexcept;
[[nodiscard]] const std::string& node_name(const Node& n) noexcept;

// Element expressions of index lambdas (src/lazy/expr.cpp).
ExPtr ex_index(int axis);
ExPtr ex_literal(Literal v);
ExPtr ex_unary(Op op, const ExPtr& a, std::source_location loc);
ExPtr ex_binary(Op op, const ExPtr& a, const ExPtr& b, std::source_location loc);
ExPtr ex_where(const ExPtr& c, const ExPtr& a, const ExPtr& b, std::source_location loc);
ExPtr ex_cast(const ExPtr& a, DType to);
ExPtr ex_access(const NodePtr& array, std::vector<ExPtr> indices, std::source_location loc);
[[nodiscard]] DType ex_dtype(const Ex& e) noexcept;

// ---- compile-time typing --------------------------------------------------------------------

template <class A, class B>
struct promote {
  static_assert(!(std::is_same_v<A, float> &&
                  std::is_same_v<B, double>)&&!(std::is_same_v<A, double> &&
                                                std::is_same_v<B, float>),
                "sluice::lazy: mixing float and double arrays is not allowed; say which "
                "precision you mean with lazy::cast<float>(x) or lazy::cast<double>(x)");
  static_assert(std::is_same_v<A, B> || (!std::is_same_v<A, bool> && !std::is_same_v<B, bool>),
                "sluice::lazy: arithmetic between bool and numbers is not allowed; convert the "
                "bool array first with lazy::cast<T>(mask)");
  using type = std::conditional_t<
      std::is_same_v<A, B>, A,
      std::conditional_t<std::is_floating_point_v<A>, A,
                         std::conditional_t<std::is_floating_point_v<B>, B,
                                            std::conditional_t<(sizeof(A) >= sizeof(B)), A, B>>>>;
};
template <class A, class B>
using promote_t = typename promote<A, B>::type;

template <class T, class S>
constexpr bool check_number() {
  static_assert(std::is_arithmetic_v<S>, "sluice::lazy: only C++ numbers combine with arrays");
  static_assert(!(std::is_integral_v<T> && std::is_floating_point_v<S>),
                "sluice::lazy: an integer array with a floating-point number; cast the array "
                "first with lazy::cast<double>(x) (numbers take the array's type)");
  static_assert(!std::is_same_v<T, bool> || std::is_same_v<S, bool>,
                "sluice::lazy: a bool array with a number; cast the array first");
  return true;
}

template <class T>
constexpr bool arithmetic_type() {
  static_assert(!std::is_same_v<T, bool>,
                "sluice::lazy: arithmetic on bool arrays; use &, |, ^, ! or cast first");
  return true;
}
template <class T>
constexpr bool floating_type() {
  static_assert(std::is_floating_point_v<T>,
                "sluice::lazy: this function needs a float or double array (cast an integer array "
                "first with lazy::cast<double>(x))");
  return true;
}
template <class T>
constexpr bool integer_type() {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                "sluice::lazy: this operation needs an int32 or int64 array");
  return true;
}
template <class T>
constexpr bool index_type() {
  static_assert(std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>,
                "sluice::lazy: index arrays are int32 or int64");
  return true;
}

}  // namespace detail

template <class T>
class Elem;
/// An index variable of an index lambda (an int64 element expression).
using Index = Elem<std::int64_t>;

/// A lazily evaluated array of `T`: a handle on a node of the DAG.
template <class T>
class Array {
  static_assert(is_element_v<T>,
                "sluice::lazy::Array<T>: T is bool, std::int32_t, std::int64_t, float or double");

 public:
  using value_type = T;
  /// An empty handle (no node); using it in an operation is an Error.
  Array() = default;
  /// Internal: wraps a node of element type T.
  explicit Array(detail::NodePtr node) : node_(std::move(node)) {}

  [[nodiscard]] const Shape& shape() const { return detail::node_shape(*checked()); }
  [[nodiscard]] std::size_t rank() const { return shape().size(); }
  /// Number of elements.
  [[nodiscard]] std::int64_t size() const { return numel(shape()); }
  [[nodiscard]] static constexpr DType dtype() noexcept { return dtype_of<T>(); }
  [[nodiscard]] bool empty_handle() const noexcept { return node_ == nullptr; }
  /// The element at `indices` (one per axis), inside an index lambda.
  template <class... I>
  requires(std::is_convertible_v<I, Index>&&...) [[nodiscard]] Elem<T> operator()(
      const I&... indices) const;
  /// Internal.
  [[nodiscard]] const detail::NodePtr& node() const noexcept { return node_; }

 private:
  [[nodiscard]] const detail::Node* checked() const;
  detail::NodePtr node_;
};

/// An element expression inside an index lambda (see `index_lambda`).
template <class T>
class Elem {
  static_assert(is_element_v<T>,
                "sluice::lazy::Elem<T>: T is bool, std::int32_t, std::int64_t, float or double");

 public:
  using value_type = T;
  /// A constant.
  Elem(T value) : ex_(detail::ex_literal(detail::literal(value))) {}  // NOLINT: implicit
  /// Internal.
  explicit Elem(detail::ExPtr ex) : ex_(std::move(ex)) {}
  [[nodiscard]] const detail::ExPtr& ex() const noexcept { return ex_; }

 private:
  detail::ExPtr ex_;
};

namespace detail {
template <class W>
struct wrapper {};
template <class T>
struct wrapper<Array<T>> {
  using value = T;
};
template <class T>
struct wrapper<Elem<T>> {
  using value = T;
};
template <class W>
concept Wrapper = requires {
  typename wrapper<std::remove_cvref_t<W>>::value;
};

template <class R, class A, class B>
Array<R> binary(Op op, const Array<A>& a, const Array<B>& b, std::source_location loc) {
  return Array<R>(make_binary(op, a.node(), b.node(), loc));
}
template <class R, class A, class B>
Elem<R> binary(Op op, const Elem<A>& a, const Elem<B>& b, std::source_location loc) {
  return Elem<R>(ex_binary(op, a.ex(), b.ex(), loc));
}
template <class R, class A, class S>
Array<R> binary_number(Op op, const Array<A>& a, S s, bool first, std::source_location loc) {
  return Array<R>(make_binary_literal(op, a.node(), literal(static_cast<A>(s)), first, loc));
}
template <class R, class A, class S>
Elem<R> binary_number(Op op, const Elem<A>& a, S s, bool first, std::source_location loc) {
  auto l = ex_literal(literal(static_cast<A>(s)));
  return Elem<R>(first ? ex_binary(op, l, a.ex(), loc) : ex_binary(op, a.ex(), l, loc));
}
template <class R, class A>
Array<R> unary(Op op, const Array<A>& a, std::source_location loc) {
  return Array<R>(make_unary(op, a.node(), loc));
}
template <class R, class A>
Elem<R> unary(Op op, const Elem<A>& a, std::source_location loc) {
  return Elem<R>(ex_unary(op, a.ex(), loc));
}
}  // namespace detail

// ---- element-wise operators (arrays with arrays, arrays with numbers; the same for Elem) -------
// Operators cannot take a default std::source_location, so their nodes carry none: errors name
// the operation and the shapes.

#define SLUICE_LAZY_ARITH(OPSYM, OPENUM)                                                      \
  template <template <class> class W, class A, class B>                                       \
  requires detail::Wrapper<W<A>> && detail::Wrapper<W<B>>                                     \
  auto operator OPSYM(const W<A>& a, const W<B>& b) {                                         \
    static_assert(detail::arithmetic_type<A>() && detail::arithmetic_type<B>());              \
    return detail::binary<detail::promote_t<A, B>>(Op::OPENUM, a, b, std::source_location{}); \
  }                                                                                           \
  template <template <class> class W, class A, class S>                                       \
  requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S> W<A>                              \
  operator OPSYM(const W<A>& a, S s) {                                                        \
    static_assert(detail::arithmetic_type<A>() && detail::check_number<A, S>());              \
    return detail::binary_number<A>(Op::OPENUM, a, s, false, std::source_location{});         \
  }                                                                                           \
  template <template <class> class W, class A, class S>                                       \
  requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S> W<A>                              \
  operator OPSYM(S s, const W<A>& a) {                                                        \
    static_assert(detail::arithmetic_type<A>() && detail::check_number<A, S>());              \
    return detail::binary_number<A>(Op::OPENUM, a, s, true, std::source_location{});          \
  }
SLUICE_LAZY_ARITH(+, add)
SLUICE_LAZY_ARITH(-, sub)
SLUICE_LAZY_ARITH(*, mul)
SLUICE_LAZY_ARITH(/, div)
#undef SLUICE_LAZY_ARITH

#define SLUICE_LAZY_COMPARE(OPSYM, OPENUM)                                                     \
  template <template <class> class W, class A, class B>                                        \
  requires detail::Wrapper<W<A>> && detail::Wrapper<W<B>>                                      \
  auto operator OPSYM(const W<A>& a, const W<B>& b) {                                          \
    static_assert(std::is_same_v<A, B> || detail::arithmetic_type<detail::promote_t<A, B>>()); \
    return detail::binary<bool>(Op::OPENUM, a, b, std::source_location{});                     \
  }                                                                                            \
  template <template <class> class W, class A, class S>                                        \
  requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S>                                    \
  auto operator OPSYM(const W<A>& a, S s) {                                                    \
    static_assert(detail::check_number<A, S>());                                               \
    return detail::binary_number<bool>(Op::OPENUM, a, s, false, std::source_location{});       \
  }                                                                                            \
  template <template <class> class W, class A, class S>                                        \
  requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S>                                    \
  auto operator OPSYM(S s, const W<A>& a) {                                                    \
    static_assert(detail::check_number<A, S>());                                               \
    return detail::binary_number<bool>(Op::OPENUM, a, s, true, std::source_location{});        \
  }
SLUICE_LAZY_COMPARE(==, eq)
SLUICE_LAZY_COMPARE(!=, ne)
SLUICE_LAZY_COMPARE(<, lt)
SLUICE_LAZY_COMPARE(<=, le)
SLUICE_LAZY_COMPARE(>, gt)
SLUICE_LAZY_COMPARE(>=, ge)
#undef SLUICE_LAZY_COMPARE

/// `&`, `|`, `^`: logical on bool, bitwise on integers (both operands of one type).
#define SLUICE_LAZY_BITS(OPSYM, LOGICAL, BITWISE)                                       \
  template <template <class> class W, class A>                                          \
  requires detail::Wrapper<W<A>> W<A>                                                   \
  operator OPSYM(const W<A>& a, const W<A>& b) {                                        \
    static_assert(std::is_integral_v<A>,                                                \
                  "sluice::lazy: &, | and ^ take bool or integer arrays of one type");  \
    return detail::binary<A>(std::is_same_v<A, bool> ? Op::LOGICAL : Op::BITWISE, a, b, \
                             std::source_location{});                                   \
  }
SLUICE_LAZY_BITS(&, logical_and, bit_and)
SLUICE_LAZY_BITS(|, logical_or, bit_or)
SLUICE_LAZY_BITS(^, ne, bit_xor)
#undef SLUICE_LAZY_BITS

/// Integer remainder with C++'s sign rule (the dividend's); x % 0 is 0.
template <template <class> class W, class A>
requires detail::Wrapper<W<A>> W<A>
operator%(const W<A>& a, const W<A>& b) {
  static_assert(detail::integer_type<A>());
  return detail::binary<A>(Op::mod, a, b, std::source_location{});
}
template <template <class> class W, class A, class S>
requires detail::Wrapper<W<A>> && std::is_integral_v<S> W<A>
operator%(const W<A>& a, S s) {
  static_assert(detail::integer_type<A>());
  return detail::binary_number<A>(Op::mod, a, s, false, std::source_location{});
}

template <template <class> class W, class A>
requires detail::Wrapper<W<A>> W<A>
operator-(const W<A>& a) {
  static_assert(detail::arithmetic_type<A>());
  return detail::unary<A>(Op::neg, a, std::source_location{});
}
/// Logical not of a bool array, bitwise not of an integer array.
template <template <class> class W, class A>
requires detail::Wrapper<W<A>> W<A>
operator!(const W<A>& a) {
  static_assert(std::is_integral_v<A>, "sluice::lazy: ! takes a bool or integer array");
  return detail::unary<A>(std::is_same_v<A, bool> ? Op::logical_not : Op::bit_not, a,
                          std::source_location{});
}
template <template <class> class W, class A>
requires detail::Wrapper<W<A>> W<A>
operator~(const W<A>& a) {
  return !a;
}

#define SLUICE_LAZY_FLOAT_FN(NAME)                                                 \
  template <template <class> class W, class A>                                     \
  requires detail::Wrapper<W<A>> W<A> NAME(                                        \
      const W<A>& a, std::source_location loc = std::source_location::current()) { \
    static_assert(detail::floating_type<A>());                                     \
    return detail::unary<A>(Op::NAME, a, loc);                                     \
  }
SLUICE_LAZY_FLOAT_FN(sqrt)
SLUICE_LAZY_FLOAT_FN(exp)
SLUICE_LAZY_FLOAT_FN(log)
SLUICE_LAZY_FLOAT_FN(sin)
SLUICE_LAZY_FLOAT_FN(cos)
SLUICE_LAZY_FLOAT_FN(tan)
SLUICE_LAZY_FLOAT_FN(tanh)
SLUICE_LAZY_FLOAT_FN(floor)
SLUICE_LAZY_FLOAT_FN(ceil)
#undef SLUICE_LAZY_FLOAT_FN

template <template <class> class W, class A>
requires detail::Wrapper<W<A>> W<A> abs(
    const W<A>& a, std::source_location loc = std::source_location::current()) {
  static_assert(detail::arithmetic_type<A>());
  return detail::unary<A>(Op::abs, a, loc);
}

#define SLUICE_LAZY_BINARY_FN(NAME, OPENUM, CHECK)                                      \
  template <template <class> class W, class A, class B>                                 \
  requires detail::Wrapper<W<A>> && detail::Wrapper<W<B>>                               \
  auto NAME(const W<A>& a, const W<B>& b,                                               \
            std::source_location loc = std::source_location::current()) {               \
    static_assert(CHECK<detail::promote_t<A, B>>());                                    \
    return detail::binary<detail::promote_t<A, B>>(Op::OPENUM, a, b, loc);              \
  }                                                                                     \
  template <template <class> class W, class A, class S>                                 \
  requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S> W<A> NAME(                  \
      const W<A>& a, S s, std::source_location loc = std::source_location::current()) { \
    static_assert(CHECK<A>() && detail::check_number<A, S>());                          \
    return detail::binary_number<A>(Op::OPENUM, a, s, false, loc);                      \
  }                                                                                     \
  template <template <class> class W, class A, class S>                                 \
  requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S> W<A> NAME(                  \
      S s, const W<A>& a, std::source_location loc = std::source_location::current()) { \
    static_assert(CHECK<A>() && detail::check_number<A, S>());                          \
    return detail::binary_number<A>(Op::OPENUM, a, s, true, loc);                       \
  }
SLUICE_LAZY_BINARY_FN(pow, pow, detail::floating_type)
SLUICE_LAZY_BINARY_FN(minimum, minimum, detail::arithmetic_type)
SLUICE_LAZY_BINARY_FN(maximum, maximum, detail::arithmetic_type)
#undef SLUICE_LAZY_BINARY_FN

/// `c ? a : b` element by element (shapes broadcast together).
template <template <class> class W, class A, class B>
requires detail::Wrapper<W<A>> && detail::Wrapper<W<B>>
auto where(const W<bool>& c, const W<A>& a, const W<B>& b,
           std::source_location loc = std::source_location::current()) {
  using R = std::conditional_t<std::is_same_v<A, B>, A, detail::promote_t<A, B>>;
  if constexpr (std::is_same_v<W<A>, Array<A>>) {
    return Array<R>(detail::make_where(c.node(), a.node(), b.node(), loc));
  } else {
    return Elem<R>(detail::ex_where(c.ex(), a.ex(), b.ex(), loc));
  }
}
template <template <class> class W, class A, class S>
requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S> W<A> where(
    const W<bool>& c, const W<A>& a, S s,
    std::source_location loc = std::source_location::current()) {
  static_assert(detail::check_number<A, S>());
  if constexpr (std::is_same_v<W<A>, Array<A>>) {
    auto f = detail::make_fill(detail::literal(static_cast<A>(s)), {}, loc);
    return Array<A>(detail::make_where(c.node(), a.node(), f, loc));
  } else {
    return Elem<A>(detail::ex_where(c.ex(), a.ex(), Elem<A>(static_cast<A>(s)).ex(), loc));
  }
}
template <template <class> class W, class A, class S>
requires detail::Wrapper<W<A>> && std::is_arithmetic_v<S> W<A> where(
    const W<bool>& c, S s, const W<A>& b,
    std::source_location loc = std::source_location::current()) {
  static_assert(detail::check_number<A, S>());
  if constexpr (std::is_same_v<W<A>, Array<A>>) {
    auto f = detail::make_fill(detail::literal(static_cast<A>(s)), {}, loc);
    return Array<A>(detail::make_where(c.node(), f, b.node(), loc));
  } else {
    return Elem<A>(detail::ex_where(c.ex(), Elem<A>(static_cast<A>(s)).ex(), b.ex(), loc));
  }
}

/// Converts the elements to `U` (C++ conversion rules; bool is 0 or 1).
template <Element U, template <class> class W, class A>
requires detail::Wrapper<W<A>> W<U> cast(
    const W<A>& a, std::source_location loc = std::source_location::current()) {
  if constexpr (std::is_same_v<W<A>, Array<A>>) {
    return Array<U>(detail::make_cast(a.node(), dtype_of<U>(), loc));
  } else {
    (void)loc;
    return Elem<U>(detail::ex_cast(a.ex(), dtype_of<U>()));
  }
}

// ---- sources ----------------------------------------------------------------------------------

/// A named input of `shape`; a program's run binds a buffer to it by name (possibly of another
/// shape: every shape is derived again, and the program instantiated for it once).
template <Element T>
[[nodiscard]] Array<T> placeholder(std::string name, Shape shape,
                                   std::source_location loc = std::source_location::current()) {
  return Array<T>(detail::make_placeholder(std::move(name), std::move(shape), dtype_of<T>(), loc));
}

/// An array whose data is `buffer` (C order, `shape` must have buffer.size() elements). The array
/// keeps the buffer alive; programs read it where it is.
template <Element T>
[[nodiscard]] Array<T> constant(std::shared_ptr<const DeviceBuffer<T>> buffer, Shape shape,
                                std::source_location loc = std::source_location::current()) {
  const auto* b = buffer.get();
  if (b == nullptr)
    return Array<T>(detail::make_constant(nullptr, nullptr, 0, 0, shape, dtype_of<T>(), loc));
  return Array<T>(detail::make_constant(std::move(buffer), b->data(), b->object_id(), b->bytes(),
                                        std::move(shape), dtype_of<T>(), loc));
}
/// As above, taking the buffer.
template <Element T>
[[nodiscard]] Array<T> constant(DeviceBuffer<T>&& buffer, Shape shape,
                                std::source_location loc = std::source_location::current()) {
  return constant(std::make_shared<const DeviceBuffer<T>>(std::move(buffer)), std::move(shape),
                  loc);
}
/// An array of `shape` whose every element is `value`.
template <Element T>
[[nodiscard]] Array<T> full(Shape shape, T value,
                            std::source_location loc = std::source_location::current()) {
  return Array<T>(detail::make_fill(detail::literal(value), std::move(shape), loc));
}

/// The general node (Pytato's IndexLambda): element `i` of the result is `f(i)`, an element
/// expression over the index variables i[0..rank) that may read other arrays at computed indices
/// (`x(i[1], i[0])`). An index outside an array is an error in debug mode (Options::debug) and is
/// clamped into range otherwise.
template <Element T, class F>
[[nodiscard]] Array<T> index_lambda(Shape shape, F f,
                                    std::source_location loc = std::source_location::current()) {
  std::vector<Index> vars;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    vars.emplace_back(detail::ex_index(static_cast<int>(k)));
  }
  auto body = f(std::span<const Index>(vars));
  static_assert(std::is_same_v<decltype(body), Elem<T>> || std::is_convertible_v<decltype(body), T>,
                "sluice::lazy::index_lambda<T>: the lambda must return an Elem<T> (use "
                "lazy::cast<T>(e) to convert)");
  return Array<T>(detail::make_lambda(std::move(shape), Elem<T>(body).ex(), loc));
}

template <class T>
template <class... I>
requires(std::is_convertible_v<I, Index>&&...) Elem<T> Array<T>::operator()(
    const I&... indices) const {
  return Elem<T>(detail::ex_access(node_, {Index(indices).ex()...}, {}));
}

template <class T>
const detail::Node* Array<T>::checked() const {
  if (!node_) {
    throw Error(Errc::invalid_state, "sluice::lazy::Array: empty handle (default-constructed)");
  }
  return node_.get();
}

// ---- reductions -------------------------------------------------------------------------------

/// Axes of a reduction: one, several, or (by default) all. Negative axes count from the end.
class Axes {
 public:
  Axes() = default;
  Axes(int axis) : axes_(std::vector<int>{axis}) {}                         // NOLINT: implicit
  Axes(std::initializer_list<int> axes) : axes_(std::vector<int>(axes)) {}  // NOLINT
  Axes(std::vector<int> axes) : axes_(std::move(axes)) {}                   // NOLINT
  [[nodiscard]] const std::optional<std::vector<int>>& get() const noexcept { return axes_; }

 private:
  std::optional<std::vector<int>> axes_;
};

#define SLUICE_LAZY_REDUCE(NAME, OPENUM)                                                         \
  template <Element T>                                                                           \
  [[nodiscard]] Array<T> NAME(const Array<T>& a, const Axes& axes = {}, bool keepdims = false,   \
                              std::source_location loc = std::source_location::current()) {      \
    static_assert(detail::arithmetic_type<T>());                                                 \
    return Array<T>(detail::make_reduce(ReduceOp::OPENUM, a.node(), axes.get(), keepdims, loc)); \
  }
SLUICE_LAZY_REDUCE(sum, sum)
SLUICE_LAZY_REDUCE(prod, prod)
SLUICE_LAZY_REDUCE(min, min)
SLUICE_LAZY_REDUCE(max, max)
#undef SLUICE_LAZY_REDUCE

/// Einstein summation over operands of one type, NumPy's explicit form ("ij,jk->ik"; "->" is
/// required, no ellipsis). A letter repeated in one operand takes its diagonal. Matrix products
/// go through the backend's BLAS where it has one that can be a graph node (the host's OpenBLAS),
/// generated kernels otherwise.
template <Element T, class... More>
requires(std::is_same_v<More, Array<T>>&&...)
    [[nodiscard]] Array<T> einsum(std::string_view spec, const Array<T>& first,
                                  const More&... more) {
  static_assert(detail::arithmetic_type<T>());
  return Array<T>(
      detail::make_einsum(spec, {first.node(), more.node()...}, std::source_location::current()));
}
/// As above with the operands in a vector (all of one type).
template <Element T>
[[nodiscard]] Array<T> einsum(std::string_view spec, const std::vector<Array<T>>& operands,
                              std::source_location loc = std::source_location::current()) {
  static_assert(detail::arithmetic_type<T>());
  std::vector<detail::NodePtr> nodes;
  for (const auto& a : operands) nodes.push_back(a.node());
  return Array<T>(detail::make_einsum(spec, std::move(nodes), loc));
}

// ---- gathers, slicing, shape operations ------------------------------------------------------

/// Elements of `a` at `indices` along `axis` (NumPy's take; without an axis, of `a` flattened).
/// Negative indices count from the end; others out of range are an error in debug mode and
/// clamped otherwise.
template <Element T, Element I>
[[nodiscard]] Array<T> take(const Array<T>& a, const Array<I>& indices,
                            std::optional<int> axis = std::nullopt,
                            std::source_location loc = std::source_location::current()) {
  static_assert(detail::index_type<I>());
  return Array<T>(detail::make_take(a.node(), indices.node(), axis, loc));
}
/// NumPy's take_along_axis: `indices` has a's rank and broadcasts with it on the other axes.
template <Element T, Element I>
[[nodiscard]] Array<T> take_along_axis(const Array<T>& a, const Array<I>& indices, int axis,
                                       std::source_location loc = std::source_location::current()) {
  static_assert(detail::index_type<I>());
  return Array<T>(detail::make_take_along_axis(a.node(), indices.node(), axis, loc));
}

/// A slice start:stop:step of one axis (NumPy's rules: defaults, negative values, clipping).
struct Slice {
  std::optional<std::int64_t> start, stop;
  std::int64_t step = 1;
};
/// A new axis of extent 1 (NumPy's None) in an index.
struct NewAxis {};
inline constexpr NewAxis newaxis{};
/// The remaining axes (NumPy's ...).
struct Ellipsis {};
inline constexpr Ellipsis ellipsis{};

namespace detail {
/// One entry of an index expression (`index`).
struct IndexItem {
  enum class Kind : std::uint8_t { slice, integer, array, newaxis, ellipsis } kind = Kind::slice;
  Slice slice;
  std::int64_t integer = 0;
  NodePtr array;
};
NodePtr make_index(const NodePtr& a, std::vector<IndexItem> items, std::source_location loc);
}  // namespace detail

/// One entry of `index`: a slice, an integer, an integer index array, `newaxis` or `ellipsis`.
class IndexArg {
 public:
  IndexArg(Slice s) : item_{detail::IndexItem::Kind::slice, s, 0, nullptr} {}            // NOLINT
  IndexArg(std::int64_t i) : item_{detail::IndexItem::Kind::integer, {}, i, nullptr} {}  // NOLINT
  IndexArg(int i) : IndexArg(static_cast<std::int64_t>(i)) {}                            // NOLINT
  IndexArg(NewAxis) : item_{detail::IndexItem::Kind::newaxis, {}, 0, nullptr} {}         // NOLINT
  IndexArg(Ellipsis) : item_{detail::IndexItem::Kind::ellipsis, {}, 0, nullptr} {}       // NOLINT
  template <Element I>
  IndexArg(const Array<I>& a)  // NOLINT
      : item_{detail::IndexItem::Kind::array, {}, 0, a.node()} {
    static_assert(detail::index_type<I>());
  }
  [[nodiscard]] const detail::IndexItem& item() const noexcept { return item_; }

 private:
  detail::IndexItem item_;
};

/// NumPy indexing `a[items...]`: basic (slices, integers, newaxis, ellipsis) and advanced
/// (integer index arrays, broadcast together; placed where the first one stands if they are
/// adjacent, else first).
template <Element T>
[[nodiscard]] Array<T> index(const Array<T>& a, std::initializer_list<IndexArg> items,
                             std::source_location loc = std::source_location::current()) {
  std::vector<detail::IndexItem> v;
  for (const auto& i : items) v.push_back(i.item());
  return Array<T>(detail::make_index(a.node(), std::move(v), loc));
}
/// As above with the entries in a vector.
template <Element T>
[[nodiscard]] Array<T> index(const Array<T>& a, const std::vector<IndexArg>& items,
                             std::source_location loc = std::source_location::current()) {
  std::vector<detail::IndexItem> v;
  for (const auto& i : items) v.push_back(i.item());
  return Array<T>(detail::make_index(a.node(), std::move(v), loc));
}

/// Same elements in a new shape (one extent may be -1).
template <Element T>
[[nodiscard]] Array<T> reshape(const Array<T>& a, Shape shape,
                               std::source_location loc = std::source_location::current()) {
  return Array<T>(detail::make_reshape(a.node(), std::move(shape), loc));
}
/// Axes permuted (reversed when `perm` is empty).
template <Element T>
[[nodiscard]] Array<T> transpose(const Array<T>& a, std::vector<int> perm = {},
                                 std::source_location loc = std::source_location::current()) {
  return Array<T>(detail::make_transpose(
      a.node(), perm.empty() ? std::nullopt : std::optional(std::move(perm)), loc));
}
/// Arrays joined along an existing axis.
template <Element T>
[[nodiscard]] Array<T> concatenate(const std::vector<Array<T>>& arrays, int axis = 0,
                                   std::source_location loc = std::source_location::current()) {
  std::vector<detail::NodePtr> n;
  for (const auto& a : arrays) n.push_back(a.node());
  return Array<T>(detail::make_concatenate(std::move(n), axis, loc));
}
/// Arrays of one shape joined along a new axis.
template <Element T>
[[nodiscard]] Array<T> stack(const std::vector<Array<T>>& arrays, int axis = 0,
                             std::source_location loc = std::source_location::current()) {
  std::vector<detail::NodePtr> n;
  for (const auto& a : arrays) n.push_back(a.node());
  return Array<T>(detail::make_stack(std::move(n), axis, loc));
}
/// Elements shifted by `shift` along `axis` with wrap-around (of the flattened array without an
/// axis).
template <Element T>
[[nodiscard]] Array<T> roll(const Array<T>& a, std::int64_t shift,
                            std::optional<int> axis = std::nullopt,
                            std::source_location loc = std::source_location::current()) {
  return Array<T>(detail::make_roll(a.node(), shift, axis, loc));
}
/// `a` broadcast to `shape`.
template <Element T>
[[nodiscard]] Array<T> broadcast_to(const Array<T>& a, Shape shape,
                                    std::source_location loc = std::source_location::current()) {
  return Array<T>(detail::make_broadcast_to(a.node(), std::move(shape), loc));
}

// ---- programs ---------------------------------------------------------------------------------

/// How much to fuse.
enum class Fusion : std::uint8_t {
  none,         ///< one kernel per operation (the reference's own system)
  elementwise,  ///< element-wise work, broadcasts and gathers fused; reductions alone
  full,         ///< also reductions with their element-wise producers, einsum epilogues
};
/// How kernels are ordered in the graph.
enum class Schedule : std::uint8_t {
  dataflow,  ///< edges from data only: independent branches run concurrently
  serial,    ///< one chain in topological order
};

/// Options of `compile`.
/// How a cuda reduction's kernel shape is chosen where it has several (operands staged in shared
/// memory or not, a thread or several lanes per output): `on` times each candidate on the device
/// when an instance is built and keeps the fastest (remembered in memory and on disk, keyed by
/// the device's name, the kernels' source and the sizes, so another program or process does not
/// time it again); `cached` uses remembered choices and the size rule elsewhere (never times);
/// `off` is the size rule alone (reproducible). `environment` (the default) reads
/// SLUICE_LAZY_TUNE (off, on or cached; unset: on). The host has one shape per kernel: nothing to
/// tune, any mode is accepted.
enum class Tune : std::uint8_t { environment, off, on, cached };

/// How matrix products (an einsum that is a GEMM or a strided batched GEMM once transposes and
/// reshapes are read as strides) are computed: `automatic` through the backend's BLAS where it
/// has one and the product is large enough to repay a call of its own (host: every one; cuda:
/// cuBLAS from 2^20 multiply-adds with m, n and k at least 48, others stay generated kernels that
/// fuse their neighbours), `blas` every one the BLAS can do, `generated` never (generated kernels
/// only, for benchmarks that compare code generation). `environment` (the default) reads
/// SLUICE_LAZY_GEMM (auto, blas or generated; unset: auto).
enum class Gemm : std::uint8_t { environment, automatic, blas, generated };

/// Where an einsum of three or more operands sums a letter under which one operand is broadcast
/// (an axis of extent 1, as the DG gradient's J ∂ξ/∂x over the nodes j): `early` contracts the
/// other operands over it first, into an intermediate (the gradient sums S·u once: 3·E·Np² terms
/// instead of 9·E·Np², for one more kernel and 3·E·Np values written and read); `late` keeps the
/// letter, so the broadcast factor multiplies inside one loop nest and no intermediate is made;
/// `automatic` (the default) is `early` where the multiply-adds it saves exceed 2 per byte of
/// intermediate written and read (the gradient: Np > 16, from p = 3), else `late`.
enum class BroadcastSum : std::uint8_t { automatic, early, late };

/// Register tiling of generated reductions along the output's last axis (an einsum's per-element
/// operator application, as the DG right-hand side's `xrej,rij,ej->xei` over the nodes i): one
/// cuda thread computes T consecutive outputs of that axis (up to 8; the axis from 2 to 64 long),
/// loading what does not depend on it (the element's values, its geometric factors) once for
/// all T, and fusion counts such a reader's evaluations per tile, so that element-wise producers
/// read by every output of an element (face fluxes, products with normals, `div - lift`) are
/// computed inside the reduction instead of being written and read again. `automatic` tiles on
/// cuda (the host's loops compute one output each and keep the fusion of before); `off` is the
/// code of before everywhere; `on` also fuses for tiles on the host (tests: the host evaluates
/// the kernels the cuda plan forms). `environment` (the default) reads SLUICE_LAZY_TILE (auto,
/// off or on; unset: auto).
enum class Tile : std::uint8_t { environment, automatic, off, on };

/// How a run's buffers reach the kernels. `arguments`: each kernel node's arguments hold the
/// addresses, so a rebinding updates every node that uses a changed buffer (on cuda one
/// `cudaGraphExecKernelNodeSetParams` each, and a matrix product through cuBLAS is recorded
/// again). `table`: the graph's first node writes every buffer's address into a table in device
/// memory (one such node per 256 addresses) and the generated kernels, and the matrix products as
/// batched calls over operand lists there, read them from it, so a rebinding updates that node's
/// arguments alone; the price is one more dependent launch per run, one more load per buffer in
/// each kernel, and a product as a batched call of one (cuBLAS's batched GEMM, which may be
/// slower than its plain one). `automatic` (the default) takes the table on cuda where a
/// rebinding of every input and output would otherwise record a cuBLAS product again (one that
/// reads or writes an input or output) or set 16 graph nodes or more, and arguments otherwise
/// (and on the host, where a node's update costs little). `environment` reads
/// SLUICE_LAZY_BINDING (auto, arguments or table; unset: auto). A program with more than 4096
/// addresses keeps arguments; a strided batch of products keeps its addresses in its arguments.
enum class Binding : std::uint8_t { environment, automatic, arguments, table };

struct Options {
  Fusion fusion = Fusion::full;
  Schedule schedule = Schedule::dataflow;
  /// Checks every gathered index and index-lambda access: an index out of range fails the run
  /// (WorkFailed naming the operation, the index and the extent).
  bool debug = false;
  /// Instances (one per set of input shapes) kept; the least recently used goes beyond it.
  std::size_t cache_capacity = 8;
  /// The device kernels are built for at compile time (default: sluice::default_device());
  /// a run on another device builds them for it.
  std::optional<Device> device;
  std::string name = "lazy";
  Tune tune = Tune::environment;
  Gemm gemm = Gemm::environment;
  BroadcastSum broadcast_sum = BroadcastSum::automatic;
  Tile tile = Tile::environment;
  Binding binding = Binding::environment;
  /// Horizontal fusion: independent kernels of the same code (the wide DAG's branches) run as one
  /// kernel over all of them, and independent matrix products of the same sizes and type as one
  /// batched BLAS call where the backend has one (cuda: cuBLAS's batched GEMM over lists of
  /// addresses). false: one kernel and one BLAS call per operation (Stats::merged_kernels and
  /// batched_products say what it did).
  bool horizontal = true;
  /// Multi-output fusion: element-wise kernels over the same output shape that read some of the
  /// same data and are not ordered (neither reads, directly or through other kernels, what the
  /// other writes), and short reductions (fewer than 8 terms) over the same extents, run as one
  /// kernel writing every one's output in one pass, loading what they share once per element
  /// (the DG right-hand side's face traces u_in, u_ex and the normals' sums vn_in, vn_ex). Not with
  /// Fusion::none (one kernel per operation). false: one kernel per fused output
  /// (Stats::multi_output_kernels says what it did).
  bool multi_output = true;
};

/// A buffer bound to a placeholder or an output: a DeviceBuffer, or a Managed for rank 0.
class Bind {
 public:
  template <Element T>
  Bind(const DeviceBuffer<T>& b)  // NOLINT: implicit
      : data_(b.data()), id_(b.object_id()), count_(b.size()), dtype_(dtype_of<T>()) {}
  /// With the shape of the data (when it differs from the placeholder's declared shape).
  template <Element T>
  Bind(const DeviceBuffer<T>& b, Shape shape)
      : data_(b.data()),
        id_(b.object_id()),
        count_(b.size()),
        dtype_(dtype_of<T>()),
        shape_(std::move(shape)) {}
  /// Memory given by address, for bindings from other languages (sluice's Python arrays):
  /// `count` elements of `dtype` at `data`, tracked as the object `id` (0: untracked).
  Bind(void* data, ObjectId id, std::size_t count, DType dtype, std::optional<Shape> shape)
      : data_(data), id_(id), count_(count), dtype_(dtype), shape_(std::move(shape)) {}
  /// A rank-0 value (input or output).
  template <Element T>
  Bind(Managed<T>& m)  // NOLINT: implicit
      : managed_(&m), dtype_(dtype_of<T>()), shape_(Shape{}) {
    prepare_ = [](void* p, const Context& ctx, std::source_location loc, bool write) {
      auto& mm = *static_cast<Managed<T>*>(p);
      Resolved r;
      r.data = write ? static_cast<void*>(mm.write_ptr(ctx, loc))
                     : const_cast<T*>(mm.read_ptr(ctx, loc));
      r.id = mm.object_id();
      return r;
    };
  }

  /// Internal: the address and id, for reading (`write` false) or writing on `ctx`.
  struct Resolved {
    void* data = nullptr;
    ObjectId id = 0;
  };
  [[nodiscard]] Resolved resolve(const Context& ctx, std::source_location loc, bool write) const {
    if (managed_ != nullptr) return prepare_(managed_, ctx, loc, write);
    return {data_, id_};
  }
  [[nodiscard]] std::size_t count() const noexcept { return managed_ ? 1 : count_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] const std::optional<Shape>& shape() const noexcept { return shape_; }
  [[nodiscard]] bool is_managed() const noexcept { return managed_ != nullptr; }

 private:
  void* data_ = nullptr;
  ObjectId id_ = 0;
  std::size_t count_ = 0;
  void* managed_ = nullptr;
  Resolved (*prepare_)(void*, const Context&, std::source_location, bool) = nullptr;
  DType dtype_ = DType::f64;
  std::optional<Shape> shape_;
};

/// A placeholder's name and the buffer bound to it.
struct Input {
  std::string_view name;
  Bind bind;
  Input(std::string_view n, Bind b) : name(n), bind(std::move(b)) {}
};

/// One generated kernel (or BLAS call) of an instance.
struct KernelInfo {
  std::string name;              ///< "k3_einsum"
  std::string kind;              ///< "map", "reduce" or "blas"
  std::string source;            ///< the generated function (empty for BLAS)
  std::int64_t elements = 0;     ///< output elements
  std::vector<std::string> ops;  ///< the array operations it computes (fused ones included)
  std::string shape;  ///< cuda: its shape ("thread", "staged(b2)", "lanes16", ...); host: empty
  /// cuda, where it has several shapes: each candidate's shape, the size rule's first ...
  std::vector<std::string> candidates;
  /// ... and, where they were timed in this process, each one's median µs (else empty)
  std::vector<double> candidate_us;
  std::string choice;  ///< "rule", "timed", "memory" or "disk" (where the shape came from)
  /// Kernels or matrix products it computes at once (horizontal fusion, Options::horizontal).
  std::size_t members = 1;
  /// Arrays each member writes (several: multi-output fusion, Options::multi_output).
  std::size_t outputs = 1;
};

/// What a program is and what it did.
struct Stats {
  std::size_t operations = 0;  ///< array operations of the DAG (placeholders not counted)
  std::size_t kernels = 0;     ///< generated kernels per run
  std::size_t blas = 0;        ///< matrix products through BLAS per run
  std::size_t graph_nodes = 0;
  std::size_t concurrency = 0;  ///< most kernels that may run at once (width of the graph)
  std::size_t temporaries = 0;  ///< temporary buffers after reuse
  std::size_t temporary_bytes = 0;
  /// Horizontal fusion (Options::horizontal): kernels computed by horizontal kernels, and matrix
  /// products computed by batched BLAS calls (each batched call adds a kernel that lists its
  /// operands, counted in `kernels`).
  std::size_t merged_kernels = 0;
  std::size_t batched_products = 0;
  /// Multi-output fusion (Options::multi_output): kernels computed by multi-output kernels (each
  /// of those counts its outputs; the kernels saved are this minus the multi-output kernels).
  std::size_t multi_output_kernels = 0;
  double codegen_ms = 0;     ///< generating the source (the first instance)
  double build_ms = 0;       ///< compiling and loading it (the first instance)
  std::string build_origin;  ///< "compiled", "disk" or "memory" (the first instance)
  double last_build_ms = 0;  ///< the most recent instance's build
  std::string last_build_origin;
  std::uint64_t instantiations = 0;  ///< instances built (one per new set of input shapes)
  std::uint64_t instance_hits = 0;   ///< runs that found their instance in the cache
  std::uint64_t evictions = 0;
  std::uint64_t rebinds = 0;  ///< runs whose buffers differed from the previous run's
  /// Graph nodes whose parameters those rebindings set (only the nodes that use a changed
  /// buffer; under a binding table the table's node, and copies and strided batches of products)
  std::uint64_t rebound_nodes = 0;
  std::uint64_t launches = 0;
  // Choosing kernel shapes (Options::tune), summed over the instances built.
  std::string tune_mode;  ///< "off", "on" or "cached" (as resolved)
  std::string gemm_mode;  ///< "auto", "blas" or "generated" (Options::gemm resolved)
  std::string tile_mode;  ///< "auto", "off" or "on" (Options::tile resolved)
  /// "auto", "arguments" or "table" (Options::binding resolved); `table` is true where the most
  /// recent instance reads its buffers' addresses from a binding table.
  std::string binding_mode;
  bool table = false;
  std::size_t tiled_kernels = 0;    ///< reductions fused and generated for register tiles
  std::size_t tune_groups = 0;      ///< kernels with more than one valid shape
  std::size_t tuned_groups = 0;     ///< of them, timed now
  std::size_t tune_hits = 0;        ///< of them, found in the tuning cache (memory or disk)
  std::size_t tune_candidates = 0;  ///< candidate kernels timed
  double tune_ms = 0;               ///< time spent choosing (build of the candidates included)
};

namespace detail {
class ProgramImpl;
}

/// Compiled arrays: a graph of fused kernels per set of input shapes, rebound and launched per run.
class Program {
 public:
  Program();
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  /// Runs on `ctx`: binds `inputs` (every placeholder, by name) and `outputs` (one per compiled
  /// output, in order; the caller's buffers, never aliasing an input), and launches the graph as
  /// one tracked operation of ctx. A new set of input shapes instantiates once (cached); buffers
  /// that differ from the previous run's are rebound in place. Misuse throws Error before anything
  /// is issued.
  void run(const Context& ctx, std::span<const Input> inputs, std::span<const Bind> outputs,
           std::source_location loc = std::source_location::current());
  void run(const Context& ctx, std::initializer_list<Input> inputs,
           std::initializer_list<Bind> outputs,
           std::source_location loc = std::source_location::current()) {
    run(ctx, std::span<const Input>(inputs.begin(), inputs.size()),
        std::span<const Bind>(outputs.begin(), outputs.size()), loc);
  }
  void run(const Context& ctx, std::span<const Input> inputs, std::initializer_list<Bind> outputs,
           std::source_location loc = std::source_location::current()) {
    run(ctx, inputs, std::span<const Bind>(outputs.begin(), outputs.size()), loc);
  }

  /// The shapes of the outputs for these input shapes (by placeholder name; missing names take
  /// their declared shape).
  [[nodiscard]] std::vector<Shape> output_shapes(
      std::span<const std::pair<std::string, Shape>> inputs = {}) const;
  /// Names, declared shapes and types of the placeholders, in order of first use.
  struct Placeholder {
    std::string name;
    Shape shape;
    DType dtype;
  };
  [[nodiscard]] std::vector<Placeholder> placeholders() const;

  /// DOT of the DAG with its fused groups as clusters (the most recent instance).
  [[nodiscard]] std::string dot() const;
  [[nodiscard]] Stats stats() const;
  /// The kernels of the most recent instance, in topological order.
  [[nodiscard]] std::vector<KernelInfo> kernels() const;
  /// The whole generated source of the most recent instance.
  [[nodiscard]] std::string source() const;
  [[nodiscard]] const Options& options() const;

  /// Internal.
  explicit Program(std::unique_ptr<detail::ProgramImpl> impl);

 private:
  std::unique_ptr<detail::ProgramImpl> impl_;
};

namespace detail {
Program compile_nodes(std::vector<NodePtr> outputs, const Options& options,
                      std::source_location loc);
void eval_into(const Context& ctx, const NodePtr& array, std::span<const Input> inputs,
               const Bind& out, const Options& options, std::source_location loc);
}  // namespace detail

/// Compiles arrays of any element types into a program (kernels built for `options.device`).
template <class... A>
[[nodiscard]] Program compile(const std::tuple<A...>& outputs, Options options = {},
                              std::source_location loc = std::source_location::current()) {
  std::vector<detail::NodePtr> nodes;
  std::apply([&](const auto&... a) { (nodes.push_back(a.node()), ...); }, outputs);
  return detail::compile_nodes(std::move(nodes), options, loc);
}
template <Element T>
[[nodiscard]] Program compile(const std::vector<Array<T>>& outputs, Options options = {},
                              std::source_location loc = std::source_location::current()) {
  std::vector<detail::NodePtr> nodes;
  for (const auto& a : outputs) nodes.push_back(a.node());
  return detail::compile_nodes(std::move(nodes), options, loc);
}
template <Element T>
[[nodiscard]] Program compile(std::initializer_list<Array<T>> outputs, Options options = {},
                              std::source_location loc = std::source_location::current()) {
  return compile(std::vector<Array<T>>(outputs), std::move(options), loc);
}

/// One-off evaluation on `ctx` into a new buffer (C order). Programs are cached by the structure
/// of the DAG, so evaluating the same expression again does not compile again.
template <Element T>
[[nodiscard]] DeviceBuffer<T> eval(const Context& ctx, const Array<T>& a,
                                   std::initializer_list<Input> inputs = {}, Options options = {},
                                   std::source_location loc = std::source_location::current()) {
  DeviceBuffer<T> out(ctx, static_cast<std::size_t>(a.size()), loc);
  detail::eval_into(ctx, a.node(), std::span<const Input>(inputs.begin(), inputs.size()), out,
                    options, loc);
  return out;
}
/// One-off evaluation of a rank-0 array into a device scalar.
template <Element T>
[[nodiscard]] Managed<T> eval_scalar(const Context& ctx, const Array<T>& a,
                                     std::initializer_list<Input> inputs = {}, Options options = {},
                                     std::source_location loc = std::source_location::current()) {
  static_assert(!std::is_same_v<T, bool>,
                "sluice::lazy::eval_scalar: Managed<bool> does not exist");
  Managed<T> out(ctx, loc);
  detail::eval_into(ctx, a.node(), std::span<const Input>(inputs.begin(), inputs.size()), out,
                    options, loc);
  return out;
}

/// Process-wide counters of the lazy layer.
struct GlobalStats {
  std::uint64_t programs = 0;       ///< compiled
  std::uint64_t modules_built = 0;  ///< generated modules compiled from source
  std::uint64_t module_memory_hits = 0;
  std::uint64_t module_disk_hits = 0;
  std::uint64_t eval_cache_hits = 0;
};
[[nodiscard]] GlobalStats global_stats();
/// Forgets the in-memory cache of built modules and of tuned kernel shapes (a later build reads
/// the disk cache, as a new process would).
void clear_module_memory();

}  // namespace sluice::lazy
