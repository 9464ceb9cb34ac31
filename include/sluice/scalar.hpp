#pragma once
/// @file
/// Device scalars: `Managed<T>`, a future for one value that lives on a device, and expression
/// templates that compute with such values on the device (reference 000, §2.3 and §3.2).
///
/// Arithmetic on `Managed` values builds a typed expression tree instead of computing anything.
/// `eval(expr, ctx)` freezes the tree into a small flat program (common subexpressions merged,
/// constants folded, only value-preserving rewrites unless asked otherwise) and runs it as ONE
/// launch on `ctx`'s stream; the result is a new `Managed`. Values never leave the device unless
/// the host asks for one with `value()`, which waits only for the work that produced it.
///
/// @code
/// sluice::Context ctx;                                   // an asynchronous context
/// sluice::Managed<double> alpha(2.0, ctx);                // on ctx's device
/// alpha = sluice::eval(1.0 / alpha, ctx);                 // one launch, asynchronous
/// auto p = sluice::compile(sqrt(alpha * alpha + 1.0));    // reusable program
/// sluice::Managed<double> r;
/// p.run(r, ctx);                                          // again one launch
/// double host = r.value();                                // waits for r's producer only
/// @endcode
///
/// Values of a `Managed` are ordered across contexts by the dependency tracker like any tracked
/// memory: a value produced on context a and used by an eval on context b needs no manual wait.
/// Destroying a `Managed` while work that uses it is queued is safe.
///
/// Types: float, double, std::complex<float>, std::complex<double>, std::int32_t, std::int64_t.
/// Mixing rules of binary operations (after host constants took the other operand's type):
/// equal types; a complex type with its own real type (computed as C++ computes `z * 2.0`,
/// component-wise, not by promoting 2.0 to complex); an integer with a wider integer or with a
/// floating-point or complex type (the integer is converted first). Mixing float and double
/// precision is a compile error: say which one you mean with `cast<T>(x)`.
/// Comparisons give `std::int32_t` 0 or 1. Integer arithmetic wraps, and integer division by zero
/// gives 0 (never undefined behaviour, on every backend).
///
/// Thread safety: distinct `Managed` objects may be used from different threads; one `Managed`
/// must not be assigned on one thread while another thread uses it (like any C++ value).
/// `ExecutableExpression` is immutable: any number of threads may run one at once.

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/detail/scalar_format.hpp"
#include "sluice/memory.hpp"

namespace sluice {

template <class T>
class Managed;
template <class Node>
class Expr;
template <class T>
class AnyExpr;
template <class T>
class ExecutableExpression;

/// How `compile` and `eval` may transform an expression.
struct CompileOptions {
  /// Also apply rewrites that are exact in real arithmetic but may change floating-point results
  /// (NaN, infinities, signed zeros, rounding): (x / y) * y → x, x - x → 0, x + 0 → x, ... See
  /// docs/scalar.md for the list. Off by default: the program then computes exactly what the
  /// expression says, operation by operation.
  bool algebraic = false;
};

/// What `compile` made of an expression.
struct ExpressionInfo {
  std::size_t nodes = 0;         ///< nodes of the expression as written (a tree)
  std::size_t merged = 0;        ///< of them, equal to an earlier node: merged into it
  std::size_t folded = 0;        ///< operations on constants only, computed at compile time
  std::size_t rewritten = 0;     ///< operations replaced by a simpler equivalent
  std::size_t instructions = 0;  ///< instructions of the program (each computes one value)
  std::size_t loads = 0;         ///< distinct Managed inputs
  std::size_t constants = 0;     ///< distinct constants
};

namespace scalar {
/// Process-wide counters (monotonic), for tests and benchmarks.
struct Stats {
  std::uint64_t launches = 0;    ///< programs run: each is exactly one launch on its context
  std::uint64_t compiled = 0;    ///< expressions compiled into programs
  std::uint64_t host_reads = 0;  ///< values read by the host with `Managed::value()`
};
[[nodiscard]] Stats stats();
}  // namespace scalar

namespace detail {

template <class T>
struct scalar_traits {
  static constexpr bool valid = false;
  static constexpr bool is_integer = false;
  static constexpr bool is_complex = false;
  static constexpr bool is_floating = false;
};
template <class T, ScalarKind K, bool Integer, bool Complex, class Real>
struct scalar_traits_base {
  static constexpr bool valid = true;
  static constexpr ScalarKind kind = K;
  static constexpr bool is_integer = Integer;
  static constexpr bool is_complex = Complex;
  static constexpr bool is_floating = !Integer && !Complex;
  using real_type = Real;
};
template <>
struct scalar_traits<std::int32_t>
    : scalar_traits_base<std::int32_t, ScalarKind::i32, true, false, std::int32_t> {};
template <>
struct scalar_traits<std::int64_t>
    : scalar_traits_base<std::int64_t, ScalarKind::i64, true, false, std::int64_t> {};
template <>
struct scalar_traits<float> : scalar_traits_base<float, ScalarKind::f32, false, false, float> {};
template <>
struct scalar_traits<double> : scalar_traits_base<double, ScalarKind::f64, false, false, double> {};
template <>
struct scalar_traits<std::complex<float>>
    : scalar_traits_base<std::complex<float>, ScalarKind::c32, false, true, float> {};
template <>
struct scalar_traits<std::complex<double>>
    : scalar_traits_base<std::complex<double>, ScalarKind::c64, false, true, double> {};

template <class T>
inline constexpr ScalarKind kind_v = scalar_traits<T>::kind;
template <class T>
using real_t = typename scalar_traits<T>::real_type;

template <class T>
ScalarValue to_scalar_value(const T& x) noexcept {
  ScalarValue v{};
  std::memcpy(v.bytes, &x, sizeof(T));
  return v;
}

/// The shared state of a Managed: its storage (one value in device memory, tracked) and whether
/// a value was ever written. Programs hold the cells of their inputs, so they read whatever value
/// the Managed holds when they run, and keep that storage alive.
struct ManagedCell {
  RawDeviceBuffer buffer;
  bool assigned = false;
};
using CellPtr = std::shared_ptr<ManagedCell>;

struct CompiledScalar;  // src/scalar/program.hpp
using ProgramPtr = std::shared_ptr<const CompiledScalar>;
using ScalarNode = std::uint32_t;

/// Builds a program from an expression tree: hash-conses nodes (common subexpressions), folds
/// constants and applies rewrites as nodes are added bottom-up.
class ScalarBuilder {
 public:
  explicit ScalarBuilder(const CompileOptions& options);
  ~ScalarBuilder();
  ScalarBuilder(const ScalarBuilder&) = delete;
  ScalarBuilder& operator=(const ScalarBuilder&) = delete;

