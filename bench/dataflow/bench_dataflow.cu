// GPU benchmarks of the dataflow layer (docs/dataflow.md, "Performance"): medians (and minima)
// of many runs, printed as a table and written as JSON to the path in argv[1] (if given).
//
//   submit  host cost of one command group with 0..4 accessors, in-order and out-of-order,
//           against a raw context launch of the same empty kernel (sluice::cuda::launch)
//   y       the Y pattern with kernels that each fill a part of the GPU: out-of-order vs in-order
//   matmul  the tiled matrix product (local memory, barriers) in GFLOP/s, cuBLAS SGEMM beside it
//
// Usage: sluice_bench_dataflow [JSON-PATH or -] [submit]; "submit" measures only the first.
//
// Compiled by nvcc through <sluice/dataflow_cuda.cuh>: the same kernels as examples 08 and 09,
// on the GPU.

#include "sluice/dataflow_cuda.cuh"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "dataflow/submit_profile.hpp"
#include "sluice/cuda.hpp"
#include "sluice/sluice.hpp"

namespace df = sluice::dataflow;
using df::access_mode;
using Clock = std::chrono::steady_clock;

namespace {

struct Stat {
  double median = 0, min = 0;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front()};
}
double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

__global__ void empty_kernel(int* p) {
  if (p != nullptr && threadIdx.x == 1024) *p = 0;  // never true: keeps the argument alive
}

std::string json;
void emit(const std::string& name, const std::string& fields) {
  json +=
      (json.empty() ? "" : ",\n") + std::string("  {\"name\": \"") + name + "\", " + fields + "}";
}

constexpr int kBatch = 200;  // submits per timed batch
constexpr int kBatches = 41;

/// Host microseconds per command group with `k` accessors of `mode` on separate buffers; with
/// `keep`, every event is kept (so each needs a backend event).
Stat submit_cost(df::Queue& q, std::vector<df::Buffer<int>>& bufs, int k, access_mode mode,
                 bool keep = false) {
  std::vector<double> per;
  std::vector<df::Event> kept;
  kept.reserve(kBatch);
  for (int b = 0; b < kBatches + 3; ++b) {
    kept.clear();
    const auto t = Clock::now();
    for (int i = 0; i < kBatch; ++i) {
      auto e = q.submit([&](df::Handler& h) {
        int* p[4] = {nullptr, nullptr, nullptr, nullptr};
        for (int a = 0; a < k; ++a) {
          p[a] = mode == access_mode::read
                     ? const_cast<int*>(bufs[a].get_access<access_mode::read>(h).get_pointer())
                     : bufs[a].get_access<access_mode::read_write>(h).get_pointer();
        }
        h.single_task([=] SLUICE_KERNEL() {
          if (p[0] != nullptr && p[1] == p[0]) p[0][0] = 0;  // never true
        });
      });
      if (keep) kept.push_back(std::move(e));
    }
    const double us = us_since(t) / kBatch;
    q.wait();
    if (b >= 3) per.push_back(us);  // the first batches warm pools and caches
  }
  return stat(per);
}

/// Host microseconds per call of `issue` (batches of kBatch; `drain` waits for a batch's work
/// after its timing).
template <class Issue, class Drain>
Stat per_call(Issue&& issue, Drain&& drain) {
  std::vector<double> per;
  for (int b = 0; b < kBatches + 3; ++b) {
    const auto t = Clock::now();
    for (int i = 0; i < kBatch; ++i) issue();
    const double us = us_since(t) / kBatch;
    drain();
    if (b >= 3) per.push_back(us);
  }
  return stat(per);
}

