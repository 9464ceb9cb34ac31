#pragma once
// A straightforward evaluator of NumPy semantics on the host, written independently of the lazy
// layer's lowering: every operation loops over its output's multi-index. Values are doubles
// (integers and bools exactly), so one type serves every element type.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::lazy::ref {

using Shape = std::vector<std::int64_t>;

struct Ref {
  Shape shape;
  std::vector<double> v;
  [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(v.size()); }
};

inline std::int64_t count(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

inline std::vector<std::int64_t> strides(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

/// Calls f(multi-index, flat) for every element of `s` in C order.
inline void each(const Shape& s, const std::function<void(const Shape&, std::int64_t)>& f) {
  const std::int64_t n = count(s);
  Shape idx(s.size(), 0);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(idx, flat);
    for (std::size_t k = s.size(); k-- > 0;) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
}

inline double at(const Ref& a, const Shape& idx) {
  const auto st = strides(a.shape);
  std::int64_t off = 0;
  for (std::size_t k = 0; k < idx.size(); ++k) off += idx[k] * st[k];
  return a.v[static_cast<std::size_t>(off)];
}

inline Shape broadcast(const std::vector<Shape>& shapes) {
  std::size_t r = 0;
  for (const auto& s : shapes) r = std::max(r, s.size());
  Shape out(r, 1);
  for (const auto& s : shapes) {
    for (std::size_t k = 0; k < s.size(); ++k) {
      auto& o = out[k + r - s.size()];
      if (s[k] != 1) {
        if (o != 1 && o != s[k]) throw std::runtime_error("reference: no broadcast");
        o = s[k];
      }
    }
  }
  return out;
}

inline double at_broadcast(const Ref& a, const Shape& out_idx) {
  Shape idx(a.shape.size());
  for (std::size_t k = 0; k < a.shape.size(); ++k) {
    idx[k] = a.shape[k] == 1 ? 0 : out_idx[k + out_idx.size() - a.shape.size()];
  }
  return at(a, idx);
}

inline Ref map(const std::vector<const Ref*>& in,
               const std::function<double(const std::vector<double>&)>& f) {
  std::vector<Shape> shapes;
  for (auto* a : in) shapes.push_back(a->shape);
  Ref r;
  r.shape = broadcast(shapes);
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  std::vector<double> args(in.size());
  each(r.shape, [&](const Shape& idx, std::int64_t flat) {
    for (std::size_t k = 0; k < in.size(); ++k) args[k] = at_broadcast(*in[k], idx);
    r.v[static_cast<std::size_t>(flat)] = f(args);
  });
  return r;
}

enum class Red { sum, prod, min, max };

inline Ref reduce(const Ref& a, std::optional<std::vector<int>> axes, bool keepdims, Red op) {
  std::vector<bool> red(a.shape.size(), !axes);
  if (axes) {
    for (int ax : *axes)
      red[static_cast<std::size_t>(ax < 0 ? ax + static_cast<int>(a.shape.size()) : ax)] = true;
  }
  Ref r;
  for (std::size_t k = 0; k < a.shape.size(); ++k) {
    if (!red[k]) {
      r.shape.push_back(a.shape[k]);
    } else if (keepdims) {
      r.shape.push_back(1);
    }
  }
  const double init = op == Red::sum    ? 0
                      : op == Red::prod ? 1
                      : op == Red::min  ? INFINITY
                                        : -INFINITY;
  r.v.assign(static_cast<std::size_t>(count(r.shape)), init);
  const auto st = strides(r.shape);
  each(a.shape, [&](const Shape& idx, std::int64_t flat) {
    std::int64_t off = 0;
    std::size_t o = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (!red[k]) {
        off += idx[k] * st[o++];
      } else if (keepdims) {
        ++o;
      }
    }
    double& acc = r.v[static_cast<std::size_t>(off)];
    const double x = a.v[static_cast<std::size_t>(flat)];
    switch (op) {
      case Red::sum:
        acc += x;
        break;
      case Red::prod:
        acc *= x;
        break;
      case Red::min:
        acc = std::min(acc, x);
        break;
      case Red::max:
        acc = std::max(acc, x);
        break;
    }
  });
  return r;
}

inline Ref einsum(const std::string& spec, const std::vector<const Ref*>& in) {
  const auto arrow = spec.find("->");
  const std::string out = spec.substr(arrow + 2);
  std::vector<std::string> ins;
  std::size_t start = 0;
  const std::string lhs = spec.substr(0, arrow);
  for (;;) {
    auto c = lhs.find(',', start);
    ins.push_back(lhs.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  std::string letters;
  std::vector<std::int64_t> ext;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    for (std::size_t a = 0; a < ins[k].size(); ++a) {
      const auto at_letter = letters.find(ins[k][a]);
      if (at_letter == std::string::npos) {
        letters += ins[k][a];
        ext.push_back(in[k]->shape[a]);
      } else {
        ext[at_letter] = std::max(ext[at_letter], in[k]->shape[a]);  // extents of 1 broadcast
      }
    }
  }
  Ref r;
  for (char c : out) r.shape.push_back(ext[letters.find(c)]);
  r.v.assign(static_cast<std::size_t>(count(r.shape)), 0.0);
  const auto st = strides(r.shape);
  each(ext, [&](const Shape& idx, std::int64_t) {
    double p = 1;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      Shape ai;
      for (std::size_t a = 0; a < ins[k].size(); ++a) {
        ai.push_back(in[k]->shape[a] == 1 ? 0 : idx[letters.find(ins[k][a])]);
      }
      p *= at(*in[k], ai);
    }
    std::int64_t off = 0;
    for (std::size_t q = 0; q < out.size(); ++q) off += idx[letters.find(out[q])] * st[q];
    r.v[static_cast<std::size_t>(off)] += p;
  });
  return r;
}

inline std::int64_t wrap(double i, std::int64_t n) {
  auto v = static_cast<std::int64_t>(i);
  if (v < 0) v += n;
  if (v < 0 || v >= n) throw std::runtime_error("reference: index out of range");
  return v;
}

inline Ref take(const Ref& a, const Ref& idx, int axis) {
  const auto k = static_cast<std::size_t>(axis);
  Ref r;
  r.shape.assign(a.shape.begin(), a.shape.begin() + static_cast<std::ptrdiff_t>(k));
  r.shape.insert(r.shape.end(), idx.shape.begin(), idx.shape.end());
  r.shape.insert(r.shape.end(), a.shape.begin() + static_cast<std::ptrdiff_t>(k) + 1,
                 a.shape.end());
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ii(o.begin() + static_cast<std::ptrdiff_t>(k),
             o.begin() + static_cast<std::ptrdiff_t>(k + idx.shape.size()));
    Shape ai(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(k));
    ai.push_back(wrap(at(idx, ii), a.shape[k]));
    ai.insert(ai.end(), o.begin() + static_cast<std::ptrdiff_t>(k + idx.shape.size()), o.end());
    r.v[static_cast<std::size_t>(flat)] = at(a, ai);
  });
  return r;
}