  ScalarNode constant(ScalarKind kind, const ScalarValue& value);
  /// Throws Error(invalid_state) for a null cell (a moved-from Managed).
  ScalarNode load(const CellPtr& cell, ScalarKind kind);
  ScalarNode op(ScalarOp op, ScalarKind kind, ScalarNode a, ScalarNode b = 0);
  /// A subtree shared by several parents (AnyExpr), built once: its node if built already.
  [[nodiscard]] const ScalarNode* find_shared(const void* key);
  void remember_shared(const void* key, ScalarNode node);
  /// The program computing `root`. Throws Error(unsupported) past the program limits.
  ProgramPtr finish(ScalarNode root);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs `program` into `target` on `ctx` (allocating the target's storage on ctx's device if it
/// has none), ordered by the tracker. Throws for misuse before issuing anything.
void scalar_run(const ProgramPtr& program, ManagedCell& target, ScalarKind kind, const Context& ctx,
                std::source_location loc);
/// As scalar_run, on the blocking context of the device the values live on.
void scalar_run_blocking(const ProgramPtr& program, ManagedCell& target, ScalarKind kind,
                         std::source_location loc);
/// Copies the value to `out` once its producer completed.
void scalar_read(const ManagedCell* cell, void* out, ScalarKind kind, std::source_location loc);
/// Gives `cell` storage on ctx's device if it has none; throws if it lives on another device.
void scalar_prepare(ManagedCell& cell, ScalarKind kind, const Context& ctx,
                    std::source_location loc);
/// Throws unless `cell` holds a value on ctx's device.
void scalar_check_read(const ManagedCell* cell, ScalarKind kind, const Context& ctx,
                       std::source_location loc);
[[nodiscard]] std::optional<Device> scalar_device(const ManagedCell* cell);
[[nodiscard]] const ExpressionInfo& scalar_info(const ProgramPtr& program);
[[nodiscard]] std::string scalar_disassemble(const ProgramPtr& program);

// ---- expression nodes ------------------------------------------------------------------------

template <class T>
struct LoadNode {
  using value_type = T;
  CellPtr cell;
  ScalarNode build(ScalarBuilder& b) const { return b.load(cell, kind_v<T>); }
};

template <class T>
struct ConstNode {
  using value_type = T;
  T value;
  ScalarNode build(ScalarBuilder& b) const { return b.constant(kind_v<T>, to_scalar_value(value)); }
};

template <ScalarOp Op, class R, class A>
struct UnaryNode {
  using value_type = R;
  A a;
  ScalarNode build(ScalarBuilder& b) const { return b.op(Op, kind_v<R>, a.build(b)); }
};

template <ScalarOp Op, class R, class A, class B>
struct BinaryNode {
  using value_type = R;
  A a;
  B b;
  ScalarNode build(ScalarBuilder& bld) const {
    const ScalarNode x = a.build(bld);
    const ScalarNode y = b.build(bld);
    return bld.op(Op, kind_v<R>, x, y);
  }
};

template <class E>
struct expr_traits {
  static constexpr bool is_expr = false;
};
template <class T>
struct expr_traits<Managed<T>> {
  static constexpr bool is_expr = true;
  using value_type = T;
};
template <class N>
struct expr_traits<Expr<N>> {
  static constexpr bool is_expr = true;
  using value_type = typename N::value_type;
};
template <class T>
struct expr_traits<AnyExpr<T>> {
  static constexpr bool is_expr = true;
  using value_type = T;
};

template <class E>
inline constexpr bool is_expr_v = expr_traits<std::remove_cvref_t<E>>::is_expr;
template <class E>
using value_t = typename expr_traits<std::remove_cvref_t<E>>::value_type;

template <class C>
struct is_std_complex : std::false_type {};
template <class R>
struct is_std_complex<std::complex<R>> : std::true_type {};

/// Host values that may appear in expressions (they become constants of the program).
template <class C>
inline constexpr bool is_host_constant_v =
    (std::is_arithmetic_v<C> && !std::is_same_v<C, bool>) ||
    std::is_same_v<C, std::complex<float>> || std::is_same_v<C, std::complex<double>>;

template <class L, class R>
concept binary_operands = (is_expr_v<L> && (is_expr_v<R> || is_host_constant_v<R>)) ||
                          (is_host_constant_v<L> && is_expr_v<R>);

/// An expression as a node (a Managed becomes a load of its cell).
template <class E>
auto as_node(const E& e) {
  if constexpr (std::is_same_v<E, Managed<value_t<E>>>) {
    return Expr<LoadNode<value_t<E>>>(LoadNode<value_t<E>>{e.cell_ptr()});
  } else {
    return e;
  }
}

template <class To, class E>
auto convert_node(const E& e) {
  if constexpr (std::is_same_v<value_t<E>, To>) {
    return as_node(e);
  } else {
    using N = decltype(as_node(e));
    return Expr<UnaryNode<ScalarOp::convert, To, N>>({as_node(e)});
  }
}

/// Conversions made without asking: they never lose the imaginary part or the fraction, and
/// never reduce precision.
template <class From, class To>
inline constexpr bool implicit_conversion_v =
    std::is_same_v<From, To> ||
    (scalar_traits<From>::is_integer &&
     (!scalar_traits<To>::is_integer || sizeof(To) >= sizeof(From))) ||
    (!scalar_traits<From>::is_integer && !scalar_traits<To>::is_integer &&
     (scalar_traits<To>::is_complex || !scalar_traits<From>::is_complex) &&
     sizeof(real_t<To>) >= sizeof(real_t<From>));

/// `e` as an expression of type T, for assignment to a Managed<T> or an AnyExpr<T>.
template <class T, class E>
auto assign_node(const E& e) {
  using From = value_t<E>;
  static_assert(
      implicit_conversion_v<From, T>,
      "sluice: this expression's type does not convert implicitly to the Managed/AnyExpr "
      "type: that would drop the imaginary part, the fraction, or precision. Say what you "
      "mean with sluice::real(z), sluice::abs(z) or sluice::cast<T>(x)");
  return convert_node<T>(e);
}

struct invalid_type {};

/// The type a host constant `C` takes next to an operand of type `Other`.
template <class C, class Other>
auto constant_type() {
  if constexpr (!scalar_traits<Other>::valid) {
    return std::type_identity<invalid_type>{};
  } else if constexpr (is_std_complex<C>::value) {
    if constexpr (scalar_traits<Other>::is_integer) {
      return std::type_identity<invalid_type>{};
    } else {
      return std::type_identity<std::complex<real_t<Other>>>{};
    }
  } else if constexpr (std::is_floating_point_v<C>) {
    if constexpr (scalar_traits<Other>::is_integer) {
      return std::type_identity<invalid_type>{};
    } else {
      return std::type_identity<real_t<Other>>{};
    }
  } else {  // an integer constant
    return std::type_identity<real_t<Other>>{};
  }
}

template <class X, class Other>
auto operand_type() {
  if constexpr (is_expr_v<X>) {
    return std::type_identity<value_t<X>>{};
  } else {
    return constant_type<X, value_t<Other>>();
  }
}
template <class X, class Other>
using operand_t = typename decltype(operand_type<X, Other>())::type;

template <class L, class R, class Res>
struct promotion {
  static constexpr bool ok = true;
  using lhs = L;
  using rhs = R;
  using result = Res;
};
struct no_promotion {
  static constexpr bool ok = false;
  using lhs = invalid_type;
  using rhs = invalid_type;
  using result = invalid_type;
};

/// Operand and result types of a binary operation on types A and B (see the file comment).
template <class A, class B>
auto promote() {
  if constexpr (!scalar_traits<A>::valid || !scalar_traits<B>::valid) {
    return no_promotion{};
  } else {
    using TA = scalar_traits<A>;
    using TB = scalar_traits<B>;
    if constexpr (std::is_same_v<A, B>) {
      return promotion<A, A, A>{};
    } else if constexpr (TA::is_complex && std::is_same_v<real_t<A>, B>) {
      return promotion<A, B, A>{};
    } else if constexpr (TB::is_complex && std::is_same_v<real_t<B>, A>) {
      return promotion<A, B, B>{};
    } else if constexpr (TA::is_integer && TB::is_integer) {
      return promotion<std::int64_t, std::int64_t, std::int64_t>{};
    } else if constexpr (TA::is_integer) {
      return promotion<std::conditional_t<TB::is_complex, real_t<B>, B>, B, B>{};
    } else if constexpr (TB::is_integer) {
      return promotion<A, std::conditional_t<TA::is_complex, real_t<A>, A>, A>{};
    } else {
      return no_promotion{};
    }
  }
}

/// Operand `x` (an expression or a host constant) as a node of type To.
template <class To, class X>
auto operand_node(const X& x) {
  if constexpr (is_expr_v<X>) {
    return convert_node<To>(x);
  } else if constexpr (is_std_complex<X>::value) {
    return Expr<ConstNode<To>>({To(x)});
  } else {
    return Expr<ConstNode<To>>({static_cast<To>(x)});
  }
}

template <class L, class R>
constexpr bool binary_types_ok() {
  using A = operand_t<L, R>;
  using B = operand_t<R, L>;
  if constexpr (std::is_same_v<A, invalid_type> || std::is_same_v<B, invalid_type>) {
    return false;
  } else {
    return decltype(promote<A, B>())::ok;
  }
}

/// Reports why operands do not combine (one message, then stops: returns no expression).
template <class L, class R>
invalid_type binary_type_error() {
  using A = operand_t<L, R>;
  using B = operand_t<R, L>;
  constexpr bool constant_ok = !std::is_same_v<A, invalid_type> && !std::is_same_v<B, invalid_type>;
  static_assert(constant_ok,
                "sluice: a floating-point or complex host constant cannot be combined with an "
                "integer expression; convert the expression first, e.g. sluice::cast<double>(n)");
  if constexpr (constant_ok) {
    static_assert(decltype(promote<A, B>())::ok,
                  "sluice: the operands mix float and double precision (e.g. Managed<float> with "
                  "Managed<double>); say which precision you mean with sluice::cast<double>(x) or "
                  "sluice::cast<float>(x)");
  }
  return {};
}

template <ScalarOp Op, class Result, class L, class R>
auto make_binary(const L& l, const R& r) {
  using P = decltype(promote<operand_t<L, R>, operand_t<R, L>>());
  using Res = std::conditional_t<std::is_void_v<Result>, typename P::result, Result>;
  auto ln = operand_node<typename P::lhs>(l);
  auto rn = operand_node<typename P::rhs>(r);
  return Expr<BinaryNode<Op, Res, decltype(ln), decltype(rn)>>({std::move(ln), std::move(rn)});
}

template <class L, class R>
using binary_result_t = typename decltype(promote<operand_t<L, R>, operand_t<R, L>>())::result;

template <ScalarOp Op, class R, class E>
auto make_unary(const E& e) {
  using N = decltype(as_node(e));
  return Expr<UnaryNode<Op, R, N>>({as_node(e)});
}

template <class T, class E>
ProgramPtr compile_as(const E& e, const CompileOptions& options) {
  ScalarBuilder builder(options);
  const ScalarNode root = assign_node<T>(e).build(builder);
  return builder.finish(root);
}

template <class C>
auto canonical_constant_type() {
  if constexpr (is_std_complex<C>::value || std::is_floating_point_v<C>) {
    if constexpr (std::is_same_v<C, long double>) {
      return std::type_identity<double>{};
    } else {
      return std::type_identity<C>{};
    }
  } else if constexpr (std::is_signed_v<C> && sizeof(C) <= 4) {
    return std::type_identity<std::int32_t>{};
  } else {
    return std::type_identity<std::int64_t>{};
  }
}

}  // namespace detail

/// True for the value types of Managed.
template <class T>
inline constexpr bool is_managed_type_v = detail::scalar_traits<T>::valid;

/// Managed values and scalar expressions.
template <class E>
concept ScalarExpression = detail::is_expr_v<E>;

// ---- Expr: a node of an expression tree --------------------------------------------------------

/// A symbolic expression (what operators on Managed values return). Holds its operands' storage,
/// not their values: it is evaluated only by `eval`, `compile` or assignment to a Managed.
template <class Node>
class Expr {
 public:
  using value_type = typename Node::value_type;
  explicit Expr(Node node) : node_(std::move(node)) {}
  /// Internal: adds this tree to a program under construction.
  detail::ScalarNode build(detail::ScalarBuilder& b) const { return node_.build(b); }

