#pragma once
/// @file
/// Internal: what one kernel launch carries (the kernel's callable, its index space and its
/// reductions) and how the host backend runs it; <sluice/dataflow_cuda.cuh> adds the cuda launch.

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "sluice/dataflow/group.hpp"
#include "sluice/dataflow/range.hpp"
#include "sluice/dataflow/reduction.hpp"

namespace sluice::dataflow::detail {

/// cuda: threads per block of a range kernel, and the most blocks a range reduction uses (each
/// leaves one partial result per reduction; a second kernel combines them in order).
inline constexpr unsigned kRangeBlock = 256;
inline constexpr unsigned kMaxReduceBlocks = 1024;

/// Blocks of a cuda range kernel over `n` work-items (grid-stride beyond that).
SLUICE_HD constexpr unsigned range_blocks(std::size_t n) noexcept {
  const std::size_t b = (n + kRangeBlock - 1) / kRangeBlock;
  return static_cast<unsigned>(b < (std::size_t{1} << 20) ? b : (std::size_t{1} << 20));
}
SLUICE_HD constexpr unsigned reduce_blocks(std::size_t n) noexcept {
  const unsigned b = range_blocks(n);
  return b < kMaxReduceBlocks ? b : kMaxReduceBlocks;
}
SLUICE_HD constexpr std::size_t align16(std::size_t b) noexcept {
  return (b + 15) / 16 * 16;
}
/// Byte offset of reduction I's partial results in the scratch of `blocks` blocks.
template <std::size_t I, class... R>
SLUICE_HD constexpr std::size_t partials_offset(std::size_t blocks) noexcept {
  const std::size_t sizes[] = {sizeof(typename R::value_type)...};
  std::size_t off = 0;
  for (std::size_t k = 0; k != I; ++k) off += align16(blocks * sizes[k]);
  return off;
}
template <class... R>
SLUICE_HD constexpr std::size_t partials_bytes(std::size_t blocks) noexcept {
  return (align16(blocks * sizeof(typename R::value_type)) + ... + 0);
}

/// Host backend: `fn(state, c)` for every chunk c in [0, chunks) on the CPU pool.
void host_parallel(std::size_t chunks, void (*fn)(void* state, std::size_t chunk), void* state);
/// Host backend: how many chunks to split `items` independent work-items into.
[[nodiscard]] std::size_t host_chunks(std::size_t items) noexcept;
/// Host backend: runs every work-group on the CPU pool, each work-item of a group as a fiber on
/// one thread, with `local_bytes` of group-local memory; `item(state, group, local)`.
void host_groups(std::size_t groups, std::size_t group_items, std::size_t local_bytes,
                 void (*item)(void* state, std::size_t group, std::size_t local), void* state);

template <class F>
void host_parallel_for(std::size_t chunks, F& f) {
  host_parallel(
      chunks, [](void* s, std::size_t c) { (*static_cast<F*>(s))(c); }, static_cast<void*>(&f));
}

/// `f(item, reducers...)`.
template <class F, class Item, class P, std::size_t... I>
SLUICE_HD void call_reducing(const F& f, const Item& it, P& reducers, std::index_sequence<I...>) {
  f(it, pack_get<I>(reducers)...);
}
/// `into[i].combine(from[i])` for every reduction.
template <class P, std::size_t... I>
SLUICE_HD void combine_all(P& into, const P& from, std::index_sequence<I...>) {
  (pack_get<I>(into).combine(pack_get<I>(from).partial()), ...);
}
/// Host: every reduction's destination becomes its starting value (the destination's or the
/// identity) combined with the chunks' partial results in order.
template <class... R, std::size_t... I, class Partials>
void host_finish(const Pack<R...>& reds, const Partials& partial, std::index_sequence<I...>) {
  auto one = [&](const auto& red, auto index) {
    constexpr std::size_t k = decltype(index)::value;
    auto acc = red.initialize_to_identity ? red.identity : *red.out;
    for (const auto& p : partial)
      acc = static_cast<decltype(acc)>(red.op(acc, pack_get<k>(p).partial()));
    *red.out = acc;
  };
  (one(pack_get<I>(reds), std::integral_constant<std::size_t, I>{}), ...);
}

// Tasks: what one kernel launch needs, copied to the device as the kernel's argument.
template <class F>
struct SingleTask {
  F f;
  static void host_run(const void* t, std::size_t) { static_cast<const SingleTask*>(t)->f(); }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return 0; }
};

