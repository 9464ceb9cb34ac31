// Programs: compile (the DAG in topological order, the first instance built), run (binding,
// instance cache, graph built once per instance and rebound in place, one tracked launch),
// introspection, and one-off evaluation.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <list>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "lazy/plan.hpp"
#include "lazy/source.hpp"
#include "lazy/tune.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/lazy_kernels.hpp"
#include "sluice/extension.hpp"
#include "sluice/graph.hpp"
#include "sluice/kernel.hpp"

namespace sluice::lazy {
namespace detail {
namespace {

std::atomic<std::uint64_t> g_programs{0}, g_modules{0}, g_memory{0}, g_disk{0}, g_eval_hits{0};

struct Resolved {
  void* data = nullptr;
  ObjectId id = 0;
};

}  // namespace

struct Instance {
  Device device;
  std::vector<Shape> inputs;  // the key: one shape per placeholder
  InstanceDesc desc;
  LazyKernels* ext = nullptr;
  std::shared_ptr<const LazyModule> module;
  LazyBuildInfo build;
  std::vector<DeviceBuffer<std::byte>> temps;
  DeviceBuffer<std::byte> table;  // the binding table (desc.table)
  PinnedBuffer<long long> err;
  std::shared_ptr<const std::vector<std::string>> sites;
  std::vector<Resolved> binding;  // per buf, as last launched
  // What exec was instantiated from: its nodes (one per step) name a rebinding's updates.
  std::optional<Graph> graph;
  std::vector<sluice::Node> nodes;
  std::vector<std::vector<int>> steps_of_buf;  // per buf, the steps whose node uses it
  std::vector<int> bound_bufs;                 // the bufs a run binds (placeholders, outputs)
  // A rebinding's scratch, kept for its capacity: no allocation of its own per run.
  std::vector<char> step_changed;
  std::vector<int> changed_steps;
  std::vector<GraphExec::NodeUpdate> updates;
  std::vector<std::byte> args;
  std::optional<GraphExec> exec;  // last: destroyed first
};

class ProgramImpl {
 public:
  ProgramImpl(std::vector<NodePtr> outputs, Options options, std::source_location loc);

  void run(const Context& ctx, std::span<const Input> inputs, std::span<const Bind> outputs,
           std::source_location loc);
  [[nodiscard]] std::vector<Shape> output_shapes(
      std::span<const std::pair<std::string, Shape>> inputs) const;
  [[nodiscard]] std::vector<Program::Placeholder> placeholders() const;
  [[nodiscard]] std::string dot() const;
  [[nodiscard]] Stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  [[nodiscard]] std::vector<KernelInfo> kernels() const;
  [[nodiscard]] std::string source() const {
    std::lock_guard lock(mutex_);
    return last_ ? last_->desc.source : std::string();
  }
  [[nodiscard]] const Options& options() const noexcept { return options_; }
  /// Builds (or finds) the instance for the declared shapes on `device`.
  void prepare(const Device& device, std::source_location loc);
  /// The declared-shape instance's plan in `dialect` (nothing built).
  /// Without BLAS.
  [[nodiscard]] InstanceDesc plan_declared(LazyDialect dialect) const;

 private:
  [[nodiscard]] std::vector<Shape> shapes_for(const std::vector<Shape>& placeholder_shapes) const;
  Instance& instance(const Device& device, const std::vector<Shape>& ps, std::source_location loc);
  Graph build_graph(Instance& inst, const std::vector<Resolved>& ptrs,
                    std::source_location loc) const;
  /// Times the candidate kernels of `req` on inst's device (scratch buffers of their sizes).
  std::vector<std::vector<std::vector<double>>> time_candidates(const Instance& inst,
                                                                const TuneRequest& req,
                                                                std::source_location loc) const;
  /// Step `s`'s uses under the binding `ptrs`, into `uses`.
  static void step_uses(const Instance& inst, const Step& s, const std::vector<Resolved>& ptrs,
                        std::vector<Use>& uses);
  /// The work of kernel (or gemm) step `s` under the binding `ptrs`; none for a gemm step that
  /// the backend records (gemm_recording).
  static std::optional<KernelWork> step_work(Instance& inst, const Step& s,
                                             const std::vector<Resolved>& ptrs);
  /// A batched gemm step's operand lists: in its table (the step's last read), or in the binding
  /// table from entry s.list.
  static const void* operand_lists(const Instance& inst, const Step& s,
                                   const std::vector<Resolved>& ptrs) {
    if (s.list < 0) return ptrs[static_cast<std::size_t>(s.reads.back())].data;
    return table_entry(inst, ptrs, s.list);
  }
  /// The address of entry `e` of the binding table.
  static const void* table_entry(const Instance& inst, const std::vector<Resolved>& ptrs, int e) {
    return static_cast<const std::byte*>(ptrs[static_cast<std::size_t>(inst.desc.table)].data) +
           sizeof(void*) * static_cast<std::size_t>(e);
  }
  /// Gemm step `s`'s BLAS call under the binding `ptrs`.
  static BlasGemmArgs gemm_args(const Instance& inst, const Step& s,
                                const std::vector<Resolved>& ptrs);
  /// Gemm step `s` recorded by the backend under the binding `ptrs`.
  static std::shared_ptr<void> gemm_recording(const Instance& inst, const Step& s,
                                              const std::vector<Resolved>& ptrs,
                                              std::source_location loc);
  /// Rebinds inst's executable to `ptrs` by updating only the nodes whose buffers changed, in one
  /// batch (a node that reads its addresses from the binding table, or has none, takes its new
  /// uses alone). `updated`: the nodes whose parameters it set (added to).
  static void rebind(Instance& inst, const std::vector<Resolved>& ptrs, std::source_location loc,
                     std::uint64_t& updated);
  [[noreturn]] void fail(const std::string& message, std::source_location loc) const {
    throw Error(Errc::invalid_argument, "sluice::lazy program '" + options_.name + "': " + message,
                loc);
  }