/// The in-order submit of an empty single_task taken apart: the same kernel launched by layers
/// of what a submit does, from plain CUDA up, then the submit's own phases (std::chrono around
/// each step, src/dataflow/submit_profile.hpp).
void bench_submit_layers(const sluice::Device& dev) {
  sluice::Context ctx(dev);
  auto* stream = static_cast<cudaStream_t>(sluice::cuda::stream(ctx));
  int* none = nullptr;
  auto body = [=] SLUICE_KERNEL() {
    if (none != nullptr) none[0] = 0;  // never true
  };
  using Task = df::detail::SingleTask<decltype(body)>;
  const Task task{body};
  std::printf("\nin-order submit taken apart, us per call (median / min of %d batches of %d)\n",
              kBatches, kBatch);
  auto row = [&](const char* name, const char* key, const Stat& s) {
    std::printf("  %-52s %7.2f / %7.2f\n", name, s.median, s.min);
    emit(std::string("layer_") + key,
         "\"median_us\": " + std::to_string(s.median) + ", \"min_us\": " + std::to_string(s.min));
  };
  auto sync = [&] { ctx.synchronize(); };
  row("CUDA <<<>>> of an empty kernel on the context's stream", "cuda_chevron",
      per_call([&] { empty_kernel<<<1, 1, 0, stream>>>(nullptr); }, sync));
  row("  + cudaGetLastError", "cuda_chevron_check",
      per_call(
          [&] {
            empty_kernel<<<1, 1, 0, stream>>>(nullptr);
            (void)cudaGetLastError();
          },
          sync));
  row("the dataflow's launch of the lambda kernel, on the stream", "dataflow_launch",
      per_call([&] { (void)df::detail::cuda_launch<Task>(stream, &task, 0, nullptr); }, sync));
  row("  through sluice::cuda::enqueue (a context operation)", "enqueue_dataflow_launch",
      per_call(
          [&] {
            sluice::cuda::enqueue(ctx, "layer", [&](cudaStream_t s) {
              (void)df::detail::cuda_launch<Task>(s, &task, 0, nullptr);
            });
          },
          sync));
  row("sluice::cuda::launch of the empty kernel (raw)", "raw_launch",
      per_call([&] { sluice::cuda::launch(ctx, empty_kernel, 1, 1, 0, nullptr); }, sync));
  df::Queue q(df::QueueOptions{.device = dev, .in_order = true});
  auto submit = [&] { (void)q.submit([&](df::Handler& h) { h.single_task(body); }); };
  row("in-order submit, event dropped", "submit_in_order", per_call(submit, [&] { q.wait(); }));
  // The submit's phases, summed over batches of submits.
  df::detail::set_submit_profiling(true);
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kBatch; ++i) submit();
    q.wait();
  }
  const auto p = df::detail::submit_profile();
  df::detail::set_submit_profiling(false);
  static const char* names[] = {"begin_submit",
                                "command-group function",
                                "waits",
                                "issue path (lock, number, tracker)",
                                "kernel launch",
                                "deferred point",
                                "writes, gates, Event",
                                "end_submit"};
  const double n = static_cast<double>(std::max<std::uint64_t>(1, p.submits));
  double total = 0;
  std::string fields;
  std::printf("  phases of %llu profiled submits (the clock's own reads included), us each:\n",
              static_cast<unsigned long long>(p.submits));
  for (int i = 0; i < static_cast<int>(df::detail::SubmitPhase::count); ++i) {
    const double us = static_cast<double>(p.ns[i]) / n / 1000;
    total += us;
    std::printf("    %-40s %7.3f\n", names[i], us);
    fields +=
        (fields.empty() ? "" : ", ") + std::string("\"") + names[i] + "\": " + std::to_string(us);
  }
  std::printf("    %-40s %7.3f\n", "sum", total);
  emit("submit_phases_us", fields);
}

Stat raw_launch_cost(const sluice::Context& ctx) {
  std::vector<double> per;
  for (int b = 0; b < kBatches + 3; ++b) {
    const auto t = Clock::now();
    for (int i = 0; i < kBatch; ++i) sluice::cuda::launch(ctx, empty_kernel, 1, 1, 0, nullptr);
    const double us = us_since(t) / kBatch;
    ctx.synchronize();
    if (b >= 3) per.push_back(us);
  }
  return stat(per);
}

