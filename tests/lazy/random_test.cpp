// Randomized programs: random DAGs over the lazy operations (element-wise math, broadcasts,
// reductions, einsum, gathers, slices, reshapes, concatenation, index lambdas) with random shapes,
// compiled in every fusion and schedule mode, run on every backend, compared element by element
// with the reference evaluator (reference.hpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "lazy/cuda_shape.hpp"
#include "lazy/generator.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

class LazyRandom : public BackendTest {};

struct Mode {
  L::Fusion fusion;
  L::Schedule schedule;
  const char* name;
  bool tiles = false;  // Tile::on (every eligible reduction fused for register tiles)
  // Binding::table: every kernel reads its buffers' addresses from the binding table
  L::Binding binding = L::Binding::environment;
};

/// `tile`: the tiling of the modes without tiles of their own.
void run_seed(const Context& ctx, std::uint64_t seed, L::Tile tile = L::Tile::environment) {
  Generator g(seed);
  const auto outs = g.program(14, 3);
  std::vector<L::Array<double>> arrays;
  for (const auto& o : outs) arrays.push_back(o.a);
  // Input data on the device.
  std::vector<DeviceBuffer<double>> dbufs;
  std::vector<DeviceBuffer<std::int64_t>> ibufs64;
  std::vector<DeviceBuffer<std::int32_t>> ibufs32;
  std::vector<L::Input> inputs;
  dbufs.reserve(g.inputs.size());
  for (const auto& [name, r] : g.inputs) {
    dbufs.emplace_back(ctx, r.v.size());
    copy(ctx, dbufs.back(), r.v);
  }
  for (const auto& ii : g.index_inputs) {
    if (ii.wide) {
      std::vector<std::int64_t> h(ii.r.v.begin(), ii.r.v.end());
      ibufs64.emplace_back(ctx, h.size());
      copy(ctx, ibufs64.back(), h);
      ctx.synchronize();  // h is pageable memory
    } else {
      std::vector<std::int32_t> h(ii.r.v.begin(), ii.r.v.end());
      ibufs32.emplace_back(ctx, h.size());
      copy(ctx, ibufs32.back(), h);
      ctx.synchronize();
    }
  }
  std::size_t k64 = 0, k32 = 0;
  for (std::size_t i = 0; i < g.inputs.size(); ++i)
    inputs.emplace_back(g.inputs[i].first, dbufs[i]);
  for (const auto& ii : g.index_inputs) {
    if (ii.wide) {
      inputs.emplace_back(ii.name, L::Bind(ibufs64[k64++]));
    } else {
      inputs.emplace_back(ii.name, L::Bind(ibufs32[k32++]));
    }
  }
  static const Mode modes[] = {
      {L::Fusion::none, L::Schedule::serial, "none/serial"},
      {L::Fusion::full, L::Schedule::dataflow, "full/dataflow"},
      {L::Fusion::full, L::Schedule::serial, "full/serial"},
      {L::Fusion::elementwise, L::Schedule::dataflow, "elementwise/dataflow"},
      {L::Fusion::none, L::Schedule::dataflow, "none/dataflow"},
      {L::Fusion::full, L::Schedule::dataflow, "full/dataflow/tiles", true},
      {L::Fusion::full, L::Schedule::dataflow, "full/dataflow/table", false, L::Binding::table},
      {L::Fusion::none, L::Schedule::serial, "none/serial/table", false, L::Binding::table}};
  for (const auto& m : modes) {
    SCOPED_TRACE(std::string("seed ") + std::to_string(seed) + ", " + m.name);
    L::Program p = L::compile(arrays, {.fusion = m.fusion,
                                       .schedule = m.schedule,
                                       .device = ctx.device(),
                                       .name = "random",
                                       .tile = m.tiles ? L::Tile::on : tile,
                                       .binding = m.binding});
    if (m.binding == L::Binding::table) {
      EXPECT_TRUE(p.stats().table) << "a binding table was asked for";
    }
    std::vector<DeviceBuffer<double>> obufs;
    std::vector<L::Bind> binds;
    obufs.reserve(outs.size());
    for (const auto& o : outs) obufs.emplace_back(ctx, o.r.v.size());
    for (const auto& b : obufs) binds.emplace_back(b);
    // Only the placeholders the outputs depend on are the program's inputs.
    std::vector<L::Input> used;
    for (const auto& ph : p.placeholders()) {
      for (const auto& in : inputs) {
        if (in.name == ph.name) used.push_back(in);
      }
    }
    p.run(ctx, used, binds);
    // Rebinding: the same values in other input buffers and other outputs, then the first inputs
    // again into those outputs (each run updates only the nodes whose buffers changed); the last
    // run's outputs are checked below, the first run's against them.
    std::vector<DeviceBuffer<double>> copies, obufs2;
    copies.reserve(dbufs.size());
    for (auto& b : dbufs) {
      copies.emplace_back(ctx, b.size());
      copy(ctx, copies.back(), b);
    }
    std::vector<L::Input> used2;
    for (const auto& in : used) {
      auto named = [&](const auto& e) { return e.first == in.name; };
      const auto it = std::find_if(g.inputs.begin(), g.inputs.end(), named);
      if (it == g.inputs.end()) {
        used2.push_back(in);  // an index input: kept
      } else {
        used2.emplace_back(in.name, copies[static_cast<std::size_t>(it - g.inputs.begin())]);
      }
    }
    obufs2.reserve(outs.size());
    std::vector<L::Bind> binds2;
    for (const auto& o : outs) obufs2.emplace_back(ctx, o.r.v.size());
    for (const auto& b : obufs2) binds2.emplace_back(b);
    p.run(ctx, used2, binds2);
    std::vector<std::vector<double>> first(outs.size());
    for (std::size_t o = 0; o < outs.size(); ++o) {
      first[o].resize(outs[o].r.v.size());
      copy(ctx, first[o], obufs[o]);
    }
    for (auto& b : obufs2) memset(ctx, b, 0);
    p.run(ctx, used, binds2);
    EXPECT_EQ(p.stats().rebinds, 2u);
    if (p.stats().table) {
      // Through the table: its one node per rebinding, and the copies into outputs.
      EXPECT_LE(p.stats().rebound_nodes, 2u * (1 + outs.size())) << p.dot();
    }
    std::vector<std::vector<double>> all(outs.size());
    for (std::size_t o = 0; o < outs.size(); ++o) {
      all[o].resize(outs[o].r.v.size());
      copy(ctx, all[o], obufs2[o]);
    }
    ctx.synchronize();
    ASSERT_EQ(first, all) << "the first binding's outputs and the rebound ones differ";
    if (std::getenv("LAZY_DEBUG")) {
      for (std::size_t o = 0; o < outs.size(); ++o) {
        for (std::size_t i = 0; i < all[o].size(); ++i)
          std::printf("o%zu[%zu] %g %g\n", o, i, all[o][i], outs[o].r.v[i]);
      }
    }
    for (std::size_t o = 0; o < outs.size(); ++o) {
      const auto& got = all[o];
      double scale = 1;
      for (double x : outs[o].r.v) scale = std::max(scale, std::abs(x));
      ASSERT_EQ(p.output_shapes()[o], outs[o].r.shape) << "output " << o;
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], outs[o].r.v[i], 1e-12 * scale * 64)
            << "output " << o << " element " << i << "\n"
            << p.dot() << "\n"
            << p.source();
      }
    }
  }
}

