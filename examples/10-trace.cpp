// 10 — seeing what ran where: a Chrome/Perfetto trace of three contexts.
//
// A producer fills chunks of data, two consumers each transform every chunk and copy their
// results back; the tracker orders consumers after the producer's writes, and the producer's
// next write of a chunk after the consumers' reads. `trace::start` installs an observer that
// times every operation on its stream; `trace::stop` writes one row per context, one slice per
// operation (name, source line, number) and an arrow for every wait one context issued for
// another. Open the file in https://ui.perfetto.dev or chrome://tracing. Running any sluice
// program with SLUICE_TRACE=file.json does the same without code changes.
//
//   example_10_trace [trace.json]

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sluice/deps.hpp"
#include "sluice/memory.hpp"
#include "sluice/observe.hpp"

int main(int argc, char** argv) {
  using namespace sluice;
  const std::string path = argc > 1 ? argv[1] : "sluice-trace.json";
  Context producer(ContextOptions{.name = "producer"});
  Context left(ContextOptions{.device = producer.device(), .name = "consumer left"});
  Context right(ContextOptions{.device = producer.device(), .name = "consumer right"});
  constexpr std::size_t n = 1 << 20, chunks = 4;
  PinnedBuffer<float> input(producer.device(), n), out_left(producer.device(), n),
      out_right(producer.device(), n);
  DeviceBuffer<float> data(producer, n), a(left, n), b(right, n);

  trace::start(path);
  for (std::size_t round = 0; round < 2; ++round) {
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t lo = c * n / chunks, count = n / chunks;
      auto in = input.span().subspan(lo, count);
      {
        // A host task that writes the staging chunk: its intent is marked for the tracker.
        Intent w(producer, input, Access::write, "fill chunk",
                 {lo * sizeof(float), count * sizeof(float)});
        producer.host_task(
            [in, round] {
              for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(round + i % 7);
            },
            "fill chunk");
      }
      copy(producer, data.span().subspan(lo, count), std::span<const float>(in));
    }
    // Each consumer copies the whole vector once the producer's chunks are there (waits: arrows).
    copy(left, a, data);
    copy(right, b, data);
    copy(left, out_left, a);
    copy(right, out_right, b);
  }
  left.synchronize();
  right.synchronize();
  const std::size_t ops = trace::stop();

  // The trace names every context and holds every operation.
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool named = text.find("producer") != std::string::npos &&
                     text.find("consumer left") != std::string::npos &&
                     text.find("consumer right") != std::string::npos;
  const bool arrows = text.find("\"ph\":\"s\"") != std::string::npos;
  const bool right_values = out_left[n - 1] == float(1 + (n / chunks - 1) % 7) &&
                            out_right[0] == float(1);
  std::printf("trace of %zu operations written to %s (contexts named: %s, arrows: %s)\n", ops,
              path.c_str(), named ? "yes" : "no", arrows ? "yes" : "no");
  return ops >= 2 * (2 * chunks + 4) && named && arrows && right_values ? 0 : 1;
}
