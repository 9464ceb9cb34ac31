// Observers and the Chrome trace (sluice/observe.hpp): every operation of every context passes
// the hook with its name, number and line; waits between contexts are reported; the trace file
// is valid JSON with a row per context, a timed slice per operation and arrows for waits.

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/deps.hpp"
#include "sluice/observe.hpp"

namespace sluice::test {
namespace {

class Recorder final : public Observer {
 public:
  struct Op {
    std::uint64_t timeline, seq;
    std::string what, file;
    bool ended = false, timed = false;
  };
  void issue_begin(const OpEvent& op) override {
    std::lock_guard lock(mutex);
    ops.push_back({op.timeline, op.seq, std::string(op.what), op.where.file_name()});
  }
  void issue_end(const OpEvent& op, const OpSpan* span) override {
    std::lock_guard lock(mutex);
    for (auto& o : ops) {
      if (o.timeline == op.timeline && o.seq == op.seq) {
        o.ended = true;
        o.timed = span != nullptr && span->start && span->end;
      }
    }
  }
  void wait(const WaitEvent& w) override {
    std::lock_guard lock(mutex);
    waits.push_back(w);
  }
  std::mutex mutex;
  std::vector<Op> ops;
  std::vector<WaitEvent> waits;
};

class ObserveTest : public BackendTest {};

TEST_P(ObserveTest, SeesEveryOperationWithItsNameNumberAndLine) {
  auto rec = std::make_shared<Recorder>();
  auto ctx = make_context();
  PinnedBuffer<int> host(device(), 64);
  DeviceBuffer<int> dev(ctx, 64);
  add_observer(rec);
  copy(ctx, dev, host);
  ctx.host_task([] {}, "my task");
  copy(ctx, host, dev);
  remove_observer(rec.get());
  ctx.host_task([] {}, "after removal");
  ctx.synchronize();
  std::vector<std::string> names;
  for (const auto& o : rec->ops) {
    if (o.timeline != ctx.id()) continue;
    names.push_back(o.what);
    EXPECT_TRUE(o.ended);
    EXPECT_FALSE(o.timed) << "no observer asked for timing";
    EXPECT_NE(o.file.find("observe_test.cpp"), std::string::npos) << o.what << " at " << o.file;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"copy", "my task", "copy"}));
  for (std::size_t i = 1; i < rec->ops.size(); ++i) {
    if (rec->ops[i].timeline == rec->ops[i - 1].timeline) {
      EXPECT_GT(rec->ops[i].seq, rec->ops[i - 1].seq);
    }
  }
}

TEST_P(ObserveTest, ReportsTheWaitsTheTrackerIssues) {
  auto rec = std::make_shared<Recorder>();
  auto a = make_context();
  auto b = make_context();
  DeviceBuffer<int> x(a, 16);
  PinnedBuffer<int> out(device(), 16);
  add_observer(rec);
  {
    Intent w(a, x, Access::write, "slow write");
    a.host_task([] {}, "write x");
  }
  copy(b, out, x);  // b waits for a's write
  remove_observer(rec.get());
  b.synchronize();
  a.synchronize();
  std::uint64_t write_seq = 0;
  for (const auto& o : rec->ops) {
    if (o.timeline == a.id() && o.what == "write x") write_seq = o.seq;
  }
  ASSERT_NE(write_seq, 0u);
  bool found = false;
  for (const auto& w : rec->waits) {
    if (w.timeline == b.id() && w.waited_timeline == a.id()) {
      EXPECT_GE(w.waited_seq, write_seq);
      found = true;
    }
  }
  EXPECT_TRUE(found) << "the wait of b for a's write was not reported";
}

TEST_P(ObserveTest, TraceFileHasARowPerContextTimedSlicesAndArrows) {
  const std::string path = ::testing::TempDir() + "sluice_trace_" + GetParam() + ".json";
  std::size_t written = 0;
  {
    auto a = make_context();
    auto b = make_context();
    PinnedBuffer<int> host(device(), 256);
    DeviceBuffer<int> x(a, 256);
    trace::start(path);
    EXPECT_TRUE(trace::active());
    for (int i = 0; i < 3; ++i) {
      copy(a, x, host);
      copy(b, host, x);  // waits for a's copy: an arrow
    }
    b.synchronize();
    written = trace::stop();
    EXPECT_FALSE(trace::active());
  }
  EXPECT_GE(written, 6u);
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const auto j = nlohmann::json::parse(in);
  int rows = 0, slices = 0, starts = 0, ends = 0;
  for (const auto& e : j.at("traceEvents")) {
    const auto ph = e.at("ph").get<std::string>();
    if (ph == "M") ++rows;
    if (ph == "X") {
      ++slices;
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_TRUE(e.at("args").at("timed").get<bool>()) << e.dump();
      EXPECT_NE(e.at("args").at("where").get<std::string>().find("observe_test.cpp"),
                std::string::npos);
    }
    if (ph == "s") ++starts;
    if (ph == "f") ++ends;
  }
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(static_cast<std::size_t>(slices), written);
  EXPECT_GE(starts, 1);
  EXPECT_EQ(starts, ends);
  std::remove(path.c_str());
}

TEST(Observe, StoppingWithoutATraceWritesNothing) {
  EXPECT_FALSE(trace::active());
  EXPECT_EQ(trace::stop(), 0u);
}

TEST(Observe, AnUnwritablePathIsAClearError) {
  trace::start("/nonexistent-dir/trace.json");
  try {
    (void)trace::stop();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("writable"), std::string::npos) << e.what();
  }
}

SLUICE_INSTANTIATE_BACKENDS(ObserveTest);

}  // namespace
}  // namespace sluice::test
