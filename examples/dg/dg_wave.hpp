#pragma once
// A nodal DG-FEM discretization of the 3D wave equation on tetrahedra (reference 001's workload,
// written as grudge writes its operator): a box of n^3 cubes, 6 tetrahedra each, degree p
// (Np = (p+1)(p+2)(p+3)/6 nodes per element, Nfp = (p+1)(p+2)/2 per face), the right-hand side as
// lazy arrays (einsums for the weak gradient and divergence, lifting and inverse mass; gathers for
// the face traces) and, for checking, the same right-hand side as plain loops.
//
// The system is u_t = -div v, v_t = -grad u (so u_tt = laplace u) on the unit cube, with u = 0 on
// its boundary (mirror states u+ = -u-, v+ = v-). With the central flux its discrete energy is
// conserved by the spatial operator; the upwind flux dissipates it.
//
// Used by examples/12-lazy-dg-wave.cpp and bench/lazy.

#include <sluice/lazy.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <vector>

namespace dg {

namespace L = sluice::lazy;

enum class Flux { central, upwind };

/// Inverse of an n x n row-major matrix (Gauss-Jordan with partial pivoting).
inline std::vector<double> invert(std::vector<double> a, int n) {
  std::vector<double> inv(static_cast<std::size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i) inv[static_cast<std::size_t>(i * n + i)] = 1;
  auto at = [n](std::vector<double>& m, int r, int c) -> double& {
    return m[static_cast<std::size_t>(r * n + c)];
  };
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(at(a, r, c)) > std::abs(at(a, piv, c))) piv = r;
    }
    if (std::abs(at(a, piv, c)) < 1e-300) throw std::runtime_error("dg: singular matrix");
    for (int k = 0; k < n; ++k) {
      std::swap(at(a, c, k), at(a, piv, k));
      std::swap(at(inv, c, k), at(inv, piv, k));
    }
    const double d = at(a, c, c);
    for (int k = 0; k < n; ++k) {
      at(a, c, k) /= d;
      at(inv, c, k) /= d;
    }
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = at(a, r, c);
      if (f == 0) continue;
      for (int k = 0; k < n; ++k) {
        at(a, r, k) -= f * at(a, c, k);
        at(inv, r, k) -= f * at(inv, c, k);
      }
    }
  }
  return inv;
}

