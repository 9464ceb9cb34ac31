#pragma once
// Choosing each cuda reduction's kernel shape by measurement (as Triton's and cuBLASLt's
// autotuners do): when an instance is planned, every kernel with more than one valid shape
// (cuda_shape_candidates) is a group; each group's candidates are generated under their own
// names into one module, built once (NVRTC and the disk cache, as any module), launched on
// scratch buffers of the kernel's sizes a few times each, and the one with the lowest median
// kept. Choices are remembered in memory and on disk (kernel_cache::directory()/lazy-tune/),
// keyed by the device's name, the candidates' source and the sizes (their parameters), so that
// another program or process with the same kernel does not time it again.

#include <functional>
#include <string>
#include <vector>

#include "lazy/plan.hpp"

namespace sluice::lazy::detail {

/// `option` resolved (`environment` reads SLUICE_LAZY_TUNE); Error for an unknown value.
[[nodiscard]] Tune resolve_tune(Tune option, std::source_location loc);
[[nodiscard]] const char* tune_name(Tune mode) noexcept;
/// `option` resolved (`environment` reads SLUICE_LAZY_GEMM); Error for an unknown value.
[[nodiscard]] Gemm resolve_gemm(Gemm option, std::source_location loc);
[[nodiscard]] const char* gemm_name(Gemm mode) noexcept;
/// `option` resolved (`environment` reads SLUICE_LAZY_TILE); Error for an unknown value.
[[nodiscard]] Tile resolve_tile(Tile option, std::source_location loc);
[[nodiscard]] const char* tile_name(Tile mode) noexcept;
/// Options::binding with `environment` resolved (SLUICE_LAZY_BINDING).
[[nodiscard]] Binding resolve_binding(Binding option, std::source_location loc);
[[nodiscard]] const char* binding_name(Binding mode) noexcept;

/// One group to time: the code it replaces and its candidates' code, in the request's module.
struct TuneGroup {
  int code = -1;                  // index in InstanceDesc::codes
  std::vector<KernelCode> codes;  // one per candidate (named sl_k<code>_c<i>)
};
struct TuneRequest {
  const InstanceDesc* desc = nullptr;
  std::vector<TuneGroup> groups;
  std::string source;  // prelude and every candidate
  std::vector<std::string> names;
  int reps = 5;
};
/// Times every candidate of every group: result [group][candidate][round] in milliseconds.
using TuneTimer = std::function<std::vector<std::vector<std::vector<double>>>(const TuneRequest&)>;

struct TuneReport {
  std::size_t groups = 0;      // kernels with alternatives
  std::size_t timed = 0;       // groups timed now
  std::size_t hits = 0;        // groups found in the memory or disk cache
  std::size_t candidates = 0;  // candidate kernels timed
  double ms = 0;
};

/// Chooses the shape of every cuda reduction of `d` with alternatives and generates those codes
/// (and the source) again in the chosen shapes. `device_name` keys the cache; `timer` times the
/// groups that `mode` (on) lets it time. Nothing changes for off, or for a host plan.
TuneReport tune_instance(InstanceDesc& d, LazyDialect dialect, bool debug, Tune mode,
                         const std::string& device_name, const TuneTimer& timer);

/// Tests: a timer used instead of the backend's (empty: none); returns the previous one.
TuneTimer set_tune_timer(TuneTimer timer);
/// The timer set by set_tune_timer (empty when none).
[[nodiscard]] TuneTimer tune_timer_override();
/// Forgets the choices remembered in memory (a later instance reads the disk cache).
void forget_tune_memory();

}  // namespace sluice::lazy::detail