void bench_submit(const sluice::Device& dev) {
  sluice::Context ctx(dev);
  const Stat raw = raw_launch_cost(ctx);
  std::printf("submit host cost, us per command group (median / min of %d batches of %d)\n",
              kBatches, kBatch);
  std::printf("  raw context launch                 %7.2f / %7.2f\n", raw.median, raw.min);
  emit("raw_launch",
       "\"median_us\": " + std::to_string(raw.median) + ", \"min_us\": " + std::to_string(raw.min));
  for (bool in_order : {true, false}) {
    df::Queue q(df::QueueOptions{.device = dev, .in_order = in_order});
    std::vector<df::Buffer<int>> bufs;
    for (int a = 0; a < 4; ++a) bufs.emplace_back(df::range<1>(256));
    {
      const Stat s = submit_cost(q, bufs, 0, access_mode::read, /*keep=*/true);
      std::printf("  %-12s 0, events kept           %7.2f / %7.2f   (%+.0f %% vs raw)\n",
                  in_order ? "in-order" : "out-of-order", s.median, s.min,
                  100.0 * (s.median / raw.median - 1));
      emit(std::string("submit_") + (in_order ? "in_order" : "out_of_order") + "_0_kept",
           "\"median_us\": " + std::to_string(s.median) + ", \"min_us\": " + std::to_string(s.min) +
               ", \"raw_median_us\": " + std::to_string(raw.median));
    }
    Stat zero{};
    for (access_mode mode : {access_mode::read_write, access_mode::read}) {
      for (int k = 0; k <= 4; ++k) {
        if (k == 0 && mode == access_mode::read) continue;
        const Stat s = submit_cost(q, bufs, k, mode);
        if (k == 0) zero = s;
        const char* m = mode == access_mode::read ? "read" : "read_write";
        std::printf("  %-12s %d x %-10s        %7.2f / %7.2f   (%+.0f %% vs raw%s)\n",
                    in_order ? "in-order" : "out-of-order", k, k == 0 ? "-" : m, s.median, s.min,
                    100.0 * (s.median / raw.median - 1), k == 0 ? "" : "");
        if (k > 0 && zero.median > 0) {
          std::printf("  %-12s    per accessor (vs 0)        %7.2f\n", "",
                      (s.median - zero.median) / k);
        }
        emit(std::string("submit_") + (in_order ? "in_order" : "out_of_order") + "_" +
                 std::to_string(k) + "_" + m,
             "\"median_us\": " + std::to_string(s.median) + ", \"min_us\": " +
                 std::to_string(s.min) + ", \"raw_median_us\": " + std::to_string(raw.median));
      }
    }
  }
}

/// The Y pattern with kernels of `blocks` x 256 threads that each spin through `iters` steps.
double y_pattern_ms(const sluice::Device& dev, bool in_order, std::size_t blocks, unsigned iters) {
  df::Queue q(df::QueueOptions{.device = dev, .in_order = in_order});
  const std::size_t n = blocks * 256;
  df::Buffer<float> A{df::range<1>(n)}, B{df::range<1>(n)};
  std::vector<double> ms;
  for (int rep = 0; rep < 13; ++rep) {
    q.wait();
    const auto t = Clock::now();
    auto work = [iters] SLUICE_KERNEL(float x) {
      for (unsigned i = 0; i < iters; ++i) x = x * 0.999999f + 1e-6f;
      return x;
    };
    q.submit([&](df::Handler& h) {
      auto a = A.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] = work(float(i)); });
    });
    q.submit([&](df::Handler& h) {
      auto b = B.get_access<access_mode::write>(h, df::no_init);
      h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { b[i] = work(2.f * i); });
    });
    q.submit([&](df::Handler& h) {
      auto a = A.get_access<access_mode::read_write>(h);
      auto b = B.get_access<access_mode::read>(h);
      h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] += b[i]; });
    });
    q.submit([&](df::Handler& h) {
      auto a = A.get_access<access_mode::read_write>(h);
      h.single_task([=] SLUICE_KERNEL() { a[0] /= 3; });
    });
    q.wait();
    if (rep >= 3) ms.push_back(us_since(t) / 1000);
  }
  return stat(ms).median;
}

void bench_y(const sluice::Device& dev) {
  std::printf("\nY pattern, ms (median of 10): A and B each %s\n",
              "a kernel of 32 blocks x 256 threads, ~1 ms of arithmetic");
  for (unsigned iters : {20000u, 200000u}) {
    const double io = y_pattern_ms(dev, true, 32, iters);
    const double ooo = y_pattern_ms(dev, false, 32, iters);
    std::printf("  %7u steps: in-order %8.3f   out-of-order %8.3f   speed-up %.2fx\n", iters, io,
                ooo, io / ooo);
    emit("y_pattern_" + std::to_string(iters), "\"in_order_ms\": " + std::to_string(io) +
                                                   ", \"out_of_order_ms\": " + std::to_string(ooo));
  }
}

