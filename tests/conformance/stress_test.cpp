// Randomized stress: many contexts, random copies and fills ordered by wait_for, random delays;
// the final contents must equal a sequential execution of the same program.

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "backend_param.hpp"

namespace sluice::test {
namespace {

class StressTest : public BackendTest {};

struct Program {
  static constexpr int kContexts = 4;
  static constexpr int kBuffers = 6;
  static constexpr std::size_t kBytes = 4096;
};

void run_program(const std::vector<Context>& ctxs, std::uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const auto& any = ctxs[0];
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  std::vector<std::vector<std::uint8_t>> shadow;
  std::vector<std::size_t> last(Program::kBuffers, 0);  // context that last touched each buffer
  for (int b = 0; b < Program::kBuffers; ++b) {
    bufs.emplace_back(any, Program::kBytes);
    shadow.emplace_back(Program::kBytes, std::uint8_t(b));
    memset(any, bufs.back(), b);
  }
  for (auto& c : ctxs) c.wait_for(any);

  for (int i = 0; i < ops; ++i) {
    const std::size_t c = pick(ctxs.size());
    const auto& ctx = ctxs[c];
    const std::size_t len = 1 + pick(Program::kBytes);
    const std::size_t dst_off = pick(Program::kBytes - len + 1);
    const std::size_t dst = pick(Program::kBuffers);
    switch (rng() % 4) {
      case 0: {  // fill
        auto v = static_cast<std::uint8_t>(rng());
        ctx.wait_for(ctxs[last[dst]]);
        memset(ctx, bufs[dst].span().subspan(dst_off, len), v);
        std::memset(shadow[dst].data() + dst_off, v, len);
        last[dst] = c;
        break;
      }
      case 1:
      case 2: {  // copy from another buffer
        std::size_t src = pick(Program::kBuffers);
        if (src == dst) src = (src + 1) % Program::kBuffers;
        const std::size_t src_off = pick(Program::kBytes - len + 1);
        ctx.wait_for(ctxs[last[dst]]);
        ctx.wait_for(ctxs[last[src]]);
        copy(ctx, bufs[dst].span().subspan(dst_off, len),
             std::span<const std::uint8_t>(bufs[src].span().subspan(src_off, len)));
        std::memcpy(shadow[dst].data() + dst_off, shadow[src].data() + src_off, len);
        last[dst] = c;
        last[src] = c;  // the reader must finish before a later writer on another context
        break;
      }
      default: {  // a random delay on the host, to shuffle timing between contexts
        auto us = static_cast<int>(rng() % 300);
        ctx.host_task([us] { std::this_thread::sleep_for(std::chrono::microseconds(us)); });
        break;
      }
    }
  }
  std::vector<std::vector<std::uint8_t>> back(Program::kBuffers,
                                               std::vector<std::uint8_t>(Program::kBytes));
  for (int b = 0; b < Program::kBuffers; ++b) {
    any.wait_for(ctxs[last[static_cast<std::size_t>(b)]]);
    copy(any, back[static_cast<std::size_t>(b)], bufs[static_cast<std::size_t>(b)]);
  }
  any.synchronize();
  for (int b = 0; b < Program::kBuffers; ++b) {
    ASSERT_EQ(back[static_cast<std::size_t>(b)], shadow[static_cast<std::size_t>(b)])
        << "buffer " << b << " differs from sequential execution; seed " << seed;
  }
  for (auto& c : ctxs) c.wait_for(any);  // buffers die on `any`; order the others before it
}

TEST_P(StressTest, RandomProgramsMatchSequentialExecution) {
  std::vector<Context> ctxs;
  for (int i = 0; i < Program::kContexts; ++i) ctxs.push_back(make_context());
  const std::uint64_t base = std::random_device{}();
  for (std::uint64_t p = 0; p < 60; ++p) {
    SCOPED_TRACE("program seed " + std::to_string(base + p));
    run_program(ctxs, base + p, 80);
    if (HasFatalFailure()) return;
  }
  for (auto& c : ctxs) c.synchronize();
}

TEST_P(StressTest, ManyShortLivedContexts) {
  constexpr std::size_t n = 1024;
  std::vector<int> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<int>(i);
  for (int round = 0; round < 50; ++round) {
    auto a = make_context();
    auto b = make_context();
    DeviceBuffer<int> d(a, n);
    copy(a, d, src);
    b.wait_for(a);
    std::vector<int> back(n);
    copy(b, back, d);
    a.wait_for(b);  // d is freed on a
    b.synchronize();
    ASSERT_EQ(back, src) << "round " << round;
  }
}

SLUICE_INSTANTIATE_BACKENDS(StressTest);

}  // namespace
}  // namespace sluice::test