  std::vector<NodePtr> outputs_;
  std::vector<NodePtr> order_;
  std::unordered_map<const Node*, int> index_;
  std::vector<int> placeholders_;  // positions in order_
  std::vector<int> output_pos_;
  Options options_;
  Tune tune_ = Tune::on;                  // options_.tune resolved
  Gemm gemm_ = Gemm::automatic;           // options_.gemm resolved
  Tile tile_ = Tile::automatic;           // options_.tile resolved
  Binding binding_ = Binding::automatic;  // options_.binding resolved
  mutable std::mutex mutex_;
  std::list<std::unique_ptr<Instance>> cache_;  // most recently used first
  Instance* last_ = nullptr;
  Stats stats_;
  // run's scratch (under mutex_), kept for its capacity.
  std::vector<const Bind*> bound_;
  std::vector<Shape> shapes_;
  std::vector<Resolved> in_ptr_, out_ptr_, ptrs_;
};

ProgramImpl::ProgramImpl(std::vector<NodePtr> outputs, Options options, std::source_location loc)
    : outputs_(std::move(outputs)), options_(std::move(options)) {
  if (outputs_.empty()) fail("compile needs at least one output", loc);
  for (const auto& o : outputs_) {
    if (!o) fail("an output is an empty Array handle", loc);
  }
  if (options_.cache_capacity == 0) options_.cache_capacity = 1;
  tune_ = resolve_tune(options_.tune, loc);
  stats_.tune_mode = tune_name(tune_);
  gemm_ = resolve_gemm(options_.gemm, loc);
  stats_.gemm_mode = gemm_name(gemm_);
  tile_ = resolve_tile(options_.tile, loc);
  stats_.tile_mode = tile_name(tile_);
  binding_ = resolve_binding(options_.binding, loc);
  stats_.binding_mode = binding_name(binding_);
  // Topological order: operands before their users (an explicit stack: chains may be deep).
  std::unordered_set<const Node*> done;
  for (const auto& root : outputs_) {
    std::vector<std::pair<const NodePtr*, std::size_t>> stack{{&root, 0}};
    while (!stack.empty()) {
      auto& [np, next] = stack.back();
      const NodePtr& n = *np;
      if (done.count(n.get())) {
        stack.pop_back();
        continue;
      }
      if (next < n->in.size()) {
        const NodePtr* child = &n->in[next++];
        if (!done.count(child->get())) stack.emplace_back(child, 0);
        continue;
      }
      done.insert(n.get());
      index_.emplace(n.get(), static_cast<int>(order_.size()));
      order_.push_back(n);
      stack.pop_back();
    }
  }
  std::unordered_map<std::string, const Node*> names;
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const Node& n = *order_[i];
    if (n.kind == NodeKind::placeholder) {
      auto [it, fresh] = names.emplace(n.name, &n);
      if (!fresh) {
        fail("two different placeholders are named '" + n.name + "'; give each input its own name",
             loc);
      }
      placeholders_.push_back(static_cast<int>(i));
    } else {
      ++stats_.operations;
    }
  }
  for (const auto& o : outputs_) output_pos_.push_back(index_.at(o.get()));
  g_programs.fetch_add(1, std::memory_order_relaxed);
}

std::vector<Shape> ProgramImpl::shapes_for(const std::vector<Shape>& ps) const {
  std::vector<Shape> shapes(order_.size());
  std::size_t p = 0;
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const Node& n = *order_[i];
    if (n.kind == NodeKind::placeholder) {
      shapes[i] = ps[p++];
      continue;
    }
    std::vector<Shape> in;
    in.reserve(n.in.size());
    for (const auto& a : n.in) in.push_back(shapes[static_cast<std::size_t>(index_.at(a.get()))]);
    shapes[i] = infer_shape(n, in);
  }
  return shapes;
}

Instance& ProgramImpl::instance(const Device& device, const std::vector<Shape>& ps,
                                std::source_location loc) {
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if ((*it)->device == device && (*it)->inputs == ps) {
      cache_.splice(cache_.begin(), cache_, it);
      ++stats_.instance_hits;
      last_ = cache_.front().get();
      return *last_;
    }
  }
  auto inst = std::make_unique<Instance>();
  inst->device = device;
  inst->inputs = ps;
  inst->ext = &extension<LazyKernels>(device.backend, loc);
  std::vector<Shape> shapes;
  try {
    shapes = shapes_for(ps);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(e.what()) + " (program '" + options_.name + "')", loc);
  }
  PlanInput pin;
  pin.order = order_;
  pin.placeholders = placeholders_;
  pin.outputs = output_pos_;
  pin.shapes = shapes;
  pin.fusion = options_.fusion;
  pin.schedule = options_.schedule;
  pin.debug = options_.debug;
  pin.broadcast_sum = options_.broadcast_sum;
  pin.tile = tile_;
  pin.dialect = inst->ext->dialect();
  pin.horizontal = options_.horizontal;
  pin.multi_output = options_.multi_output;
  pin.gemm_table = inst->ext->has_gemm_table();
  pin.binding = binding_;
  if (inst->ext->has_gemm() && gemm_ != Gemm::generated) {
    const bool all = gemm_ == Gemm::blas;
    LazyKernels* ext = inst->ext;
    pin.gemm = [all, ext](const GemmPlan& g) {
      return all || ext->gemm_pays(g.m, g.n, g.k, g.batch);
    };
  }
  inst->desc = plan_instance(pin);
  if (pin.dialect == LazyDialect::cuda && tune_ != Tune::off) {
    TuneTimer timer = tune_timer_override();
    if (!timer) {
      timer = [&](const TuneRequest& req) { return time_candidates(*inst, req, loc); };
    }
    const auto r = tune_instance(inst->desc, pin.dialect, pin.debug, tune_,
                                 sluice::device_info(device).name, timer);
    stats_.tune_groups += r.groups;
    stats_.tuned_groups += r.timed;
    stats_.tune_hits += r.hits;
    stats_.tune_candidates += r.candidates;
    stats_.tune_ms += r.ms;
  }
  finish_binding(inst->desc, pin.dialect);
  std::vector<std::string> names;
  for (const auto& c : inst->desc.codes) names.push_back(c.name);
  if (!names.empty()) {
    inst->module = inst->ext->build(device, inst->desc.source, names, inst->build, loc);
    auto& counter = inst->build.origin == "compiled" ? g_modules
                    : inst->build.origin == "disk"   ? g_disk
                                                     : g_memory;
    counter.fetch_add(1, std::memory_order_relaxed);
  } else {
    inst->build.origin = "none";
  }
  auto sites = std::make_shared<std::vector<std::string>>();
  for (const auto& s : inst->desc.lowered.sites) sites->push_back(s.what);
  inst->sites = std::move(sites);
  if (stats_.instantiations == 0) {
    stats_.codegen_ms = inst->desc.codegen_ms;
    stats_.build_ms = inst->build.ms;
    stats_.build_origin = inst->build.origin;
  }
  stats_.last_build_ms = inst->build.ms;
  stats_.last_build_origin = inst->build.origin;
  ++stats_.instantiations;
  cache_.push_front(std::move(inst));
  while (cache_.size() > options_.cache_capacity) {
    if (cache_.back().get() == last_) last_ = nullptr;
    cache_.pop_back();
    ++stats_.evictions;
  }
  last_ = cache_.front().get();
  const auto& d = last_->desc;
  stats_.kernels = 0;
  stats_.blas = 0;
  for (const auto& s : d.steps) {
    stats_.kernels += (s.kind == Step::Kind::kernel || s.kind == Step::Kind::table) && s.code >= 0;
    stats_.blas += s.kind == Step::Kind::gemm;
  }
  stats_.merged_kernels = d.merged;
  stats_.batched_products = d.batched;
  stats_.tiled_kernels = d.tiled;
  stats_.table = d.table >= 0;
  stats_.multi_output_kernels = d.siblings;
  stats_.graph_nodes = d.steps.size();
  stats_.concurrency = d.width;
  stats_.temporaries = d.temp_bytes.size();
  stats_.temporary_bytes = 0;
  for (auto b : d.temp_bytes) stats_.temporary_bytes += b;
  return *last_;
}