 private:
  Node node_;
};

/// A type-erased expression of type T, for trees whose shape is decided at run time:
/// @code
/// sluice::AnyExpr<double> sum = 0.0;
/// for (auto& x : xs) sum = sum + x * x;   // xs: std::vector<sluice::Managed<double>>
/// auto norm2 = sluice::eval(sqrt(sum), ctx);
/// @endcode
/// Copies share the tree; a subtree used several times is compiled once.
template <class T>
class AnyExpr {
  static_assert(is_managed_type_v<T>,
                "sluice::AnyExpr<T> needs T = float, double, std::complex<float>, "
                "std::complex<double>, std::int32_t or std::int64_t");

 public:
  using value_type = T;

  template <class E>
  requires(detail::is_expr_v<E> && !std::is_same_v<std::remove_cvref_t<E>, AnyExpr>)
      AnyExpr(const E& e)
      : node_(make(detail::assign_node<T>(e))) {}
  /// A constant.
  AnyExpr(T constant) : node_(make(Expr<detail::ConstNode<T>>({constant}))) {}

  /// Internal: adds this tree to a program under construction (once per program).
  detail::ScalarNode build(detail::ScalarBuilder& b) const {
    if (const auto* built = b.find_shared(node_.get())) return *built;
    const auto n = node_->build(b);
    b.remember_shared(node_.get(), n);
    return n;
  }

