#pragma once
// A generator of random lazy programs (random DAGs over the operations, random shapes,
// broadcasts, slices, gathers) together with their reference values (reference.hpp).

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "lazy/reference.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {

namespace L = sluice::lazy;
namespace ref = sluice::lazy::ref;
using ref::Ref;

struct Val {
  L::Array<double> a;
  Ref r;
};

struct IndexInput {
  std::string name;
  Ref r;      // values as doubles
  bool wide;  // int64, else int32
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed), values_(seed) {}
  /// The same program as Generator(seed) gives (the same operations and shapes), with inputs
  /// named `prefix` + the usual names and their values drawn from `value_seed` instead: copies
  /// of one program that horizontal fusion merges, each with data of its own.
  Generator(std::uint64_t seed, std::string prefix, std::uint64_t value_seed)
      : rng_(seed), values_(value_seed), prefix_(std::move(prefix)), own_values_(true) {}

  /// Builds a random program; returns its outputs.
  std::vector<Val> program(int ops, int outputs) {
    pool_.push_back(leaf(random_shape()));
    pool_.push_back(leaf(random_shape()));
    for (int i = 0; i < ops; ++i) {
      Val v = step();
      pool_.push_back(std::move(v));
    }
    std::vector<Val> out;
    for (int k = 0; k < outputs; ++k) {
      // Mostly the latest values, sometimes an earlier one (placeholders included).
      const std::size_t n = pool_.size();
      const std::size_t pick =
          uniform(0, 3) == 0 ? uniform(0, n - 1) : n - 1 - std::min<std::size_t>(k, n - 1);
      out.push_back(pool_[pick]);
    }
    return out;
  }

  std::vector<std::pair<std::string, Ref>> inputs;  // double placeholders
  std::vector<IndexInput> index_inputs;

 private:
  std::size_t uniform(std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
  }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  double value(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(values_);
  }

  ref::Shape random_shape(std::size_t max_rank = 3) {
    ref::Shape s(uniform(0, max_rank));
    for (auto& d : s) d = static_cast<std::int64_t>(uniform(0, 4) == 0 ? 1 : uniform(2, 5));
    return s;
  }

  Val leaf(const ref::Shape& s) {
    const std::string name = prefix_ + "p" + std::to_string(inputs.size());
    Ref r{s, {}};
    r.v.resize(static_cast<std::size_t>(ref::count(s)));
    for (auto& x : r.v) x = own_values_ ? value(-1, 1) : real(-1, 1);
    inputs.emplace_back(name, r);
    return {L::placeholder<double>(name, s), r};
  }

  /// An int index array of `shape` with values in [-n, n).
  template <class I>
  std::pair<L::Array<I>, Ref> index_leaf(const ref::Shape& s, std::int64_t n) {
    const std::string name = prefix_ + "q" + std::to_string(index_inputs.size());
    Ref r{s, {}};
    r.v.resize(static_cast<std::size_t>(ref::count(s)));
    for (auto& x : r.v) {
      const auto top = static_cast<std::size_t>(2 * n - 1);
      const auto u = own_values_ ? std::uniform_int_distribution<std::size_t>(0, top)(values_)
                                 : uniform(0, top);
      x = static_cast<double>(static_cast<std::int64_t>(u) - n);
    }
    index_inputs.push_back({name, r, sizeof(I) == 8});
    return {L::placeholder<I>(name, s), r};
  }

  /// A shape that broadcasts with `s`: some axes made 1, some leading axes dropped.
  ref::Shape broadcastable(const ref::Shape& s) {
    ref::Shape b(s.begin() + static_cast<std::ptrdiff_t>(uniform(0, s.size())), s.end());
    for (auto& d : b) {
      if (uniform(0, 2) == 0) d = 1;
    }
    return b;
  }

  Val& any() { return pool_[uniform(0, pool_.size() - 1)]; }
  Val& recent() {
    return pool_[pool_.size() - 1 - uniform(0, std::min<std::size_t>(2, pool_.size() - 1))];
  }

  /// A value whose shape broadcasts with `s`: an existing one if there is one, else a new leaf.
  Val partner(const ref::Shape& s) {
    std::vector<std::size_t> fits;
    for (std::size_t i = 0; i < pool_.size(); ++i) {
      try {
        (void)ref::broadcast({s, pool_[i].r.shape});
        if (ref::broadcast({s, pool_[i].r.shape}) == s) fits.push_back(i);
      } catch (const std::exception&) {
      }
    }
    if (!fits.empty() && uniform(0, 2) != 0) return pool_[fits[uniform(0, fits.size() - 1)]];
    return leaf(broadcastable(s));
  }

  Val step() {
    Val a = recent();
    const auto& s = a.r.shape;
    const std::size_t rank = s.size();
    switch (uniform(0, 19)) {
      case 0:
        return {L::sin(a.a), ref::map({&a.r}, [](auto& x) { return std::sin(x[0]); })};
      case 1:
        return {L::tanh(a.a) * 2.0,
                ref::map({&a.r}, [](auto& x) { return std::tanh(x[0]) * 2.0; })};
      case 2:
        return {L::sqrt(L::abs(a.a) + 1.0),
                ref::map({&a.r}, [](auto& x) { return std::sqrt(std::abs(x[0]) + 1.0); })};
      case 3: {
        Val b = partner(s);
        return {a.a + b.a * 0.5, ref::map({&a.r, &b.r}, [](auto& x) { return x[0] + x[1] * 0.5; })};
      }
      case 4: {
        Val b = partner(s);
        return {a.a * b.a - 1.0, ref::map({&a.r, &b.r}, [](auto& x) { return x[0] * x[1] - 1.0; })};
      }
      case 5: {
        Val b = partner(s);
        return {a.a / (b.a * b.a + 1.0),
                ref::map({&a.r, &b.r}, [](auto& x) { return x[0] / (x[1] * x[1] + 1.0); })};
      }
      case 6: {
        Val b = partner(s);
        Val c = partner(s);
        return {L::where(a.a > b.a, L::maximum(a.a, c.a), -c.a),
                ref::map({&a.r, &b.r, &c.r},
                         [](auto& x) { return x[0] > x[1] ? std::max(x[0], x[2]) : -x[2]; })};
      }
      case 7: {
        if (rank == 0) break;
        std::vector<int> axes;
        for (std::size_t k = 0; k < rank; ++k) {
          if (uniform(0, 1) == 0)
            axes.push_back(uniform(0, 1) ? static_cast<int>(k)
                                         : static_cast<int>(k) - static_cast<int>(rank));
        }
        if (axes.empty()) axes.push_back(0);
        const bool keep = uniform(0, 1) == 0;
        switch (ref::count(s) == 0 ? uniform(0, 1) : uniform(0, 3)) {
          case 0:
            return {L::sum(a.a, axes, keep), ref::reduce(a.r, axes, keep, ref::Red::sum)};
          case 1:
            return {L::prod(a.a, axes, keep), ref::reduce(a.r, axes, keep, ref::Red::prod)};
          case 2:
            return {L::min(a.a, axes, keep), ref::reduce(a.r, axes, keep, ref::Red::min)};
          default:
            return {L::max(a.a, axes, keep), ref::reduce(a.r, axes, keep, ref::Red::max)};
        }
      }
      case 8: {
        if (rank == 2) {
          switch (uniform(0, 4)) {
            case 0: {
              Val b = leaf({s[1], static_cast<std::int64_t>(uniform(1, 5))});
              return {L::einsum("ij,jk->ik", a.a, b.a), ref::einsum("ij,jk->ik", {&a.r, &b.r})};
            }
            case 1: {
              Val b = leaf(s);
              return {L::einsum("ij,ij->i", a.a, b.a), ref::einsum("ij,ij->i", {&a.r, &b.r})};
            }
            case 2: {
              Val b = leaf({static_cast<std::int64_t>(uniform(1, 4)), s[1]});
              return {L::einsum("ij,kj->ki", a.a, b.a), ref::einsum("ij,kj->ki", {&a.r, &b.r})};
            }
            case 3: {
              // A chain: contracted pairwise (the cheaper order).
              Val b = leaf({s[1], static_cast<std::int64_t>(uniform(1, 5))});
              Val c = leaf({b.r.shape[1], static_cast<std::int64_t>(uniform(1, 5))});
              return {L::einsum("ij,jk,kl->il", a.a, b.a, c.a),
                      ref::einsum("ij,jk,kl->il", {&a.r, &b.r, &c.r})};
            }
            default:
              return {L::einsum("ij->ji", a.a), ref::einsum("ij->ji", {&a.r})};
          }
        }
        if (rank == 3) {
          Val b = leaf({s[1], s[2]});
          Val c = leaf({s[0], s[2]});
          return {L::einsum("xij,ij,xj->xi", a.a, b.a, c.a),
                  ref::einsum("xij,ij,xj->xi", {&a.r, &b.r, &c.r})};
        }
        if (rank == 1) {
          Val b = partner(s);
          if (b.r.shape == s)
            return {L::einsum("i,i->", a.a, b.a), ref::einsum("i,i->", {&a.r, &b.r})};
        }
        break;
      }
      case 9: {
        if (rank == 0 || ref::count(s) == 0) break;
        const int axis = static_cast<int>(uniform(0, rank - 1));
        const ref::Shape is = random_shape(2);
        if (uniform(0, 1) == 0) {
          auto [idx, ir] = index_leaf<std::int64_t>(is, s[static_cast<std::size_t>(axis)]);
          return {L::take(a.a, idx, axis), ref::take(a.r, ir, axis)};
        }
        auto [idx, ir] = index_leaf<std::int32_t>(is, s[static_cast<std::size_t>(axis)]);
        return {L::take(a.a, idx, axis), ref::take(a.r, ir, axis)};
      }
      case 10: {
        if (rank == 0 || ref::count(s) == 0) break;
        const int axis = static_cast<int>(uniform(0, rank - 1));
        ref::Shape is = s;
        for (std::size_t k = 0; k < rank; ++k) {
          if (static_cast<int>(k) == axis) {
            is[k] = static_cast<std::int64_t>(uniform(1, 4));
          } else if (uniform(0, 2) == 0) {
            is[k] = 1;
          }
        }
        auto [idx, ir] = index_leaf<std::int64_t>(is, s[static_cast<std::size_t>(axis)]);
        return {L::take_along_axis(a.a, idx, axis), ref::take_along_axis(a.r, ir, axis)};
      }
      case 11: {
        if (rank == 0) break;
        std::vector<ref::SliceSpec> specs;
        std::vector<L::Slice> ls;
        for (std::size_t k = 0; k < rank; ++k) {
          ref::SliceSpec sp;
          const auto n = static_cast<std::int64_t>(s[k]);
          if (uniform(0, 1))
            sp.start = static_cast<std::int64_t>(uniform(0, static_cast<std::size_t>(2 * n))) - n;
          if (uniform(0, 1))
            sp.stop =
                static_cast<std::int64_t>(uniform(0, static_cast<std::size_t>(2 * n + 2))) - n - 1;
          sp.step = uniform(0, 3) == 0 ? -static_cast<std::int64_t>(uniform(1, 2))
                                       : static_cast<std::int64_t>(uniform(1, 2));
          specs.push_back(sp);
          ls.push_back(L::Slice{sp.start, sp.stop, sp.step});
        }
        std::vector<L::IndexArg> items(ls.begin(), ls.end());
        return {L::index(a.a, items), ref::slice(a.r, specs)};
      }
      case 12: {
        if (rank < 2 || s[0] == 0 || s[1] == 0) break;
        const ref::Shape bs = random_shape(2);
        auto [i0, r0] = index_leaf<std::int64_t>(bs, s[0]);
        auto [i1, r1] = index_leaf<std::int32_t>(broadcastable(bs), s[1]);
        return {L::index(a.a, {i0, i1}), ref::index2(a.r, r0, r1)};
      }
      case 13: {
        const auto n = ref::count(s);
        if (uniform(0, 1) == 0 || n < 4 || n % 2 != 0) {
          return {L::reshape(a.a, {-1}), ref::reshape(a.r, {n})};
        }
        return {L::reshape(a.a, {2, -1}), ref::reshape(a.r, {2, n / 2})};
      }
      case 14: {
        std::vector<int> perm(rank);
        for (std::size_t k = 0; k < rank; ++k) perm[k] = static_cast<int>(k);
        std::shuffle(perm.begin(), perm.end(), rng_);
        return {L::transpose(a.a, perm), ref::transpose(a.r, perm)};
      }
      case 15: {
        if (rank == 0) break;
        const int axis = static_cast<int>(uniform(0, rank - 1));
        ref::Shape bs = s;
        bs[static_cast<std::size_t>(axis)] = static_cast<std::int64_t>(uniform(1, 3));
        Val b = leaf(bs);
        Val c = {L::cos(a.a), ref::map({&a.r}, [](auto& x) { return std::cos(x[0]); })};
        return {L::concatenate(std::vector<L::Array<double>>{a.a, b.a, c.a}, axis),
                ref::concatenate({&a.r, &b.r, &c.r}, axis)};
      }
      case 16: {
        const int axis = static_cast<int>(uniform(0, rank));
        Val b = leaf(s);
        return {L::stack(std::vector<L::Array<double>>{a.a, b.a}, axis),
                ref::stack({&a.r, &b.r}, axis)};
      }
      case 17: {
        if (rank == 0) break;
        const int axis = static_cast<int>(uniform(0, rank - 1));
        const auto shift = static_cast<std::int64_t>(uniform(0, 12)) - 6;
        return {L::roll(a.a, shift, axis), ref::roll(a.r, shift, axis)};
      }
      case 18: {
        if (rank == 0 || rank > 2) break;
        // Reverses axis 0 and adds the element's own flat position (an index lambda).
        const auto n0 = s[0];
        L::Array<double> r = L::index_lambda<double>(s, [&](std::span<const L::Index> i) {
          if (rank == 1) return a.a(n0 - 1 - i[0]) + L::cast<double>(i[0]);
          return a.a(n0 - 1 - i[0], i[1]) + L::cast<double>(i[0] * 10 + i[1]);
        });
        Ref rr = a.r;
        ref::each(s, [&](const ref::Shape& o, std::int64_t flat) {
          ref::Shape ai = o;
          ai[0] = n0 - 1 - o[0];
          rr.v[static_cast<std::size_t>(flat)] =
              ref::at(a.r, ai) + static_cast<double>(rank == 1 ? o[0] : o[0] * 10 + o[1]);
        });
        return {r, rr};
      }
      default: {
        Ref rr = a.r;
        for (auto& x : rr.v) x = static_cast<double>(static_cast<float>(x)) + 0.25;
        return {L::cast<double>(L::cast<float>(a.a)) + L::full<double>({}, 0.25), rr};
      }
    }
    return {L::cos(a.a), ref::map({&a.r}, [](auto& x) { return std::cos(x[0]); })};
  }

  std::mt19937_64 rng_;
  std::mt19937_64 values_;  // input values, where they have a seed of their own
  std::string prefix_;
  bool own_values_ = false;
  std::vector<Val> pool_;
};

}  // namespace sluice::test