inline Ref take_along_axis(const Ref& a, const Ref& idx, int axis) {
  const auto k = static_cast<std::size_t>(axis);
  Ref r;
  r.shape.resize(a.shape.size());
  for (std::size_t d = 0; d < a.shape.size(); ++d) {
    r.shape[d] = d == k ? idx.shape[d] : std::max(a.shape[d], idx.shape[d]);
  }
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ii(o.size()), ai(o.size());
    for (std::size_t d = 0; d < o.size(); ++d) {
      ii[d] = idx.shape[d] == 1 ? 0 : o[d];
      ai[d] = a.shape[d] == 1 ? 0 : o[d];
    }
    ai[k] = wrap(at(idx, ii), a.shape[k]);
    r.v[static_cast<std::size_t>(flat)] = at(a, ai);
  });
  return r;
}

inline Ref reshape(const Ref& a, const Shape& s) {
  Ref r{s, a.v};
  return r;
}

inline Ref transpose(const Ref& a, std::vector<int> perm) {
  if (perm.empty()) {
    for (std::size_t k = a.shape.size(); k-- > 0;) perm.push_back(static_cast<int>(k));
  }
  Ref r;
  for (int p : perm) r.shape.push_back(a.shape[static_cast<std::size_t>(p)]);
  r.v.resize(a.v.size());
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ai(o.size());
    for (std::size_t k = 0; k < o.size(); ++k) ai[static_cast<std::size_t>(perm[k])] = o[k];
    r.v[static_cast<std::size_t>(flat)] = at(a, ai);
  });
  return r;
}

