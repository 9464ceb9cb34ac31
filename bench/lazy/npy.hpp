#pragma once
// Writing NumPy .npy files (format 1.0), and a DG case's operators, inputs and expected outputs
// for the peers (bench/peers/lazy_peers.py reads them).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "dg/dg_wave.hpp"

namespace npy {

template <class T>
const char* descr() {
  if constexpr (std::is_same_v<T, double>) return "<f8";
  if constexpr (std::is_same_v<T, std::int32_t>) return "<i4";
  if constexpr (std::is_same_v<T, std::uint8_t>) return "|b1";
}

template <class T>
void write(const std::filesystem::path& path, const std::vector<T>& data,
           const std::vector<std::int64_t>& shape) {
  std::string dict = std::string("{'descr': '") + descr<T>() + "', 'fortran_order': False, 'shape': (";
  for (auto d : shape) dict += std::to_string(d) + ", ";
  dict += "), }";
  std::string header = dict;
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  out.put(static_cast<char>(len & 0xff));
  out.put(static_cast<char>(len >> 8));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(T)));
}

/// DIR/p<p>_s<scale>/: the operator's arrays in the shapes dg::rhs uses, u and v, and the
/// upwind right-hand side computed by the plain loops.
inline void dump_dg(const std::string& dir, const dg::Reference& R, const dg::Mesh& m,
                    const std::vector<double>& u, const std::vector<double>& v, int p, int scale) {
  namespace fs = std::filesystem;
  const fs::path d = fs::path(dir) / ("p" + std::to_string(p) + "_s" + std::to_string(scale));
  fs::create_directories(d);
  const std::int64_t E = m.E, Np = R.Np, Nfp = R.Nfp;
  write(d / "ijm.npy", m.ijm, {3, 3, E, 1});
  write(d / "S.npy", R.S, {3, Np, Np});
  write(d / "Lift.npy", R.Lift, {Np, 4, Nfp});
  std::vector<double> sJ(static_cast<std::size_t>(4 * E * Nfp));
  for (std::size_t fe = 0; fe < static_cast<std::size_t>(4 * E); ++fe) {
    for (std::size_t k = 0; k < static_cast<std::size_t>(Nfp); ++k) sJ[fe * static_cast<std::size_t>(Nfp) + k] = m.sJ[fe];
  }
  write(d / "sJ.npy", sJ, {4, E, Nfp});
  std::vector<double> jinv(m.J.size());
  for (std::size_t e = 0; e < jinv.size(); ++e) jinv[e] = 1.0 / m.J[e];
  write(d / "Jinv.npy", jinv, {E, 1});
  write(d / "Minv.npy", R.Minv, {Np, Np});
  write(d / "normal.npy", m.normal, {3, 4, E, 1});
  std::vector<std::int32_t> fm(R.fmask.begin(), R.fmask.end());
  write(d / "fmask.npy", fm, {4, 1, Nfp});
  write(d / "nbr_elem.npy", m.nbr_elem, {4, E, Nfp});
  write(d / "nbr_node.npy", m.nbr_node, {4, E, Nfp});
  write(d / "boundary.npy", m.boundary, {4, E, 1});
  write(d / "u.npy", u, {E, Np});
  write(d / "v.npy", v, {3, E, Np});
  std::vector<double> du(u.size()), dv(v.size());
  dg::rhs_loops(R, m, u.data(), v.data(), du.data(), dv.data(), dg::Flux::upwind);
  write(d / "du.npy", du, {E, Np});
  write(d / "dv.npy", dv, {3, E, Np});
}

}  // namespace npy
