#pragma once
/// @file
/// The nodes of scalar expression trees (sluice/scalar.hpp) and how operands become nodes:
/// each node adds itself to a program under construction (ScalarBuilder).

// Private: only sluice's public headers include this file (they define
// SLUICE_IMPL_PUBLIC_INCLUDE around the include, as Kokkos does for its internals).
#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#error \
    "sluice/detail/scalar_nodes.hpp is internal to sluice and may change without notice: include <sluice/scalar.hpp> instead"
#endif

#include <complex>
#include <type_traits>
#include <utility>

#include "sluice/detail/scalar_runtime.hpp"
#include "sluice/detail/scalar_type_rules.hpp"

namespace sluice::detail {

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

template <ScalarOp Op, class Result, class L, class R>
auto make_binary(const L& l, const R& r) {
  using P = decltype(promote<operand_t<L, R>, operand_t<R, L>>());
  using Res = std::conditional_t<std::is_void_v<Result>, typename P::result, Result>;
  auto ln = operand_node<typename P::lhs>(l);
  auto rn = operand_node<typename P::rhs>(r);
  return Expr<BinaryNode<Op, Res, decltype(ln), decltype(rn)>>({std::move(ln), std::move(rn)});
}

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

}  // namespace sluice::detail