/// Gauss-Legendre points and weights on [0, 1].
inline void gauss_legendre(int q, std::vector<double>& x, std::vector<double>& w) {
  x.resize(static_cast<std::size_t>(q));
  w.resize(static_cast<std::size_t>(q));
  for (int i = 0; i < q; ++i) {
    double t = std::cos(M_PI * (i + 0.75) / (q + 0.5));
    for (int it = 0; it < 100; ++it) {
      double p0 = 1, p1 = t;
      for (int k = 2; k <= q; ++k) {
        const double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      const double dp = q * (t * p1 - p0) / (t * t - 1);
      const double dt = p1 / dp;
      t -= dt;
      if (std::abs(dt) < 1e-16) break;
    }
    double p0 = 1, p1 = t;
    for (int k = 2; k <= q; ++k) {
      const double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
      p0 = p1;
      p1 = p2;
    }
    const double dp = q * (t * p1 - p0) / (t * t - 1);
    x[static_cast<std::size_t>(i)] = 0.5 * (1 - t);
    w[static_cast<std::size_t>(i)] = 1.0 / ((1 - t * t) * dp * dp);
  }
}

/// The reference element: the unit simplex x, y, z >= 0, x + y + z <= 1, with equispaced nodes.
struct Reference {
  int p = 1, Np = 0, Nfp = 0;
  std::vector<std::array<int, 3>> lattice;  // node n at (i, j, k) / p
  std::vector<int> fmask;                   // 4 x Nfp: volume node of face node k of face f
  std::vector<double> M, Minv;              // Np x Np
  std::vector<double> S;                    // 3 x Np x Np: S[r][i][j] = int d_r(phi_i) phi_j
  std::vector<double> Lift;           // Np x 4 x Nfp: L[i][f][k] = int_f phi_i phi_fmask[f][k]
  std::array<double, 4> face_area{};  // of the reference faces
};

inline Reference make_reference(int p) {
  Reference R;
  R.p = p;
  for (int k = 0; k <= p; ++k) {
    for (int j = 0; j + k <= p; ++j) {
      for (int i = 0; i + j + k <= p; ++i) R.lattice.push_back({i, j, k});
    }
  }
  R.Np = static_cast<int>(R.lattice.size());
  R.Nfp = (p + 1) * (p + 2) / 2;
  const int Np = R.Np;
  // Monomials x^a y^b z^c, a + b + c <= p, the same lattice.
  const auto& mono = R.lattice;
  auto node = [&](int n) {
    const auto& l = R.lattice[static_cast<std::size_t>(n)];
    return std::array<double, 3>{double(l[0]) / p, double(l[1]) / p, double(l[2]) / p};
  };
  auto mpow = [](double x, int e) { return e == 0 ? 1.0 : std::pow(x, e); };
  std::vector<double> V(static_cast<std::size_t>(Np * Np));
  for (int n = 0; n < Np; ++n) {
    const auto x = node(n);
    for (int m = 0; m < Np; ++m) {
      const auto& e = mono[static_cast<std::size_t>(m)];
      V[static_cast<std::size_t>(n * Np + m)] =
          mpow(x[0], e[0]) * mpow(x[1], e[1]) * mpow(x[2], e[2]);
    }
  }
  const auto C = invert(V, Np);  // phi_j = sum_m C[m][j] mono_m
  auto c = [&](int m, int j) { return C[static_cast<std::size_t>(m * Np + j)]; };
  auto fact = [](int n) {
    double f = 1;
    for (int i = 2; i <= n; ++i) f *= i;
    return f;
  };
  R.M.assign(static_cast<std::size_t>(Np * Np), 0.0);
  for (int i = 0; i < Np; ++i) {
    for (int j = 0; j < Np; ++j) {
      double s = 0;
      for (int m = 0; m < Np; ++m) {
        for (int l = 0; l < Np; ++l) {
          const auto& a = mono[static_cast<std::size_t>(m)];
          const auto& b = mono[static_cast<std::size_t>(l)];
          const int e0 = a[0] + b[0], e1 = a[1] + b[1], e2 = a[2] + b[2];
          s += c(m, i) * c(l, j) * fact(e0) * fact(e1) * fact(e2) / fact(e0 + e1 + e2 + 3);
        }
      }
      R.M[static_cast<std::size_t>(i * Np + j)] = s;
    }
  }
  R.Minv = invert(R.M, Np);
  // D_r[k][j] = d_r phi_j at node k; S[r][i][j] = (D_r^T M)[i][j].
  R.S.assign(static_cast<std::size_t>(3 * Np * Np), 0.0);
  for (int r = 0; r < 3; ++r) {
    std::vector<double> D(static_cast<std::size_t>(Np * Np), 0.0);
    for (int k = 0; k < Np; ++k) {
      const auto x = node(k);
      for (int j = 0; j < Np; ++j) {
        double s = 0;
        for (int m = 0; m < Np; ++m) {
          auto e = mono[static_cast<std::size_t>(m)];
          if (e[static_cast<std::size_t>(r)] == 0) continue;
          const double f = e[static_cast<std::size_t>(r)];
          e[static_cast<std::size_t>(r)] -= 1;
          s += c(m, j) * f * mpow(x[0], e[0]) * mpow(x[1], e[1]) * mpow(x[2], e[2]);
        }
        D[static_cast<std::size_t>(k * Np + j)] = s;
      }
    }
    for (int i = 0; i < Np; ++i) {
      for (int j = 0; j < Np; ++j) {
        double s = 0;
        for (int k = 0; k < Np; ++k) {
          s += D[static_cast<std::size_t>(k * Np + i)] * R.M[static_cast<std::size_t>(k * Np + j)];
        }
        R.S[static_cast<std::size_t>((r * Np + i) * Np + j)] = s;
      }
    }
  }
  // Faces: 0 (z = 0), 1 (y = 0), 2 (x = 0), 3 (x + y + z = 1), by their vertices.
  const std::array<std::array<double, 3>, 4> vert{{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  const std::array<std::array<int, 3>, 4> fv{{{0, 1, 2}, {0, 1, 3}, {0, 2, 3}, {1, 2, 3}}};
  R.fmask.clear();
  for (int f = 0; f < 4; ++f) {
    for (int n = 0; n < Np; ++n) {
      const auto& l = R.lattice[static_cast<std::size_t>(n)];
      const bool on = f == 0   ? l[2] == 0
                      : f == 1 ? l[1] == 0
                      : f == 2 ? l[0] == 0
                               : l[0] + l[1] + l[2] == p;
      if (on) R.fmask.push_back(n);
    }
  }
  std::vector<double> gx, gw;
  gauss_legendre(p + 3, gx, gw);
  R.Lift.assign(static_cast<std::size_t>(Np * 4 * R.Nfp), 0.0);
  for (int f = 0; f < 4; ++f) {
    const auto& A = vert[static_cast<std::size_t>(fv[static_cast<std::size_t>(f)][0])];
    const auto& B = vert[static_cast<std::size_t>(fv[static_cast<std::size_t>(f)][1])];
    const auto& Cc = vert[static_cast<std::size_t>(fv[static_cast<std::size_t>(f)][2])];
    const std::array<double, 3> e1{B[0] - A[0], B[1] - A[1], B[2] - A[2]},
        e2{Cc[0] - A[0], Cc[1] - A[1], Cc[2] - A[2]};
    const std::array<double, 3> cr{e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                                   e1[0] * e2[1] - e1[1] * e2[0]};
    const double jac = std::sqrt(cr[0] * cr[0] + cr[1] * cr[1] + cr[2] * cr[2]);
    R.face_area[static_cast<std::size_t>(f)] = jac / 2;
    auto phi = [&](int j, const std::array<double, 3>& x) {
      double s = 0;
      for (int m = 0; m < Np; ++m) {
        const auto& e = mono[static_cast<std::size_t>(m)];
        s += c(m, j) * mpow(x[0], e[0]) * mpow(x[1], e[1]) * mpow(x[2], e[2]);
      }
      return s;
    };
    for (int a = 0; a < R.Nfp; ++a) {
      for (int b = 0; b < R.Nfp; ++b) {
        const int i = R.fmask[static_cast<std::size_t>(f * R.Nfp + a)];
        const int j = R.fmask[static_cast<std::size_t>(f * R.Nfp + b)];
        double s = 0;
        for (std::size_t qu = 0; qu < gx.size(); ++qu) {
          for (std::size_t qw = 0; qw < gx.size(); ++qw) {
            const double su = gx[qu], t = (1 - gx[qu]) * gx[qw];
            const std::array<double, 3> x{A[0] + su * e1[0] + t * e2[0],
                                          A[1] + su * e1[1] + t * e2[1],
                                          A[2] + su * e1[2] + t * e2[2]};
            s += gw[qu] * gw[qw] * (1 - gx[qu]) * jac * phi(i, x) * phi(j, x);
          }
        }
        R.Lift[static_cast<std::size_t>((i * 4 + f) * R.Nfp + b)] = s;
      }
    }
  }
  return R;
}

/// The mesh: n^3 cubes of the unit cube, 6 tetrahedra each (all sharing the cube's diagonal), with
/// the per-element data the operator needs.
struct Mesh {
  int n = 0;
  std::int64_t E = 0;
  std::vector<double> J;       // E: |det| of the element's map from the reference simplex
  std::vector<double> ijm;     // 3 x 3 x E: J * d(xi_r)/d(x_x)
  std::vector<double> normal;  // 3 x 4 x E: outward unit normal of face f
  std::vector<double> sJ;      // 4 x E: physical over reference face area
  std::vector<std::int32_t> nbr_elem, nbr_node;  // 4 x E x Nfp: the exterior trace's node
  std::vector<std::uint8_t> boundary;            // 4 x E
  std::vector<double> x;                         // E x Np x 3: node coordinates
};

inline Mesh make_mesh(const Reference& R, int n) {
  Mesh m;
  m.n = n;
  m.E = std::int64_t{6} * n * n * n;
  const int Np = R.Np, Nfp = R.Nfp;
  const std::size_t E = static_cast<std::size_t>(m.E);
  auto vid = [n](int i, int j, int k) { return i + (n + 1) * (j + (n + 1) * k); };
  auto vx = [n](int id) {
    const int i = id % (n + 1), j = (id / (n + 1)) % (n + 1), k = id / ((n + 1) * (n + 1));
    return std::array<double, 3>{double(i) / n, double(j) / n, double(k) / n};
  };
  std::vector<std::array<int, 4>> tets;
  const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < n; ++i) {
        for (const auto& pm : perms) {
          std::array<int, 3> c{i, j, k};
          std::array<int, 4> t{};
          t[0] = vid(c[0], c[1], c[2]);
          for (int s = 0; s < 3; ++s) {
            c[static_cast<std::size_t>(pm[s])] += 1;
            t[static_cast<std::size_t>(s + 1)] = vid(c[0], c[1], c[2]);
          }
          tets.push_back(t);
        }
      }
    }
  }
  const std::array<std::array<int, 3>, 4> fv{{{0, 1, 2}, {0, 1, 3}, {0, 2, 3}, {1, 2, 3}}};
  m.J.resize(E);
  m.ijm.assign(9 * E, 0.0);
  m.normal.assign(12 * E, 0.0);
  m.sJ.assign(4 * E, 0.0);
  m.x.assign(E * static_cast<std::size_t>(Np) * 3, 0.0);
  std::map<std::array<int, 3>, std::vector<std::pair<int, int>>> faces;
  for (std::size_t e = 0; e < E; ++e) {
    const auto& t = tets[e];
    const auto P0 = vx(t[0]);
    double A[3][3];
    for (int col = 0; col < 3; ++col) {
      const auto Pc = vx(t[static_cast<std::size_t>(col + 1)]);
      for (int r = 0; r < 3; ++r)
        A[r][col] = Pc[static_cast<std::size_t>(r)] - P0[static_cast<std::size_t>(r)];
    }
    const double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                       A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                       A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
    m.J[e] = std::abs(det);
    // d(xi_r)/d(x_x) = (A^-1)[r][x].
    double inv[3][3];
    inv[0][0] = (A[1][1] * A[2][2] - A[1][2] * A[2][1]) / det;
    inv[0][1] = (A[0][2] * A[2][1] - A[0][1] * A[2][2]) / det;
    inv[0][2] = (A[0][1] * A[1][2] - A[0][2] * A[1][1]) / det;
    inv[1][0] = (A[1][2] * A[2][0] - A[1][0] * A[2][2]) / det;
    inv[1][1] = (A[0][0] * A[2][2] - A[0][2] * A[2][0]) / det;
    inv[1][2] = (A[0][2] * A[1][0] - A[0][0] * A[1][2]) / det;
    inv[2][0] = (A[1][0] * A[2][1] - A[1][1] * A[2][0]) / det;
    inv[2][1] = (A[0][1] * A[2][0] - A[0][0] * A[2][1]) / det;
    inv[2][2] = (A[0][0] * A[1][1] - A[0][1] * A[1][0]) / det;
    for (int x = 0; x < 3; ++x) {
      for (int r = 0; r < 3; ++r)
        m.ijm[(static_cast<std::size_t>(x * 3 + r)) * E + e] = m.J[e] * inv[r][x];
    }
    for (int nd = 0; nd < Np; ++nd) {
      const auto& l = R.lattice[static_cast<std::size_t>(nd)];
      for (int r = 0; r < 3; ++r) {
        double v = P0[static_cast<std::size_t>(r)];
        for (int col = 0; col < 3; ++col) v += A[r][col] * l[static_cast<std::size_t>(col)] / R.p;
        m.x[(e * static_cast<std::size_t>(Np) + static_cast<std::size_t>(nd)) * 3 +
            static_cast<std::size_t>(r)] = v;
      }
    }
    for (int f = 0; f < 4; ++f) {
      const auto& f3 = fv[static_cast<std::size_t>(f)];
      const auto a = vx(t[static_cast<std::size_t>(f3[0])]),
                 b = vx(t[static_cast<std::size_t>(f3[1])]),
                 c = vx(t[static_cast<std::size_t>(f3[2])]);
      int opp = 0 + 1 + 2 + 3 - f3[0] - f3[1] - f3[2];
      const auto o = vx(t[static_cast<std::size_t>(opp)]);
      const std::array<double, 3> e1{b[0] - a[0], b[1] - a[1], b[2] - a[2]},
          e2{c[0] - a[0], c[1] - a[1], c[2] - a[2]};
      std::array<double, 3> cr{e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                               e1[0] * e2[1] - e1[1] * e2[0]};
      const double len = std::sqrt(cr[0] * cr[0] + cr[1] * cr[1] + cr[2] * cr[2]);
      const double side = cr[0] * (o[0] - a[0]) + cr[1] * (o[1] - a[1]) + cr[2] * (o[2] - a[2]);
      for (int x = 0; x < 3; ++x) {
        m.normal[(static_cast<std::size_t>(x * 4 + f)) * E + e] =
            (side > 0 ? -1 : 1) * cr[static_cast<std::size_t>(x)] / len;
      }
      m.sJ[static_cast<std::size_t>(f) * E + e] =
          (len / 2) / R.face_area[static_cast<std::size_t>(f)];
      std::array<int, 3> key{t[static_cast<std::size_t>(f3[0])], t[static_cast<std::size_t>(f3[1])],
                             t[static_cast<std::size_t>(f3[2])]};
      std::sort(key.begin(), key.end());
      faces[key].push_back({static_cast<int>(e), f});
    }
  }
  m.nbr_elem.assign(4 * E * static_cast<std::size_t>(Nfp), 0);
  m.nbr_node.assign(4 * E * static_cast<std::size_t>(Nfp), 0);
  m.boundary.assign(4 * E, 0);
  auto X = [&](std::size_t e, int nd) {
    return &m.x[(e * static_cast<std::size_t>(Np) + static_cast<std::size_t>(nd)) * 3];
  };
  for (const auto& [key, list] : faces) {
    for (std::size_t s = 0; s < list.size(); ++s) {
      const auto [e, f] = list[s];
      const auto eu = static_cast<std::size_t>(e);
      const std::size_t base =
          (static_cast<std::size_t>(f) * E + eu) * static_cast<std::size_t>(Nfp);
      if (list.size() == 1) {
        m.boundary[static_cast<std::size_t>(f) * E + eu] = 1;
        for (int k = 0; k < Nfp; ++k) {
          m.nbr_elem[base + static_cast<std::size_t>(k)] = e;
          m.nbr_node[base + static_cast<std::size_t>(k)] =
              R.fmask[static_cast<std::size_t>(f * Nfp + k)];
        }
        continue;
      }
      const auto [e2, f2] = list[1 - s];
      for (int k = 0; k < Nfp; ++k) {
        const double* p = X(eu, R.fmask[static_cast<std::size_t>(f * Nfp + k)]);
        int found = -1;
        for (int k2 = 0; k2 < Nfp; ++k2) {
          const double* q =
              X(static_cast<std::size_t>(e2), R.fmask[static_cast<std::size_t>(f2 * Nfp + k2)]);
          if (std::abs(p[0] - q[0]) + std::abs(p[1] - q[1]) + std::abs(p[2] - q[2]) < 1e-9)
            found = k2;
        }
        if (found < 0) throw std::runtime_error("dg: face nodes do not match");
        m.nbr_elem[base + static_cast<std::size_t>(k)] = e2;
        m.nbr_node[base + static_cast<std::size_t>(k)] =
            R.fmask[static_cast<std::size_t>(f2 * Nfp + found)];
      }
    }
  }
  return m;
}