 private:
  struct Node {
    virtual ~Node() = default;
    virtual detail::ScalarNode build(detail::ScalarBuilder& b) const = 0;
  };
  template <class E>
  struct Holder final : Node {
    explicit Holder(E x) : e(std::move(x)) {}
    detail::ScalarNode build(detail::ScalarBuilder& b) const override { return e.build(b); }
    E e;
  };
  template <class E>
  static std::shared_ptr<const Node> make(E e) {
    return std::make_shared<const Holder<E>>(std::move(e));
  }

  std::shared_ptr<const Node> node_;
};

// ---- ExecutableExpression ----------------------------------------------------------------------

/// A frozen expression: a flat program that can run any number of times, into any target, on any
/// context. Each run reads the values its Managed inputs hold at that point of the stream order
/// and is exactly one launch. It keeps the storage of its inputs alive. Cheap to copy.
template <class T>
class ExecutableExpression {
 public:
  using value_type = T;

  /// An empty program; running it throws.
  ExecutableExpression() = default;
  /// Internal: use `compile`.
  explicit ExecutableExpression(detail::ProgramPtr program) : program_(std::move(program)) {}

  /// Computes the value into `target` on `ctx`, asynchronously. `target` gets storage on ctx's
  /// device if it has none. Throws Error if an input was never assigned, or an input or the
  /// target lives on another device than ctx's.
  void run(Managed<T>& target, const Context& ctx,
           std::source_location loc = std::source_location::current()) const {
    detail::scalar_run(program_, target.cell(), detail::kind_v<T>, ctx, loc);
  }
  /// As run(target, ctx), on the blocking context of the device the values live on (the target's,
  /// else the inputs', else the default device): complete when this returns.
  void run(Managed<T>& target, std::source_location loc = std::source_location::current()) const {
    detail::scalar_run_blocking(program_, target.cell(), detail::kind_v<T>, loc);
  }
  /// Computes the value into a new Managed on `ctx`, asynchronously.
  [[nodiscard]] Managed<T> operator()(
      const Context& ctx, std::source_location loc = std::source_location::current()) const {
    Managed<T> m;
    run(m, ctx, loc);
    return m;
  }

