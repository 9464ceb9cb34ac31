// A replay compares each operation with its previous recording as it is recorded, and launches
// the executable as it is when the whole body matched (docs/graph.md, "Replay"). These tests
// make a body look unchanged while it is not — a value, an address, a size, the kind of an
// operation, one operation fewer or more, two swapped, a buffer made anew (possibly at the same
// address, or registered anew there), an intent around an operation, a wait for another context,
// another context joining — and check every run against the same program issued eagerly, that
// graph::stats() counts a run as unchanged exactly when its body recorded what the last one did,
// and that unchanged replays stay ordered against other contexts and host accessors.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/deps.hpp"
#include "sluice/graph.hpp"

namespace sluice::test {
namespace {

constexpr int kBuffers = 4;
constexpr std::size_t kBytes = 512;

enum class Kind { memset, copy, fill };  // a fill is a captured operation: never matched

struct Op {
  Kind kind = Kind::memset;
  int dst = 0, src = 0;
  std::size_t off = 0, off2 = 0, len = 1;  // off: destination, off2: source
  int value = 0;
  bool operator==(const Op&) const = default;
};

std::size_t pick(std::mt19937_64& rng, std::size_t n) {
  return static_cast<std::size_t>(rng() % n);
}

/// A copy whose source and destination overlap is made a memset (copies never overlap).
void keep_valid(Op& o) {
  if (o.kind == Kind::copy && o.dst == o.src && o.off < o.off2 + o.len && o.off2 < o.off + o.len) {
    o.kind = Kind::memset;
  }
}

/// A random operation; a fill (which makes the rest of the body record anew) only if `fills`.
Op random_op(std::mt19937_64& rng, bool fills) {
  Op o;
  const auto k = pick(rng, 20);
  o.kind = k < 9 ? Kind::memset : k < 18 || !fills ? Kind::copy : Kind::fill;
  o.dst = static_cast<int>(pick(rng, kBuffers));
  o.src = static_cast<int>(pick(rng, kBuffers));  // the same buffer too: two uses of one object
  o.len = 1 + pick(rng, kBytes / 2);
  o.off = pick(rng, kBytes - o.len + 1);
  o.off2 = pick(rng, kBytes - o.len + 1);
  o.value = static_cast<int>(pick(rng, 256));
  keep_valid(o);
  return o;
}

using Bufs = std::vector<DeviceBuffer<std::uint8_t>>;

void issue(const Context& c, Bufs& bufs, const Op& o) {
  auto d = bufs[static_cast<std::size_t>(o.dst)].span().subspan(o.off, o.len);
  switch (o.kind) {
    case Kind::memset:
      memset(c, d, o.value);
      break;
    case Kind::copy:
      copy(c, d, bufs[static_cast<std::size_t>(o.src)].span().subspan(o.off2, o.len));
      break;
    case Kind::fill:
      fill(c, d, static_cast<std::uint8_t>(o.value));
      break;
  }
}

/// One run of a program: the body's operations on the replaying context, and what else the
/// body does (another context's work inside it, eager or joined; an intent around one operation).
struct Program {
  std::vector<Op> body;
  int intent_at = -1;  // the operation issued inside an Intent (a write of Side::marked)
  bool other_first = false;
  Op other_op;              // issued eagerly on the other context as the body starts (not recorded)
  bool waits = false;       // the replaying context waits for the other one as the body starts
  int join_at = -1;         // the other context joins the capture before this operation
  Op joined_op;             // ... and issues this there, then is joined back
  std::vector<int> epochs;  // per buffer: made anew this many times
};

/// What a run's body does, for a failure's message.
std::string describe(const Program& r) {
  std::string s = "body:";
  for (const auto& o : r.body) {
    s += o.kind == Kind::memset ? " memset" : o.kind == Kind::copy ? " copy" : " fill";
  }
  s += "; intent_at " + std::to_string(r.intent_at) + ", other_first " +
       std::to_string(r.other_first) + ", waits " + std::to_string(r.waits) + ", join_at " +
       std::to_string(r.join_at);
  return s;
}

/// Whether two runs record the same graph (what the replay must count as unchanged): the same
/// operations on the same buffers (not made anew between them), intents at the same places,
/// and no joined context in either.
bool records_same(const Program& a, const Program& b) {
  // A wait for a point outside the capture is part of its graph (new each run).
  if (a.join_at >= 0 || b.join_at >= 0 || a.waits || b.waits || a.body != b.body ||
      a.intent_at != b.intent_at) {
    return false;
  }
  auto same_buffer = [&](int k) {
    return a.epochs[static_cast<std::size_t>(k)] == b.epochs[static_cast<std::size_t>(k)];
  };
  for (const auto& o : a.body) {
    if (o.kind == Kind::fill) return false;
    if (!same_buffer(o.dst) || (o.kind == Kind::copy && !same_buffer(o.src))) return false;
  }
  return true;
}

/// A replaying context with the other context that works on its buffers, or the same pair
/// issuing the program eagerly (the reference).
struct Side {
  Context ctx, other;
  Bufs bufs;
  DeviceBuffer<std::uint8_t> seen;  // what the other context read after each run
  // What an Intent marks: only the replaying context uses it, so the intent never waits (a
  // wait for another context's work would make the recording wait for a point outside it).
  DeviceBuffer<std::uint8_t> marked;