/// The operator's data as lazy constants (device buffers of ctx's device).
struct Operators {
  L::Array<double> ijm, S, Lift, sJ, Jinv, Minv, normal;
  L::Array<std::int32_t> elem, fmask, nbr_elem, nbr_node;
  L::Array<bool> boundary;
};

template <class T>
L::Array<T> upload(const sluice::Context& ctx, const std::vector<T>& h, L::Shape shape) {
  sluice::DeviceBuffer<T> d(ctx, h.size());
  sluice::copy(ctx, d, h);
  ctx.synchronize();
  return L::constant(std::move(d), std::move(shape));
}

inline Operators operators(const sluice::Context& ctx, const Reference& R, const Mesh& m) {
  const std::int64_t E = m.E, Np = R.Np, Nfp = R.Nfp;
  Operators o;
  o.ijm = upload(ctx, m.ijm, {3, 3, E, 1});
  o.S = upload(ctx, R.S, {3, Np, Np});
  o.Lift = upload(ctx, R.Lift, {Np, 4, Nfp});
  std::vector<double> sJ(static_cast<std::size_t>(4 * E * Nfp));
  for (std::size_t fe = 0; fe < static_cast<std::size_t>(4 * E); ++fe) {
    for (std::size_t k = 0; k < static_cast<std::size_t>(Nfp); ++k)
      sJ[fe * static_cast<std::size_t>(Nfp) + k] = m.sJ[fe];
  }
  o.sJ = upload(ctx, sJ, {4, E, Nfp});
  std::vector<double> jinv(m.J.size());
  for (std::size_t e = 0; e < jinv.size(); ++e) jinv[e] = 1.0 / m.J[e];
  o.Jinv = upload(ctx, jinv, {E, 1});
  o.Minv = upload(ctx, R.Minv, {Np, Np});
  o.normal = upload(ctx, m.normal, {3, 4, E, 1});
  std::vector<std::int32_t> elem(static_cast<std::size_t>(E));
  for (std::int64_t e = 0; e < E; ++e)
    elem[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(e);
  o.elem = upload(ctx, elem, {1, E, 1});
  std::vector<std::int32_t> fm(R.fmask.begin(), R.fmask.end());
  o.fmask = upload(ctx, fm, {4, 1, Nfp});
  o.nbr_elem = upload(ctx, m.nbr_elem, {4, E, Nfp});
  o.nbr_node = upload(ctx, m.nbr_node, {4, E, Nfp});
  std::vector<bool> b(m.boundary.begin(), m.boundary.end());
  sluice::DeviceBuffer<bool> db(ctx, b.size());
  auto hb = std::make_unique<bool[]>(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) hb[i] = b[i];
  sluice::copy(ctx, db, std::span<bool>(hb.get(), b.size()));
  ctx.synchronize();
  o.boundary = L::constant(std::move(db), {4, E, 1});
  return o;
}

/// The right-hand side (du/dt, dv/dt) of u (E, Np) and v (3, E, Np), as grudge writes it.
struct Rhs {
  L::Array<double> du, dv;
};

inline Rhs rhs(const Operators& o, const L::Array<double>& u, const L::Array<double>& v,
               Flux flux) {
  using L::Slice;
  // Face traces (4, E, Nfp): interior by the face node picks, exterior by the opposite face's
  // element and node permutation; on the boundary the mirror state.
  auto u_in = L::index(u, {o.elem, o.fmask});
  auto u_ex = L::where(o.boundary, -u_in, L::index(u, {o.nbr_elem, o.nbr_node}));
  auto v_in = L::index(v, {Slice{}, o.elem, o.fmask});  // (3, 4, E, Nfp)
  auto v_ex = L::where(o.boundary, v_in, L::index(v, {Slice{}, o.nbr_elem, o.nbr_node}));
  auto vn_in = L::sum(o.normal * v_in, 0);
  auto vn_ex = L::sum(o.normal * v_ex, 0);
  auto u_star = (u_in + u_ex) * 0.5;
  auto vn_star = (vn_in + vn_ex) * 0.5;
  if (flux == Flux::upwind) {
    u_star = u_star + (vn_in - vn_ex) * 0.5;
    vn_star = vn_star + (u_in - u_ex) * 0.5;
  }
  auto grad = L::einsum("xrej,rij,ej->xei", o.ijm, o.S, u);  // weak gradient (3, E, Np)
  auto div = L::einsum("xrej,rij,xej->ei", o.ijm, o.S, v);   // weak divergence (E, Np)
  auto lift_u = L::einsum("ifj,fej,fej->ei", o.Lift, o.sJ, vn_star);
  auto lift_v = L::einsum("ifj,fej,xfej->xei", o.Lift, o.sJ, o.normal * u_star);
  return {L::einsum("ei,ij,ej->ei", o.Jinv, o.Minv, div - lift_u),
          L::einsum("ei,ij,xej->xei", o.Jinv, o.Minv, grad - lift_v)};
}

/// The same right-hand side as plain loops on host arrays (the check, and the benchmark's
/// "plain C++" baseline).
/// Elements [first, last) (all by default).
inline void rhs_loops(const Reference& R, const Mesh& m, const double* u, const double* v,
                      double* du, double* dv, Flux flux, std::int64_t first = 0,
                      std::int64_t last = -1) {
  const std::size_t E = static_cast<std::size_t>(m.E), Np = static_cast<std::size_t>(R.Np),
                    Nfp = static_cast<std::size_t>(R.Nfp);
  std::vector<double> au(Np), av(3 * Np), fu(4 * Nfp), fv(3 * 4 * Nfp);
  const std::size_t e_end = last < 0 ? E : static_cast<std::size_t>(last);
  for (std::size_t e = static_cast<std::size_t>(first); e < e_end; ++e) {
    std::fill(au.begin(), au.end(), 0.0);
    std::fill(av.begin(), av.end(), 0.0);
    // Volume terms.
    for (std::size_t i = 0; i < Np; ++i) {
      for (std::size_t r = 0; r < 3; ++r) {
        double su = 0, sv[3] = {0, 0, 0};
        for (std::size_t j = 0; j < Np; ++j) {
          const double s = R.S[(r * Np + i) * Np + j];
          su += s * u[e * Np + j];
          for (std::size_t x = 0; x < 3; ++x) sv[x] += s * v[(x * E + e) * Np + j];
        }
        for (std::size_t x = 0; x < 3; ++x) {
          const double g = m.ijm[(x * 3 + r) * E + e];
          av[x * Np + i] += g * su;
          au[i] += g * sv[x];
        }
      }
    }
    // Fluxes.
    for (std::size_t f = 0; f < 4; ++f) {
      const bool bd = m.boundary[f * E + e] != 0;
      double n[3];
      for (std::size_t x = 0; x < 3; ++x) n[x] = m.normal[(x * 4 + f) * E + e];
      for (std::size_t k = 0; k < Nfp; ++k) {
        const std::size_t in = static_cast<std::size_t>(R.fmask[f * Nfp + k]);
        const std::size_t q = (f * E + e) * Nfp + k;
        const std::size_t ne = static_cast<std::size_t>(m.nbr_elem[q]),
                          nn = static_cast<std::size_t>(m.nbr_node[q]);
        const double ui = u[e * Np + in], ue = bd ? -ui : u[ne * Np + nn];
        double vni = 0, vne = 0;
        for (std::size_t x = 0; x < 3; ++x) {
          const double vi = v[(x * E + e) * Np + in];
          vni += n[x] * vi;
          vne += n[x] * (bd ? vi : v[(x * E + ne) * Np + nn]);
        }
        double us = (ui + ue) * 0.5, vns = (vni + vne) * 0.5;
        if (flux == Flux::upwind) {
          us += (vni - vne) * 0.5;
          vns += (ui - ue) * 0.5;
        }
        fu[f * Nfp + k] = vns;
        for (std::size_t x = 0; x < 3; ++x) fv[(x * 4 + f) * Nfp + k] = n[x] * us;
      }
    }
    for (std::size_t i = 0; i < Np; ++i) {
      double lu = 0, lv[3] = {0, 0, 0};
      for (std::size_t f = 0; f < 4; ++f) {
        const double sj = m.sJ[f * E + e];
        for (std::size_t k = 0; k < Nfp; ++k) {
          const double l = R.Lift[(i * 4 + f) * Nfp + k] * sj;
          lu += l * fu[f * Nfp + k];
          for (std::size_t x = 0; x < 3; ++x) lv[x] += l * fv[(x * 4 + f) * Nfp + k];
        }
      }
      au[i] -= lu;
      for (std::size_t x = 0; x < 3; ++x) av[x * Np + i] -= lv[x];
    }
    const double jinv = 1.0 / m.J[e];
    for (std::size_t i = 0; i < Np; ++i) {
      double su = 0, sv[3] = {0, 0, 0};
      for (std::size_t j = 0; j < Np; ++j) {
        const double mi = R.Minv[i * Np + j];
        su += mi * au[j];
        for (std::size_t x = 0; x < 3; ++x) sv[x] += mi * av[x * Np + j];
      }
      du[e * Np + i] = jinv * su;
      for (std::size_t x = 0; x < 3; ++x) dv[(x * E + e) * Np + i] = jinv * sv[x];
    }
  }
}

/// The discrete energy 1/2 sum_e J_e (u^T M u + sum_x v_x^T M v_x).
inline double energy(const Reference& R, const Mesh& m, const double* u, const double* v) {
  const std::size_t E = static_cast<std::size_t>(m.E), Np = static_cast<std::size_t>(R.Np);
  double total = 0;
  for (std::size_t e = 0; e < E; ++e) {
    for (std::size_t i = 0; i < Np; ++i) {
      for (std::size_t j = 0; j < Np; ++j) {
        double vv = 0;
        for (std::size_t x = 0; x < 3; ++x) vv += v[(x * E + e) * Np + i] * v[(x * E + e) * Np + j];
        total += 0.5 * m.J[e] * R.M[i * Np + j] * (u[e * Np + i] * u[e * Np + j] + vv);
      }
    }
  }
  return total;
}

/// Low-storage RK4 (Carpenter and Kennedy, 5 stages).
inline constexpr double rk4a[5] = {
    0.0, -567301805773.0 / 1357537059087.0, -2404267990393.0 / 2016746695238.0,
    -3550918686646.0 / 2091501179385.0, -1275806237668.0 / 842570457699.0};
inline constexpr double rk4b[5] = {
    1432997174477.0 / 9575080441755.0, 5161836677717.0 / 13612068292357.0,
    1720146321549.0 / 2090206949498.0, 3134564353537.0 / 4481467310338.0,
    2277821191437.0 / 14882151754819.0};

}  // namespace dg
