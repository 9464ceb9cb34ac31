#include "graph/capture_state.hpp"

#include <algorithm>
#include <span>

#include "deps/tracker.hpp"
#include "graph/graph_stats.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {
namespace {

std::string at(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

/// A point inside a capture: the nodes recorded so far on its context. It stands for work that
/// runs only when the graph is launched, so the host never waits for it: while the capture
/// records, a wait on it is refused through the capture (which is discarded); afterwards it is
/// an Error naming the capture. A context that waits on it after the capture waits for the real
/// point the capture's work stands for (CaptureEnd).
class CaptureEvent final : public CorePoint {
 public:
  bool query() override { refuse("a host query of an event recorded inside the capture"); }
  void synchronize() override { refuse("a host wait on an event recorded inside the capture"); }
  double elapsed_ms_since(const EventImpl&) override {
    throw Error(Errc::invalid_state,
                "an event recorded inside a graph capture has no time; time the graph's launch");
  }
  CaptureSink* capture_sink() const noexcept override {
    auto s = state_.lock();
    return s && s->active() ? s.get() : nullptr;
  }
  std::shared_ptr<EventImpl> captured_base() const override {
    {
      std::lock_guard lock(end_->mutex);
      if (end_->point) return end_->point;
    }
    if (auto s = state_.lock(); s && !s->active()) {
      if (auto p = s->end_point()) return p;
    }
    return base_;  // the device failed while ending the capture: its members were synchronized
  }

  [[noreturn]] void refuse(std::string_view what) {
    if (auto s = state_.lock(); s && s->active()) {
      if (auto c = ctx_.lock()) s->refuse(*c, what, loc_);
    }
    throw Error(Errc::invalid_state,
                "the event recorded at " + at(loc_) + " inside the " + end_->description +
                    " stands for captured work, which runs only when its graph is launched: the "
                    "host cannot wait for it. Record an event on the launching context after the "
                    "launch, or give the graph an event record node (Graph::add_event_record)",
                loc_);
  }

  std::weak_ptr<CaptureState> state_;
  std::weak_ptr<ContextImpl> ctx_;
  std::source_location loc_;
  std::vector<std::uint32_t> nodes_;
  std::shared_ptr<EventImpl> base_;
  std::shared_ptr<CaptureEnd> end_;
};

std::uint64_t next_serial() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

CaptureState::CaptureState(std::shared_ptr<ContextImpl> origin, std::string name,
                           std::source_location loc)
    : origin_(std::move(origin)),
      name_(std::move(name)),
      loc_(loc),
      serial_(next_serial()),
      graph_(std::make_shared<GraphData>()) {
  graph_->ir.name = name_;
  end_->description = where();
}

std::string CaptureState::where() const {
  return "capture '" + name_ + "' begun at " + at(loc_);
}

void CaptureState::start() {
  auto base = origin_->record(false, loc_);
  {
    std::lock_guard lock(mutex_);
    members_.push_back({origin_, origin_.get(), origin_->name(), {}, std::move(base)});
  }
  active_.store(true, std::memory_order_release);
  try {
    origin_->begin_capture(shared_from_this(), loc_);
  } catch (...) {
    active_.store(false, std::memory_order_release);
    throw;
  }
  graph_stats().captures.fetch_add(1, std::memory_order_relaxed);
}

CaptureState::Member* CaptureState::member(const ContextImpl& ctx) {
  for (auto& m : members_) {
    if (m.key == &ctx && !m.ctx.expired()) return &m;
  }
  return nullptr;
}

void CaptureState::record_op(ContextImpl& ctx, const OpInfo& op,
                             const std::function<void(Stream&, const OpInfo&)>& f) {
  auto& stream = ctx.stream();
  ir::Captured node;
  try {
    stream.begin_capture(op);
  } catch (const Error& e) {
    if (e.code() != Errc::invalid_state) throw;
    refuse(ctx, std::string(op.what) + " (" + e.what() + ")", op.where);
  }
  try {
    f(stream, op);
  } catch (...) {
    stream.abort_capture();
    throw;
  }
  try {
    node.recording = stream.end_capture(op);
  } catch (const Error& e) {
    refuse(ctx, std::string(op.what) + " (" + e.what() + ")", op.where);
  }
  if (!node.recording) {
    ctx.clear_capture_uses();
    return;  // nothing to run (e.g. an empty operation)
  }
  node.where = op.where;
  append(ctx, op, std::move(node), ctx.capture_uses());
}

namespace {
ir::Params params_of(const SimpleOp& simple) {
  if (simple.kind == SimpleOp::Kind::copy) return ir::Copy{simple.dst, simple.src, simple.bytes};
  return ir::Memset{simple.dst, simple.value, simple.bytes};
}
}  // namespace

void CaptureState::record_node(ContextImpl& ctx, const OpInfo& op, const SimpleOp& simple) {
  // A copy or memset the backend's graph runs as such: a node of its own, without recording on
  // the stream, compared parameter by parameter when a replay updates the executable.
  append(ctx, op, params_of(simple), ctx.capture_uses());
}

void CaptureState::record_expected(ContextImpl& ctx, const OpInfo& op, const SimpleOp& simple,
                                   std::uint32_t node, std::span<const Use> uses) {
  {
    std::lock_guard lock(mutex_);
    Member* m = member(ctx);
    // expected_uses compared the rest under ctx's mutex, which the caller still holds.
    if (m != nullptr && expected_ && matched_nodes_ == node && edges_match(*m, node)) {
      advance(*m, op);
      return;
    }
  }
  append(ctx, op, params_of(simple), uses);
}

const std::vector<Use>* CaptureState::expected_uses(const ContextImpl& ctx, std::string_view what,
                                                    const SimpleOp& simple, std::uint32_t& node) {
  std::lock_guard lock(mutex_);
  if (!expected_) return nullptr;
  const Member* m = member(ctx);
  if (m == nullptr) return nullptr;
  const auto* want = next_expected(*m, ctx, what, params_of(simple));
  if (want == nullptr) return nullptr;
  node = matched_nodes_;
  return &want->uses;
}

void CaptureState::reserve(std::size_t nodes) {
  std::lock_guard lock(mutex_);
  graph_->ir.nodes.reserve(nodes);
  graph_->ir.edges.reserve(nodes);
  if (!members_.empty()) members_.front().ops.reserve(nodes);
}

void CaptureState::expect(std::shared_ptr<GraphData> previous) {
  std::lock_guard lock(mutex_);
  if (!members_.empty()) members_.front().ops.reserve(previous->ir.nodes.size());
  expected_ = std::move(previous);
  origin_->set_capture_expects(true);
}

namespace {
/// Whether a copy or memset recorded now has the parameters of `before`'s. Other kinds never
/// do: a captured operation's recording is new each time.
bool same_simple_params(const ir::Params& before, const ir::Params& now) {
  if (const auto* a = std::get_if<ir::Memset>(&before)) {
    const auto* b = std::get_if<ir::Memset>(&now);
    return b != nullptr && a->dst == b->dst && a->value == b->value && a->bytes == b->bytes;
  }
  if (const auto* a = std::get_if<ir::Copy>(&before)) {
    const auto* b = std::get_if<ir::Copy>(&now);
    return b != nullptr && a->dst == b->dst && a->src == b->src && a->bytes == b->bytes;
  }
  return false;
}

bool same_uses(std::span<const Use> now, const std::vector<Use>& before) {
  return std::equal(now.begin(), now.end(), before.begin(), before.end(),
                    [](const Use& x, const Use& y) {
                      return x.id == y.id && x.mode == y.mode && x.range.offset == y.range.offset &&
                             x.range.size == y.range.size;
                    });
}
}  // namespace

const ir::Node* CaptureState::next_expected(const Member& m, const ContextImpl& ctx,
                                            std::string_view what, const ir::Params& params) const {
  const auto& prev = expected_->ir;
  const auto index = matched_nodes_;
  if (index >= prev.nodes.size()) return nullptr;
  const auto& want = prev.nodes[index];
  if (!same_simple_params(want.params, params) || want.name != what || want.context != ctx.name() ||
      !edges_match(m, index)) {
    return nullptr;
  }
  return &want;
}

bool CaptureState::edges_match(const Member& m, std::uint32_t node) const {
  // The edges the node would get (from ctx's frontier), in the order a recording adds them.
  const auto& edges = expected_->ir.edges;
  if (matched_edges_ + m.frontier.size() > edges.size()) return false;
  for (std::size_t k = 0; k < m.frontier.size(); ++k) {
    if (edges[matched_edges_ + k] != std::pair{m.frontier[k], node}) return false;
  }
  return true;
}

void CaptureState::advance(Member& m, const OpInfo& op) {
  const auto index = matched_nodes_++;
  matched_edges_ += m.frontier.size();
  m.frontier.assign(1, index);
  m.ops.emplace_back(op.seq, index);
}

bool CaptureState::match_next(Member& m, const ContextImpl& ctx, const OpInfo& op,
                              const ir::Params& params, std::span<const Use> uses) {
  const auto* want = next_expected(m, ctx, op.what, params);
  if (want == nullptr || !same_uses(uses, want->uses)) {
    diverge();
    return false;
  }
  advance(m, op);
  return true;
}

void CaptureState::diverge() {
  if (!expected_) return;
  const auto& prev = expected_->ir;
  auto& g = graph_->ir;
  g.nodes.reserve(std::max<std::size_t>(prev.nodes.size(), 32));
  g.edges.reserve(prev.edges.size());
  g.nodes.assign(prev.nodes.begin(), prev.nodes.begin() + matched_nodes_);
  g.edges.assign(prev.edges.begin(),
                 prev.edges.begin() + static_cast<std::ptrdiff_t>(matched_edges_));
  previous_ = std::move(expected_);  // uses handed out by expected_uses point into it
  origin_->set_capture_expects(false);
}

void CaptureState::append(ContextImpl& ctx, const OpInfo& op, ir::Params params,
                          std::span<const Use> uses) {
  std::lock_guard lock(mutex_);
  Member* m = member(ctx);
  if (m == nullptr || (expected_ && match_next(*m, ctx, op, params, uses))) {
    ctx.clear_capture_uses();
    return;  // (no member cannot happen: only members record)
  }
  auto& nodes = graph_->ir.nodes;
  if (nodes.capacity() == 0) nodes.reserve(32);  // moving nodes as the list grows costs
  const auto index = static_cast<std::uint32_t>(nodes.size());
  auto& node = nodes.emplace_back();
  node.params = std::move(params);
  node.name = std::string(op.what);
  node.context = ctx.name();
  node.uses.assign(uses.begin(), uses.end());
  ctx.clear_capture_uses();
  for (auto p : m->frontier) graph_->ir.edges.emplace_back(p, index);
  m->frontier.assign(1, index);
  m->ops.emplace_back(op.seq, index);
}

std::shared_ptr<EventImpl> CaptureState::record(ContextImpl& ctx, std::source_location loc) {
  points_made_.fetch_add(1, std::memory_order_relaxed);
  auto e = std::make_shared<CaptureEvent>();
  e->state_ = weak_from_this();
  e->ctx_ = ctx.weak_from_this();
  e->loc_ = loc;
  e->end_ = end_;
  e->failures = ctx.failures();
  e->seq = ctx.issued();
  e->timeline = ctx.timeline();
  e->device = ctx.device();
  std::lock_guard lock(mutex_);
  if (Member* m = member(ctx)) {
    e->nodes_ = m->frontier;
    e->base_ = m->base;
  }
  return e;
}

std::shared_ptr<EventImpl> CaptureState::record_at(ContextImpl& ctx, std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  Member* m = member(ctx);
  if (m == nullptr) return ctx.record(false, loc_);  // cannot happen: only members capture
  auto it = std::upper_bound(m->ops.begin(), m->ops.end(), seq,
                             [](std::uint64_t s, const auto& e) { return s < e.first; });
  if (it == m->ops.begin()) return m->base;  // work from before the context joined: real
  points_made_.fetch_add(1, std::memory_order_relaxed);
  auto e = std::make_shared<CaptureEvent>();
  e->state_ = weak_from_this();
  e->ctx_ = ctx.weak_from_this();
  e->loc_ = loc_;
  e->end_ = end_;
  e->failures = ctx.failures();
  e->seq = seq;
  e->timeline = ctx.timeline();
  e->device = ctx.device();
  e->nodes_.assign(1, std::prev(it)->second);
  e->base_ = m->base;
  return e;
}

bool CaptureState::wait(ContextImpl& ctx, const std::shared_ptr<EventImpl>& event,
                        std::source_location loc) {
  auto* ce = dynamic_cast<CaptureEvent*>(event.get());
  if (ce == nullptr) {
    // A point outside the capture: launches of the graph wait for it too.
    std::lock_guard lock(mutex_);
    diverge();  // the previous recording's launches waited for other points
    auto& ext = graph_->external_waits;
    if (std::find(ext.begin(), ext.end(), event) == ext.end()) ext.push_back(event);
    return false;
  }
  if (auto other = ctx.capture(); other && other.get() != this && other->active()) {
    refuse(ctx, "a wait for work of capture '" + name_ + "' while recording another capture", loc);
  }
  bool joined;
  {
    std::lock_guard lock(mutex_);
    joined = member(ctx) != nullptr;
  }
  if (!joined) {
    // Waiting on captured work makes the context part of the capture (reference 002's
    // multi-stream capture): its later work is recorded too, until the capture ends.
    if (ctx.kind() == StreamKind::blocking) {
      refuse(ctx, "a blocking-kind context waiting for captured work", loc);
    }
    auto base = ctx.record(false, loc);
    {
      std::lock_guard lock(mutex_);
      diverge();  // the previous recording was of one context
      members_.push_back({ctx.weak_from_this(), &ctx, ctx.name(), {}, std::move(base)});
    }
    ctx.begin_capture(shared_from_this(), loc);
  }
  std::lock_guard lock(mutex_);
  Member* m = member(ctx);
  if (!joined && untracked()) {
    // A second context: from now on the tracker's marks order the members' operations. The
    // origin's operations recorded so far have none, so the newcomer follows all of them (the
    // event it waited for may be older than some).
    untracked_.store(false, std::memory_order_release);
    for (auto n : members_.front().frontier) {
      if (std::find(m->frontier.begin(), m->frontier.end(), n) == m->frontier.end()) {
        m->frontier.push_back(n);
      }
    }
  }
  for (auto n : ce->nodes_) {
    if (std::find(m->frontier.begin(), m->frontier.end(), n) == m->frontier.end()) {
      m->frontier.push_back(n);
    }
  }
  return true;
}

void CaptureState::refuse(const ContextImpl& ctx, std::string_view what, std::source_location loc) {
  discard();
  throw Error(Errc::invalid_state,
              std::string(what) + " on context '" + ctx.name() + "' at " + at(loc) +
                  " cannot be part of a graph; the " + where() +
                  " was discarded and every context in it stays usable. Move the operation "
                  "out of the captured region",
              loc);
}

void CaptureState::refuse_host_wait(const EventImpl& event, std::string_view what,
                                    std::source_location loc) {
  std::shared_ptr<ContextImpl> ctx;
  {
    std::lock_guard lock(mutex_);
    for (auto& m : members_) {
      auto c = m.ctx.lock();
      if (c && c->timeline() == event.timeline) ctx = std::move(c);
    }
  }
  refuse(ctx ? *ctx : *origin_,
         std::string(what) +
             " on an event recorded inside the capture (its work runs only when "
             "the graph is launched)",
         loc);
}

void CaptureState::adopt(std::shared_ptr<void> keeper) {
  std::lock_guard lock(mutex_);
  diverge();  // the new graph keeps it
  graph_->ir.keep_alive.push_back(std::move(keeper));
}

void CaptureState::discard() noexcept {
  active_.store(false, std::memory_order_release);
  origin_->set_capture_expects(false);
  // Contexts drop this sink on their next operation (a lock of theirs may be held here); the
  // Capture's end or destructor releases them at once.
}

void CaptureState::release_members() noexcept {
  std::vector<std::shared_ptr<ContextImpl>> live;
  {
    std::lock_guard lock(mutex_);
    for (auto& m : members_) {
      if (auto c = m.ctx.lock()) live.push_back(std::move(c));
    }
  }
  origin_->set_capture_expects(false);
  for (auto& c : live) c->end_capture(this);
  // The tracker's marks of captured work stand for this point from now on (issue order after
  // the capture is then what it would be had the captured work run). A capture that handed out
  // no point (untracked, no Event recorded inside) needs none.
  const bool points = points_made_.load(std::memory_order_acquire) != 0;
  Tracker::instance().capture_ended(this, origin_, points ? end_point() : nullptr);
}

std::shared_ptr<EventImpl> CaptureState::end_point() noexcept {
  std::lock_guard end_lock(end_->mutex);  // not mutex_: a member may hold its own and want it
  if (end_->point) return end_->point;
  std::vector<std::shared_ptr<ContextImpl>> members;
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 1; i < members_.size(); ++i) {
      if (auto c = members_[i].ctx.lock()) members.push_back(std::move(c));
    }
  }
  try {
    // The members were joined back into the origin by edges of the graph; on the streams, the
    // origin now waits for them, so one point covers what any recorded operation waited for.
    for (auto& c : members) origin_->wait(c->record(false, loc_), loc_);
    end_->point = origin_->record(false, loc_);
  } catch (...) {
    // The device failed: the host waits for every member instead, so nothing recorded in the
    // capture stands for unfinished work (the tracker then drops its marks).
    for (auto& c : members) {
      try {
        c->stream().synchronize();
      } catch (...) {
      }
    }
    try {
      origin_->stream().synchronize();
    } catch (...) {
    }
  }
  return end_->point;
}