  void body(const Program& r) {
    if (r.other_first) issue(other, bufs, r.other_op);
    if (r.waits) ctx.wait_for(other);
    for (std::size_t i = 0; i < r.body.size(); ++i) {
      if (static_cast<int>(i) == r.join_at) {
        other.wait_for(ctx);  // joins the capture
        issue(other, bufs, r.joined_op);
        ctx.wait_for(other);  // and is joined back
      }
      const auto& o = r.body[i];
      if (static_cast<int>(i) == r.intent_at) {
        Intent intent(ctx, marked, Access::write, "intent");
        issue(ctx, bufs, o);
      } else {
        issue(ctx, bufs, o);
      }
    }
  }
  /// Buffer k made anew with its contents (the old one released in stream order).
  void remake(int k) {
    DeviceBuffer<std::uint8_t> fresh(ctx, kBytes);
    copy(ctx, fresh, bufs[static_cast<std::size_t>(k)]);
    bufs[static_cast<std::size_t>(k)] = std::move(fresh);
  }
};

class ReplayMatchTest : public BackendTest {
 protected:
  Side make_side(std::uint64_t seed) const {
    Side s{make_context(), make_context(), {}, {}, {}};
    std::mt19937_64 rng(seed);
    std::vector<std::vector<std::uint8_t>> init(kBuffers, std::vector<std::uint8_t>(kBytes));
    for (auto& b : init) {
      for (auto& x : b) x = static_cast<std::uint8_t>(rng());
      s.bufs.emplace_back(s.ctx, kBytes);
      copy(s.ctx, s.bufs.back(), b);  // from pageable memory: kept until the synchronize
    }
    s.seen = DeviceBuffer<std::uint8_t>(s.other, kBytes);
    s.marked = DeviceBuffer<std::uint8_t>(s.ctx, kBytes);
    s.ctx.synchronize();
    return s;
  }

