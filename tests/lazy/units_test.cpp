// A generated module's chunks (src/lazy/units.hpp), which the cuda backend compiles apart: every
// unit in exactly one chunk, in order, after the prelude; small sources stay whole.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lazy/units.hpp"

namespace sluice::test {
namespace {

namespace D = sluice::lazy::detail;

/// A source of `n` units after a prelude, and its kernels' names.
std::pair<std::string, std::vector<std::string>> units_source(int n) {
  std::string s = "// prelude\nstruct P {};\n";
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back("sl_k" + std::to_string(i));
    s += std::string(sluice::lazy_unit_mark) + names.back() + "\nvoid " + names.back() +
         "() { /* unit " + std::to_string(i) + " */ }\n";
  }
  return {s, names};
}

TEST(LazyUnits, EveryUnitLiesInOneChunkInOrderAfterThePrelude) {
  for (int n : {6, 7, 11, 24, 25, 44, 100}) {
    SCOPED_TRACE("units " + std::to_string(n));
    const auto [source, names] = units_source(n);
    const auto chunks = D::module_chunks(source, names);
    ASSERT_EQ(chunks.size(), std::min<std::size_t>(8, static_cast<std::size_t>(n) / 3));
    std::vector<std::string> found;
    std::size_t least = names.size(), most = 0;
    for (const auto& c : chunks) {
      EXPECT_EQ(c.source.rfind("// prelude\nstruct P {};\n", 0), 0u);
      least = std::min(least, c.names.size());
      most = std::max(most, c.names.size());
      for (const auto& name : c.names) {
        found.push_back(name);
        // The unit's whole text is in its chunk, and no other unit's.
        const std::string body = name + "() { /* unit ";
        EXPECT_NE(c.source.find(body), std::string::npos);
      }
      std::size_t bodies = 0;
      for (std::size_t at = c.source.find("() { /* unit "); at != std::string::npos;
           at = c.source.find("() { /* unit ", at + 1)) {
        ++bodies;
      }
      EXPECT_EQ(bodies, c.names.size());
    }
    EXPECT_EQ(found, names);
    EXPECT_LE(most - least, 1u);
    EXPECT_GE(least, 3u);
  }
}

TEST(LazyUnits, SmallSourcesAndSourcesWithoutUnitsStayWhole) {
  for (int n : {1, 2, 5}) {
    const auto [source, names] = units_source(n);
    const auto chunks = D::module_chunks(source, names);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].source, source);
    EXPECT_EQ(chunks[0].names, names);
  }
  const std::string plain = "extern \"C\" __global__ void k() {}\n";
  const auto chunks = D::module_chunks(plain, {"k"});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].source, plain);
  EXPECT_EQ(chunks[0].names, std::vector<std::string>{"k"});
  // The chunking is the source's alone: the same chunks on every call (disk cache keys).
  const auto [source, names] = units_source(30);
  const auto a = D::module_chunks(source, names), b = D::module_chunks(source, names);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].source, b[i].source);
}

}  // namespace
}  // namespace sluice::test