  /// What the compiler did (merged, folded, rewritten nodes; program size).
  [[nodiscard]] const ExpressionInfo& info() const { return detail::scalar_info(program_); }
  /// The program as text, one instruction per line ("%2 = mul f64 %0, %1").
  [[nodiscard]] std::string disassemble() const { return detail::scalar_disassemble(program_); }

 private:
  detail::ProgramPtr program_;
};

// ---- Managed -----------------------------------------------------------------------------------

/// A future for one value of type T in a device's memory (reference 000, §3.2).
///
/// Starts unassigned; gets storage on the device of the context that first writes it, and stays
/// on that device. Assigning from an expression evaluates it on the device:
/// - `m = expr;` and `Managed<T> m = expr;` use the blocking context of the device the values
///   live on: complete when the statement ends (as in the reference).
/// - `m.assign(expr, ctx)` and `eval(expr, ctx)` are asynchronous on `ctx`.
/// `value()` returns the value to the host, waiting only for the work that produced it.
///
/// Copies are deep (a device-side copy on the blocking context); moves are cheap. Asynchronous
/// operations take `const Managed<T>&` (read) or `Managed<T>&` (write) and use `read_ptr` /
/// `write_ptr` with an `Intent`, so the value stays on the device.
template <class T>
class Managed {
  static_assert(is_managed_type_v<T>,
                "sluice::Managed<T> needs T = float, double, std::complex<float>, "
                "std::complex<double>, std::int32_t or std::int64_t");

 public:
  using value_type = T;

