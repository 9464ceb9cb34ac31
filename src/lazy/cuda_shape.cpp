// Choosing a cuda reduction kernel's shape (see cuda_shape.hpp).

#include "lazy/cuda_shape.hpp"

#include <algorithm>
#include <optional>

namespace sluice::lazy::detail {
namespace {

std::int64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::boolean:
      return 1;
    case DType::i32:
    case DType::f32:
      return 4;
    case DType::i64:
    case DType::f64:
      return 8;
  }
  return 8;
}

/// Strides of `shape` with every one but the innermost made odd (bank-conflict free along any
/// one axis); types under 4 bytes are not padded.
std::vector<std::int64_t> padded_strides(const Shape& shape, DType t) {
  std::vector<std::int64_t> st(shape.size(), 1);
  for (std::size_t k = shape.size(); k-- > 1;) {
    st[k - 1] = st[k] * shape[k];
    if (dtype_bytes(t) >= 4 && st[k - 1] % 2 == 0) ++st[k - 1];
  }
  return st;
}

/// How far the flat offset of `load` (in a buffer of `shape`) moves when variable `var` goes
/// from 0 to 1 with the others at 0; nothing when it is not a constant (a gathered index).
std::optional<std::int64_t> flat_step(const Ex& load, const Shape& shape, int vars, int var) {
  std::vector<std::int64_t> st(shape.size(), 1);
  for (std::size_t k = shape.size(); k-- > 1;) st[k - 1] = st[k] * shape[k];
  ExPtr off = ex_int(0);
  for (std::size_t k = 0; k < load.args.size() && k < st.size(); ++k) {
    off = ex_add(off, ex_mul(load.args[k], ex_int(st[k])));
  }
  std::vector<ExPtr> at0(static_cast<std::size_t>(vars), ex_int(0));
  std::vector<ExPtr> at1 = at0;
  at1[static_cast<std::size_t>(var)] = ex_int(1);
  const auto a = int_value(*substitute(off, at0));
  const auto b = int_value(*substitute(off, at1));
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

}  // namespace

CudaShapeRules& cuda_shape_rules() noexcept {
  static CudaShapeRules rules;
  return rules;
}

namespace {

/// Operands small enough for shared memory and read by at least `reuse` terms per element.
std::vector<StagedBuffer> stageable(const Kernel& k, const Lowered& L, std::int64_t reuse) {
  std::vector<StagedBuffer> out;
  const auto& rules = cuda_shape_rules();
  const std::int64_t outputs = numel(k.shape);
  const std::int64_t terms = numel(k.red);
  std::int64_t used = 0;
  for (std::size_t j = 0; j < k.reads.size(); ++j) {
    const auto& n = L.nodes[static_cast<std::size_t>(k.reads[j])];
    const std::int64_t count = numel(n.shape);
    if (n.shape.empty() || count <= 0) continue;
    if (count > outputs || count * reuse > outputs * std::max<std::int64_t>(terms, 1)) continue;
    auto st = padded_strides(n.shape, n.dtype);
    const std::int64_t padded = st[0] * n.shape[0];
    const std::int64_t capacity = (padded + 1023) / 1024 * 1024;
    const std::int64_t bytes = capacity * dtype_bytes(n.dtype);
    if (used + bytes > rules.stage_bytes) continue;
    used += bytes;
    out.push_back({static_cast<int>(j), std::move(st), capacity});
  }
  return out;
}

/// Lanes per output for a reduction of `terms` terms: a power of two up to 32 with at least
/// four terms per lane.
int lanes_for(std::int64_t terms) {
  int g = 1;
  while (g < 32 && g * 2 * 2 <= terms) g *= 2;
  return g;
}

}  // namespace

CudaShape choose_cuda_shape(const Kernel& k, const Lowered& L) {
  CudaShape s;
  if (k.kind != Kernel::Kind::reduce) return s;
  const auto& rules = cuda_shape_rules();
  const std::int64_t outputs = numel(k.shape);
  const std::int64_t terms = numel(k.red);
  const int rank = static_cast<int>(k.shape.size());
  const int nred = static_cast<int>(k.red.size());
  if (outputs <= 0) return s;

  // Operands small enough for shared memory and read by many outputs.
  s.staged = stageable(k, L, rules.stage_reuse);
  // A multi-output reduction (merge_siblings: short and untiled) keeps a thread per output.
  if (!k.siblings.empty()) return s;
  // Fused for register tiles: tiled (the fusion counted on it), never lanes.
  if (k.tile > 1) {
    s.tile = k.tile;
    return s;
  }

  // Lanes per output: for long reductions whose innermost variable walks a buffer's contiguous
  // axis while consecutive outputs read it strided (not the same element, not the next one).
  const auto t = k.body->dtype;
  if (nred == 0 || terms < rules.group_terms || t == DType::boolean) return s;
  bool strided = false;
  const int vars = rank + nred;
  for_each_load(k.body, [&](const Ex& load) {
    for (const auto& st : s.staged) {
      if (k.reads[static_cast<std::size_t>(st.read)] == load.slot) return;
    }
    const auto& shape = L.nodes[static_cast<std::size_t>(load.slot)].shape;
    const auto r = flat_step(load, shape, vars, vars - 1);
    if (!r || (*r != 1 && *r != -1)) return;
    // A reduction to a scalar has no output variable: its outputs are the split's partials.
    const std::int64_t o = rank > 0 ? flat_step(load, shape, vars, rank - 1).value_or(2) : 2;
    if (o != 0 && o != 1 && o != -1) strided = true;
  });
  if (!rules.force_group && !strided) return s;
  int g = lanes_for(terms);
  if (rules.force_group) g = std::max(g, 2);
  s.group = g;
  return s;
}

std::vector<CudaShape> cuda_shape_candidates(const Kernel& k, const Lowered& L) {
  std::vector<CudaShape> out{choose_cuda_shape(k, L)};
  if (k.kind != Kernel::Kind::reduce || numel(k.shape) <= 0) return out;
  const std::int64_t terms = numel(k.red);
  std::vector<std::vector<StagedBuffer>> stagings{out[0].staged, stageable(k, L, 2), {}};
  std::vector<int> groups{1};
  if (!k.red.empty() && terms >= 8 && k.body->dtype != DType::boolean && k.siblings.empty()) {
    groups.push_back(std::max(out[0].group, lanes_for(terms)));
  }
  for (const auto& st : stagings) {
    if (k.tile > 1) {
      CudaShape c{st, 1, k.tile};
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
    }
    for (int g : groups) {
      CudaShape c{st, g, 1};
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
    }
  }
  return out;
}

std::string describe(const CudaShape& shape) {
  std::string s;
  if (!shape.staged.empty()) {
    s = "staged(";
    for (std::size_t i = 0; i < shape.staged.size(); ++i) {
      s += (i ? ",b" : "b") + std::to_string(shape.staged[i].read + 1);
    }
    s += ")";
  }
  if (shape.group > 1) s += (s.empty() ? "lanes" : "+lanes") + std::to_string(shape.group);
  if (shape.tile > 1) s += (s.empty() ? "tile" : "+tile") + std::to_string(shape.tile);
  return s.empty() ? "thread" : s;
}

}  // namespace sluice::lazy::detail