void bench_matmul(const sluice::Device& dev, std::size_t n) {
  constexpr std::size_t tile = 16;
  df::Queue q(df::QueueOptions{.device = dev, .in_order = true});
  std::vector<float> a(n * n), b(n * n), c(n * n), ref(n * n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  df::Buffer<float, 2> A(static_cast<const float*>(a.data()), df::range<2>(n, n));
  df::Buffer<float, 2> B(static_cast<const float*>(b.data()), df::range<2>(n, n));
  df::Buffer<float, 2> C(c.data(), df::range<2>(n, n));
  auto run = [&] {
    q.submit([&](df::Handler& h) {
      auto pa = A.get_access<access_mode::read>(h);
      auto pb = B.get_access<access_mode::read>(h);
      auto pc = C.get_access<access_mode::write>(h, df::no_init);
      df::local_accessor<float, 2> ta(df::range<2>(tile, tile), h), tb(df::range<2>(tile, tile), h);
      h.parallel_for(df::nd_range<2>(df::range<2>(n, n), df::range<2>(tile, tile)),
                     [=] SLUICE_KERNEL(df::nd_item<2> it) {
                       const std::size_t i = it.get_global_id(0), j = it.get_global_id(1);
                       const std::size_t li = it.get_local_id(0), lj = it.get_local_id(1);
                       float sum = 0;
                       for (std::size_t t = 0; t < n; t += tile) {
                         ta[{li, lj}] = pa[{i, t + lj}];
                         tb[{li, lj}] = pb[{t + li, j}];
                         it.barrier();
                         for (std::size_t k = 0; k < tile; ++k) sum += ta[{li, k}] * tb[{k, lj}];
                         it.barrier();
                       }
                       pc[{i, j}] = sum;
                     });
    });
  };
  run();
  q.wait();
  std::vector<double> ms;
  for (int rep = 0; rep < 10; ++rep) {
    const auto t = Clock::now();
    run();
    q.wait();
    ms.push_back(us_since(t) / 1000);
  }
  const Stat s = stat(ms);
  const double flops = 2.0 * double(n) * n * n;
  // cuBLAS on the queue's context stream (row-major C = A B is column-major C^T = B^T A^T).
  const sluice::Context& ctx = q.contexts()[0];
  sluice::DeviceBuffer<float> da(ctx, n * n), db(ctx, n * n), dc(ctx, n * n);
  sluice::copy(ctx, da, a);
  sluice::copy(ctx, db, b);
  cublasHandle_t handle = sluice::cuda::blas_handle(ctx);
  const float one = 1, zero = 0;
  auto gemm = [&] {
    sluice::cuda::enqueue(ctx, "sgemm", [&](CUstream_st*) {
      cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &one, db.data(), int(n),
                  da.data(), int(n), &zero, dc.data(), int(n));
    });
  };
  gemm();
  ctx.synchronize();
  std::vector<double> bms;
  for (int rep = 0; rep < 10; ++rep) {
    const auto t = Clock::now();
    gemm();
    ctx.synchronize();
    bms.push_back(us_since(t) / 1000);
  }
  sluice::copy(ctx, ref, dc);
  ctx.synchronize();
  const Stat bs = stat(bms);
  double worst = 0;
  {
    df::HostAccessor<float, 2, access_mode::read> hc(C);
    for (std::size_t i = 0; i < n * n; ++i)
      worst = std::max(worst, double(std::abs(hc.data()[i] - ref[i])));
  }
  std::printf(
      "\ntiled matmul %zux%zu float, 16x16 tiles: %8.3f ms (min %8.3f) = %7.0f GFLOP/s;"
      " cuBLAS SGEMM %8.3f ms = %7.0f GFLOP/s; max |diff| %.2e\n",
      n, n, s.median, s.min, flops / s.median / 1e6, bs.median, flops / bs.median / 1e6, worst);
  emit("matmul_" + std::to_string(n),
       "\"dataflow_ms\": " + std::to_string(s.median) +
           ", \"dataflow_gflops\": " + std::to_string(flops / s.median / 1e6) +
           ", \"cublas_ms\": " + std::to_string(bs.median) +
           ", \"cublas_gflops\": " + std::to_string(flops / bs.median / 1e6) +
           ", \"max_abs_diff\": " + std::to_string(worst));
}

}  // namespace

int main(int argc, char** argv) {
  bool gpu = false;
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) gpu = true;
  }
  if (!gpu) {
    std::printf("no cuda device: nothing measured\n");
    return 0;
  }
  const sluice::Device dev{"cuda", 0};
  std::printf("%s\n", sluice::device_info(dev).name.c_str());
  // argv[2] == "submit": only the submit costs (quick, for before/after rounds).
  const bool all = argc < 3 || std::string(argv[2]) != "submit";
  bench_submit(dev);
  bench_submit_layers(dev);
  if (all) {
    bench_y(dev);
    bench_matmul(dev, 1024);
    bench_matmul(dev, 4096);
  }
  if (argc > 1 && std::string(argv[1]) != "-") {
    std::ofstream(argv[1]) << "[\n" << json << "\n]\n";
  }
  return 0;
}
