// The one merge rule of AccessList (src/deps/access_list.hpp), which every layer's operations
// go through on their way to the tracker.

#include "deps/access_list.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sluice/error.hpp"

namespace {

using sluice::Access;
using sluice::ByteRange;
using sluice::Use;
using sluice::detail::AccessList;

std::vector<Use> uses(const AccessList& a) {
  return {a.uses().begin(), a.uses().end()};
}

TEST(AccessList, OneObjectInTwoRolesIsOneReadWrite) {
  AccessList a;
  a.read(7).write(7);
  ASSERT_EQ(a.uses().size(), 1u);
  EXPECT_EQ(a.uses()[0].mode, Access::read_write);
  EXPECT_EQ(a.uses()[0].range.size, ByteRange::whole().size);
}

TEST(AccessList, SameModeTwiceStaysThatMode) {
  AccessList a;
  a.read(3).read(3);
  ASSERT_EQ(a.uses().size(), 1u);
  EXPECT_EQ(a.uses()[0].mode, Access::read);
}

TEST(AccessList, EmptyObjectsAreLeftOut) {
  AccessList a;
  a.read(0).write(0);
  EXPECT_TRUE(a.empty());
}

TEST(AccessList, OverlappingRangesMergeIntoTheirHull) {
  AccessList a;
  a.read(1, {0, 100}).write(1, {50, 100});
  ASSERT_EQ(a.uses().size(), 1u);
  EXPECT_EQ(a.uses()[0].range.offset, 0u);
  EXPECT_EQ(a.uses()[0].range.size, 150u);
  EXPECT_EQ(a.uses()[0].mode, Access::read_write);
}

TEST(AccessList, TouchingRangesMerge) {
  AccessList a;
  a.write(1, {0, 8}).write(1, {8, 8});
  ASSERT_EQ(a.uses().size(), 1u);
  EXPECT_EQ(a.uses()[0].range.size, 16u);
  EXPECT_EQ(a.uses()[0].mode, Access::write);
}

TEST(AccessList, TouchingRangesOfDifferentModesStayApart) {
  // An exchange writes ghost values right beside the values it sends: reading those values on
  // another context must not wait for it, so the write must not cover them.
  AccessList a;
  a.write(1, {0, 8}).read(1, {8, 8});
  auto u = uses(a);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].mode, Access::write);
  EXPECT_EQ(u[0].range.size, 8u);
  EXPECT_EQ(u[1].mode, Access::read);
  EXPECT_EQ(u[1].range.offset, 8u);
  a.read(1, {0, 4});  // overlaps the write: merged with it
  u = uses(a);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].mode, Access::read_write);
}

TEST(AccessList, DisjointRangesOfOneObjectStayApart) {
  AccessList a;
  a.read(1, {0, 8}).write(1, {100, 8}).read(2);
  auto u = uses(a);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].mode, Access::read);
  EXPECT_EQ(u[1].mode, Access::write);
}

TEST(AccessList, AWiderRangeFoldsInTheAccessesItNowReaches) {
  AccessList a;
  a.read(1, {0, 10}).read(1, {20, 10}).read(2).write(1, {40, 10});
  ASSERT_EQ(a.uses().size(), 4u);
  a.write(1, {5, 40});  // reaches all three ranges of object 1
  auto u = uses(a);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].id, 1u);
  EXPECT_EQ(u[0].range.offset, 0u);
  EXPECT_EQ(u[0].range.size, 50u);
  EXPECT_EQ(u[0].mode, Access::read_write);
  EXPECT_EQ(u[1].id, 2u);
}

TEST(AccessList, AWholeObjectAccessAbsorbsRanges) {
  AccessList a;
  a.write(1, {16, 8}).read(1);
  ASSERT_EQ(a.uses().size(), 1u);
  EXPECT_EQ(a.uses()[0].range.offset, 0u);
  EXPECT_EQ(a.uses()[0].range.size, ByteRange::whole().size);
  EXPECT_EQ(a.uses()[0].mode, Access::read_write);
}

TEST(AccessList, ManyAccessesSpillAndStillMerge) {
  AccessList a;
  for (sluice::ObjectId id = 1; id <= 40; ++id) a.read(id);
  for (sluice::ObjectId id = 1; id <= 40; ++id) a.write(id);
  auto u = uses(a);
  ASSERT_EQ(u.size(), 40u);
  for (std::size_t i = 0; i < u.size(); ++i) {
    EXPECT_EQ(u[i].id, i + 1);
    EXPECT_EQ(u[i].mode, Access::read_write);
  }
}

struct FakeBuffer {
  double* p;
  sluice::ObjectId id;
  [[nodiscard]] double* data() const { return p; }
  [[nodiscard]] sluice::ObjectId object_id() const { return id; }
};

TEST(AccessList, MarkingABufferReturnsThePointerTheWorkMayUse) {
  double storage[4] = {};
  FakeBuffer b{storage, 9};
  AccessList a;
  const double* in = a.read(b);
  double* out = a.write(b);
  EXPECT_EQ(in, storage);
  EXPECT_EQ(out, storage);
  ASSERT_EQ(a.uses().size(), 1u);
  EXPECT_EQ(a.uses()[0].mode, Access::read_write);
}

TEST(AccessList, AtMostTwoAccessesByPointer) {
  int x = 0, y = 0, z = 0;
  AccessList a;
  a.raw(&x, 4, Access::write).raw(&y, 4, Access::read);
  EXPECT_EQ(a.raw_uses().size(), 2u);
  EXPECT_THROW(a.raw(&z, 4, Access::read), sluice::Error);
  a.raw(nullptr, 4, Access::read);  // nothing to resolve: ignored
  a.raw(&z, 0, Access::read);
  EXPECT_EQ(a.raw_uses().size(), 2u);
}

}  // namespace
