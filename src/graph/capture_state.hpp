#pragma once
// The state of one Capture: the graph being recorded, the contexts recording into it and, per
// context, the nodes its next operation runs after (its frontier).

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "graph/graph_data.hpp"

namespace sluice::detail {

/// The real point that the capture's recorded work stands for once the capture ended: the
/// origin's stream after every member's real work (its work from before it joined, and the waits
/// issued eagerly during the capture). Shared with the capture's events, which outlive it.
struct CaptureEnd {
  std::mutex mutex;
  std::shared_ptr<EventImpl> point;  // null until the capture ended
  std::string description;           // "capture 'name' begun at file:line"
};

class CaptureState final : public CaptureSink, public std::enable_shared_from_this<CaptureState> {
 public:
  CaptureState(std::shared_ptr<ContextImpl> origin, std::string name, std::source_location loc);

  /// Makes the origin record into this capture.
  void start();
  [[nodiscard]] bool active() const noexcept override {
    return active_.load(std::memory_order_acquire);
  }
  /// Records without the tracker's marks while the origin is the only context recording (a
  /// Replay of a one-context body: its launch is the tracked operation). Before start().
  void set_untracked() noexcept { untracked_.store(true, std::memory_order_release); }
  [[nodiscard]] bool untracked() const noexcept override {
    return untracked_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::uint64_t serial() const noexcept override { return serial_; }
  void record_op(ContextImpl& ctx, const OpInfo& op,
                 const std::function<void(Stream&, const OpInfo&)>& f) override;
  void record_node(ContextImpl& ctx, const OpInfo& op, const SimpleOp& simple) override;
  void record_expected(ContextImpl& ctx, const OpInfo& op, const SimpleOp& simple,
                       std::uint32_t node, std::span<const Use> uses) override;
  [[nodiscard]] const std::vector<Use>* expected_uses(const ContextImpl& ctx, std::string_view what,
                                                      const SimpleOp& simple,
                                                      std::uint32_t& node) override;
  /// Room for `nodes` nodes (a replay knows how many its body recorded last time).
  void reserve(std::size_t nodes);
  /// A replay's previous recording, which this capture compares each operation with as it is
  /// recorded (before the body records; `previous` of one context, no external waits, no
  /// events): while
  /// every copy or memset equals the previous recording's node at its place, with the same
  /// edges, no node is built. The first difference, or anything else recorded (another kind of
  /// operation, a joining context, a wait outside the capture, an adopted object), copies the
  /// matched prefix into the new graph and records on as without it.
  void expect(std::shared_ptr<GraphData> previous);
  /// After finish(): whether it returned the previous recording itself (everything matched).
  [[nodiscard]] bool matched_previous() const noexcept { return matched_previous_; }
  std::shared_ptr<EventImpl> record(ContextImpl& ctx, std::source_location loc) override;
  std::shared_ptr<EventImpl> record_at(ContextImpl& ctx, std::uint64_t seq) override;
  bool wait(ContextImpl& ctx, const std::shared_ptr<EventImpl>& event,
            std::source_location loc) override;
  [[noreturn]] void refuse(const ContextImpl& ctx, std::string_view what,
                           std::source_location loc) override;
  [[noreturn]] void refuse_host_wait(const EventImpl& event, std::string_view what,
                                     std::source_location loc) override;
  void adopt(std::shared_ptr<void> keeper) override;

  /// Ends the capture: checks every joined context was joined back, returns the graph.
  std::shared_ptr<GraphData> finish(std::source_location loc);
  /// Ends the capture, dropping what was recorded. Never throws.
  void discard() noexcept;
  /// Stops every member context recording into this capture, then makes the real point its
  /// work stands for (end_point) and hands it to the tracker for the accesses recorded during the
  /// capture. Never throws.
  void release_members() noexcept;
  /// The point the capture's work stands for once it is no longer recording: made on first use
  /// (the origin waits for every member's stream, then records). Never throws; null only if the
  /// device failed, after a host synchronize of every member.
  std::shared_ptr<EventImpl> end_point() noexcept;

 private:
  struct Member {
    std::weak_ptr<ContextImpl> ctx;
    const ContextImpl* key = nullptr;
    std::string name;
    std::vector<std::uint32_t> frontier;
    std::shared_ptr<EventImpl> base;  // the real stream point where it entered the capture
    std::vector<std::pair<std::uint64_t, std::uint32_t>> ops = {};  // (operation number, node)
  };
  Member* member(const ContextImpl& ctx);  // mutex_ held
  /// Appends a node for operation `op` of ctx with `params` and `uses` after ctx's frontier
  /// (which it becomes), or, while expect()ing, counts it matched.
  void append(ContextImpl& ctx, const OpInfo& op, ir::Params params, std::span<const Use> uses);
  /// While expect()ing: whether an operation named `what` with `params` from member m (of ctx)
  /// equals the previous recording's next node, edges included (uses not compared). mutex_ held.
  [[nodiscard]] const ir::Node* next_expected(const Member& m, const ContextImpl& ctx,
                                              std::string_view what,
                                              const ir::Params& params) const;
  /// While expect()ing: true (and ctx's frontier moved) if operation `op` with `params` and
  /// `uses` equals the previous recording's next node and its edges; else the matched prefix
  /// becomes the graph's (diverge) and false. mutex_ held.
  bool match_next(Member& m, const ContextImpl& ctx, const OpInfo& op, const ir::Params& params,
                  std::span<const Use> uses);
  /// Whether the previous recording's edges into `node` are those from m's frontier, in the
  /// order a recording adds them. mutex_ held.
  [[nodiscard]] bool edges_match(const Member& m, std::uint32_t node) const;
  /// Counts the next expected node matched by operation `op` of member m. mutex_ held.
  void advance(Member& m, const OpInfo& op);
  /// Stops comparing: the previous recording's matched nodes and edges become the graph's.
  /// mutex_ held.
  void diverge();
  [[nodiscard]] std::string where() const;

  std::shared_ptr<ContextImpl> origin_;
  std::string name_;
  std::source_location loc_;
  std::atomic<bool> active_{false};
  std::atomic<bool> untracked_{false};
  const std::uint64_t serial_;
  // Points handed out (marks, Events recorded inside): only then is an end point needed.
  std::atomic<std::uint32_t> points_made_{0};
  std::mutex mutex_;
  std::shared_ptr<GraphData> graph_;
  // While comparing with a replay's previous recording (expect): it, and how many of its nodes
  // and edges this capture recorded again so far (graph_ holds none of them until diverge()).
  std::shared_ptr<GraphData> expected_;
  std::shared_ptr<GraphData> previous_;  // expected_ once diverged
  std::uint32_t matched_nodes_ = 0;
  std::size_t matched_edges_ = 0;
  bool matched_previous_ = false;
  std::vector<Member> members_;
  std::shared_ptr<CaptureEnd> end_ = std::make_shared<CaptureEnd>();
};

}  // namespace sluice::detail
