// The dependency tracker: ordering from marked intent, byte ranges, elided waits, deferred
// release, host accessors, debug mode.

#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>

#include "backend_param.hpp"
#include "sluice/deps.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class TrackerTest : public BackendTest {};

TEST_P(TrackerTest, WriteThenReadAcrossContextsIsOrdered) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 1 << 18;
  std::vector<int> src(n), back(n, 0);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<int>(i * 7);
  DeviceBuffer<int> d(a, n);
  Gate open(device());
  open.block(a);
  copy(a, d, src);     // write on a, held back by the gate
  copy(b, back, d);    // read on b: must wait for a's write
  open.open();
  b.synchronize();
  EXPECT_EQ(back, src);
}

TEST_P(TrackerTest, ReadThenWriteAcrossContextsIsOrdered) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 4096;
  std::vector<int> ones(n, 1), back(n, 0);
  DeviceBuffer<int> d(a, n);
  copy(a, d, ones);
  a.synchronize();
  Gate open(device());
  open.block(a);
  copy(a, back, d);  // read on a, held back
  memset(b, d, 0);   // write on b: must not overtake the read
  open.open();
  b.synchronize();
  a.synchronize();
  EXPECT_EQ(back, ones);
}

TEST_P(TrackerTest, WriteThenWriteAcrossContextsIsOrdered) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 4096;
  std::vector<std::uint8_t> back(n, 0);
  DeviceBuffer<std::uint8_t> d(a, n);
  Gate open(device());
  open.block(a);
  memset(a, d, 1);
  memset(b, d, 2);  // issued later: its value must win
  open.open();
  copy(a, back, d);
  a.synchronize();
  EXPECT_EQ(back, std::vector<std::uint8_t>(n, 2));
}

TEST_P(TrackerTest, DisjointRangesOfOneBufferDoNotSerialize) {
  auto a = make_context();
  auto b = make_context();
  DeviceBuffer<float> x(a, 1024);
  a.synchronize();
  Rendezvous r(a, 2);
  {
    Intent lo(a, x, Access::write, "lower half", x.elements(0, 512));
    r.arrive(a, 0);
  }
  {
    Intent hi(b, x, Access::write, "upper half", x.elements(512, 512));
    r.arrive(b, 1);
  }
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(r.all_met()) << "writes to disjoint halves were serialized";
}

TEST_P(TrackerTest, ConcurrentReadersDoNotSerialize) {
  auto a = make_context();
  auto b = make_context();
  DeviceBuffer<float> x(a, 1024);
  memset(a, x, 0);
  a.synchronize();
  Rendezvous r(a, 2);
  {
    Intent ra(a, x, Access::read, "reader a");
    r.arrive(a, 0);
  }
  {
    Intent rb(b, x, Access::read, "reader b");
    r.arrive(b, 1);
  }
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(r.all_met()) << "two reads of the same bytes were serialized";
}

TEST_P(TrackerTest, OverlappingRangesDoSerialize) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 1000;
  DeviceBuffer<std::uint8_t> d(a, n);
  memset(a, d, 0);
  Gate open(device());
  open.block(a);
  memset(a, d.span().subspan(0, 600), 1);
  memset(b, d.span().subspan(500, 500), 2);  // overlaps [500, 600): must come after
  open.open();
  std::vector<std::uint8_t> back(n);
  copy(b, back, d);
  b.synchronize();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], i < 500 ? 1 : 2) << i;
}

TEST_P(TrackerTest, SameContextNeedsNoWaitsOrEvents) {
  auto a = make_context();
  DeviceBuffer<int> x(a, 256), y(a, 256);
  const auto before = deps::stats();
  for (int i = 0; i < 100; ++i) {
    memset(a, x, i);
    copy(a, y, x);
  }
  a.synchronize();
  const auto after = deps::stats();
  EXPECT_EQ(after.waits_issued, before.waits_issued);
  EXPECT_EQ(after.events_recorded, before.events_recorded);
  EXPECT_GE(after.marks - before.marks, 300u);
}