template <int D, class F>
struct RangeTask {
  range<D> r;
  F f;
  static void host_run(const void* t, std::size_t) {
    const auto& task = *static_cast<const RangeTask*>(t);
    const std::size_t n = task.r.size();
    const std::size_t chunks = host_chunks(n);
    auto body = [&](std::size_t c) {
      const std::size_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      for (std::size_t i = lo; i < hi; ++i) {
        task.f(item<D>(delinearize<D>(i, task.r), task.r));
      }
    };
    host_parallel_for(chunks, body);
  }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return 0; }
};

/// A range kernel with reductions `R...` (each a Reduction<T, Op>).
template <int D, class F, class... R>
struct ReduceTask {
  range<D> r;
  F f;
  Pack<R...> reds;
  using Reducers = decltype(make_reducers(std::declval<const Pack<R...>&>()));

  static void host_run(const void* t, std::size_t) {
    const auto& task = *static_cast<const ReduceTask*>(t);
    const std::size_t n = task.r.size();
    const std::size_t chunks = host_chunks(n);
    std::vector<Reducers> partial(chunks, make_reducers(task.reds));
    auto body = [&](std::size_t c) {
      Reducers& red = partial[c];
      const std::size_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      for (std::size_t i = lo; i < hi; ++i) {
        call_reducing(task.f, item<D>(delinearize<D>(i, task.r), task.r), red,
                      std::index_sequence_for<R...>{});
      }
    };
    host_parallel_for(chunks, body);
    // Combined in chunk order: the result does not depend on which thread ran which chunk.
    host_finish(task.reds, partial, std::index_sequence_for<R...>{});
  }
  /// cuda: one partial result per block and reduction.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return partials_bytes<R...>(reduce_blocks(r.size()));
  }
};

template <int D, class F>
struct NdTask {
  nd_range<D> r;
  F f;
  static void host_run(const void* t, std::size_t local_bytes) {
    const auto& task = *static_cast<const NdTask*>(t);
    const range<D> groups = task.r.get_group_range();
    auto item_fn = [](void* s, std::size_t g, std::size_t l) {
      const auto& tk = *static_cast<const NdTask*>(s);
      const range<D> gr = tk.r.get_group_range();
      tk.f(nd_item<D>(delinearize<D>(g, gr), delinearize<D>(l, tk.r.local), gr, tk.r.local));
    };
    host_groups(groups.size(), task.r.local.size(), local_bytes, item_fn,
                const_cast<void*>(static_cast<const void*>(&task)));
  }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return 0; }
};

/// An nd_range kernel with reductions `R...`.
template <int D, class F, class... R>
struct NdReduceTask {
  nd_range<D> r;
  F f;
  Pack<R...> reds;
  using Reducers = decltype(make_reducers(std::declval<const Pack<R...>&>()));

  static void host_run(const void* t, std::size_t local_bytes) {
    const auto& task = *static_cast<const NdReduceTask*>(t);
    const std::size_t groups = task.r.get_group_range().size();
    // One partial per group: a group's work-items are fibers of one thread, so they combine into
    // it without synchronization, each when it finishes.
    struct State {
      const NdReduceTask* task;
      Reducers* partial;
    };
    std::vector<Reducers> partial(groups, make_reducers(task.reds));
    State state{&task, partial.data()};
    auto item_fn = [](void* raw, std::size_t g, std::size_t l) {
      const auto& st = *static_cast<State*>(raw);
      const auto& tk = *st.task;
      const range<D> gr = tk.r.get_group_range();
      Reducers red = make_reducers(tk.reds);
      call_reducing(
          tk.f, nd_item<D>(delinearize<D>(g, gr), delinearize<D>(l, tk.r.local), gr, tk.r.local),
          red, std::index_sequence_for<R...>{});
      combine_all(st.partial[g], red, std::index_sequence_for<R...>{});
    };
    host_groups(groups, task.r.local.size(), local_bytes, item_fn, &state);
    // Combined in group order: the result does not depend on which thread ran which group.
    host_finish(task.reds, partial, std::index_sequence_for<R...>{});
  }
  /// cuda: one partial result per work-group and reduction.
  [[nodiscard]] std::size_t scratch_bytes() const noexcept {
    return partials_bytes<R...>(r.get_group_range().size());
  }
};

template <class Task>
std::shared_ptr<const void> copy_task(const void* t) {
  return std::make_shared<const Task>(*static_cast<const Task*>(t));
}

}  // namespace sluice::dataflow::detail
