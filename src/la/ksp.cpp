// The Krylov solver object (sluice/la.hpp): its checks, and a solve handed to Run
// (src/la/ksp_run.hpp).

#include <memory>
#include <string>
#include <utility>

#include "la/ksp_options.hpp"
#include "la/ksp_run.hpp"

namespace sluice {
namespace la {

using detail::la::check_device;
using detail::la::check_sizes;
using detail::la::check_vec;
using detail::la::validate;

// ---- Ksp ----------------------------------------------------------------------------------------

Ksp::Ksp(Mat A, KspOptions options)
    : A_(std::move(A)), options_(std::move(options)), work_(std::make_unique<Work>()) {
  if (!A_.valid()) throw Error(Errc::invalid_argument, "Ksp: the Mat is empty");
  if (A_.rows() != A_.cols()) {
    throw Error(Errc::invalid_argument, "Ksp: the matrix is " + std::to_string(A_.rows()) + " x " +
                                            std::to_string(A_.cols()) + "; it must be square");
  }
  validate(options_, std::source_location::current());
}

Ksp::~Ksp() = default;
Ksp::Ksp(Ksp&&) noexcept = default;
Ksp& Ksp::operator=(Ksp&&) noexcept = default;

int Ksp::check_interval() const noexcept {
  return detail::la::check_interval(options_, A_.is_matrix_free());
}

void Ksp::set_options(KspOptions options) {
  validate(options, std::source_location::current());
  options_ = std::move(options);
}

KspResult Ksp::solve(const Vec& b, Vec& x, std::source_location loc) {
  return solve(b, x, x.context(), loc);
}

KspResult Ksp::solve(const Vec& b, Vec& x, const Context& ctx, std::source_location loc) {
  return solve_on(b, x, ctx, nullptr, loc);
}

KspResult Ksp::solve(const Vec& b, Vec& x, const Context& ctx, detail::la::KspParallel& par,
                     std::source_location loc) {
  return solve_on(b, x, ctx, &par, loc);
}

KspResult Ksp::solve_on(const Vec& b, Vec& x, const Context& ctx, detail::la::KspParallel* par,
                        std::source_location loc) {
  check_vec(b, "KSPSolve", loc);
  check_vec(x, "KSPSolve", loc);
  check_device(ctx, A_.device(), "KSPSolve (the matrix)", loc);
  check_device(ctx, b.device(), "KSPSolve (b)", loc);
  check_device(ctx, x.device(), "KSPSolve (x)", loc);
  check_sizes(static_cast<std::size_t>(A_.rows()), b.size(), "KSPSolve (matrix rows and b)", loc);
  check_sizes(static_cast<std::size_t>(A_.rows()), x.size(), "KSPSolve (matrix rows and x)", loc);
  if (b.object_id() == x.object_id()) {
    throw Error(Errc::invalid_argument, "KSPSolve: b and x must be different vectors", loc);
  }
  validate(options_, loc);
  if (A_.rows() == 0) return {};
  return detail::la::Run(*A_.impl(), options_, *work_, b, x, ctx, par, loc).solve();
}

}  // namespace la
}  // namespace sluice
