// Graph mode: a solve recorded once (set-up, a while node whose body is a block of
// iterations; across ranks the host runs that loop, see Work::graph_body), kept by its key and
// relaunched or updated (src/la/ksp_run.hpp).

#include "la/ksp_run.hpp"

namespace sluice::detail::la {

int Run::graph_block() const {
  int k = o_.fixed_iterations ? std::min(o_.max_it, kFixedBlock)
                              : std::min(check_interval(o_, A_.is_stencil), o_.max_it);
  if (o_.type == KspType::cg && k % 2 != 0) ++k;
  return k;
}

std::vector<std::uint64_t> Run::graph_key() const {
  std::vector<std::uint64_t> key;
  auto add = [&key](auto v) { key.push_back(static_cast<std::uint64_t>(v)); };
  auto add_ptr = [&](const void* p, ObjectId id) {
    add(reinterpret_cast<std::uintptr_t>(p));
    add(id);
  };
  for (const Vec* v : std::initializer_list<const Vec*>{&b_, &x_, &w_.r, &w_.z, &w_.p, &w_.p2,
                                                        &w_.w, &w_.s, &w_.rp, &w_.v, &w_.t, &w_.q,
                                                        &w_.u, &w_.d, &w_.y, &w_.invdiag}) {
    add_ptr(v->empty() ? nullptr : v->data(), v->empty() ? 0 : v->object_id());
  }
  add_ptr(w_.state.data(), w_.state.object_id());
  add_ptr(w_.hist.data(), w_.hist.object_id());
  add_ptr(w_.slots.data(), w_.slots.object_id());
  add_ptr(w_.running.device_ptr(), w_.running.object_id());
  add_ptr(&A_, 0);
  // The context: on cuda the la reductions captured from it use its stream's scratch, so the
  // graph is relaunched only on the context it was recorded from.
  add_ptr(&ctx_.impl(), 0);
  AccessList acc;
  (void)A_.op(acc);
  for (const auto& a : acc.uses()) add(a.id);
  add(static_cast<int>(o_.type));
  add(static_cast<int>(o_.pc));
  add(static_cast<int>(o_.cg_variant));
  add(static_cast<int>(o_.norm_type));
  for (double d : {o_.rtol, o_.atol, o_.dtol}) add(std::bit_cast<std::uint64_t>(d));
  add(o_.max_it);
  add(o_.fixed_iterations);
  add(o_.initial_guess_nonzero);
  add(graph_block());
  if (par_ != nullptr) par_->add_key(key);
  return key;
}

Graph Run::record_solve() {
  const bool cg = o_.type == KspType::cg;
  const std::string name = cg ? "KSPSolve_CG" : "KSPSolve_TFQMR";
  const int k = graph_block();
  std::int32_t* flag = w_.running.write_ptr(ctx_, loc_);
  LaKspState* mirror = w_.slots.data();  // the state the host reads at the end: slot 0
  auto running = [&] {
    AccessList acc;
    (void)acc.read(w_.state);  // through dst_, the state's address
    acc.write(w_.running.object_id());
    (void)acc.write(w_.slots, slot_range(0));
    issue_tracked(ctx_.impl(), acc, "KSP running", loc_,
                  [&](Stream& s, const OpInfo& op) { k_.running(s, dst_, flag, mirror, op); });
  };
  // CG from a zero guess: the set-up travels with the first block (see cg_folds_setup), which
  // sets the flag and slot 0 itself; later trips run the body.
  const bool fold = cg && cg_folds_setup();
  Graph setup = record(name + " set-up", [&] {
    if (fold) {
      setup_pending_ = true;
      graph_flag_ = flag;
      cg_iterations(k, 0);
      graph_flag_ = nullptr;
      return;
    }
    upload_state();
    cg ? cg_setup_any() : tf_setup();
    running();
  });
  auto body = [&] {
    return record(name + " iterations", [&] {
      if (par_ != nullptr || (cg && cg_single())) {
        // Across ranks every step ends in a reduction, and the single-reduction variant has
        // no block kernel: the iterations one by one.
        for (int i = 0; i < k; ++i) (void)(cg ? cg_iteration_any() : tf_iteration());
        running();
        return;
      }
      graph_flag_ = flag;  // the block sets the flag and slot 0 itself
      (void)(cg ? cg_iterations(k, 0) : tf_iterations(k, 0));
      graph_flag_ = nullptr;
    });
  };
  Graph g(name);
  const Node first =
      g.add_child(setup, {.name = name + (fold ? " set-up and " + std::to_string(k) + " iterations"
                                               : std::string(" set-up"))});
  // A fixed-iteration solve of at most one block needs no loop: its body as a plain child graph
  // (its kernels do nothing if the set-up already stopped, as a while node would skip them), or
  // none where the set-up's block is that one trip. SLUICE_KSP_GRAPH_LOOP=always keeps the
  // while node (to measure what it costs).
  const char* loop_env = std::getenv("SLUICE_KSP_GRAPH_LOOP");
  const bool one_trip = o_.fixed_iterations && o_.max_it <= k &&
                        (loop_env == nullptr || std::string(loop_env) != "always");
  Node loop = first;
  host_body_.reset();
  host_end_.reset();
  if (!one_trip && par_ != nullptr) {  // the loop on the host (Work::graph_body)
    host_body_.emplace(body());
    if (right_) host_end_.emplace(record(name + " end", [&] { unwind(); }));
    return g;
  }
  if (!one_trip) {
    loop = g.add_while(
        w_.running, body(),
        {.name = name + " " + std::to_string(k) + " iterations while running", .after = {first}});
  } else if (!fold) {
    loop = g.add_child(body(),
                       {.name = name + " " + std::to_string(k) + " iterations", .after = {first}});
  }
  if (right_)
    g.add_child(record(name + " end", [&] { unwind(); }), {.name = name + " end", .after = {loop}});
  return g;
}

void Run::run_graph() {
  if (w_.running.device() && *w_.running.device() != ctx_.device()) w_.running = {};
  if (w_.running.object_id() == 0) (void)w_.running.write_ptr(ctx_, loc_);
  auto key = graph_key();
  if (!w_.graph || w_.graph->device() != ctx_.device() || w_.graph_key != key) {
    w_.graph_key.clear();
    Graph g = record_solve();
    bool updated = false;
    if (w_.graph && w_.graph->device() == ctx_.device()) {
      try {
        w_.graph->update(g, loc_);
        updated = true;
      } catch (const Error&) {  // another topology (options changed): instantiate anew
      }
    }
    if (!updated) w_.graph.emplace(g, ctx_.device(), loc_);
    w_.graph_body.reset();
    w_.graph_end.reset();
    if (host_body_) w_.graph_body.emplace(*host_body_, ctx_.device(), loc_);
    if (host_end_) w_.graph_end.emplace(*host_end_, ctx_.device(), loc_);
    host_body_.reset();
    host_end_.reset();
    w_.graph_key = std::move(key);
  }
  wait_for_host_access(w_.slots.object_id(), Access::write, slot_range(0), loc_);
  w_.graph->launch(ctx_, loc_);
  if (w_.graph_body) {
    // Each trip ends with the state in pinned slot 0: the host reads its stop, as the while
    // node reads the flag. Every rank holds the same state, so all launch alike.
    for (;;) {
      Event trip;
      trip.record(ctx_, loc_);
      trip.synchronize(loc_);
      if (w_.slots.data()[0].stop != 0) break;
      w_.graph_body->launch(ctx_, loc_);
    }
    if (w_.graph_end) w_.graph_end->launch(ctx_, loc_);
  }
  Snapshot s;
  s.event.record(ctx_, loc_);
  read(s);
}

}  // namespace sluice::detail::la