  /// Unassigned, without storage.
  Managed() : cell_(std::make_shared<detail::ManagedCell>()) {}
  /// Unassigned, with storage on ctx's device (for operations that will write it there).
  explicit Managed(const Context& ctx, std::source_location loc = std::source_location::current())
      : Managed() {
    detail::scalar_prepare(*cell_, detail::kind_v<T>, ctx, loc);
  }
  /// `value` on ctx's device, written asynchronously (the value travels inside the launch: no
  /// host buffer has to outlive this call).
  Managed(T value, const Context& ctx, std::source_location loc = std::source_location::current())
      : Managed() {
    assign(value, ctx, loc);
  }
  /// `value` on the default device, through its blocking context.
  explicit Managed(T value, std::source_location loc = std::source_location::current())
      : Managed() {
    run_blocking(Expr<detail::ConstNode<T>>({value}), {}, loc);
  }
  /// Evaluates `e` asynchronously on `ctx`.
  template <class E>
  requires detail::is_expr_v<E> Managed(const E& e, const Context& ctx, CompileOptions options = {},
                                        std::source_location loc = std::source_location::current())
      : Managed() {
    assign(e, ctx, options, loc);
  }
  /// Evaluates `e` on the blocking context of the device its values live on.
  template <class E>
  requires detail::is_expr_v<E> Managed(const E& e,
                                        std::source_location loc = std::source_location::current())
      : Managed() {
    run_blocking(e, {}, loc);
  }

  /// A device-side copy on the blocking context (unassigned if `other` is).
  Managed(const Managed& other) : Managed() {
    if (other.assigned()) run_blocking(other, {}, std::source_location::current());
  }
  Managed(Managed&& other) noexcept = default;
  ~Managed() = default;

  /// Copies `other`'s value into this one's storage on the blocking context.
  Managed& operator=(const Managed& other) {
    if (this == &other) return *this;
    if (!other.assigned()) {
      cell().assigned = false;
      return *this;
    }
    run_blocking(other, {}, std::source_location::current());
    return *this;
  }
  /// Takes `other`'s value (its storage). Programs that read this Managed read the new value;
  /// those that read `other` find it unassigned.
  Managed& operator=(Managed&& other) noexcept {
    if (this == &other) return *this;
    if (!cell_) {
      cell_ = std::move(other.cell_);
      return *this;
    }
    if (!other.cell_) {
      cell_->assigned = false;
      return *this;
    }
    cell_->buffer = std::move(other.cell_->buffer);  // the old storage is released in stream order
    cell_->assigned = std::exchange(other.cell_->assigned, false);
    return *this;
  }
  /// Evaluates `e` into this one's storage on the blocking context.
  template <class E>
  requires detail::is_expr_v<E> Managed& operator=(const E& e) {
    run_blocking(e, {}, std::source_location::current());
    return *this;
  }
  /// Writes `value` through the blocking context.
  Managed& operator=(T value) {
    run_blocking(Expr<detail::ConstNode<T>>({value}), {}, std::source_location::current());
    return *this;
  }

  /// Evaluates `e` into this one's storage, asynchronously on `ctx` (no allocation once the
  /// storage exists; `eval` instead writes a fresh Managed, which avoids waiting for readers of
  /// the old value on other contexts).
  template <class E>
  requires detail::is_expr_v<E> Managed& assign(
      const E& e, const Context& ctx, CompileOptions options = {},
      std::source_location loc = std::source_location::current()) {
    detail::scalar_run(detail::compile_as<T>(e, options), cell(), detail::kind_v<T>, ctx, loc);
    return *this;
  }
  /// Writes `value`, asynchronously on `ctx`.
  Managed& assign(T value, const Context& ctx,
                  std::source_location loc = std::source_location::current()) {
    return assign(Expr<detail::ConstNode<T>>({value}), ctx, {}, loc);
  }

  /// The value, on the host. Waits only for the work that produced it. Throws Error if never
  /// assigned, WorkFailed (once) if the producing work failed.
  [[nodiscard]] T value(std::source_location loc = std::source_location::current()) const {
    T v{};
    detail::scalar_read(cell_.get(), &v, detail::kind_v<T>, loc);
    return v;
  }

  /// True once a value was written (or an operation was given `write_ptr`).
  [[nodiscard]] bool assigned() const noexcept { return cell_ && cell_->assigned; }
  /// The device it lives on; empty while it has no storage.
  [[nodiscard]] std::optional<Device> device() const { return detail::scalar_device(cell_.get()); }
  /// Its device address (nullptr while it has no storage). Do not dereference on the host.
  [[nodiscard]] T* device_ptr() const noexcept {
    return cell_ ? static_cast<T*>(cell_->buffer.data()) : nullptr;
  }
  /// The tracker's id of its storage (0 while it has none): `Intent(ctx, m, Access::read, ...)`.
  [[nodiscard]] ObjectId object_id() const noexcept { return cell_ ? cell_->buffer.id() : 0; }

