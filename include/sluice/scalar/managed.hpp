#pragma once
/// @file
/// `Managed<T>`, a future for one value on a device, and `ExecutableExpression<T>`, a compiled
/// expression; `compile` and `eval` (sluice/scalar.hpp).

#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <utility>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/scalar/expression.hpp"

namespace sluice {

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

}  // namespace sluice