void ProgramImpl::prepare(const Device& device, std::source_location loc) {
  std::lock_guard lock(mutex_);
  std::vector<Shape> ps;
  for (int p : placeholders_) ps.push_back(order_[static_cast<std::size_t>(p)]->shape);
  (void)instance(device, ps, loc);
}

InstanceDesc ProgramImpl::plan_declared(LazyDialect dialect) const {
  std::vector<Shape> ps;
  for (int p : placeholders_) ps.push_back(order_[static_cast<std::size_t>(p)]->shape);
  const auto shapes = shapes_for(ps);
  PlanInput pin;
  pin.order = order_;
  pin.placeholders = placeholders_;
  pin.outputs = output_pos_;
  pin.shapes = shapes;
  pin.fusion = options_.fusion;
  pin.schedule = options_.schedule;
  pin.debug = options_.debug;
  pin.broadcast_sum = options_.broadcast_sum;
  pin.tile = tile_;
  pin.dialect = dialect;
  pin.horizontal = options_.horizontal;
  pin.multi_output = options_.multi_output;
  return plan_instance(pin);
}

GeneratedSource generate_source(const std::vector<NodePtr>& outputs, const Options& options,
                                LazyDialect dialect) {
  ProgramImpl p(outputs, options, std::source_location::current());
  const auto d = p.plan_declared(dialect);
  GeneratedSource g;
  g.source = d.source;
  for (const auto& c : d.codes) g.kernels.push_back(c.name);
  return g;
}

TunedSource tune_source(const std::vector<NodePtr>& outputs, const Options& options,
                        const std::string& device_name) {
  const auto loc = std::source_location::current();
  ProgramImpl p(outputs, options, loc);
  auto d = p.plan_declared(LazyDialect::cuda);
  const auto r = tune_instance(d, LazyDialect::cuda, options.debug, resolve_tune(options.tune, loc),
                               device_name, tune_timer_override());
  TunedSource t;
  t.source = d.source;
  for (const auto& c : d.codes) {
    t.shapes.push_back(c.shape);
    t.candidates.push_back(c.candidates);
    t.choices.push_back(c.choice);
  }
  t.groups = r.groups;
  t.timed = r.timed;
  t.hits = r.hits;
  t.candidates_timed = r.candidates;
  return t;
}

std::vector<std::vector<std::vector<double>>> ProgramImpl::time_candidates(
    const Instance& inst, const TuneRequest& req, std::source_location loc) const {
  LazyBuildInfo info;
  const auto module = inst.ext->build(inst.device, req.source, req.names, info, loc);
  const auto& d = inst.desc;
  auto fill_of = [](DType t) {
    switch (t) {
      case DType::boolean:
        return LazyTimedBuffer::Fill::boolean;
      case DType::i32:
        return LazyTimedBuffer::Fill::int32;
      case DType::i64:
        return LazyTimedBuffer::Fill::int64;
      case DType::f32:
        return LazyTimedBuffer::Fill::real32;
      case DType::f64:
        break;
    }
    return LazyTimedBuffer::Fill::real64;
  };
  auto bytes_of = [&](int ln) {
    const auto& n = d.lowered.nodes[static_cast<std::size_t>(ln)];
    return std::max<std::size_t>(static_cast<std::size_t>(numel(n.shape)) * dtype_size(n.dtype), 8);
  };
  std::vector<LazyTimedGroup> groups;
  std::size_t index = 0;
  for (const auto& g : req.groups) {
    const auto& code = d.codes[static_cast<std::size_t>(g.code)];
    const auto& k = d.fused.kernels[static_cast<std::size_t>(code.kernel)];
    LazyTimedGroup tg;
    // The output is scratch (the caller's buffers are never written with these results); a
    // program constant is read where it is; everything else is scratch filled by its type.
    tg.buffers.push_back({LazyTimedBuffer::Fill::zero, bytes_of(k.out), nullptr});
    for (int r : code.buffers) {
      const int b = d.buf_of[static_cast<std::size_t>(r)];
      const auto& buf = d.bufs[static_cast<std::size_t>(b)];
      LazyTimedBuffer t{fill_of(d.lowered.nodes[static_cast<std::size_t>(r)].dtype), bytes_of(r),
                        nullptr};
      if (buf.role == Buf::Role::constant) {
        t.data = order_[static_cast<std::size_t>(buf.index)]->data;
      }
      tg.buffers.push_back(t);
    }
    for (const auto& sib : k.siblings)
      tg.buffers.push_back({LazyTimedBuffer::Fill::zero, bytes_of(sib.out), nullptr});
    if (code.debug) tg.buffers.push_back({LazyTimedBuffer::Fill::zero, 32, nullptr});
    for (const auto& c : g.codes) {
      std::vector<std::byte> args(c.arg_bytes());
      if (!c.params.empty()) {
        std::memcpy(args.data() + 8 * c.all_slots(), c.params.data(), 8 * c.params.size());
      }
      tg.kernels.push_back(index++);
      tg.elements.push_back(c.elements);
      tg.max_blocks.push_back(c.max_blocks);
      tg.args.push_back(std::move(args));
    }
    groups.push_back(std::move(tg));
  }
  return inst.ext->time(inst.device, module, groups, req.reps, loc);
}

