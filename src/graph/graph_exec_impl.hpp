#pragma once
// An instantiated graph: the backend's executable plus the IR its parameters came from.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "deps/access_list.hpp"
#include "graph/graph_data.hpp"

namespace sluice::detail {

/// Counts an instantiation, and the nodes it batched, in graph::stats().
void count_instantiation(const GraphExecutable& exec) noexcept;

class GraphExecImpl {
 public:
  GraphExecImpl(std::shared_ptr<GraphData> graph, const Device& device, std::source_location loc);
  /// The backend's executable waits for its launches when destroyed: kept while a host hold is
  /// active (sluice/backend.hpp), so that dropping a graph never waits for held-back work.
  ~GraphExecImpl();
  GraphExecImpl(const GraphExecImpl&) = delete;
  GraphExecImpl& operator=(const GraphExecImpl&) = delete;

  void launch(const Context& ctx, std::source_location loc);
  /// Takes `next` (same topology, checked by the caller). Returns why the backend re-instantiated
  /// instead of updating in place (empty if it updated).
  std::string update(std::shared_ptr<GraphData> next, std::source_location loc);
  /// The IR the backend was given (keeps graph_ alive).
  [[nodiscard]] static ir::GraphPtr ir_of(const std::shared_ptr<GraphData>& g) {
    return {g, &g->ir};
  }
  /// Applies `updates` (checked by GraphExec::update: `index[k]` is the node of `updates[k]`),
  /// moved from them (a node's uses swapped with the update's: the caller gets a vector to
  /// reuse). The IR work follows the nodes updated, not the graph: the new version of the IR is
  /// one that no launch holds any more brought up to date (a copy only while every earlier
  /// version is still in flight), and the access list is renamed in place where the new uses are
  /// the old ones with objects swapped for others (else merged again). All or nothing.
  void update_nodes(std::span<GraphExec::NodeUpdate> updates, std::span<const std::uint32_t> index,
                    std::source_location loc);
  /// Scratch for GraphExec::update's node indices (reused: no allocation per update).
  [[nodiscard]] std::vector<std::uint32_t>& index_scratch() noexcept { return index_; }
  /// A private copy of the IR to edit (launches already issued keep theirs).
  [[nodiscard]] std::shared_ptr<GraphData> editable() const {
    return std::make_shared<GraphData>(*graph_);
  }
  [[nodiscard]] const std::shared_ptr<GraphData>& graph() const noexcept { return graph_; }
  [[nodiscard]] const Device& device() const noexcept { return device_; }

 private:
  /// One object of the access list renamed by a node update, and how many node uses named it.
  struct Rename {
    ObjectId from = 0;
    ObjectId to = 0;
    std::uint32_t uses = 0;
  };
  /// An earlier version of the IR and the update generation it was current at.
  struct Version {
    std::shared_ptr<GraphData> data;
    std::uint64_t gen = 0;
  };

  /// Merges the uses of `g` into accesses_ and counts them per object (refs_).
  void set_accesses(const ir::Graph& g);
  void require_live_buffers(std::source_location loc) const;
  /// The IR version to edit into the next one (see update_nodes).
  std::shared_ptr<GraphData> next_version();
  /// Whether `next`'s nodes changed_ use what graph_'s did but for objects renamed one to one,
  /// each renamed everywhere the graph names it (renames_ says how); then the merged list of
  /// `next` is the current one renamed.
  bool plan_renames(const ir::Graph& next);
  /// Renames accesses_ and refs_ by renames_ (or back).
  void apply_renames(bool back);
  /// The entry of renames_ that renames `id`, or that renames an object to `id` (or null).
  [[nodiscard]] const Rename* renamed_from(ObjectId id) const;
  [[nodiscard]] const Rename* renamed_to(ObjectId id) const;
  /// After an update that may change anything: earlier versions are not brought up to date.
  void forget_versions();

  std::shared_ptr<GraphData> graph_;
  Device device_;
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<GraphExecutable> exec_;
  AccessList accesses_;
  std::string what_;
  // Versions: graph_ is generation gen_; node_gen_[i], the generation node i last changed in.
  std::vector<Version> spare_;
  std::uint64_t gen_ = 0;
  std::vector<std::uint64_t> node_gen_;
  std::vector<std::pair<ObjectId, std::uint32_t>> refs_;  // by id: node uses naming it
  // Scratch of update_nodes, kept for its capacity.
  // changed_: nodes updated (their uses may have changed); params_changed_: those of them whose
  // parameters did (the rest are uses_only updates).
  std::vector<std::uint32_t> index_, changed_, params_changed_;
  std::vector<char> touched_;
  std::vector<Rename> renames_;
  std::vector<std::uint32_t> by_to_;  // renames_ (sorted by `from`) ordered by `to`
  std::vector<Use> fresh_;
};

}  // namespace sluice::detail