inline Ref concatenate(const std::vector<const Ref*>& in, int axis) {
  const auto k = static_cast<std::size_t>(axis);
  Ref r;
  r.shape = in[0]->shape;
  r.shape[k] = 0;
  for (auto* a : in) r.shape[k] += a->shape[k];
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ai = o;
    for (auto* a : in) {
      if (ai[k] < a->shape[k]) {
        r.v[static_cast<std::size_t>(flat)] = at(*a, ai);
        return;
      }
      ai[k] -= a->shape[k];
    }
  });
  return r;
}

inline Ref stack(const std::vector<const Ref*>& in, int axis) {
  const auto k = static_cast<std::size_t>(axis);
  Ref r;
  r.shape = in[0]->shape;
  r.shape.insert(r.shape.begin() + static_cast<std::ptrdiff_t>(k),
                 static_cast<std::int64_t>(in.size()));
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ai = o;
    ai.erase(ai.begin() + static_cast<std::ptrdiff_t>(k));
    r.v[static_cast<std::size_t>(flat)] = at(*in[static_cast<std::size_t>(o[k])], ai);
  });
  return r;
}

inline Ref roll(const Ref& a, std::int64_t shift, int axis) {
  const auto k = static_cast<std::size_t>(axis);
  Ref r{a.shape, a.v};
  const std::int64_t n = a.shape[k];
  if (n == 0) return r;
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ai = o;
    ai[k] = (((o[k] - shift) % n) + n) % n;
    r.v[static_cast<std::size_t>(flat)] = at(a, ai);
  });
  return r;
}

inline Ref broadcast_to(const Ref& a, const Shape& s) {
  Ref r;
  r.shape = s;
  r.v.resize(static_cast<std::size_t>(count(s)));
  each(s, [&](const Shape& o, std::int64_t flat) {
    r.v[static_cast<std::size_t>(flat)] = at_broadcast(a, o);
  });
  return r;
}

/// A slice resolved as NumPy does.
inline std::vector<std::int64_t> slice_indices(std::optional<std::int64_t> start,
                                               std::optional<std::int64_t> stop, std::int64_t step,
                                               std::int64_t n) {
  std::vector<std::int64_t> out;
  auto fix = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < 0) v += n;
    return std::clamp(v, lo, hi);
  };
  if (step > 0) {
    const std::int64_t b = start ? fix(*start, 0, n) : 0, e = stop ? fix(*stop, 0, n) : n;
    for (std::int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    const std::int64_t b = start ? fix(*start, -1, n - 1) : n - 1;
    const std::int64_t e = stop ? fix(*stop, -1, n - 1) : -1;
    for (std::int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

/// Basic indexing by slices only (one per axis).
struct SliceSpec {
  std::optional<std::int64_t> start, stop;
  std::int64_t step = 1;
};
inline Ref slice(const Ref& a, const std::vector<SliceSpec>& s) {
  std::vector<std::vector<std::int64_t>> picks;
  Ref r;
  for (std::size_t k = 0; k < a.shape.size(); ++k) {
    picks.push_back(k < s.size() ? slice_indices(s[k].start, s[k].stop, s[k].step, a.shape[k])
                                 : slice_indices(std::nullopt, std::nullopt, 1, a.shape[k]));
    r.shape.push_back(static_cast<std::int64_t>(picks.back().size()));
  }
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape ai(o.size());
    for (std::size_t k = 0; k < o.size(); ++k) ai[k] = picks[k][static_cast<std::size_t>(o[k])];
    r.v[static_cast<std::size_t>(flat)] = at(a, ai);
  });
  return r;
}

/// a[i0, i1] with two index arrays broadcast together on the first two axes (the rest sliced
/// whole): the advanced block first (adjacent).
inline Ref index2(const Ref& a, const Ref& i0, const Ref& i1) {
  const Shape b = broadcast({i0.shape, i1.shape});
  Ref r;
  r.shape = b;
  r.shape.insert(r.shape.end(), a.shape.begin() + 2, a.shape.end());
  r.v.resize(static_cast<std::size_t>(count(r.shape)));
  each(r.shape, [&](const Shape& o, std::int64_t flat) {
    Shape bi(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(b.size()));
    Shape ai{wrap(at_broadcast(i0, bi), a.shape[0]), wrap(at_broadcast(i1, bi), a.shape[1])};
    ai.insert(ai.end(), o.begin() + static_cast<std::ptrdiff_t>(b.size()), o.end());
    r.v[static_cast<std::size_t>(flat)] = at(a, ai);
  });
  return r;
}

}  // namespace sluice::lazy::ref