namespace {
/// Drops repeated (object, mode) uses, keeping the first of each in place (a rebinding compares
/// uses by place). A horizontal kernel's members share operands: many uses, so a sort there,
/// not a scan per use.
void drop_repeated_uses(std::vector<Use>& uses) {
  auto same = [](const Use& a, const Use& b) { return a.id == b.id && a.mode == b.mode; };
  std::size_t out = 0;
  if (uses.size() <= 16) {
    for (std::size_t k = 0; k < uses.size(); ++k) {
      if (std::none_of(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(out),
                       [&](const Use& u) { return same(u, uses[k]); })) {
        uses[out++] = uses[k];
      }
    }
  } else {
    std::vector<std::uint32_t> order(uses.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = static_cast<std::uint32_t>(k);
    std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
      const auto &a = uses[x], &b = uses[y];
      return a.id != b.id ? a.id < b.id : a.mode != b.mode ? a.mode < b.mode : x < y;
    });
    std::vector<char> repeated(uses.size(), 0);
    for (std::size_t k = 1; k < order.size(); ++k) {
      if (same(uses[order[k - 1]], uses[order[k]])) repeated[order[k]] = 1;
    }
    for (std::size_t k = 0; k < uses.size(); ++k) {
      if (!repeated[k]) uses[out++] = uses[k];
    }
  }
  uses.resize(out);
}
}  // namespace

void ProgramImpl::step_uses(const Instance& inst, const Step& s, const std::vector<Resolved>& ptrs,
                            std::vector<Use>& uses) {
  uses.clear();
  auto add = [&](int b, Access access) {
    const auto& r = ptrs[static_cast<std::size_t>(b)];
    if (r.id != 0) uses.push_back({r.id, access, {}});
  };
  for (int b : s.reads) add(b, Access::read);
  for (int b : s.writes) add(b, Access::write);
  // Under a binding table, what reads its addresses there reads the table.
  if (inst.desc.table >= 0 && ((s.kind == Step::Kind::gemm && s.list >= 0) ||
                               (s.kind == Step::Kind::kernel && s.code >= 0))) {
    add(inst.desc.table, Access::read);
  }
  drop_repeated_uses(uses);
  const bool checked =
      s.kind == Step::Kind::check || (s.kind == Step::Kind::kernel && s.code >= 0 &&
                                      inst.desc.codes[static_cast<std::size_t>(s.code)].debug);
  if (checked) uses.push_back({inst.err.object_id(), Access::read_write, {}});
}

BlasGemmArgs ProgramImpl::gemm_args(const Instance& inst, const Step& s,
                                    const std::vector<Resolved>& ptrs) {
  const auto& d = inst.desc;
  const auto& k = d.fused.kernels[static_cast<std::size_t>(s.kernel)];
  BlasGemmArgs a;
  a.precision = k.dtype == DType::f32 ? Precision::f32 : Precision::f64;
  a.trans_a = k.gemm.trans_a;
  a.trans_b = k.gemm.trans_b;
  a.m = k.gemm.m;
  a.n = k.gemm.n;
  a.k = k.gemm.k;
  a.lda = k.gemm.lda;
  a.ldb = k.gemm.ldb;
  a.ldc = k.gemm.ldc;
  if (s.members.size() > 1 || s.list >= 0) {
    // Batched over lists in a table (the step's last read, or the binding table's from entry
    // s.list): no operand of its own.
    a.batch = static_cast<std::int64_t>(s.members.size());
    return a;
  }
  a.alpha = 1;
  a.beta = 0;
  a.a = ptrs[static_cast<std::size_t>(d.buf_of[static_cast<std::size_t>(k.gemm.a)])].data;
  a.b = ptrs[static_cast<std::size_t>(d.buf_of[static_cast<std::size_t>(k.gemm.b)])].data;
  a.c = ptrs[static_cast<std::size_t>(s.writes.front())].data;
  a.stride_a = k.gemm.stride_a;
  a.stride_b = k.gemm.stride_b;
  a.stride_c = k.gemm.stride_c;
  a.batch = k.gemm.batch;
  return a;
}

std::shared_ptr<void> ProgramImpl::gemm_recording(const Instance& inst, const Step& s,
                                                  const std::vector<Resolved>& ptrs,
                                                  std::source_location loc) {
  auto r = s.members.size() > 1 || s.list >= 0
               ? inst.ext->gemm_table_recording(inst.device, gemm_args(inst, s, ptrs),
                                                operand_lists(inst, s, ptrs), loc)
               : inst.ext->gemm_recording(inst.device, gemm_args(inst, s, ptrs), loc);
  if (!r) {
    throw Error(Errc::backend_failure,
                "sluice::lazy: the backend's LazyKernels has_gemm() but gives neither a kernel nor "
                "a recording for matrix product '" +
                    s.name + "'",
                loc);
  }
  return r;
}

std::optional<KernelWork> ProgramImpl::step_work(Instance& inst, const Step& s,
                                                 const std::vector<Resolved>& ptrs) {
  const auto& d = inst.desc;
  if (s.kind == Step::Kind::gemm) {
    if (s.members.size() > 1 || s.list >= 0) {
      return inst.ext->gemm_table(gemm_args(inst, s, ptrs), operand_lists(inst, s, ptrs));
    }
    return inst.ext->gemm(gemm_args(inst, s, ptrs));
  }
  const auto& c = d.codes[static_cast<std::size_t>(s.code)];
  auto& args = inst.args;
  args.assign(c.arg_bytes(), std::byte{0});
  auto put = [&](std::size_t slot, const void* p) {
    std::memcpy(args.data() + 8 * slot, &p, sizeof p);
  };
  auto at = [&](int b) -> const void* {
    // An indirect kernel's slot holds buffer b's entry of the binding table.
    return c.indirect ? table_entry(inst, ptrs, b) : ptrs[static_cast<std::size_t>(b)].data;
  };
  if (s.kind == Step::Kind::table) {
    // A binding table's step writes its entries from s.list on.
    put(0, s.list < 0 ? at(s.writes.front()) : table_entry(inst, ptrs, s.list));
    for (std::size_t j = 0; j < s.addresses.size(); ++j) put(j + 1, at(s.addresses[j]));
  } else {
    // Member m's slots: its first output, its reads, its further outputs, the error record.
    const std::size_t S = c.buffer_slots(), R = c.buffers.size();
    const auto O = static_cast<std::size_t>(c.outputs);
    for (std::size_t m = 0; m * O < s.writes.size(); ++m) {
      put(m * S, at(s.writes[m * O]));
      for (std::size_t j = 0; j < R; ++j) put(m * S + j + 1, at(s.reads[m * R + j]));
      for (std::size_t o = 1; o < O; ++o) put(m * S + R + o, at(s.writes[m * O + o]));
      if (c.debug) put(m * S + S - 1, inst.err.data());
    }
  }
  if (!c.params.empty()) {
    std::memcpy(args.data() + 8 * c.all_slots(), c.params.data(), 8 * c.params.size());
  }
  return inst.ext->work(inst.module, static_cast<std::size_t>(s.code), c.elements, c.weight,
                        c.max_blocks, args);
}