  /// For an asynchronous operation on `ctx` that reads the value: checks that it is assigned and
  /// lives on ctx's device, and returns its device address. Mark the access with an Intent.
  [[nodiscard]] const T* read_ptr(
      const Context& ctx, std::source_location loc = std::source_location::current()) const {
    detail::scalar_check_read(cell_.get(), detail::kind_v<T>, ctx, loc);
    return device_ptr();
  }
  /// For an asynchronous operation on `ctx` that writes the value: gives it storage on ctx's
  /// device if needed, counts it as assigned, and returns its device address. Mark the access
  /// with an Intent.
  /// @code
  /// T* p = result.write_ptr(ctx);
  /// sluice::Intent w(ctx, result, sluice::Access::write, "my_norm");
  /// my_norm_kernel<<<..., sluice::cuda::stream(ctx)>>>(x, n, p);
  /// @endcode
  [[nodiscard]] T* write_ptr(const Context& ctx,
                             std::source_location loc = std::source_location::current()) {
    detail::scalar_prepare(cell(), detail::kind_v<T>, ctx, loc);
    cell_->assigned = true;
    return device_ptr();
  }

  /// Internal: the shared state (null after a move).
  [[nodiscard]] const detail::CellPtr& cell_ptr() const noexcept { return cell_; }

 private:
  template <class U>
  friend class ExecutableExpression;

  detail::ManagedCell& cell() {
    if (!cell_) cell_ = std::make_shared<detail::ManagedCell>();
    return *cell_;
  }
  template <class E>
  void run_blocking(const E& e, const CompileOptions& options, std::source_location loc) {
    detail::scalar_run_blocking(detail::compile_as<T>(e, options), cell(), detail::kind_v<T>, loc);
  }

  detail::CellPtr cell_;
};

// ---- compile and eval ----------------------------------------------------------------------

/// Freezes `e` into a program (see ExecutableExpression).
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] ExecutableExpression<detail::value_t<E>> compile(const E& e,
                                                               CompileOptions options = {}) {
  return ExecutableExpression<detail::value_t<E>>(
      detail::compile_as<detail::value_t<E>>(e, options));
}

/// Evaluates `e` asynchronously on `ctx` into a new Managed on ctx's device: one launch.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] Managed<detail::value_t<E>> eval(
    const E& e, const Context& ctx, CompileOptions options = {},
    std::source_location loc = std::source_location::current()) {
  Managed<detail::value_t<E>> m;
  m.assign(e, ctx, options, loc);
  return m;
}

/// Evaluates `e` on the blocking context of the device its values live on.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] Managed<detail::value_t<E>> eval(
    const E& e, CompileOptions options = {},
    std::source_location loc = std::source_location::current()) {
  Managed<detail::value_t<E>> m;
  compile(e, options).run(m, loc);
  return m;
}

/// A host value as an expression (useful to start an expression from constants).
template <class C>
requires detail::is_host_constant_v<C>
[[nodiscard]] auto constant(const C& value) {
  using T = typename decltype(detail::canonical_constant_type<C>())::type;
  return Expr<detail::ConstNode<T>>({static_cast<T>(value)});
}

/// `e` converted to U. Converting complex to real (use real/imag/abs) or floating-point to
/// integer is not supported.
template <class U, class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto cast(const E& e) {
  using T = detail::value_t<E>;
  static_assert(is_managed_type_v<U>,
                "sluice::cast<U>: U must be float, double, std::complex<float>, "
                "std::complex<double>, std::int32_t or std::int64_t");
  static_assert(!(detail::scalar_traits<T>::is_complex && !detail::scalar_traits<U>::is_complex),
                "sluice::cast cannot drop an imaginary part; use sluice::real(z), sluice::imag(z) "
                "or sluice::abs(z)");
  static_assert(!(!detail::scalar_traits<T>::is_integer && detail::scalar_traits<U>::is_integer),
                "sluice::cast from floating-point or complex to an integer type is not supported");
  return detail::convert_node<U>(e);
}

// ---- operators ---------------------------------------------------------------------------------

#define SLUICE_SCALAR_ARITHMETIC(symbol, opcode)                \
  template <class L, class R>                                   \
  requires detail::binary_operands<L, R>                        \
  [[nodiscard]] auto operator symbol(const L& l, const R& r) {  \
    if constexpr (detail::binary_types_ok<L, R>()) {            \
      return detail::make_binary<ScalarOp::opcode, void>(l, r); \
    } else {                                                    \
      return detail::binary_type_error<L, R>();                 \
    }                                                           \
  }
SLUICE_SCALAR_ARITHMETIC(+, add)
SLUICE_SCALAR_ARITHMETIC(-, sub)
SLUICE_SCALAR_ARITHMETIC(*, mul)
SLUICE_SCALAR_ARITHMETIC(/, div)
#undef SLUICE_SCALAR_ARITHMETIC

#define SLUICE_SCALAR_EQUALITY(symbol, opcode)                          \
  template <class L, class R>                                           \
  requires detail::binary_operands<L, R>                                \
  [[nodiscard]] auto operator symbol(const L& l, const R& r) {          \
    if constexpr (detail::binary_types_ok<L, R>()) {                    \
      return detail::make_binary<ScalarOp::opcode, std::int32_t>(l, r); \
    } else {                                                            \
      return detail::binary_type_error<L, R>();                         \
    }                                                                   \
  }
