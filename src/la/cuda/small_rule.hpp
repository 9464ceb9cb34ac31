#pragma once
// When the small la kernels (cg_small.cu, tf_small.cu) take a block by default (the size rule),
// and the small TFQMR kernel's switch SLUICE_CUDA_TF_SMALL. Host code: tests/la/small_rule_test.cpp
// checks the rule and the switch's words on the host.

#include <algorithm>
#include <cstdint>
#include <string>

#include "sluice/backend.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/la_kernels.hpp"

namespace sluice::detail::cuda::small_steps {

// Where the size rule (auto) takes the small kernels at all, as measured for CG on an H100
// (2026-11-26, after the iteration lost three of its five barriers; docs/bench/issue26.md): up to
// 1024 points the small CG kernel beat the default path (0.10 / 0.12 ms against 0.135 for 20
// iterations at 16² and 32²), but at 64 x 64 it was 1.7x slower. Since its logic runs once per
// block (2026-11-27, H100), the 2D 5-point solves of 1089 to 4096 points take 0.110-0.128 ms in
// the clusters the rule picks (2 up to 2048 points, 4 above) against 0.139-0.141 for the default
// path: the rule goes to 4096 points there. The other stencils keep 1024 until they are measured
// at those sizes. The small TFQMR kernel takes the same sizes (conservative: measured at 64 x 64
// 2D 5-point only, 1.4-1.8x faster than the default path while its logic still ran in every
// warp). Asking for a kernel (`require`, a CG shape, TFQMR's `on`) takes it at any size it fits.
constexpr std::int64_t kAutoMaxRows = 1024;
constexpr std::int64_t kAutoMaxRows2d5 = 4096;

/// The most points the size rule gives a small kernel for stencil `kind`.
constexpr std::int64_t auto_max_rows(LaStencilKind kind) {
  return kind == LaStencilKind::d2p5 ? kAutoMaxRows2d5 : kAutoMaxRows;
}

/// Calls `f(word)` for each comma-separated word of a switch's value, skipping the empty words
/// and those that mean the default (auto, 1).
template <class F>
void each_switch_word(const std::string& all, F&& f) {
  std::size_t at = 0;
  while (at <= all.size()) {
    const std::size_t end = std::min(all.find(',', at), all.size());
    const std::string word = all.substr(at, end - at);
    at = end + 1;
    if (word.empty() || word == "auto" || word == "1") continue;
    f(word);
  }
}

/// SLUICE_CUDA_TF_SMALL, comma-separated words: auto, 1 or unset (the size rule), on (wherever the
/// kernel fits), off or 0 (never), require (with auto or on: a block the kernel does not take is
/// an Error saying why; it implies on, as SLUICE_CUDA_CG_SMALL's `require` takes any size).
struct TfMode {
  bool off = false;
  bool on = false;
  bool require = false;
};

inline TfMode tf_mode_from(const char* value, const OpInfo& op) {
  TfMode mode;
  if (value == nullptr) return mode;
  const std::string all(value);
  each_switch_word(all, [&](const std::string& word) {
    if (word == "off" || word == "0") {
      mode.off = true;
    } else if (word == "on") {
      mode.on = true;
    } else if (word == "require") {
      mode.require = true;
    } else {
      throw Error(Errc::invalid_argument,
                  "SLUICE_CUDA_TF_SMALL: unknown word '" + word +
                      "'; use auto (the default), on, off and require",
                  op.where);
    }
  });
  if (mode.off && (mode.on || mode.require)) {
    throw Error(Errc::invalid_argument,
                "SLUICE_CUDA_TF_SMALL: '" + all + "' asks for the kernel and turns it off; use one",
                op.where);
  }
  return mode;
}

/// Whether the small TFQMR kernel should take a block of `rows` points on stencil `kind` under
/// `mode` (it may still not fit; see tf_small_block).
constexpr bool tf_small_wanted(const TfMode& mode, LaStencilKind kind, std::int64_t rows) {
  if (mode.off) return false;
  if (mode.on || mode.require) return true;
  return rows <= auto_max_rows(kind);
}

}  // namespace sluice::detail::cuda::small_steps