Graph ProgramImpl::build_graph(Instance& inst, const std::vector<Resolved>& ptrs,
                               std::source_location loc) const {
  const auto& d = inst.desc;
  Graph g(options_.name);
  std::vector<sluice::Node> nodes;
  nodes.reserve(d.steps.size());
  for (const auto& s : d.steps) {
    NodeOptions o;
    o.name = s.name;
    for (int a : s.after) o.after.push_back(nodes[static_cast<std::size_t>(a)]);
    step_uses(inst, s, ptrs, o.uses);
    switch (s.kind) {
      case Step::Kind::kernel:
      case Step::Kind::table:
      case Step::Kind::gemm:
        if (s.kind == Step::Kind::kernel && s.code < 0) {
          nodes.push_back(g.add_empty(std::move(o)));
          break;
        }
        if (auto w = step_work(inst, s, ptrs)) {
          nodes.push_back(g.add_kernel(std::move(*w), std::move(o)));
        } else {
          nodes.push_back(g.add_recorded(gemm_recording(inst, s, ptrs, loc), std::move(o), loc));
        }
        break;
      case Step::Kind::copy: {
        const auto& src = ptrs[static_cast<std::size_t>(s.reads[0])];
        const auto& dst = ptrs[static_cast<std::size_t>(s.writes.front())];
        const auto bytes = d.bufs[static_cast<std::size_t>(s.writes.front())].bytes;
        nodes.push_back(bytes == 0 ? g.add_empty(std::move(o))
                                   : g.add_copy(dst.data, src.data, bytes, std::move(o)));
        break;
      }
      case Step::Kind::check: {
        nodes.push_back(g.add_host(
            [err = inst.err.data(), sites = inst.sites, name = options_.name] {
              if (__atomic_load_n(err, __ATOMIC_ACQUIRE) == 0) return;
              const long long site = err[1], index = err[2], extent = err[3];
              std::memset(err, 0, 4 * sizeof(long long));
              const std::string where = site >= 0 && static_cast<std::size_t>(site) < sites->size()
                                            ? (*sites)[static_cast<std::size_t>(site)]
                                            : std::string("?");
              throw Error(Errc::invalid_argument,
                          "sluice::lazy program '" + name + "': index " + std::to_string(index) +
                              " is out of range [0, " + std::to_string(extent) + ") in " + where);
            },
            std::move(o)));
        break;
      }
    }
  }
  inst.nodes = std::move(nodes);
  if (inst.steps_of_buf.empty()) {
    for (std::size_t b = 0; b < d.bufs.size(); ++b) {
      const auto role = d.bufs[b].role;
      if (role == Buf::Role::placeholder || role == Buf::Role::output) {
        inst.bound_bufs.push_back(static_cast<int>(b));
      }
    }
    inst.steps_of_buf.resize(d.bufs.size());
    for (std::size_t i = 0; i < d.steps.size(); ++i) {
      const auto& s = d.steps[i];
      auto note = [&](int b) {
        auto& v = inst.steps_of_buf[static_cast<std::size_t>(b)];
        if (v.empty() || v.back() != static_cast<int>(i)) v.push_back(static_cast<int>(i));
      };
      for (int b : s.reads) note(b);
      for (int b : s.writes) note(b);
      for (int b : s.addresses) note(b);
    }
  }
  return g;
}

void ProgramImpl::rebind(Instance& inst, const std::vector<Resolved>& ptrs,
                         std::source_location loc, std::uint64_t& updated) {
  const auto& d = inst.desc;
  // The steps whose node uses a buffer that changed (constants and temporaries never do), from
  // the lists made when the graph was built; in step order.
  inst.step_changed.assign(d.steps.size(), 0);
  for (int b : inst.bound_bufs) {
    const auto i = static_cast<std::size_t>(b);
    if (ptrs[i].data == inst.binding[i].data && ptrs[i].id == inst.binding[i].id) continue;
    for (int s : inst.steps_of_buf[i]) inst.step_changed[static_cast<std::size_t>(s)] = 1;
  }
  inst.changed_steps.clear();
  for (std::size_t i = 0; i < d.steps.size(); ++i) {
    if (inst.step_changed[i]) inst.changed_steps.push_back(static_cast<int>(i));
  }
  // One update per changed node; the NodeUpdates (their uses' capacity) are reused.
  auto& updates = inst.updates;
  if (updates.size() < inst.changed_steps.size()) updates.resize(inst.changed_steps.size());
  for (std::size_t k = 0; k < inst.changed_steps.size(); ++k) {
    const auto i = static_cast<std::size_t>(inst.changed_steps[k]);
    const auto& s = d.steps[i];
    auto& u = updates[k];
    u.node = inst.nodes[i];
    u.kernel.reset();
    u.recording.reset();
    u.dst = nullptr;
    u.src = nullptr;
    u.bytes = 0;
    step_uses(inst, s, ptrs, u.uses);
    u.uses_only = false;
    if ((s.kind == Step::Kind::gemm && s.list >= 0) ||
        (s.kind == Step::Kind::kernel && s.code >= 0 &&
         d.codes[static_cast<std::size_t>(s.code)].indirect)) {
      u.uses_only = true;  // its addresses are in the binding table (updated with step 0)
    } else if (s.kind == Step::Kind::gemm ||
               ((s.kind == Step::Kind::kernel || s.kind == Step::Kind::table) && s.code >= 0)) {
      u.kernel = step_work(inst, s, ptrs);
      if (!u.kernel) u.recording = gemm_recording(inst, s, ptrs, loc);
    } else if (s.kind == Step::Kind::copy &&
               d.bufs[static_cast<std::size_t>(s.writes.front())].bytes != 0) {
      u.dst = ptrs[static_cast<std::size_t>(s.writes.front())].data;
      u.src = ptrs[static_cast<std::size_t>(s.reads[0])].data;
      u.bytes = d.bufs[static_cast<std::size_t>(s.writes.front())].bytes;
    } else {
      u.uses_only = true;  // an empty node (no elements): nothing to set but its uses
    }
  }
  inst.exec->update(std::span(updates.data(), inst.changed_steps.size()), loc);
  for (std::size_t k = 0; k < inst.changed_steps.size(); ++k) updated += !updates[k].uses_only;
}

