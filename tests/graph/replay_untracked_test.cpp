// Replays of a one-context body record it without the tracker's marks (the launch is the one
// tracked operation, ordered by the union of the body's accesses). These tests check that the
// replay stays ordered against other contexts working on the same memory, that a context joining
// the body makes the rest of the capture tracked again, and that the capture guards still hold.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backend_param.hpp"
#include "sluice/deps.hpp"
#include "sluice/graph.hpp"

namespace sluice::test {
namespace {

constexpr int kBuffers = 4;
constexpr std::size_t kBytes = 512;

struct Op {
  int kind;  // 0 memset, 1 copy
  int src, dst;
  std::size_t off, off2, len;
  int value;
};

std::vector<Op> random_ops(std::mt19937_64& rng, int count) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  std::vector<Op> ops;
  for (int i = 0; i < count; ++i) {
    Op o{};
    o.kind = static_cast<int>(pick(2));
    o.src = static_cast<int>(pick(kBuffers));
    o.dst = static_cast<int>((o.src + 1 + pick(kBuffers - 1)) % kBuffers);
    o.len = 1 + pick(kBytes / 2);
    o.off = pick(kBytes - o.len + 1);
    o.off2 = pick(kBytes - o.len + 1);
    o.value = static_cast<int>(pick(256));
    ops.push_back(o);
  }
  return ops;
}

using Bufs = std::vector<DeviceBuffer<std::uint8_t>>;
using Host = std::vector<std::vector<std::uint8_t>>;

void issue(const Context& c, const Op& o, Bufs& bufs) {
  if (o.kind == 0) {
    memset(c, bufs[o.dst].span().subspan(o.off, o.len), o.value);
  } else {
    copy(c, bufs[o.dst].span().subspan(o.off2, o.len), bufs[o.src].span().subspan(o.off, o.len));
  }
}

void simulate(const Op& o, Host& h) {
  if (o.kind == 0) {
    std::fill_n(h[o.dst].begin() + static_cast<std::ptrdiff_t>(o.off), o.len,
                static_cast<std::uint8_t>(o.value));
  } else {
    std::copy_n(h[o.src].begin() + static_cast<std::ptrdiff_t>(o.off), o.len,
                h[o.dst].begin() + static_cast<std::ptrdiff_t>(o.off2));
  }
}

class ReplayUntrackedTest : public BackendTest {
 protected:
  Host contents(const Context& ctx, Bufs& bufs) const {
    Host out;
    for (auto& b : bufs) {
      out.emplace_back(kBytes);
      copy(ctx, out.back(), b);
    }
    ctx.synchronize();
    return out;
  }
};

TEST_P(ReplayUntrackedTest, ReplaysInterleavedWithOtherContextsMatchSequential) {
  // A body of copies and memsets on ctx a, replayed (every run: the update path) while contexts
  // b and c write and read the same buffers before and after each replay without waiting: issue
  // order must hold, as a sequential run on the host gives it. Every third run a joins b into
  // the body (b writes a buffer the body wrote, then a waits for b): that part is tracked again.
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 rng(seed);
    auto a = make_context();
    auto b = make_context();
    auto c = make_context();
    Bufs bufs;
    Host expected(kBuffers, std::vector<std::uint8_t>(kBytes));
    for (int i = 0; i < kBuffers; ++i) {
      bufs.emplace_back(a, kBytes);
      for (auto& v : expected[i]) v = static_cast<std::uint8_t>(rng());
      copy(a, bufs.back(), expected[i]);
    }
    a.synchronize();
    const auto body = random_ops(rng, 20);
    const Op joined{0, 0, body.back().dst, 0, 0, kBytes / 3, 77};
    Replay replay(ReplayOptions{.eager_when_cheaper = false});
    for (int round = 0; round < 9; ++round) {
      // Values change every other round: updates in place, then unchanged launches.
      const int shift = round / 2;
      auto shifted = body;
      for (auto& o : shifted) o.value = (o.value + shift) % 256;
      const bool join = round % 3 == 2;
      for (const auto& o : random_ops(rng, 3)) {
        issue(rng() % 2 ? b : c, o, bufs);
        simulate(o, expected);
      }
      replay.run(a, "body", [&] {
        for (const auto& o : shifted) issue(a, o, bufs);
        if (join) {
          issue(b, joined, bufs);  // conflicts with the body's writes: b joins the capture
          a.wait_for(b);
        }
      });
      for (const auto& o : shifted) simulate(o, expected);
      if (join) simulate(joined, expected);
      for (const auto& o : random_ops(rng, 3)) {
        issue(rng() % 2 ? b : c, o, bufs);
        simulate(o, expected);
      }
    }
    ASSERT_EQ(contents(a, bufs), expected) << "seed " << seed;
  }
}

