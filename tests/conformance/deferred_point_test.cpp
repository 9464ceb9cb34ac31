// Deferred points of a context (src/core/context_impl.hpp): an event recorded for an operation
// only if someone still holds its point when the next operation is issued, exactly at the
// operation's end; and records with no operation between them sharing one backend event.

#include <memory>

#include "backend_param.hpp"
#include "core/context_impl.hpp"

namespace sluice::test {
namespace {

class DeferredPointTest : public BackendTest {};

/// Issues a host task writing `*flag = value` on `ctx` and defers `p` to its end.
void issue_with_point(const Context& ctx, int* flag, int value,
                      const std::shared_ptr<detail::DeferredPoint>& p) {
  auto& c = ctx.impl();
  c.failures()->set_may_fail();
  c.enqueue("set", std::source_location::current(), [&](Stream& s, const OpInfo& op) {
    s.host_task([flag, value] { *flag = value; }, op);
    EXPECT_TRUE(c.defer_point(p, op.seq));
  });
}

TEST_P(DeferredPointTest, AHeldPointGetsTheEventOfItsOperation) {
  auto ctx = make_context();
  int flag = 0;
  auto p = std::make_shared<detail::DeferredPoint>();
  issue_with_point(ctx, &flag, 1, p);
  const auto seq = p->seq;
  EXPECT_EQ(seq, ctx.impl().issued());
  ctx.host_task([] {});  // the next operation: p's event is recorded before it
  Gate gate(device());
  gate.block(ctx);
  auto e = ctx.impl().point_event(*p, std::source_location::current());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->seq, seq);
  e->synchronize();  // an event recorded now would wait for the gate: never returns
  EXPECT_EQ(flag, 1);
  EXPECT_FALSE(ctx.idle());
  gate.open();
  ctx.synchronize();
}

TEST_P(DeferredPointTest, APointAskedForAtTheEndIsRecordedThen) {
  auto ctx = make_context();
  int flag = 0;
  auto p = std::make_shared<detail::DeferredPoint>();
  issue_with_point(ctx, &flag, 2, p);
  auto e = ctx.impl().point_event(*p, std::source_location::current());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->seq, p->seq);
  // Shared with a record made with no operation between.
  EXPECT_EQ(ctx.impl().record(false, std::source_location::current()), e);
  e->synchronize();
  EXPECT_EQ(flag, 2);
}

TEST_P(DeferredPointTest, RecordsShareAnEventUntilTheNextOperation) {
  auto ctx = make_context();
  auto& c = ctx.impl();
  const auto loc = std::source_location::current();
  auto a = c.record(false, loc);
  EXPECT_EQ(c.record(false, loc), a);
  EXPECT_NE(c.record(true, loc), a);  // timing events are never shared
  int flag = 0;
  ctx.host_task([&] { flag = 3; });
  auto b = c.record(false, loc);
  EXPECT_NE(b, a);
  EXPECT_EQ(b->seq, c.issued());
  b->synchronize();
  EXPECT_EQ(flag, 3);
}

TEST_P(DeferredPointTest, ADroppedPointCostsNoEventAndIsReused) {
  auto ctx = make_context();
  int flag = 0;
  auto p = std::make_shared<detail::DeferredPoint>();
  issue_with_point(ctx, &flag, 4, p);
  std::weak_ptr<detail::DeferredPoint> watch = p;
  p.reset();                 // only the context holds it now
  ctx.host_task([] {});      // the next operation lets it go, without recording an event
  auto kept = watch.lock();  // kept for reuse
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->event, nullptr);
  kept.reset();
  std::shared_ptr<detail::DeferredPoint> reused;
  ctx.impl().enqueue("set", std::source_location::current(), [&](Stream& s, const OpInfo& op) {
    s.host_task([&flag] { flag = 5; }, op);
    reused = ctx.impl().spare_point();
    EXPECT_TRUE(ctx.impl().defer_point(reused, op.seq));
  });
  EXPECT_EQ(reused, watch.lock());
  ctx.synchronize();
  EXPECT_EQ(flag, 5);
}

}  // namespace

SLUICE_INSTANTIATE_BACKENDS(DeferredPointTest);

}  // namespace sluice::test