void ProgramImpl::run(const Context& ctx, std::span<const Input> inputs,
                      std::span<const Bind> outputs, std::source_location loc) {
  std::lock_guard lock(mutex_);
  const std::size_t np = placeholders_.size();
  auto& bound = bound_;
  bound.assign(np, nullptr);
  auto placeholder = [&](std::size_t p) -> const Node& {
    return *order_[static_cast<std::size_t>(placeholders_[p])];
  };
  std::size_t next = 0;  // inputs given in the placeholders' order match at once
  for (const auto& in : inputs) {
    std::size_t p = next < np && placeholder(next).name == in.name ? next : 0;
    while (p < np && placeholder(p).name != in.name) ++p;
    next = p + 1;
    if (p == np) {
      std::string known;
      for (std::size_t q = 0; q < np; ++q) known += (q ? ", " : "") + placeholder(q).name;
      fail("there is no placeholder '" + std::string(in.name) +
               "' (placeholders: " + (known.empty() ? "none" : known) + ")",
           loc);
    }
    if (bound[p] != nullptr) fail("input '" + std::string(in.name) + "' is bound twice", loc);
    bound[p] = &in.bind;
  }
  auto& ps = shapes_;
  ps.resize(np);
  for (std::size_t p = 0; p < np; ++p) {
    const Node& n = placeholder(p);
    if (bound[p] == nullptr)
      fail("input '" + n.name + "' is not bound; pass {\"" + n.name + "\", buffer}", loc);
    const Bind& b = *bound[p];
    if (b.dtype() != n.dtype) {
      fail(std::string("input '") + n.name + "' is " + to_string(n.dtype) + " but a buffer of " +
               to_string(b.dtype()) + " was bound",
           loc);
    }
    ps[p] = b.shape() ? *b.shape() : n.shape;
    if (static_cast<std::int64_t>(b.count()) != numel(ps[p])) {
      fail("input '" + n.name + "' of shape " + to_string(ps[p]) + " needs " +
               std::to_string(numel(ps[p])) + " elements but the buffer bound holds " +
               std::to_string(b.count()) +
               (b.shape() ? "" : "; bind it with its shape: {\"" + n.name + "\", {buffer, shape}}"),
           loc);
    }
  }
  if (outputs.size() != outputs_.size()) {
    fail("it has " + std::to_string(outputs_.size()) + " output(s) but " +
             std::to_string(outputs.size()) + " buffer(s) were given",
         loc);
  }
  Instance& inst = instance(ctx.device(), ps, loc);
  const auto& d = inst.desc;
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const Node& n = *outputs_[o];
    const Shape& s = d.shapes[static_cast<std::size_t>(output_pos_[o])];
    if (outputs[o].dtype() != n.dtype) {
      fail("output " + std::to_string(o) + " (" + op_name(n) + ") is " + to_string(n.dtype) +
               " but a buffer of " + to_string(outputs[o].dtype()) + " was bound",
           loc);
    }
    if (static_cast<std::int64_t>(outputs[o].count()) != numel(s)) {
      fail("output " + std::to_string(o) + " (" + op_name(n) + ") has shape " + to_string(s) +
               " (" + std::to_string(numel(s)) + " elements) but the buffer bound holds " +
               std::to_string(outputs[o].count()),
           loc);
    }
  }
  // Addresses: inputs read, outputs written (a Managed output counts as assigned from here on).
  auto& in_ptr = in_ptr_;
  auto& out_ptr = out_ptr_;
  in_ptr.resize(np);
  out_ptr.resize(outputs.size());
  for (std::size_t p = 0; p < np; ++p) {
    auto r = bound[p]->resolve(ctx, loc, false);
    in_ptr[p] = {r.data, r.id};
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    auto r = outputs[o].resolve(ctx, loc, true);
    out_ptr[o] = {r.data, r.id};
    for (std::size_t p = 0; p < np; ++p) {
      if (r.id != 0 && in_ptr[p].id == r.id) {
        fail("output " + std::to_string(o) + " is the buffer bound to input '" +
                 placeholder(p).name +
                 "'; bind a distinct buffer (outputs are written while inputs are read)",
             loc);
      }
    }
    for (std::size_t q = 0; q < o; ++q) {
      if (r.id != 0 && out_ptr[q].id == r.id) {
        fail("outputs " + std::to_string(q) + " and " + std::to_string(o) + " are the same buffer",
             loc);
      }
    }
  }
  if (!inst.exec) {
    // First launch of this instance: its temporaries, and the graph.
    for (auto bytes : d.temp_bytes) {
      inst.temps.emplace_back(ctx, std::max<std::size_t>(bytes, 8), loc);
    }
    if (d.table >= 0) {
      inst.table = DeviceBuffer<std::byte>(
          ctx, std::max<std::size_t>(d.bufs[static_cast<std::size_t>(d.table)].bytes, 8), loc);
    }
    if (options_.debug) {
      inst.err = PinnedBuffer<long long>(ctx.device(), 4, loc);
      std::memset(inst.err.data(), 0, 4 * sizeof(long long));
    }
  }
  auto& ptrs = ptrs_;
  ptrs.resize(d.bufs.size());
  for (std::size_t b = 0; b < d.bufs.size(); ++b) {
    const Buf& buf = d.bufs[b];
    switch (buf.role) {
      case Buf::Role::placeholder:
        ptrs[b] = in_ptr[static_cast<std::size_t>(buf.index)];
        break;
      case Buf::Role::output:
        ptrs[b] = out_ptr[static_cast<std::size_t>(buf.index)];
        break;
      case Buf::Role::constant: {
        const Node& n = *order_[static_cast<std::size_t>(buf.index)];
        ptrs[b] = {const_cast<void*>(n.data), n.id};
        break;
      }
      case Buf::Role::temp: {
        const auto& t = inst.temps[static_cast<std::size_t>(buf.index)];
        ptrs[b] = {t.data(), t.object_id()};
        break;
      }
      case Buf::Role::table:
        ptrs[b] = {inst.table.data(), inst.table.object_id()};
        break;
    }
  }
  auto same = [](const std::vector<Resolved>& a, const std::vector<Resolved>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].data != b[i].data || a[i].id != b[i].id) return false;
    }
    return true;
  };
  if (!inst.exec) {
    inst.graph = build_graph(inst, ptrs, loc);
    inst.exec.emplace(*inst.graph, ctx.device(), loc);
    inst.binding = ptrs;
  } else if (!same(inst.binding, ptrs)) {
    // Only the nodes that use a changed buffer, in one batch.
    rebind(inst, ptrs, loc, stats_.rebound_nodes);
    std::swap(inst.binding, ptrs);  // both keep their capacity
    ++stats_.rebinds;
  }
  inst.exec->launch(ctx, loc);
  ++stats_.launches;
}