SLUICE_SCALAR_EQUALITY(==, eq)
SLUICE_SCALAR_EQUALITY(!=, ne)
#undef SLUICE_SCALAR_EQUALITY

#define SLUICE_SCALAR_ORDERING(symbol, opcode)                                              \
  template <class L, class R>                                                               \
  requires detail::binary_operands<L, R>                                                    \
  [[nodiscard]] auto operator symbol(const L& l, const R& r) {                              \
    if constexpr (!detail::binary_types_ok<L, R>()) {                                       \
      return detail::binary_type_error<L, R>();                                             \
    } else {                                                                                \
      static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_complex,      \
                    "sluice: complex numbers have no ordering; compare sluice::real(z) or " \
                    "sluice::abs(z) instead");                                              \
      return detail::make_binary<ScalarOp::opcode, std::int32_t>(l, r);                     \
    }                                                                                       \
  }
SLUICE_SCALAR_ORDERING(<, lt)
SLUICE_SCALAR_ORDERING(<=, le)
SLUICE_SCALAR_ORDERING(>, gt)
SLUICE_SCALAR_ORDERING(>=, ge)
#undef SLUICE_SCALAR_ORDERING

template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto operator-(const E& e) {
  return detail::make_unary<ScalarOp::neg, detail::value_t<E>>(e);
}

/// min(a, b) = b < a ? b : a and max(a, b) = a < b ? b : a, as std::min and std::max.
template <class L, class R>
requires detail::binary_operands<L, R>
[[nodiscard]] auto min(const L& l, const R& r) {
  if constexpr (!detail::binary_types_ok<L, R>()) {
    return detail::binary_type_error<L, R>();
  } else {
    static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_complex,
                  "sluice::la::min: complex numbers have no ordering");
    return detail::make_binary<ScalarOp::min, void>(l, r);
  }
}
template <class L, class R>
requires detail::binary_operands<L, R>
[[nodiscard]] auto max(const L& l, const R& r) {
  if constexpr (!detail::binary_types_ok<L, R>()) {
    return detail::binary_type_error<L, R>();
  } else {
    static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_complex,
                  "sluice::la::max: complex numbers have no ordering");
    return detail::make_binary<ScalarOp::max, void>(l, r);
  }
}
/// std::pow on the operand types.
template <class L, class R>
requires detail::binary_operands<L, R>
[[nodiscard]] auto pow(const L& l, const R& r) {
  if constexpr (!detail::binary_types_ok<L, R>()) {
    return detail::binary_type_error<L, R>();
  } else {
    static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_integer,
                  "sluice::pow needs a floating-point or complex operand; convert integers with "
                  "sluice::cast<double>(n)");
    return detail::make_binary<ScalarOp::pow, void>(l, r);
  }
}

/// |x|; of a complex number, its modulus (a real value).
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto abs(const E& e) {
  return detail::make_unary<ScalarOp::abs, detail::real_t<detail::value_t<E>>>(e);
}

#define SLUICE_SCALAR_FUNCTION(name)                                      \
  template <class E>                                                      \
  requires detail::is_expr_v<E>                                           \
  [[nodiscard]] auto name(const E& e) {                                   \
    static_assert(!detail::scalar_traits<detail::value_t<E>>::is_integer, \
                  "sluice::" #name                                        \
                  " needs a floating-point or complex operand; convert "  \
                  "integers with sluice::cast<double>(n)");               \
    return detail::make_unary<ScalarOp::name, detail::value_t<E>>(e);     \
  }
SLUICE_SCALAR_FUNCTION(sqrt)
SLUICE_SCALAR_FUNCTION(exp)
SLUICE_SCALAR_FUNCTION(log)
SLUICE_SCALAR_FUNCTION(sin)
SLUICE_SCALAR_FUNCTION(cos)
SLUICE_SCALAR_FUNCTION(tan)
#undef SLUICE_SCALAR_FUNCTION

/// The complex conjugate; of a real value, the value itself.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto conj(const E& e) {
  if constexpr (detail::scalar_traits<detail::value_t<E>>::is_complex) {
    return detail::make_unary<ScalarOp::conj, detail::value_t<E>>(e);
  } else {
    return detail::as_node(e);
  }
}
/// The real part; of a real value, the value itself.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto real(const E& e) {
  if constexpr (detail::scalar_traits<detail::value_t<E>>::is_complex) {
    return detail::make_unary<ScalarOp::real, detail::real_t<detail::value_t<E>>>(e);
  } else {
    return detail::as_node(e);
  }
}
/// The imaginary part; of a real value, 0.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto imag(const E& e) {
  using T = detail::value_t<E>;
  if constexpr (detail::scalar_traits<T>::is_complex) {
    return detail::make_unary<ScalarOp::imag, detail::real_t<T>>(e);
  } else {
    return Expr<detail::ConstNode<T>>({T(0)});
  }
}

}  // namespace sluice