TEST_P(TrackerTest, ImpliedWaitsAreElided) {
  auto a = make_context();
  auto b = make_context();
  DeviceBuffer<int> x(a, 256), y(a, 256), out(b, 256);
  Gate open(device());
  open.block(a);
  memset(a, x, 1);
  memset(a, y, 2);
  const auto before = deps::stats();
  copy(b, out, y);  // waits for a up to the write of y
  copy(b, out, x);  // the write of x came earlier on a: already implied
  const auto after = deps::stats();
  open.open();
  b.synchronize();
  EXPECT_EQ(after.waits_issued - before.waits_issued, 1u);
  EXPECT_GE(after.waits_elided - before.waits_elided, 1u);
}

TEST_P(TrackerTest, FinishedReadersArePruned) {
  std::vector<Context> ctxs;
  for (int i = 0; i < 4; ++i) ctxs.push_back(make_context());
  DeviceBuffer<int> x(ctxs[0], 1024);
  memset(ctxs[0], x, 0);
  std::vector<int> back(16);
  for (int round = 0; round < 200; ++round) {
    for (std::size_t c = 0; c < ctxs.size(); ++c) {
      copy(ctxs[c], std::span(back).subspan(0, 16),
           std::span<const int>(x.span().subspan(static_cast<std::size_t>(round % 64) * 16, 16)));
      ctxs[c].synchronize();
    }
  }
  auto f = deps::footprint();
  // 64 distinct ranges were read; finished readers are dropped, so each keeps at most a few.
  EXPECT_LT(f.records, 600u) << "reader records grow without bound";
}

TEST_P(TrackerTest, DestroyedBufferIsReleasedOnlyAfterOtherContextsUsedIt) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 1 << 16;
  std::vector<int> src(n, 9), back(n, 0);
  Gate open(device());
  {
    DeviceBuffer<int> d(a, n);
    copy(a, d, src);
    open.block(b);
    copy(b, back, d);  // b still reads d when d is destroyed
  }
  // Reuse pressure on a: if d's memory went back to the pool now, this would overwrite it.
  for (int i = 0; i < 4; ++i) {
    DeviceBuffer<int> e(a, n);
    memset(a, e, 0);
  }
  a.synchronize();
  open.open();
  b.synchronize();
  EXPECT_EQ(back, src);
}

TEST_P(TrackerTest, HostReadAccessorWaitsOnlyForTheProducer) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 1024;
  PinnedBuffer<int> p(a, n);
  DeviceBuffer<int> d(a, n);
  std::vector<int> src(n, 5);
  copy(a, d, src);
  copy(a, p, d);  // producer of p
  Gate open(device());
  open.block(b);  // unrelated work that never finishes before the read
  {
    auto r = p.read();
    EXPECT_EQ(r[0], 5);
    EXPECT_EQ(r[n - 1], 5);
  }
  open.open();
  b.synchronize();
}

TEST_P(TrackerTest, HostReadAccessorDoesNotWaitForOtherReaders) {
  auto a = make_context();
  constexpr std::size_t n = 1024;
  PinnedBuffer<int> p(a, n);
  {
    auto w = p.write();
    for (auto& v : w) v = 3;
  }
  DeviceBuffer<int> d(a, n);
  Gate open(device());
  open.block(a);
  copy(a, d, p);  // a device reader of p, held back
  {
    auto r = p.read();  // must not wait for the device reader
    EXPECT_EQ(r[7], 3);
    EXPECT_FALSE(a.idle());
  }
  open.open();
  a.synchronize();
}

TEST_P(TrackerTest, HostWriteAccessorWaitsForReaders) {
  auto a = make_context();
  constexpr std::size_t n = 1024;
  PinnedBuffer<int> p(a, n);
  {
    auto w = p.write();
    for (auto& v : w) v = 1;
  }
  DeviceBuffer<int> d(a, n);
  Gate gate(device());
  std::atomic<bool> opened{false};
  gate.block(a);
  copy(a, d, p);
  std::thread opener([&] {
    std::this_thread::sleep_for(20ms);
    opened = true;
    gate.open();
  });
  {
    auto w = p.write();  // waits until the device copy read p
    EXPECT_TRUE(opened.load());
    for (auto& v : w) v = 2;
  }
  opener.join();
  std::vector<int> back(n);
  copy(a, back, d);
  a.synchronize();
  EXPECT_EQ(back, std::vector<int>(n, 1));
}