std::vector<Shape> ProgramImpl::output_shapes(
    std::span<const std::pair<std::string, Shape>> inputs) const {
  std::vector<Shape> ps;
  for (int p : placeholders_) {
    const Node& n = *order_[static_cast<std::size_t>(p)];
    Shape s = n.shape;
    for (const auto& [name, shape] : inputs) {
      if (name == n.name) s = shape;
    }
    ps.push_back(std::move(s));
  }
  const auto shapes = shapes_for(ps);
  std::vector<Shape> out;
  for (int o : output_pos_) out.push_back(shapes[static_cast<std::size_t>(o)]);
  return out;
}

std::vector<Program::Placeholder> ProgramImpl::placeholders() const {
  std::vector<Program::Placeholder> out;
  for (int p : placeholders_) {
    const Node& n = *order_[static_cast<std::size_t>(p)];
    out.push_back({n.name, n.shape, n.dtype});
  }
  return out;
}

std::vector<KernelInfo> ProgramImpl::kernels() const {
  std::lock_guard lock(mutex_);
  std::vector<KernelInfo> out;
  if (!last_) return out;
  const auto& d = last_->desc;
  for (const auto& s : d.steps) {
    if (s.kind == Step::Kind::table) {
      KernelInfo info;
      info.name = s.name;
      info.kind = "table";
      info.source = d.codes[static_cast<std::size_t>(s.code)].text;
      info.elements = static_cast<std::int64_t>(s.addresses.size());
      out.push_back(std::move(info));
      continue;
    }
    if (s.kind != Step::Kind::kernel && s.kind != Step::Kind::gemm) continue;
    const auto& k = d.fused.kernels[static_cast<std::size_t>(s.kernel)];
    KernelInfo info;
    info.name = s.name;
    info.kind = s.kind == Step::Kind::gemm       ? "blas"
                : k.kind == Kernel::Kind::reduce ? "reduce"
                                                 : "map";
    info.members = s.members.size();
    info.outputs = k.siblings.size() + 1;
    if (s.code >= 0) {
      const auto& c = d.codes[static_cast<std::size_t>(s.code)];
      info.source = c.text;
      info.shape = c.shape;
      info.candidates = c.candidates;
      info.candidate_us = c.candidate_us;
      info.choice = c.choice;
    }
    info.elements = numel(k.shape);
    for (int m : s.members) {
      for (int p : d.fused.kernels[static_cast<std::size_t>(m)].parts) {
        const int u = d.lowered.nodes[static_cast<std::size_t>(p)].node;
        if (u >= 0) info.ops.push_back(op_where(*order_[static_cast<std::size_t>(u)]));
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::string ProgramImpl::dot() const {
  std::lock_guard lock(mutex_);
  std::ostringstream o;
  o << "digraph \"" << options_.name << "\" {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  auto label = [&](std::size_t i) {
    const Node& n = *order_[i];
    const Shape& s = last_ ? last_->desc.shapes[i] : n.shape;
    std::string l = op_name(n);
    for (auto& c : l) {
      if (c == '"') c = '\'';
    }
    return l + "\\n" + to_string(s) + " " + to_string(n.dtype);
  };
  std::vector<int> cluster(order_.size(), -1);
  if (last_) {
    const auto& d = last_->desc;
    for (std::size_t si = 0; si < d.steps.size(); ++si) {
      const auto& s = d.steps[si];
      for (int m : s.members) {
        for (int p : d.fused.kernels[static_cast<std::size_t>(m)].parts) {
          const int u = d.lowered.nodes[static_cast<std::size_t>(p)].node;
          if (u >= 0 && cluster[static_cast<std::size_t>(u)] < 0)
            cluster[static_cast<std::size_t>(u)] = static_cast<int>(si);
        }
      }
    }
    for (std::size_t si = 0; si < d.steps.size(); ++si) {
      const auto& s = d.steps[si];
      if (s.members.empty()) continue;
      o << "  subgraph cluster_" << si << " {\n    label=\"" << s.name
        << (s.kind == Step::Kind::gemm ? " (BLAS)" : "") << "\"; style=rounded; color=blue;\n";
      for (std::size_t i = 0; i < order_.size(); ++i) {
        if (cluster[i] == static_cast<int>(si))
          o << "    n" << i << " [label=\"" << label(i) << "\"];\n";
      }
      o << "  }\n";
    }
  }
  for (std::size_t i = 0; i < order_.size(); ++i) {
    if (cluster[i] >= 0) continue;
    const bool input =
        order_[i]->kind == NodeKind::placeholder || order_[i]->kind == NodeKind::constant;
    o << "  n" << i << " [label=\"" << label(i) << "\"" << (input ? ", shape=ellipse" : "")
      << "];\n";
  }
  for (std::size_t i = 0; i < order_.size(); ++i) {
    for (const auto& a : order_[i]->in) o << "  n" << index_.at(a.get()) << " -> n" << i << ";\n";
  }
  for (std::size_t k = 0; k < output_pos_.size(); ++k) {
    o << "  out" << k << " [label=\"output " << k << "\", shape=plaintext];\n  n" << output_pos_[k]
      << " -> out" << k << ";\n";
  }
  o << "}\n";
  return o.str();
}

// ---- one-off evaluation ---------------------------------------------------------------------

namespace {

/// A key for a DAG's structure (and its constants' identities): equal keys compile alike.
std::string structure_key(const NodePtr& root, const Options& options, const Device& device) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, int> index;
  std::vector<std::pair<const Node*, std::size_t>> stack{{root.get(), 0}};
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (index.count(n)) {
      stack.pop_back();
      continue;
    }
    if (next < n->in.size()) {
      const Node* c = n->in[next++].get();
      if (!index.count(c)) stack.emplace_back(c, 0);
      continue;
    }
    index.emplace(n, static_cast<int>(order.size()));
    order.push_back(n);
    stack.pop_back();
  }
  std::ostringstream o;
  o << device.to_string() << '|' << static_cast<int>(options.fusion)
    << static_cast<int>(options.schedule) << options.debug << static_cast<int>(options.gemm)
    << static_cast<int>(options.broadcast_sum) << options.horizontal << options.multi_output
    << static_cast<int>(resolve_tile(options.tile, std::source_location::current()))
    << static_cast<int>(resolve_binding(options.binding, std::source_location::current())) << '|';
  std::function<void(const ExPtr&)> ex = [&](const ExPtr& e) {
    o << '(' << static_cast<int>(e->kind) << ',' << static_cast<int>(e->dtype) << ','
      << static_cast<int>(e->op) << ',' << e->lit.i << ',' << e->lit.f << ',' << e->var << ','
      << (e->array ? index.at(e->array.get()) : -1);
    for (const auto& a : e->args) ex(a);
    o << ')';
  };
  for (const Node* n : order) {
    o << '{' << static_cast<int>(n->kind) << ',' << static_cast<int>(n->dtype) << ','
      << to_string(n->shape) << ',' << n->name << ',' << static_cast<int>(n->op) << ','
      << static_cast<int>(n->rop) << ',' << n->keepdims << ',' << n->spec_text << ','
      << (n->axis ? *n->axis : -99) << ',' << n->shift << ',' << to_string(n->target) << ','
      << n->lit.i << ',' << n->lit.f << ',' << n->id << ',' << n->data;
    if (n->axes) {
      for (int a : *n->axes) o << ',' << a;
    }
    for (const auto& it : n->items) {
      o << ";" << static_cast<int>(it.kind) << ',' << it.integer << ','
        << (it.slice.start ? *it.slice.start : -99999) << ','
        << (it.slice.stop ? *it.slice.stop : -99999) << ',' << it.slice.step;
    }
    for (const auto& a : n->in) o << '<' << index.at(a.get());
    if (n->body) ex(n->body);
    o << '}';
  }
  return o.str();
}

struct EvalCache {
  std::mutex mutex;
  std::list<std::pair<std::string, std::shared_ptr<Program>>> entries;  // most recent first
  static constexpr std::size_t capacity = 64;
};

// Never destroyed: its programs own temporaries released in stream order on their contexts,
// which must not happen during static destruction (the host pool may be gone by then).
EvalCache& eval_cache() {
  static EvalCache* c = new EvalCache;
  return *c;
}

}  // namespace

Program compile_nodes(std::vector<NodePtr> outputs, const Options& options,
                      std::source_location loc) {
  auto impl = std::make_unique<ProgramImpl>(std::move(outputs), options, loc);
  impl->prepare(options.device ? *options.device : default_device(), loc);
  return Program(std::move(impl));
}

void eval_into(const Context& ctx, const NodePtr& array, std::span<const Input> inputs,
               const Bind& out, const Options& options, std::source_location loc) {
  if (!array) {
    throw Error(Errc::invalid_state, "sluice::lazy::eval: empty Array handle", loc);
  }
  auto& cache = eval_cache();
  const std::string key = structure_key(array, options, ctx.device());
  std::shared_ptr<Program> program;
  {
    std::lock_guard lock(cache.mutex);
    for (auto it = cache.entries.begin(); it != cache.entries.end(); ++it) {
      if (it->first == key) {
        cache.entries.splice(cache.entries.begin(), cache.entries, it);
        program = it->second;
        g_eval_hits.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
  }
  if (!program) {
    Options o = options;
    o.device = ctx.device();
    if (o.name == "lazy") o.name = "eval";
    program = std::make_shared<Program>(compile_nodes({array}, o, loc));
    std::lock_guard lock(cache.mutex);
    cache.entries.emplace_front(key, program);
    if (cache.entries.size() > EvalCache::capacity) cache.entries.pop_back();
  }
  program->run(ctx, inputs, std::span<const Bind>(&out, 1), loc);
}

}  // namespace detail

// ---- Program --------------------------------------------------------------------------------

Program::Program() = default;
Program::Program(std::unique_ptr<detail::ProgramImpl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

namespace {
detail::ProgramImpl& checked(const std::unique_ptr<detail::ProgramImpl>& p) {
  if (!p) throw Error(Errc::invalid_state, "sluice::lazy::Program is empty; compile arrays first");
  return *p;
}
}  // namespace

void Program::run(const Context& ctx, std::span<const Input> inputs, std::span<const Bind> outputs,
                  std::source_location loc) {
  checked(impl_).run(ctx, inputs, outputs, loc);
}
std::vector<Shape> Program::output_shapes(
    std::span<const std::pair<std::string, Shape>> inputs) const {
  return checked(impl_).output_shapes(inputs);
}
std::vector<Program::Placeholder> Program::placeholders() const {
  return checked(impl_).placeholders();
}
std::string Program::dot() const {
  return checked(impl_).dot();
}
Stats Program::stats() const {
  return checked(impl_).stats();
}
std::vector<KernelInfo> Program::kernels() const {
  return checked(impl_).kernels();
}
std::string Program::source() const {
  return checked(impl_).source();
}
const Options& Program::options() const {
  return checked(impl_).options();
}

void clear_module_memory() {
  detail::forget_tune_memory();
  for (const char* backend : {"host", "cuda"}) {
    if (auto* e = find_extension<LazyKernels>(backend)) e->forget_memory();
  }
  kernel_cache::clear_memory();
}

GlobalStats global_stats() {
  using namespace detail;
  return {g_programs.load(), g_modules.load(), g_memory.load(), g_disk.load(), g_eval_hits.load()};
}

}  // namespace sluice::lazy
