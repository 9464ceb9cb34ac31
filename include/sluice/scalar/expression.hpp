#pragma once
/// @file
/// Scalar expressions (sluice/scalar.hpp): `Expr`, a node of an expression tree, and `AnyExpr`,
/// a type-erased expression whose shape is decided at run time.

#include <memory>
#include <type_traits>
#include <utility>

#include "sluice/scalar/options.hpp"

#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#define SLUICE_IMPL_PUBLIC_INCLUDE
#define SLUICE_IMPL_PUBLIC_INCLUDE_NOTDEFINED_SCALAR_EXPRESSION
#endif
#include "sluice/detail/scalar_nodes.hpp"
#include "sluice/detail/scalar_runtime.hpp"
#include "sluice/detail/scalar_type_rules.hpp"
#ifdef SLUICE_IMPL_PUBLIC_INCLUDE_NOTDEFINED_SCALAR_EXPRESSION
#undef SLUICE_IMPL_PUBLIC_INCLUDE
#undef SLUICE_IMPL_PUBLIC_INCLUDE_NOTDEFINED_SCALAR_EXPRESSION
#endif

namespace sluice {

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

}  // namespace sluice