TEST_P(TrackerTest, DeviceWorkConflictingWithAHostAccessorIsRefused) {
  auto a = make_context();
  PinnedBuffer<int> p(a, 16);
  DeviceBuffer<int> d(a, 16);
  memset(a, d, 0);
  auto r = p.read();
  EXPECT_NO_THROW(copy(a, d, p));  // reading alongside a host reader is fine
  try {
    copy(a, p, d);
    FAIL() << "a device write under a host read accessor was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state);
    EXPECT_NE(std::string(e.what()).find("accessor"), std::string::npos) << e.what();
  }
}

TEST_P(TrackerTest, UserRegisteredMemoryIsOrdered) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 4096;
  DeviceBuffer<std::uint8_t> storage(a, n);  // stands in for memory from another library
  a.synchronize();
  // Mark on a separate id (not the buffer's own), as a library with its own allocator would.
  const ObjectId id = new_object_id();
  Gate open(device());
  std::vector<std::uint8_t> back(n);
  open.block(a);
  {
    Intent w(a, id, Access::write, "producer");
    memset(a, storage, 7);
  }
  {
    Intent r(b, id, Access::read, "consumer");
    copy(b, back, storage);
  }
  open.open();
  b.synchronize();
  EXPECT_EQ(back, std::vector<std::uint8_t>(n, 7));
}

TEST_P(TrackerTest, RegisterMemoryRejectsBadInput) {
  std::vector<double> host(100);
  const ObjectId id = register_memory(host.data(), {MemoryType::host, 800, alignof(double)});
  auto found = find_memory(host.data() + 50);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->base, host.data());
  EXPECT_THROW(register_memory(host.data() + 10, {MemoryType::host, 8, 1}), Error);
  EXPECT_THROW(register_memory(nullptr, {MemoryType::host, 8, 1}), Error);
  auto ctx = make_context();
  EXPECT_THROW(mark_intent_begin(ctx, id, Access::read, "too far", {700, 200}), Error);
  unregister_memory(id);
  EXPECT_FALSE(find_memory(host.data()).has_value());
  EXPECT_THROW(mark_intent_begin(ctx, id, Access::read, "gone"), Error);
}

TEST_P(TrackerTest, DebugModeRecordsTheGraphAndCatchesUnguardedHostAccess) {
  deps::set_debug(true);
  deps::clear_graph();
  auto a = make_context();
  auto b = make_context();
  PinnedBuffer<int> p(a, 64);
  DeviceBuffer<int> d(a, 64);
  memset(a, d, 0);
  Gate open(device());
  open.block(b);
  copy(b, p, d);  // queued work on b writes p
  try {
    (void)p[3];
    ADD_FAILURE() << "unguarded host access to a buffer being written was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state);
    EXPECT_NE(std::string(e.what()).find("accessor"), std::string::npos) << e.what();
  }
  open.open();
  b.synchronize();
  EXPECT_NO_THROW((void)p[3]);
  std::ostringstream dot;
  deps::write_dot(dot);
  deps::set_debug(false);
  const std::string g = dot.str();
  EXPECT_NE(g.find("digraph"), std::string::npos);
  EXPECT_NE(g.find("memset"), std::string::npos) << g;
  EXPECT_NE(g.find("copy"), std::string::npos) << g;
  EXPECT_NE(g.find("->"), std::string::npos) << "the cross-context edge is missing:\n" << g;
  deps::clear_graph();
}

TEST_P(TrackerTest, DebugModeAllowsHostTasksOrderedAfterTheWriter) {
  deps::set_debug(true);
  auto a = make_context();
  PinnedBuffer<int> p(a, 8);
  DeviceBuffer<int> d(a, 8);
  memset(a, d, 0);
  copy(a, p, d);
  int seen = -1;
  a.host_task([&] { seen = p[0]; });  // ordered after the copy on the same context: allowed
  EXPECT_NO_THROW(a.synchronize());
  deps::set_debug(false);
  EXPECT_EQ(seen, 0);
}

SLUICE_INSTANTIATE_BACKENDS(TrackerTest);

}  // namespace
}  // namespace sluice::test