TEST_P(ReplayUntrackedTest, AnUnchangedReplayMarksOnlyItsLaunch) {
  // The capture of a replayed one-context body leaves no marks: the launch marks the union of
  // the accesses (here one per buffer), not one per operation.
  auto ctx = make_context();
  Bufs bufs;
  for (int i = 0; i < kBuffers; ++i) bufs.emplace_back(ctx, kBytes);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  auto body = [&] {
    for (int k = 0; k < 10; ++k) {
      for (auto& buf : bufs) memset(ctx, buf, k);
    }
  };
  replay.run(ctx, "body", body);  // first run: tracked capture, instantiation
  replay.run(ctx, "body", body);
  const auto before = deps::stats().marks;
  replay.run(ctx, "body", body);
  const auto marks = deps::stats().marks - before;
  EXPECT_LE(marks, static_cast<std::uint64_t>(kBuffers)) << "40 operations recorded";
  auto got = contents(ctx, bufs);
  for (const auto& h : got) EXPECT_EQ(h, std::vector<std::uint8_t>(kBytes, 9));
}

TEST_P(ReplayUntrackedTest, AHostReadOfCapturedWorkIsStillRefused) {
  // The guard of a host read inside the body: without marks, the capture still refuses it and
  // the replay runs the body eagerly (with the right result).
  auto a = make_context();
  DeviceBuffer<std::uint8_t> src(a, 64);
  PinnedBuffer<std::uint8_t> out(a, 64);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  std::vector<ReplayEvent::Kind> events;
  replay.on_event([&](const ReplayEvent& e) { events.push_back(e.kind); });
  for (int i = 0; i < 4; ++i) {
    std::uint8_t seen = 0;
    replay.run(a, "read inside", [&] {
      memset(a, src, i);
      copy(a, out, src);
      if (i == 3) seen = out.read()[0];
    });
    a.synchronize();
    EXPECT_EQ(out.read()[63], i);
    if (i == 3) {
      EXPECT_EQ(seen, 3);
    }
  }
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), ReplayEvent::Kind::eager);
}

TEST_P(ReplayUntrackedTest, ABufferDestroyedInTheBodyOfAnotherContextIsKeptForTheLaunch) {
  // A temporary made on another context and released inside the body, used only by the body's
  // operations (no marks): the capture adopts it, so the launch never uses freed memory.
  auto a = make_context();
  auto b = make_context();
  DeviceBuffer<std::uint8_t> out(a, 256);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  for (int i = 1; i <= 4; ++i) {
    replay.run(a, "temporary", [&] {
      DeviceBuffer<std::uint8_t> tmp(b, 256);
      memset(a, tmp, i);
      copy(a, out, tmp);
    });
    std::vector<std::uint8_t> host(256);
    copy(a, host, out);
    a.synchronize();
    EXPECT_EQ(host[0], i);
    EXPECT_EQ(host[255], i);
  }
}

SLUICE_INSTANTIATE_BACKENDS(ReplayUntrackedTest);

}  // namespace
}  // namespace sluice::test