std::shared_ptr<GraphData> CaptureState::finish(std::source_location loc) {
  if (!active()) {
    release_members();
    throw Error(
        Errc::invalid_state,
        "the " + where() + " was discarded by an earlier error (see that error); capture again",
        loc);
  }
  active_.store(false, std::memory_order_release);
  std::string unjoined;
  std::unique_lock lock(mutex_);
  if (expected_) {
    const auto& prev = expected_->ir;
    matched_previous_ = matched_nodes_ == prev.nodes.size() &&
                        matched_edges_ == prev.edges.size() && members_.size() == 1;
    if (!matched_previous_) diverge();  // fewer operations than last time
  }
  if (members_.size() > 1) {
    // Every node a member ended on must lead into the origin's last nodes (a capture of one
    // context, the common case of a replay, has nothing to check).
    const auto& g = graph_->ir;
    std::vector<char> reaches(g.nodes.size(), 0);
    std::vector<std::uint32_t> todo = members_.front().frontier;
    auto pred = ir::predecessors(g);
    for (auto n : todo) reaches[n] = 1;
    while (!todo.empty()) {  // backwards from the origin's frontier
      auto n = todo.back();
      todo.pop_back();
      for (auto p : pred[n]) {
        if (!reaches[p]) {
          reaches[p] = 1;
          todo.push_back(p);
        }
      }
    }
    for (std::size_t i = 1; i < members_.size(); ++i) {
      for (auto n : members_[i].frontier) {
        if (!reaches[n]) {
          unjoined = members_[i].name;
          break;
        }
      }
      if (!unjoined.empty()) break;
    }
  }
  graph_->single_context = members_.size() == 1;
  auto result = matched_previous_ ? std::move(expected_) : graph_;
  lock.unlock();  // release_members takes it
  release_members();
  if (!unjoined.empty()) {
    throw Error(Errc::invalid_state,
                "context '" + unjoined + "' joined the " + where() +
                    " (it was forked from or waited for captured work) but was not joined back "
                    "before the capture ended; call wait_for or join on the capturing context "
                    "for it. The capture was discarded",
                loc);
  }
  return result;
}

}  // namespace sluice::detail