  /// Changes `r` by one mutation of kind `m` (some may leave it as it was: counted by
  /// records_same, not assumed).
  static void mutate(Program& r, int m, std::mt19937_64& rng, bool fills, Side& replayed,
                     Side& eager) {
    auto& body = r.body;
    const auto i = pick(rng, body.size());
    auto& o = body[i];
    switch (m) {
      case 1:  // a value
        o.kind = o.kind == Kind::copy ? Kind::memset : o.kind;
        o.value = (o.value + 1 + static_cast<int>(pick(rng, 255))) % 256;
        break;
      case 2:  // an address: another offset, or another buffer
        if (rng() % 2 == 0) {
          o.off = (o.off + 1 + pick(rng, kBytes - o.len)) % (kBytes - o.len + 1);
        } else {
          o.dst = (o.dst + 1) % kBuffers;
        }
        break;
      case 3:  // a size
        o.len = o.len > 1 ? o.len - 1 : 2;
        o.off = std::min(o.off, kBytes - o.len);
        o.off2 = std::min(o.off2, kBytes - o.len);
        break;
      case 4:  // the kind of operation, on the same bytes
        o.kind = o.kind == Kind::memset ? Kind::copy : Kind::memset;
        break;
      case 5:  // one operation fewer at the end: every operation recorded matches
        if (body.size() > 1) body.pop_back();
        break;
      case 6:  // one more
        body.push_back(random_op(rng, fills));
        break;
      case 7:  // one fewer in the middle
        if (body.size() > 1) body.erase(body.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 8:  // two swapped
        std::swap(o, body[pick(rng, body.size())]);
        break;
      case 9: {  // a buffer made anew (its memory may come back at the same address)
        const int k = static_cast<int>(pick(rng, kBuffers));
        replayed.remake(k);
        eager.remake(k);
        ++r.epochs[static_cast<std::size_t>(k)];
        break;
      }
      case 10:  // an intent around one operation
        r.intent_at = r.intent_at < 0 ? static_cast<int>(i) : -1;
        break;
      case 11:  // the other context writes, eagerly, at the start of the body
        r.other_first = !r.other_first;
        r.other_op = random_op(rng, fills);
        if (r.other_op.kind == Kind::fill) r.other_op.kind = Kind::memset;
        break;
      case 12:  // the other context joins the capture
        r.join_at = r.join_at < 0 ? static_cast<int>(i) : -1;
        r.joined_op = random_op(rng, fills);
        break;
      case 13:  // the replaying context waits for the other one
        r.waits = !r.waits;
        break;
      default:
        break;
    }
    if (m >= 1 && m <= 4) keep_valid(o);  // (after 6 or 7 `o` may no longer be an element)
    if (r.intent_at >= static_cast<int>(body.size())) r.intent_at = -1;
    if (r.join_at >= static_cast<int>(body.size())) r.join_at = -1;
  }

  static void expect_same(Side& replayed, Side& eager, const std::string& where) {
    for (int b = 0; b < kBuffers; ++b) {
      const auto got = to_vector(replayed.ctx, replayed.bufs[static_cast<std::size_t>(b)]);
      const auto want = to_vector(eager.ctx, eager.bufs[static_cast<std::size_t>(b)]);
      ASSERT_EQ(got, want) << where << ": buffer " << b;
    }
    ASSERT_EQ(to_vector(replayed.other, replayed.seen), to_vector(eager.other, eager.seen))
        << where << ": what the other context read after the run";
  }
};

TEST_P(ReplayMatchTest, RandomMutationsMatchEagerIssueAndAreNeverCountedUnchanged) {
  const char* env = std::getenv("SLUICE_REPLAY_MATCH_PROGRAMS");
  const int programs = env != nullptr ? std::atoi(env) : under_host_sanitizer() ? 4 : 16;
  constexpr int kRuns = 14;
  std::uint64_t total_unchanged = 0;
  for (int p = 1; p <= programs; ++p) {
    const auto seed = static_cast<std::uint64_t>(p) * 104729u;
    std::mt19937_64 rng(seed);
    const bool fills = p % 3 == 0;  // most bodies are all copies and memsets (matched whole)
    Side replayed = make_side(seed);
    Side eager = make_side(seed);
    Replay replay(ReplayOptions{.eager_when_cheaper = false});  // every run replays
    replay.on_event([&](const ReplayEvent& e) {
      EXPECT_NE(e.kind, ReplayEvent::Kind::eager) << "program " << p << ": " << e.reason;
    });
    Program run;
    run.epochs.assign(kBuffers, 0);
    const int nops = 8 + static_cast<int>(pick(rng, 25));
    for (int i = 0; i < nops; ++i) run.body.push_back(random_op(rng, fills));
    Program last;
    bool joined_before_last = false;  // the run before `last` had a context join
    const auto start = graph::stats();
    std::uint64_t unchanged = 0;
    for (int r = 0; r < kRuns; ++r) {
      const std::string where = "program " + std::to_string(p) + " (seed " + std::to_string(seed) +
                                ") run " + std::to_string(r);
      // Half the runs keep the body; the others change it one way.
      if (r > 0 && rng() % 2 == 0) {
        mutate(run, 1 + static_cast<int>(pick(rng, 13)), rng, fills, replayed, eager);
      }
      // Counted unchanged exactly when the body records what the last run did, once that run
      // was recorded untracked (a tracked recording, the first or one after a joined context,
      // may have waited for another context: a wait its graph keeps, so the next run records
      // anew).
      const bool same = r > 0 && records_same(last, run);
      const bool last_untracked = r > 1 && !joined_before_last;
      // Another context writes a buffer of the body before the run, held back by a gate until
      // the replay is issued: the replay's launch must wait for it.
      Op before;
      before.dst = static_cast<int>(pick(rng, kBuffers));
      before.len = kBytes;
      before.value = static_cast<int>(pick(rng, 256));
      const int read_back = static_cast<int>(pick(rng, kBuffers));
      {
        Gate gate(device());
        gate.block(replayed.other);
        // Nothing here may wait for the gate: a call that held the host this long is named.
        auto held = [&, t = std::chrono::steady_clock::now()](const char* what) mutable {
          const auto now = std::chrono::steady_clock::now();
          if (now - t > std::chrono::seconds(20)) {
            ADD_FAILURE() << where << ": " << what << " held the host behind the gate ("
                          << describe(run) << ", counted before: " << graph::stats().unchanged
                          << " unchanged, " << graph::stats().updates << " updates, "
                          << graph::stats().reinstantiations << " re-instantiations)";
          }
          t = now;
        };
        issue(replayed.other, replayed.bufs, before);
        held("the other context's write");
        const auto s0 = graph::stats();
        replay.run(replayed.ctx, "body", [&] { replayed.body(run); });
        held("the replay");
        const auto s1 = graph::stats();
        const auto counted = s1.unchanged - s0.unchanged;
        if (!same) {
          EXPECT_EQ(counted, 0u) << where << ": counted unchanged, but its body differs";
        } else if (last_untracked) {
          EXPECT_EQ(counted, 1u) << where << ": the same body was not counted unchanged";
        }
        unchanged += counted;
        // ... and reads what the replay wrote.
        copy(replayed.other, replayed.seen, replayed.bufs[static_cast<std::size_t>(read_back)]);
        held("the read-back copy");
        gate.open();
      }
      issue(eager.other, eager.bufs, before);
      eager.body(run);
      copy(eager.other, eager.seen, eager.bufs[static_cast<std::size_t>(read_back)]);
      expect_same(replayed, eager, where);
      if (HasFatalFailure()) return;
      joined_before_last = last.join_at >= 0;
      last = run;
    }
    const auto end = graph::stats();
    EXPECT_EQ(end.unchanged - start.unchanged, unchanged);
    // Every run after the first is exactly one of: unchanged, updated, re-instantiated.
    EXPECT_EQ(end.unchanged - start.unchanged + end.updates - start.updates + end.reinstantiations -
                  start.reinstantiations,
              static_cast<std::uint64_t>(kRuns - 1))
        << "program " << p;
    EXPECT_EQ(end.eager_fallbacks, start.eager_fallbacks) << "program " << p;
    total_unchanged += unchanged;
  }
  EXPECT_GT(total_unchanged, 0u) << "no run replayed an unchanged body: the test tests nothing";
}

/// Each kind of run, counted: the first instantiates; the same body launches unchanged (no
/// update); a value changes (an update); the same again (unchanged); the last operation dropped
/// (every recorded operation matches, yet a re-instantiation); another context replays it.
TEST_P(ReplayMatchTest, CountsEachKindOfRun) {
  Context ctx = make_context();
  Bufs bufs;
  for (int i = 0; i < 6; ++i) bufs.emplace_back(ctx, 64);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  std::vector<ReplayEvent> events;
  replay.on_event([&](const ReplayEvent& e) { events.push_back(e); });
  auto run = [&](const Context& c, int value, std::size_t ops) {
    const auto before = graph::stats();
    replay.run(c, "memsets", [&] {
      for (std::size_t i = 0; i < ops; ++i) memset(c, bufs[i], value + static_cast<int>(i));
      copy(c, bufs[ops], bufs[0]);
    });
    for (std::size_t i = 0; i < ops; ++i) {
      EXPECT_EQ(to_vector(c, bufs[i]),
                std::vector<std::uint8_t>(64, static_cast<std::uint8_t>(value + i)));
    }
    EXPECT_EQ(to_vector(c, bufs[ops]), std::vector<std::uint8_t>(64, value));
    const auto after = graph::stats();
    return std::vector<std::uint64_t>{
        after.instantiations - before.instantiations, after.unchanged - before.unchanged,
        after.updates - before.updates, after.reinstantiations - before.reinstantiations};
  };
  using V = std::vector<std::uint64_t>;  // instantiations, unchanged, updates, reinstantiations
  EXPECT_EQ(run(ctx, 1, 5), (V{1, 0, 0, 0}));
  EXPECT_EQ(run(ctx, 1, 5), (V{0, 1, 0, 0}));
  EXPECT_EQ(run(ctx, 2, 5), (V{0, 0, 1, 0}));
  EXPECT_EQ(run(ctx, 2, 5), (V{0, 1, 0, 0}));
  EXPECT_EQ(run(ctx, 2, 4), (V{1, 0, 0, 1}));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NE(events[1].reason.find("node 4 'copy': kind copy instead of memset"), std::string::npos)
      << events[1].reason;
  EXPECT_EQ(run(ctx, 2, 4), (V{0, 1, 0, 0}));
  Context another = make_context();
  another.wait_for(ctx);
  EXPECT_EQ(run(another, 2, 4), (V{1, 0, 0, 1}));  // its nodes name another context
  ASSERT_EQ(events.size(), 3u);
  EXPECT_NE(events[2].reason.find("context '" + another.name() + "'"), std::string::npos)
      << events[2].reason;
}

/// The same addresses but another object: the region unregistered and registered again (a new
/// id). Reusing the recording would launch with the old id's accesses (an Error: destroyed); the
/// replay must see new uses and update.
TEST_P(ReplayMatchTest, MemoryRegisteredAnewAtTheSameAddressIsAnotherBody) {
  Context ctx = make_context();
  DeviceBuffer<std::uint8_t> a(ctx, 256), b(ctx, 256);
  const std::span<std::uint8_t> pa(a.data(), 256), pb(b.data(), 256);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  auto body = [&] {
    memset(ctx, pa, 4);
    copy(ctx, pb, pa);
  };
  replay.run(ctx, "raw", body);
  const auto before = graph::stats();
  replay.run(ctx, "raw", body);
  EXPECT_EQ(graph::stats().unchanged - before.unchanged, 1u);
  ctx.synchronize();
  const auto found = find_memory(pa.data());
  ASSERT_TRUE(found.has_value());
  unregister_memory(found->id);
  const ObjectId again = register_memory(pa.data(), found->attributes);
  EXPECT_NE(again, found->id);
  memset(ctx, pb, 0);
  const auto s0 = graph::stats();
  replay.run(ctx, "raw", body);
  const auto s1 = graph::stats();
  EXPECT_EQ(s1.unchanged - s0.unchanged, 0u);
  EXPECT_EQ(s1.updates - s0.updates + s1.reinstantiations - s0.reinstantiations, 1u);
  EXPECT_EQ(to_vector(ctx, pb), std::vector<std::uint8_t>(256, 4));
  replay.run(ctx, "raw", body);  // with the new id: unchanged again
  EXPECT_EQ(graph::stats().unchanged - s1.unchanged, 1u);
  ctx.synchronize();
  unregister_memory(again);  // `a` releases its memory; its own id is gone already
}

/// An unchanged replay's launch is one tracked operation: it waits for another context's write
/// of what the body reads, and another context's read of what it writes waits for it (each
/// held back by a gate, so unordered work would run first and be seen).
TEST_P(ReplayMatchTest, AnUnchangedReplayIsOrderedAgainstOtherContexts) {
  Context ctx = make_context();
  Context other = make_context();
  DeviceBuffer<std::uint8_t> in(ctx, 4096), out(ctx, 4096), seen(other, 4096);
  memset(ctx, in, 1);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  auto body = [&] { copy(ctx, out, in); };
  replay.run(ctx, "copy", body);
  replay.run(ctx, "copy", body);
  {
    Gate gate(device());
    gate.block(other);
    memset(other, in, 7);  // held back
    const auto before = graph::stats();
    replay.run(ctx, "copy", body);
    EXPECT_EQ(graph::stats().unchanged - before.unchanged, 1u);
    gate.open();
  }
  EXPECT_EQ(to_vector(ctx, out), std::vector<std::uint8_t>(4096, 7));
  {
    Gate gate(device());
    gate.block(ctx);
    memset(ctx, in, 9);  // held back, as is the replay after it
    replay.run(ctx, "copy", body);
    copy(other, seen, out);  // must wait for the replay
    gate.open();
  }
  EXPECT_EQ(to_vector(other, seen), std::vector<std::uint8_t>(4096, 9));
}

/// A host accessor alive on memory an unchanged body writes refuses it, as it refuses the body
/// recorded anew or issued eagerly; once it is gone the body replays unchanged.
TEST_P(ReplayMatchTest, AHostAccessorRefusesAnUnchangedBody) {
  Context ctx = make_context();
  DeviceBuffer<std::uint8_t> x(ctx, 128);
  PinnedBuffer<std::uint8_t> h(ctx, 128);
  memset(ctx, x, 3);
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  auto body = [&] { copy(ctx, h, x); };
  replay.run(ctx, "to host", body);
  replay.run(ctx, "to host", body);
  ctx.synchronize();
  {
    auto view = h.read();
    EXPECT_THROW(replay.run(ctx, "to host", body), Error);
  }
  const auto before = graph::stats();
  replay.run(ctx, "to host", body);
  EXPECT_EQ(graph::stats().unchanged - before.unchanged, 1u);
  ctx.synchronize();
  auto view = h.read();
  EXPECT_EQ(std::vector<std::uint8_t>(view.begin(), view.end()), std::vector<std::uint8_t>(128, 3));
}

SLUICE_INSTANTIATE_BACKENDS(ReplayMatchTest);

}  // namespace
}  // namespace sluice::test
