// The Krylov solvers' options: their names (parsed and printed) and their checks
// (sluice/la.hpp, src/la/ksp_options.hpp).

#include "la/ksp_options.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "sluice/error.hpp"

namespace sluice {
namespace la {

// ---- names --------------------------------------------------------------------------------------

std::string_view to_string(ConvergedReason r) noexcept {
  switch (r) {
    case ConvergedReason::iterating:
      return "CONVERGED_ITERATING";
    case ConvergedReason::converged_rtol:
      return "CONVERGED_RTOL";
    case ConvergedReason::converged_atol:
      return "CONVERGED_ATOL";
    case ConvergedReason::converged_its:
      return "CONVERGED_ITS";
    case ConvergedReason::diverged_its:
      return "DIVERGED_ITS";
    case ConvergedReason::diverged_dtol:
      return "DIVERGED_DTOL";
    case ConvergedReason::diverged_breakdown:
      return "DIVERGED_BREAKDOWN";
    case ConvergedReason::diverged_indefinite_pc:
      return "DIVERGED_INDEFINITE_PC";
    case ConvergedReason::diverged_nanorinf:
      return "DIVERGED_NANORINF";
    case ConvergedReason::diverged_indefinite_mat:
      return "DIVERGED_INDEFINITE_MAT";
  }
  return "UNKNOWN";
}

namespace {
template <class E, std::size_t N>
E parse_name(std::string_view name, const std::pair<std::string_view, E> (&table)[N],
             const char* what) {
  std::string accepted;
  for (const auto& [n, v] : table) {
    if (n == name) return v;
    accepted += (accepted.empty() ? "" : ", ") + std::string(n);
  }
  throw Error(Errc::invalid_argument,
              "unknown " + std::string(what) + " '" + std::string(name) + "'; use " + accepted);
}
template <class E, std::size_t N>
std::string_view name_of(E v, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [n, e] : table) {
    if (e == v) return n;
  }
  return "?";
}
constexpr std::pair<std::string_view, KspType> kKspTypes[] = {{"cg", KspType::cg},
                                                              {"tfqmr", KspType::tfqmr}};
constexpr std::pair<std::string_view, PcType> kPcTypes[] = {{"none", PcType::none},
                                                            {"jacobi", PcType::jacobi}};
constexpr std::pair<std::string_view, KspNormType> kNormTypes[] = {
    {"none", KspNormType::none},
    {"preconditioned", KspNormType::preconditioned},
    {"unpreconditioned", KspNormType::unpreconditioned},
    {"natural", KspNormType::natural}};
constexpr std::pair<std::string_view, CgVariant> kCgVariants[] = {
    {"classic", CgVariant::classic},
    {"single-reduction", CgVariant::single_reduction},
    {"one-reduction", CgVariant::single_reduction}};
constexpr std::pair<std::string_view, SolveMode> kModes[] = {
    {"sync", SolveMode::sync}, {"async", SolveMode::async}, {"graph", SolveMode::graph}};
}  // namespace

KspType parse_ksp_type(std::string_view n) {
  return parse_name(n, kKspTypes, "KSP type");
}
PcType parse_pc_type(std::string_view n) {
  return parse_name(n, kPcTypes, "preconditioner");
}
KspNormType parse_norm_type(std::string_view n) {
  return parse_name(n, kNormTypes, "norm type");
}
SolveMode parse_solve_mode(std::string_view n) {
  return parse_name(n, kModes, "solve mode");
}
CgVariant parse_cg_variant(std::string_view n) {
  return parse_name(n, kCgVariants, "CG variant");
}
std::string_view to_string(KspType t) noexcept {
  return name_of(t, kKspTypes);
}
std::string_view to_string(PcType t) noexcept {
  return name_of(t, kPcTypes);
}
std::string_view to_string(KspNormType t) noexcept {
  return name_of(t, kNormTypes);
}
std::string_view to_string(SolveMode m) noexcept {
  return name_of(m, kModes);
}
std::string_view to_string(CgVariant v) noexcept {
  return name_of(v, kCgVariants);
}

}  // namespace la

namespace detail::la {

using sluice::la::KspNormType;
using sluice::la::KspOptions;
using sluice::la::KspType;

int check_interval(const KspOptions& o, bool matrix_free) {
  if (o.check_every > 0) return o.check_every;
  return o.type == KspType::cg && matrix_free ? 32 : 8;
}

void validate(const KspOptions& o, std::source_location loc) {
  auto bad = [&](const std::string& what) {
    throw Error(Errc::invalid_argument, "KSP: " + what, loc);
  };
  if (o.max_it < 1) bad("max_it must be at least 1, got " + std::to_string(o.max_it));
  if (o.check_every < 0) {
    bad("check_every must be at least 1 (or 0 to let the solver choose), got " +
        std::to_string(o.check_every));
  }
  if (!(o.rtol >= 0) || !(o.atol >= 0) || !(o.dtol >= 0)) {
    bad("rtol, atol and dtol must be non-negative numbers");
  }
  if (o.norm_type == KspNormType::none && !o.fixed_iterations) {
    bad("norm type none has no norm to test; use fixed_iterations (PETSc: KSPConvergedSkip)");
  }
  if (o.cg_variant != sluice::la::CgVariant::classic &&
      o.cg_variant != sluice::la::CgVariant::single_reduction) {
    bad("cg_variant must be CgVariant::classic or CgVariant::single_reduction, got " +
        std::to_string(static_cast<int>(o.cg_variant)));
  }
  if (o.type == KspType::tfqmr && o.norm_type == KspNormType::natural) {
    bad("TFQMR supports the preconditioned, unpreconditioned and none norm types, not natural");
  }
}

}  // namespace detail::la
}  // namespace sluice
