// Randomized differential test of the tracker: random programs over several contexts, many
// buffers and sub-ranges, random modes and random delays, with no manual synchronization between
// contexts. The final contents (and every host read in between) must equal sequential execution.

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "backend_param.hpp"
#include "sluice/deps.hpp"

namespace sluice::test {
namespace {

constexpr int kContexts = 4;
constexpr int kBuffers = 5;
constexpr std::size_t kBytes = 2048;

int programs(int default_count) {
  const char* env = std::getenv("SLUICE_DIFF_PROGRAMS");
  return env != nullptr ? std::atoi(env) : default_count;
}

class DifferentialTest : public BackendTest {
 protected:
  void run_program(const std::vector<Context>& ctxs, std::uint64_t seed, int ops);
};

void DifferentialTest::run_program(const std::vector<Context>& ctxs, std::uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  auto ctx_at = [&] { return ctxs[pick(ctxs.size())]; };
  std::vector<std::optional<DeviceBuffer<std::uint8_t>>> bufs(kBuffers);
  std::vector<std::vector<std::uint8_t>> shadow(kBuffers);
  auto fresh = [&](std::size_t b) {
    auto c = ctx_at();
    bufs[b].emplace(c, kBytes);
    auto v = static_cast<std::uint8_t>(rng());
    memset(c, *bufs[b], v);
    shadow[b].assign(kBytes, v);
  };
  for (std::size_t b = 0; b < kBuffers; ++b) fresh(b);
  PinnedBuffer<std::uint8_t> pinned(ctxs[0], kBytes);
  std::vector<std::uint8_t> pinned_shadow(kBytes, 0);
  {
    auto w = pinned.write();
    std::fill(w.begin(), w.end(), std::uint8_t{0});
  }

  for (int i = 0; i < ops; ++i) {
    const auto c = ctx_at();
    const std::size_t len = 1 + pick(kBytes / 2);
    const std::size_t off = pick(kBytes - len + 1);
    const std::size_t dst = pick(kBuffers);
    switch (rng() % 8) {
      case 0: {  // fill a sub-range
        auto v = static_cast<std::uint8_t>(rng());
        memset(c, bufs[dst]->span().subspan(off, len), v);
        std::memset(shadow[dst].data() + off, v, len);
        break;
      }
      case 1:
      case 2: {  // copy a sub-range from another buffer
        std::size_t src = (dst + 1 + pick(kBuffers - 1)) % kBuffers;
        const std::size_t soff = pick(kBytes - len + 1);
        copy(c, bufs[dst]->span().subspan(off, len),
             std::span<const std::uint8_t>(bufs[src]->span().subspan(soff, len)));
        std::memmove(shadow[dst].data() + off, shadow[src].data() + soff, len);
        break;
      }
      case 3: {  // a user kernel marked read_write (host backend: it runs as a host task)
        if (!is_host()) break;
        std::uint8_t* p = bufs[dst]->data() + off;
        auto us = static_cast<int>(rng() % 200);
        {
          Intent k(c, *bufs[dst], Access::read_write, "scale", {off, len});
          c.host_task([p, len, us] {
            std::this_thread::sleep_for(std::chrono::microseconds(us));
            for (std::size_t j = 0; j < len; ++j) p[j] = static_cast<std::uint8_t>(p[j] * 3 + 1);
          });
        }
        for (std::size_t j = 0; j < len; ++j) {
          shadow[dst][off + j] = static_cast<std::uint8_t>(shadow[dst][off + j] * 3 + 1);
        }
        break;
      }
      case 4: {  // a random delay, to shuffle timing between contexts
        auto us = static_cast<int>(rng() % 300);
        c.host_task([us] { std::this_thread::sleep_for(std::chrono::microseconds(us)); });
        break;
      }
      case 5: {  // read back into pinned memory and check it on the host through an accessor
        copy(c, pinned.span().subspan(off, len),
             std::span<const std::uint8_t>(bufs[dst]->span().subspan(off, len)));
        std::memcpy(pinned_shadow.data() + off, shadow[dst].data() + off, len);
        auto r = pinned.read();
        for (std::size_t j = off; j < off + len; ++j) {
          ASSERT_EQ(r[j], pinned_shadow[j]) << "host read of byte " << j << " at op " << i;
        }
        break;
      }
      case 6: {  // upload from pinned memory
        copy(c, bufs[dst]->span().subspan(off, len),
             std::span<const std::uint8_t>(pinned.span().subspan(off, len)));
        std::memcpy(shadow[dst].data() + off, pinned_shadow.data() + off, len);
        break;
      }
      default: {  // destroy a buffer while work may still use it, and make a new one
        fresh(dst);
        break;
      }
    }
  }
  std::vector<std::vector<std::uint8_t>> back(kBuffers, std::vector<std::uint8_t>(kBytes));
  for (std::size_t b = 0; b < kBuffers; ++b) copy(ctx_at(), back[b], *bufs[b]);
  for (const auto& c : ctxs) c.synchronize();
  for (std::size_t b = 0; b < kBuffers; ++b) {
    ASSERT_EQ(back[b], shadow[b]) << "buffer " << b << " differs from sequential execution";
  }
}

TEST_P(DifferentialTest, RandomProgramsMatchSequentialExecution) {
  std::vector<Context> ctxs;
  for (int i = 0; i < kContexts; ++i) ctxs.push_back(make_context());
  const std::uint64_t base = std::random_device{}();
  const int count = programs(is_host() ? 1000 : 300);
  for (int p = 0; p < count; ++p) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(p);
    SCOPED_TRACE("program seed " + std::to_string(seed) +
                 " (rerun one with SLUICE_DIFF_PROGRAMS=1 after fixing the seed)");
    run_program(ctxs, seed, 40);
    if (HasFatalFailure()) return;
  }
  const auto f = deps::footprint();
  EXPECT_LT(f.objects, 64u) << "objects of destroyed buffers are still tracked";
}

SLUICE_INSTANTIATE_BACKENDS(DifferentialTest);

}  // namespace
}  // namespace sluice::test
