#pragma once
/// @file
/// Group algorithms and sub-group shuffles (SYCL 2020 §4.17.3–4.17.4) in nd_range kernels:
/// `reduce_over_group`, `exclusive_scan_over_group`, `inclusive_scan_over_group`,
/// `group_broadcast`, `any_of_group`, `all_of_group`, `none_of_group` over a work-group or a
/// sub-group, and `select_from_group`, `shift_group_left`, `shift_group_right`,
/// `permute_group_by_xor` over a sub-group.
///
/// Every work-item of the group must call the same algorithm in converged control flow (SYCL's
/// rule for group functions). Values are any trivially copyable type of at most 32 bytes.
///
/// The combination order is fixed: within a sub-group a tree (reduce: lane l takes lane l + 16,
/// then + 8, ..., + 1; scans: lane l takes lane l - 1, - 2, ..., - 16), then the same across the
/// sub-groups' results. cuda runs it with warp shuffles, the host replays it on the values the
/// work-items left in their slots, so floating-point results are the same bits on both.

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "sluice/dataflow/functional.hpp"
#include "sluice/dataflow/group.hpp"

namespace sluice::dataflow {

namespace detail {

template <class T>
inline constexpr bool is_group_value_v = std::is_trivially_copyable_v<T> && sizeof(T) <= 32;

template <class T, class Op>
SLUICE_HD inline T apply_op(const Op& op, const T& a, const T& b) {
  return static_cast<T>(op(a, b));
}

/// What a work-item of a scan needs: the inclusive result and the one of the work-item before
/// it (for the exclusive form; undefined for the first work-item).
template <class T>
struct ScanPair {
  T incl;
  T prev;
};

// ---- the order, on values in an array (the host replays it; cuda shuffles it) ----

/// The sub-group tree reduction of v[0, c) into v[0].
template <class T, class Op>
SLUICE_HD inline void tree_reduce(T* v, std::size_t c, const Op& op) {
  for (std::size_t off = sub_group_size / 2; off > 0; off /= 2) {
    for (std::size_t l = 0; l + off < c; ++l) v[l] = apply_op(op, v[l], v[l + off]);
  }
}
/// The sub-group inclusive scan of v[0, c), in place (Hillis-Steele).
template <class T, class Op>
SLUICE_HD inline void tree_scan(T* v, std::size_t c, const Op& op) {
  for (std::size_t off = 1; off < sub_group_size; off *= 2) {
    for (std::size_t l = c; l-- > off;) v[l] = apply_op(op, v[l - off], v[l]);
  }
}

#if !defined(__CUDA_ARCH__)
template <class T>
inline T* slot_value(std::byte* slots, std::size_t l) {
  return reinterpret_cast<T*>(slots + l * kCollectiveSlotBytes);
}

/// Host: the reduction of the slots [first, first + count) (sub-group trees, then a tree over
/// the sub-groups' results), written to every slot.
template <class T, class Op>
void host_complete_reduce(std::byte* slots, std::size_t first, std::size_t count, const void* arg) {
  const Op& op = *static_cast<const Op*>(arg);
  T part[sub_group_size];
  T lanes[sub_group_size];
  const std::size_t groups = (count + sub_group_size - 1) / sub_group_size;
  for (std::size_t s = 0; s < groups; ++s) {
    const std::size_t c =
        count - s * sub_group_size < sub_group_size ? count - s * sub_group_size : sub_group_size;
    for (std::size_t l = 0; l < c; ++l)
      std::memcpy(&lanes[l], slot_value<T>(slots, first + s * sub_group_size + l), sizeof(T));
    tree_reduce(lanes, c, op);
    part[s] = lanes[0];
  }
  if (groups > 1) tree_reduce(part, groups, op);
  for (std::size_t l = 0; l < count; ++l)
    std::memcpy(slot_value<T>(slots, first + l), &part[0], sizeof(T));
}

/// Host: the scan of the slots [first, first + count): each slot gets its ScanPair.
template <class T, class Op>
void host_complete_scan(std::byte* slots, std::size_t first, std::size_t count, const void* arg) {
  const Op& op = *static_cast<const Op*>(arg);
  const std::size_t groups = (count + sub_group_size - 1) / sub_group_size;
  T totals[sub_group_size];
  T lanes[sub_group_size];
  // Per sub-group: the scan, kept in place; the totals, scanned across sub-groups.
  for (std::size_t s = 0; s < groups; ++s) {
    const std::size_t base = first + s * sub_group_size;
    const std::size_t c =
        count - s * sub_group_size < sub_group_size ? count - s * sub_group_size : sub_group_size;
    for (std::size_t l = 0; l < c; ++l)
      std::memcpy(&lanes[l], slot_value<T>(slots, base + l), sizeof(T));
    tree_scan(lanes, c, op);
    totals[s] = lanes[c - 1];
    for (std::size_t l = 0; l < c; ++l) {
      ScanPair<T> p{lanes[l], l > 0 ? lanes[l - 1] : lanes[l]};
      std::memcpy(slots + (base + l) * kCollectiveSlotBytes, &p, sizeof p);
    }
  }
  if (groups == 1) return;
  tree_scan(totals, groups, op);
  for (std::size_t s = 1; s < groups; ++s) {
    const T& before = totals[s - 1];
    const std::size_t base = first + s * sub_group_size;
    const std::size_t c =
        count - s * sub_group_size < sub_group_size ? count - s * sub_group_size : sub_group_size;
    for (std::size_t l = 0; l < c; ++l) {
      ScanPair<T> p;
      std::memcpy(&p, slots + (base + l) * kCollectiveSlotBytes, sizeof p);
      p.prev = l > 0 ? apply_op(op, before, p.prev) : before;
      p.incl = apply_op(op, before, p.incl);
      std::memcpy(slots + (base + l) * kCollectiveSlotBytes, &p, sizeof p);
    }
  }
}

/// Host: slot `*arg` (an index relative to `first`) copied to every slot.
template <class T>
void host_complete_broadcast(std::byte* slots, std::size_t first, std::size_t count,
                             const void* arg) {
  const std::size_t src = *static_cast<const std::size_t*>(arg);
  T v;
  std::memcpy(&v, slot_value<T>(slots, first + (src < count ? src : 0)), sizeof(T));
  for (std::size_t l = 0; l < count; ++l)
    std::memcpy(slot_value<T>(slots, first + l), &v, sizeof(T));
}

/// Host: a permutation; slot l gets the value of lane `map(l)` (its own when out of range).
/// `arg` points at {kind, n}: 0 select (the source lane stored in each slot's tail), 1 shift
/// left by n, 2 shift right by n, 3 xor n.
struct Permutation {
  int kind;
  std::size_t n;
};
template <class T>
void host_complete_permute(std::byte* slots, std::size_t first, std::size_t count,
                           const void* arg) {
  const auto& p = *static_cast<const Permutation*>(arg);
  T in[sub_group_size];
  std::size_t src[sub_group_size];
  for (std::size_t l = 0; l < count; ++l) {
    std::memcpy(&in[l], slot_value<T>(slots, first + l), sizeof(T));
    std::memcpy(&src[l], slots + (first + l) * kCollectiveSlotBytes + 32, sizeof(std::size_t));
  }
  for (std::size_t l = 0; l < count; ++l) {
    std::size_t from = l;
    switch (p.kind) {
      case 0:
        from = src[l];
        break;
      case 1:
        from = l + p.n;
        break;
      case 2:
        from = l >= p.n ? l - p.n : count;
        break;
      default:
        from = l ^ p.n;
        break;
    }
    if (from >= count) from = l;
    std::memcpy(slot_value<T>(slots, first + l), &in[from], sizeof(T));
  }
}

/// Host: logical or / and of the slots' bools: slot gets {any, all}.
inline void host_complete_vote(std::byte* slots, std::size_t first, std::size_t count,
                               const void*) {
  bool any = false, all = true;
  for (std::size_t l = 0; l < count; ++l) {
    const bool b = *reinterpret_cast<const bool*>(slots + (first + l) * kCollectiveSlotBytes);
    any = any || b;
    all = all && b;
  }
  for (std::size_t l = 0; l < count; ++l) {
    auto* s = reinterpret_cast<bool*>(slots + (first + l) * kCollectiveSlotBytes);
    s[0] = any;
    s[1] = all;
  }
}

template <class T, class R = T>
R host_run(CollectiveScope scope, const T& x, CollectiveFn fn, const void* arg) {
  std::byte* slot = host_collective_slot();
  std::memcpy(slot, &x, sizeof(T));
  host_collective(scope, fn, arg);
  R r;
  std::memcpy(&r, host_collective_slot(), sizeof(R));
  return r;
}
#endif

#if defined(__CUDACC__)
/// Shared memory of the work-group collectives: one slot per warp plus one for the result.
__device__ inline unsigned char* group_scratch() {
  __shared__ alignas(16) unsigned char scratch[(sub_group_size + 1) * 32];
  return scratch;
}
__device__ inline unsigned block_linear_id() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ inline unsigned block_size() {
  return blockDim.x * blockDim.y * blockDim.z;
}
/// The lanes of warp `warp` in a block of `n` threads, and their mask.
__device__ inline unsigned warp_lanes(unsigned n, unsigned warp) {
  const unsigned left = n - warp * 32u;
  return left < 32u ? left : 32u;
}
__device__ inline unsigned lane_mask(unsigned lanes) {
  return lanes == 32u ? 0xffffffffu : (1u << lanes) - 1u;
}

/// `shfl(word)` applied to every 32-bit word of `x` (any trivially copyable T).
template <class T, class Shfl>
__device__ inline T shuffle_words(const T& x, Shfl shfl) {
  constexpr int kWords = (sizeof(T) + 3) / 4;
  unsigned w[kWords] = {};
  memcpy(w, &x, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = shfl(w[i]);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}
template <class T>
__device__ inline T shfl_idx(unsigned mask, const T& x, unsigned src) {
  return shuffle_words(x, [&](unsigned w) { return __shfl_sync(mask, w, static_cast<int>(src)); });
}
template <class T>
__device__ inline T shfl_down(unsigned mask, const T& x, unsigned d) {
  return shuffle_words(x, [&](unsigned w) { return __shfl_down_sync(mask, w, d); });
}
template <class T>
__device__ inline T shfl_up(unsigned mask, const T& x, unsigned d) {
  return shuffle_words(x, [&](unsigned w) { return __shfl_up_sync(mask, w, d); });
}
template <class T>
__device__ inline T shfl_xor(unsigned mask, const T& x, unsigned m) {
  return shuffle_words(x,
                       [&](unsigned w) { return __shfl_xor_sync(mask, w, static_cast<int>(m)); });
}

/// The sub-group tree reduction (the order of tree_reduce); the result in lane 0.
template <class T, class Op>
__device__ inline T warp_reduce(T v, unsigned lane, unsigned lanes, unsigned mask, const Op& op) {
#pragma unroll
  for (unsigned off = 16; off > 0; off /= 2) {
    const T other = shfl_down(mask, v, off);
    if (lane + off < lanes) v = apply_op(op, v, other);
  }
  return v;
}
/// The sub-group inclusive scan (the order of tree_scan).
template <class T, class Op>
__device__ inline T warp_scan(T v, unsigned lane, unsigned mask, const Op& op) {
#pragma unroll
  for (unsigned off = 1; off < 32; off *= 2) {
    const T other = shfl_up(mask, v, off);
    if (lane >= off) v = apply_op(op, other, v);
  }
  return v;
}

template <class T, class Op>
__device__ T block_reduce(const T& x, const Op& op) {
  const unsigned n = block_size(), l = block_linear_id();
  const unsigned warp = l / 32u, lane = l % 32u, lanes = warp_lanes(n, warp);
  const unsigned mask = lane_mask(lanes);
  T v = warp_reduce(x, lane, lanes, mask, op);
  const unsigned warps = (n + 31u) / 32u;
  if (warps == 1) return shfl_idx(mask, v, 0);
  T* part = reinterpret_cast<T*>(group_scratch());
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = part[lane < warps ? lane : 0];
    w = warp_reduce(w, lane, warps, 0xffffffffu, op);
    if (lane == 0) part[sub_group_size] = w;
  }
  __syncthreads();
  const T r = part[sub_group_size];
  __syncthreads();  // the scratch is free for the next collective
  return r;
}

template <class T, class Op>
__device__ ScanPair<T> block_scan(const T& x, const Op& op) {
  const unsigned n = block_size(), l = block_linear_id();
  const unsigned warp = l / 32u, lane = l % 32u, lanes = warp_lanes(n, warp);
  const unsigned mask = lane_mask(lanes);
  ScanPair<T> p;
  p.incl = warp_scan(x, lane, mask, op);
  p.prev = shfl_up(mask, p.incl, 1);
  if (lane == 0) p.prev = p.incl;
  const unsigned warps = (n + 31u) / 32u;
  if (warps == 1) return p;
  T* tot = reinterpret_cast<T*>(group_scratch());
  if (lane == lanes - 1) tot[warp] = p.incl;
  __syncthreads();
  if (warp == 0) {
    T t = tot[lane < warps ? lane : 0];
    t = warp_scan(t, lane, 0xffffffffu, op);
    // Lanes past the last warp read tot[0] above, which lane 0 now overwrites: order the reads
    // first (lanes of a warp are not in lockstep since Volta; racecheck flags it otherwise).
    __syncwarp();
    if (lane < warps) tot[lane] = t;
  }
  __syncthreads();
  if (warp > 0) {
    const T before = tot[warp - 1];
    p.prev = lane > 0 ? apply_op(op, before, p.prev) : before;
    p.incl = apply_op(op, before, p.incl);
  }
  __syncthreads();
  return p;
}

template <class T>
__device__ T block_broadcast(const T& x, unsigned src) {
  T* slot = reinterpret_cast<T*>(group_scratch());
  if (block_linear_id() == src) *slot = x;
  __syncthreads();
  const T r = *slot;
  __syncthreads();
  return r;
}
#endif

// ---- the two scopes behind one interface ----

template <int D, class T, class Op>
SLUICE_HD T group_reduce(const group<D>&, const T& x, const Op& op) {
#if defined(__CUDA_ARCH__)
  return block_reduce(x, op);
#else
  return host_run(CollectiveScope::work_group, x, &host_complete_reduce<T, Op>, &op);
#endif
}
template <class T, class Op>
SLUICE_HD T group_reduce(const sub_group& g, const T& x, const Op& op) {
#if defined(__CUDA_ARCH__)
  const unsigned lanes = g.get_local_linear_range(), mask = lane_mask(lanes);
  return shfl_idx(mask, warp_reduce(x, g.get_local_linear_id(), lanes, mask, op), 0);
#else
  (void)g;
  return host_run(CollectiveScope::sub_group, x, &host_complete_reduce<T, Op>, &op);
#endif
}
template <int D, class T, class Op>
SLUICE_HD ScanPair<T> group_scan(const group<D>&, const T& x, const Op& op) {
#if defined(__CUDA_ARCH__)
  return block_scan(x, op);
#else
  return host_run<T, ScanPair<T>>(CollectiveScope::work_group, x, &host_complete_scan<T, Op>, &op);
#endif
}
template <class T, class Op>
SLUICE_HD ScanPair<T> group_scan(const sub_group& g, const T& x, const Op& op) {
#if defined(__CUDA_ARCH__)
  const unsigned lane = g.get_local_linear_id(), mask = lane_mask(g.get_local_linear_range());
  ScanPair<T> p;
  p.incl = warp_scan(x, lane, mask, op);
  p.prev = shfl_up(mask, p.incl, 1);
  if (lane == 0) p.prev = p.incl;
  return p;
#else
  (void)g;
  return host_run<T, ScanPair<T>>(CollectiveScope::sub_group, x, &host_complete_scan<T, Op>, &op);
#endif
}
template <int D, class T>
SLUICE_HD T group_bcast(const group<D>& g, const T& x, std::size_t src) {
#if defined(__CUDA_ARCH__)
  (void)g;
  return block_broadcast(x, static_cast<unsigned>(src));
#else
  (void)g;
  return host_run(CollectiveScope::work_group, x, &host_complete_broadcast<T>, &src);
#endif
}
template <class T>
SLUICE_HD T group_bcast(const sub_group& g, const T& x, std::size_t src) {
#if defined(__CUDA_ARCH__)
  return shfl_idx(lane_mask(g.get_local_linear_range()), x, static_cast<unsigned>(src));
#else
  (void)g;
  return host_run(CollectiveScope::sub_group, x, &host_complete_broadcast<T>, &src);
#endif
}
/// {any, all} of `pred` over the group.
template <int D>
SLUICE_HD void group_vote(const group<D>&, bool pred, bool& any, bool& all) {
#if defined(__CUDA_ARCH__)
  any = __syncthreads_or(pred) != 0;
  all = __syncthreads_and(pred) != 0;
#else
  struct Votes {
    bool any, all;
  };
  const auto v =
      host_run<bool, Votes>(CollectiveScope::work_group, pred, &host_complete_vote, nullptr);
  any = v.any;
  all = v.all;
#endif
}
SLUICE_HD inline void group_vote(const sub_group& g, bool pred, bool& any, bool& all) {
#if defined(__CUDA_ARCH__)
  const unsigned mask = lane_mask(g.get_local_linear_range());
  any = __any_sync(mask, pred) != 0;
  all = __all_sync(mask, pred) != 0;
#else
  (void)g;
  struct Votes {
    bool any, all;
  };
  const auto v =
      host_run<bool, Votes>(CollectiveScope::sub_group, pred, &host_complete_vote, nullptr);
  any = v.any;
  all = v.all;
#endif
}

template <class G>
struct is_group : std::false_type {};
template <int D>
struct is_group<group<D>> : std::true_type {};
template <>
struct is_group<sub_group> : std::true_type {};
}  // namespace detail

/// `group<D>` and `sub_group`: the types group algorithms take.
template <class G>
inline constexpr bool is_group_v = detail::is_group<std::remove_cvref_t<G>>::value;

/// The combination of `x` over every work-item of `g` with `op`, on every work-item.
template <class Group, class T, class BinaryOperation>
requires is_group_v<Group> SLUICE_HD T reduce_over_group(const Group& g, T x, BinaryOperation op) {
  static_assert(detail::is_group_value_v<T>,
                "group algorithms take trivially copyable values of at most 32 bytes");
  return detail::group_reduce(g, x, op);
}
/// `op(init, reduce_over_group(g, x, op))`.
template <class Group, class V, class T, class BinaryOperation>
requires is_group_v<Group> SLUICE_HD T reduce_over_group(const Group& g, V x, T init,
                                                         BinaryOperation op) {
  return detail::apply_op(op, init, reduce_over_group(g, static_cast<T>(x), op));
}

/// The combination of the `x` of the work-items before this one (by local linear id), after
/// `init`; the first work-item gets `init`.
template <class Group, class V, class T, class BinaryOperation>
requires is_group_v<Group> SLUICE_HD T exclusive_scan_over_group(const Group& g, V x, T init,
                                                                 BinaryOperation op) {
  static_assert(detail::is_group_value_v<T>,
                "group algorithms take trivially copyable values of at most 32 bytes");
  const auto p = detail::group_scan(g, static_cast<T>(x), op);
  return g.get_local_linear_id() == 0 ? init : detail::apply_op(op, init, p.prev);
}
/// As above with the operator's known identity as `init`.
template <class Group, class T, class BinaryOperation>
requires is_group_v<Group> SLUICE_HD T exclusive_scan_over_group(const Group& g, T x,
                                                                 BinaryOperation op) {
  return exclusive_scan_over_group(g, x, known_identity_v<BinaryOperation, T>, op);
}
/// The combination of the `x` of the work-items up to and including this one.
template <class Group, class T, class BinaryOperation>
requires is_group_v<Group> SLUICE_HD T inclusive_scan_over_group(const Group& g, T x,
                                                                 BinaryOperation op) {
  static_assert(detail::is_group_value_v<T>,
                "group algorithms take trivially copyable values of at most 32 bytes");
  return detail::group_scan(g, x, op).incl;
}
/// `op(init, inclusive_scan_over_group(g, x, op))`.
template <class Group, class V, class BinaryOperation, class T>
requires is_group_v<Group> SLUICE_HD T inclusive_scan_over_group(const Group& g, V x,
                                                                 BinaryOperation op, T init) {
  return detail::apply_op(op, init, inclusive_scan_over_group(g, static_cast<T>(x), op));
}

/// The `x` of the group's leader (local linear id 0), on every work-item.
template <class Group, class T>
requires is_group_v<Group> SLUICE_HD T group_broadcast(const Group& g, T x) {
  return detail::group_bcast(g, x, 0);
}
/// The `x` of the work-item with local linear id `local_linear_id`.
template <class Group, class T>
requires is_group_v<Group> SLUICE_HD T group_broadcast(const Group& g, T x,
                                                       std::size_t local_linear_id) {
  static_assert(detail::is_group_value_v<T>,
                "group algorithms take trivially copyable values of at most 32 bytes");
  return detail::group_bcast(g, x, local_linear_id);
}
/// The `x` of the work-item with local id `local_id`.
template <int D, class T>
SLUICE_HD T group_broadcast(const group<D>& g, T x, const id<D>& local_id) {
  return group_broadcast(g, x, detail::linearize<D>(local_id, g.get_local_range()));
}

/// Whether `pred` holds on any work-item of the group.
template <class Group>
requires is_group_v<Group> SLUICE_HD bool any_of_group(const Group& g, bool pred) {
  bool any = false, all = false;
  detail::group_vote(g, pred, any, all);
  return any;
}
template <class Group, class T, class Predicate>
requires is_group_v<Group> SLUICE_HD bool any_of_group(const Group& g, T x, Predicate pred) {
  return any_of_group(g, static_cast<bool>(pred(x)));
}
/// Whether `pred` holds on every work-item of the group.
template <class Group>
requires is_group_v<Group> SLUICE_HD bool all_of_group(const Group& g, bool pred) {
  bool any = false, all = false;
  detail::group_vote(g, pred, any, all);
  return all;
}
template <class Group, class T, class Predicate>
requires is_group_v<Group> SLUICE_HD bool all_of_group(const Group& g, T x, Predicate pred) {
  return all_of_group(g, static_cast<bool>(pred(x)));
}
/// Whether `pred` holds on no work-item of the group.
template <class Group>
requires is_group_v<Group> SLUICE_HD bool none_of_group(const Group& g, bool pred) {
  return !any_of_group(g, pred);
}
template <class Group, class T, class Predicate>
requires is_group_v<Group> SLUICE_HD bool none_of_group(const Group& g, T x, Predicate pred) {
  return !any_of_group(g, static_cast<bool>(pred(x)));
}

// ---- sub-group shuffles: every lane reads another lane's value. A source lane outside the
// sub-group is unspecified in SYCL; here a lane then gets its own value on the host and whatever
// the warp shuffle returns on cuda. ----

/// The `x` of sub-group lane `remote_local_id`.
template <class T>
SLUICE_HD T select_from_group(const sub_group& g, T x, id<1> remote_local_id) {
  static_assert(detail::is_group_value_v<T>,
                "sub-group shuffles take trivially copyable values of at most 32 bytes");
#if defined(__CUDA_ARCH__)
  return detail::shfl_idx(detail::lane_mask(g.get_local_linear_range()), x,
                          static_cast<unsigned>(remote_local_id[0]));
#else
  (void)g;
  std::byte* slot = detail::host_collective_slot();
  const std::size_t src = remote_local_id[0];
  std::memcpy(slot + 32, &src, sizeof src);
  const detail::Permutation p{0, 0};
  return detail::host_run(detail::CollectiveScope::sub_group, x, &detail::host_complete_permute<T>,
                          &p);
#endif
}
/// The `x` of the lane `delta` above this one.
template <class T>
SLUICE_HD T shift_group_left(const sub_group& g, T x, std::size_t delta = 1) {
  static_assert(detail::is_group_value_v<T>,
                "sub-group shuffles take trivially copyable values of at most 32 bytes");
#if defined(__CUDA_ARCH__)
  return detail::shfl_down(detail::lane_mask(g.get_local_linear_range()), x,
                           static_cast<unsigned>(delta));
#else
  (void)g;
  const detail::Permutation p{1, delta};
  return detail::host_run(detail::CollectiveScope::sub_group, x, &detail::host_complete_permute<T>,
                          &p);
#endif
}
/// The `x` of the lane `delta` below this one.
template <class T>
SLUICE_HD T shift_group_right(const sub_group& g, T x, std::size_t delta = 1) {
  static_assert(detail::is_group_value_v<T>,
                "sub-group shuffles take trivially copyable values of at most 32 bytes");
#if defined(__CUDA_ARCH__)
  return detail::shfl_up(detail::lane_mask(g.get_local_linear_range()), x,
                         static_cast<unsigned>(delta));
#else
  (void)g;
  const detail::Permutation p{2, delta};
  return detail::host_run(detail::CollectiveScope::sub_group, x, &detail::host_complete_permute<T>,
                          &p);
#endif
}
/// The `x` of lane `lane ^ mask`.
template <class T>
SLUICE_HD T permute_group_by_xor(const sub_group& g, T x, std::size_t mask) {
  static_assert(detail::is_group_value_v<T>,
                "sub-group shuffles take trivially copyable values of at most 32 bytes");
#if defined(__CUDA_ARCH__)
  return detail::shfl_xor(detail::lane_mask(g.get_local_linear_range()), x,
                          static_cast<unsigned>(mask));
#else
  (void)g;
  const detail::Permutation p{3, mask};
  return detail::host_run(detail::CollectiveScope::sub_group, x, &detail::host_complete_permute<T>,
                          &p);
#endif
}

}  // namespace sluice::dataflow
