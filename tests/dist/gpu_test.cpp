// The dist layer on GPUs: several devices in one process (peer copies, ordering across devices,
// memory of one device refused on another), NCCL communicators with one process driving every
// GPU and with a process per GPU (under mpirun), random collectives and exchanges among work on
// several streams, and distributed solves against the host's. scripts/gpu-dist runs them on a
// machine with 2 GPUs or more (alone, and under mpirun -np 2 and -np 4); elsewhere they skip
// with the reason.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "core/cuda_interop.hpp"
#include "dist_test_util.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"
#include "sluice/memory.hpp"

namespace sluice::dist {
namespace {

/// A communicator over every process, each with `local` ranks on GPUs of its own: process p of
/// the node drives cuda:(p * local) ... cuda:(p * local + local - 1).
Comm gpu_comm(int local, ExchangePath exchanges = ExchangePath::automatic) {
  std::vector<Context> ctxs;
  const int first = Environment::node_process_rank() * local;
  for (int i = 0; i < local; ++i) {
    ctxs.emplace_back(ContextOptions{.device = Device{"cuda", first + i},
                                     .name = "gpu rank context " + std::to_string(i)});
  }
  return Comm(CommOptions{.contexts = ctxs, .name = "gpu", .exchanges = exchanges});
}

TEST(DistGpu, RanksSharingAGpuAreRefusedBeforeNccl) {
  if (auto why = test::gpus_needed(1); !why.empty()) GTEST_SKIP() << why;
  // Alone: two ranks of this process on cuda:0; under mpirun: every process's rank on cuda:0.
  // Every process gets the same refusal (no process is left waiting in NCCL's set-up).
  const Context c0(Device{"cuda", 0});
  const int local = Environment::process_count() == 1 ? 2 : 1;
  try {
    Comm bad(CommOptions{.contexts = std::vector<Context>(static_cast<std::size_t>(local), c0),
                         .name = "shared"});
    ADD_FAILURE() << "two ranks on cuda:0 were accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ranks 0 and 1"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find("one rank per GPU"), std::string::npos) << what;
  }
  // The process's communication still works afterwards.
  Comm good = gpu_comm(1);
  Managed<double> v(1.0, good.context());
  good.allreduce(v, ReduceOp::sum);
  EXPECT_EQ(v.value(), static_cast<double>(good.size()));
}

TEST(DistGpu, PeerCopiesAndOrderingAcrossDevices) {
  // Two GPUs seen by this process (every process of the node uses the same two).
  if (test::cuda_devices() < 2) {
    GTEST_SKIP() << "needs 2 CUDA device(s) on this node, found " << test::cuda_devices()
                 << ": run scripts/gpu-dist on a machine with 2 GPUs or more";
  }
  Context c0(Device{"cuda", 0}), c1(Device{"cuda", 1});
  constexpr std::size_t n = 1 << 20;
  la::Vec a(c0, n), b(c1, n);
  for (int k = 1; k <= 20; ++k) {
    la::set(a, k, c0);  // on GPU 0
    // A peer copy issued on GPU 1's context: ordered after the set on GPU 0 by the tracker.
    sluice::copy(c1, std::span<double>(b.data(), n), std::span<const double>(a.data(), n));
    la::scale(b, 2.0, c1);
    EXPECT_EQ(la::sum(b, c1), 2.0 * k * static_cast<double>(n)) << "round " << k;
  }
  // Memory of one device in another device's operation: refused, naming both.
  try {
    la::axpy(b, 1.0, a, c1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  // A communicator of this process's own GPU (under mpirun, every process has another), given
  // memory of another GPU: refused at the call.
  const int mine = Environment::node_process_rank();
  if (test::cuda_devices() < Environment::node_process_count()) return;  // no GPU of its own
  Comm one(CommOptions{.contexts = {Context(Device{"cuda", mine})}});
  DeviceBuffer<double> elsewhere(mine == 0 ? c1 : c0, 4);
  EXPECT_THROW(one.allreduce(elsewhere, ReduceOp::sum), Error);
}

void collectives(const Comm& c) {
  const int n = c.size();
  std::vector<Managed<double>> v;
  std::vector<DeviceBuffer<double>> ring;
  for (int l = 0; l < c.local_size(); ++l) {
    v.emplace_back(1.0 + c.rank(l), c.context(l));
    std::vector<double> h(6, -1.0);
    for (int k = 0; k < 2; ++k) h[static_cast<std::size_t>(k)] = c.rank(l) * 10 + k;
    ring.emplace_back(c.context(l), 6);
    sluice::copy(c.context(l), ring.back(), h);
    c.context(l).synchronize();  // h is pageable and goes at the end of this iteration
  }
  c.for_each_local([&](const Rank& r) {
    const auto l = static_cast<std::size_t>(r.local_index());
    r.allreduce(v[l], ReduceOp::sum);
    const int me = r.rank(), left = (me + n - 1) % n, right = (me + 1) % n;
    const DistSegment sends[] = {{right, 0, 2}, {left, 0, 2}};
    const DistSegment recvs[] = {{left, 2, 2}, {right, 4, 2}};
    r.exchange(ring[l], sends, ring[l], recvs, r.context());
  });
  for (int l = 0; l < c.local_size(); ++l) {
    EXPECT_EQ(v[static_cast<std::size_t>(l)].value(), n * (n + 1) / 2.0);
    std::vector<double> h(6);
    sluice::copy(c.context(l), h, ring[static_cast<std::size_t>(l)]);
    c.context(l).synchronize();
    const int me = c.rank(l), left = (me + n - 1) % n, right = (me + 1) % n;
    EXPECT_EQ(h, (std::vector<double>{me * 10.0, me * 10.0 + 1, left * 10.0, left * 10.0 + 1,
                                      right * 10.0, right * 10.0 + 1}));
  }
}

TEST(DistGpu, NcclCollectivesOfOneProcessDrivingEveryGpu) {
  if (Environment::process_count() > 1) GTEST_SKIP() << "runs alone: one process, every GPU";
  if (auto why = test::gpus_needed(2); !why.empty()) GTEST_SKIP() << why;
  for (int g = 2; g <= test::cuda_devices(); g *= 2) {
    SCOPED_TRACE(std::to_string(g) + " GPUs");
    // pick_device's placement (rank i on cuda:i), as `sluice solve --local-ranks` makes it.
    Comm c(CommOptions{.local_ranks = g, .backend = "cuda", .name = "gpu"});
    EXPECT_EQ(c.engine(), "nccl");
    EXPECT_EQ(c.local_size(), g);
    for (int l = 0; l < g; ++l) EXPECT_EQ(c.context(l).device(), (Device{"cuda", l}));
    collectives(c);
  }
}

TEST(DistGpu, NcclCollectivesOfAProcessPerGpu) {
  if (auto why = test::gpus_needed(1); !why.empty()) GTEST_SKIP() << why;
  if (Environment::process_count() < 2) GTEST_SKIP() << "runs under mpirun -np 2: a GPU each";
  Comm c = gpu_comm(1);
  EXPECT_EQ(c.engine(), "nccl");
  collectives(c);
}

TEST(DistGpu, RandomCollectivesAndExchangesAmongWorkOnSeveralStreams) {
  if (auto why = test::gpus_needed(1); !why.empty()) GTEST_SKIP() << why;
  if (Environment::process_count() < 2) GTEST_SKIP() << "runs under mpirun -np 2: a GPU each";
  // One rank per process: NCCL needs a thread per GPU a process drives, and this test issues
  // every local rank's part from one thread.
  // The exchanges on each path: the copy engines' (peer) and NCCL's.
  for (ExchangePath path : {ExchangePath::peer, ExchangePath::engine}) {
    Comm c = gpu_comm(1, path);
    SCOPED_TRACE(std::string(c.exchanges()) + " exchanges");
    EXPECT_EQ(c.exchanges(), path == ExchangePath::peer ? "peer" : "nccl");
    for (unsigned seed : {11u, 12u, 13u}) test::random_interleaving(c, seed);
  }
}

/// Distributed CG and TFQMR on the GPUs against la on the host (one context, the whole grid).
void solves_match_host(const Comm& c) {
  Context host(Device{"host", 0});
  const std::int64_t nz = 4 * c.size() + 3;
  for (bool assembled : {false, true}) {
    const Mat A = assembled ? Mat::stencil_csr(c, la::Stencil::d3p7, 24, 20, nz)
                            : Mat::stencil(c, la::Stencil::d3p7, 24, 20, nz);
    const la::Mat H = la::Mat::stencil(host, la::Stencil::d3p7, 24, 20, nz);
    // CG classic and single-reduction (one gather an iteration), TFQMR.
    for (auto [type, variant] : {std::pair{la::KspType::cg, la::CgVariant::classic},
                                 std::pair{la::KspType::cg, la::CgVariant::single_reduction},
                                 std::pair{la::KspType::tfqmr, la::CgVariant::classic}}) {
      la::KspOptions o{.type = type,
                       .cg_variant = variant,
                       .rtol = 1e-9,
                       .mode = la::SolveMode::sync,
                       .history = true};
      la::Vec hb(host, static_cast<std::size_t>(H.rows())), hx = hb.duplicate(),
                                                            one = hb.duplicate();
      la::set(one, 1.0);
      la::mult(H, one, hb);
      const auto want = la::Ksp(H, o).solve(hb, hx);
      std::vector<double> sync_x;
      la::KspResult sync_r;
      for (auto mode : {la::SolveMode::sync, la::SolveMode::async, la::SolveMode::graph}) {
        o.mode = mode;
        SCOPED_TRACE(std::string(la::to_string(type)) + " " + std::string(la::to_string(variant)) +
                     " " + std::string(la::to_string(mode)) + (assembled ? " csr" : " stencil") +
                     " on " + std::to_string(c.size()) + " GPUs");
        Vec b = A.create_vec(), x = A.create_vec(), ones = A.create_vec();
        set(ones, 1.0);
        mult(A, ones, b);
        Ksp ksp(A, o);
        const auto r = ksp.solve(b, x);
        EXPECT_TRUE(r.converged());
        EXPECT_LE(std::abs(r.iterations - want.iterations), 1);
        const auto xs = x.to_vector();
        for (double v : xs) ASSERT_NEAR(v, 1.0, 1e-6);
        if (mode == la::SolveMode::sync) {
          sync_x = xs;
          sync_r = r;
        } else {  // the same kernels in the same order: the same bits as sync
          EXPECT_EQ(r.iterations, sync_r.iterations);
          EXPECT_EQ(r.history, sync_r.history);
          EXPECT_EQ(xs, sync_x);
        }
      }
    }
  }
}

/// The .cu files of src/, relative to it ("la/cuda/la_kernels.cu").
std::set<std::string> kernel_files_of_the_source() {
  std::set<std::string> files;
  const std::filesystem::path src = SLUICE_SOURCE_DIR;
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    if (e.is_regular_file() && e.path().extension() == ".cu") {
      files.insert(e.path().lexically_relative(src).generic_string());
    }
  }
  return files;
}

/// After a communicator over several GPUs of this process: every function of every .cu file of
/// the module is loaded on each of `c`'s devices (the NCCL engine's preload), so no first launch
/// during a solve loads code while an NCCL kernel runs (docs/dist.md, one process driving
/// several GPUs). Every .cu file of src/ registered for it.
void expect_every_kernel_loaded(const Comm& c) {
  auto& interop = sluice::extension<sluice::detail::CudaInterop>("cuda");
  const auto want = kernel_files_of_the_source();
  for (int l = 0; l < c.local_size(); ++l) {
    const int device = c.context(l).device().index;
    SCOPED_TRACE("cuda:" + std::to_string(device));
    const auto k = interop.kernels(device, false);
    std::cout << "[ kernels  ] cuda:" << device << ": " << k.loaded << " of " << k.functions
              << " functions of " << k.files.size() << " files loaded ("
              << (k.lazy ? "lazy" : "eager") << " module loading)" << std::endl;
    EXPECT_EQ(k.failure, "");
    EXPECT_GT(k.functions, k.files.size());
    EXPECT_EQ(k.loaded, k.functions);
    std::set<std::string> got;
    for (const auto& f : k.files) {
      const auto at = f.rfind("src/");
      got.insert(at == std::string::npos ? f : f.substr(at + 4));
    }
    EXPECT_EQ(got, want) << "every .cu file of src/ registers with SLUICE_CUDA_KERNEL_FILE";
  }
}

TEST(DistGpu, OneProcessDrivingEveryGpuLoadsEveryKernelFirst) {
  if (Environment::process_count() > 1) GTEST_SKIP() << "runs alone: one process, every GPU";
  if (auto why = test::gpus_needed(2); !why.empty()) GTEST_SKIP() << why;
  expect_every_kernel_loaded(gpu_comm(test::cuda_devices()));
}

TEST(DistGpu, SolvesOnEveryGpuOfOneProcessMatchTheHost) {
  if (Environment::process_count() > 1) GTEST_SKIP() << "runs alone: one process, every GPU";
  if (auto why = test::gpus_needed(2); !why.empty()) GTEST_SKIP() << why;
  const Comm c = gpu_comm(test::cuda_devices());
  // Checked first: a kernel left to load lazily may hang the solve (the case's watchdog then
  // ends it) instead of failing here with the count.
  const char* preload = std::getenv("SLUICE_DIST_PRELOAD");
  if (preload == nullptr || std::string(preload) != "0") expect_every_kernel_loaded(c);
  solves_match_host(c);
}

TEST(DistGpu, SolvesOnAGpuPerProcessMatchTheHost) {
  if (auto why = test::gpus_needed(1); !why.empty()) GTEST_SKIP() << why;
  if (Environment::process_count() < 2) GTEST_SKIP() << "runs under mpirun -np 2: a GPU each";
  solves_match_host(gpu_comm(1));
}

}  // namespace
}  // namespace sluice::dist