TEST_P(LazyRandom, ProgramsMatchTheReference) {
  Context ctx = make_context();
  // SLUICE_LAZY_SEEDS=N runs more programs (the default keeps CI short; the disk cache makes a
  // second run fast).
  std::uint64_t seeds = 24;
  if (const char* e = std::getenv("SLUICE_LAZY_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    run_seed(ctx, seed);
    if (HasFatalFailure()) return;
  }
}

// Every reduction in the cuda shapes of cuda_shape.hpp (operands staged in shared memory, lanes
// sharing an output; with tiles, every tile staged) however small, so that the random programs
// reach their corner cases. Lanes need the untiled fusion: the modes without tiles have it.
TEST_P(LazyRandom, ProgramsMatchTheReferenceInEveryCudaShape) {
  if (is_host()) GTEST_SKIP() << "the host dialect has no cuda kernel shapes";
  struct Force {
    L::detail::CudaShapeRules saved = L::detail::cuda_shape_rules();
    Force() {
      auto& r = L::detail::cuda_shape_rules();
      r.stage_reuse = 0;
      r.group_terms = 2;
      r.force_group = true;
    }
    ~Force() { L::detail::cuda_shape_rules() = saved; }
  } force;
  Context ctx = make_context();
  std::uint64_t seeds = 12;
  if (const char* e = std::getenv("SLUICE_LAZY_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    run_seed(ctx, seed, L::Tile::off);
    if (HasFatalFailure()) return;
  }
}

SLUICE_INSTANTIATE_BACKENDS(LazyRandom);

}  // namespace
}  // namespace sluice::test
