// Error messages a newcomer reads (issue 23, defect 8): a tracked buffer is named by its kind,
// size and where it was made (not "object 5"), "sluice:" opens a message once even when one
// error wraps another, and a host kernel whose add_host<...> types differ from the TypedKernel's
// names both lists.

#include <gtest/gtest.h>

#include <string>

#include "sluice/graph.hpp"
#include "sluice/kernel.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

std::string here(int line) {
  return std::string("messages_test.cpp:") + std::to_string(line);
}

TEST(Messages, DestroyedBufferIsNamedByKindSizeAndOrigin) {
  Context ctx(Device{"host", 0});
  Graph g("uses y");
  int line = 0;
  {
    line = __LINE__ + 1;
    DeviceBuffer<std::uint8_t> y(ctx, 64);
    g.add_memset(y.data(), 0, 64, {.name = "zero y", .uses = {writes(y)}});
    GraphExec exec(g, ctx.device());
    exec.launch(ctx);
    ctx.synchronize();
  }
  try {
    GraphExec exec(g, ctx.device());
    FAIL() << "a graph over a destroyed buffer was instantiated";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device buffer of 64 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find(here(line)), std::string::npos) << m;
    EXPECT_NE(m.find("destroyed"), std::string::npos) << m;
    EXPECT_EQ(count(m, "sluice:"), 1u) << m;
  }
}

TEST(Messages, HostAccessorConflictNamesTheBuffer) {
  Context ctx(Device{"host", 0});
  const int line = __LINE__ + 1;
  PinnedBuffer<int> p(ctx, 16);
  DeviceBuffer<int> d(ctx, 16);
  auto r = p.read();
  try {
    copy(ctx, p, d);  // writes p while the host reads it
    FAIL() << "a write under a host accessor was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pinned host buffer of 64 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find(here(line)), std::string::npos) << m;
    EXPECT_EQ(m.find("object "), std::string::npos) << m;
  }
}

TEST(Messages, NestedErrorsSaySluiceOnce) {
  const Error inner(Errc::invalid_argument, "inner problem");
  const Error outer(Errc::invalid_state, std::string("outer context: ") + inner.what());
  EXPECT_EQ(std::string(outer.what()), "sluice: outer context: inner problem");
}

TEST(Messages, MismatchedHostKernelTypesAreNamed) {
  const Device host{"host", 0};
  KernelSpec spec("scale", 2);
  spec.add_host<float, float*>([](std::size_t, float, float*) {});
  try {
    TypedKernel<float, int*> k(host, spec);
    FAIL() << "mismatched host kernel types were accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("<float, float*>"), std::string::npos) << m;
    EXPECT_NE(m.find("<float, int*>"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace sluice::test
