// When the small la kernels take a block by default, and the small TFQMR kernel's switch
// (src/la/cuda/small_rule.hpp), checked on the host: the size rule TFQMR shares with CG, each
// word of SLUICE_CUDA_TF_SMALL, and a clear Error for a word it does not know or a contradiction.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "la/cuda/small_rule.hpp"
#include "sluice/error.hpp"

namespace sluice::test {
namespace {

using namespace detail::cuda::small_steps;  // NOLINT
using detail::LaStencilKind;

const OpInfo kOp{0, "test", std::source_location::current()};

constexpr LaStencilKind kKinds[] = {LaStencilKind::d2p5, LaStencilKind::d2p9, LaStencilKind::d3p7,
                                    LaStencilKind::d3p27};

TEST(SmallRuleTest, AutoTakesTheSizesTheCgRuleTakes) {
  const TfMode mode = tf_mode_from(nullptr, kOp);  // unset: auto
  EXPECT_FALSE(mode.off || mode.on || mode.require);
  // The 2D 5-point stencil up to 4096 points (64 x 64, the measured case), the others to 1024.
  EXPECT_TRUE(tf_small_wanted(mode, LaStencilKind::d2p5, 64 * 64));
  EXPECT_FALSE(tf_small_wanted(mode, LaStencilKind::d2p5, 64 * 64 + 1));
  for (LaStencilKind k : {LaStencilKind::d2p9, LaStencilKind::d3p7, LaStencilKind::d3p27}) {
    EXPECT_TRUE(tf_small_wanted(mode, k, 32 * 32));
    EXPECT_TRUE(tf_small_wanted(mode, k, 10 * 10 * 10));
    EXPECT_FALSE(tf_small_wanted(mode, k, 1025));
    EXPECT_FALSE(tf_small_wanted(mode, k, 16 * 16 * 16));
  }
  for (LaStencilKind k : kKinds) {
    EXPECT_EQ(auto_max_rows(k), k == LaStencilKind::d2p5 ? kAutoMaxRows2d5 : kAutoMaxRows);
    EXPECT_TRUE(tf_small_wanted(tf_mode_from("auto", kOp), k, 1));
  }
}

TEST(SmallRuleTest, EachWordOfTheSwitch) {
  for (const char* v : {"", "auto", "auto,", "1"}) {  // "1" as SLUICE_CUDA_CG_SMALL reads it
    const TfMode m = tf_mode_from(v, kOp);
    EXPECT_FALSE(m.off || m.on || m.require) << v;
  }
  for (const char* v : {"off", "0", "auto,off"}) {
    const TfMode m = tf_mode_from(v, kOp);
    EXPECT_TRUE(m.off) << v;
    for (LaStencilKind k : kKinds) EXPECT_FALSE(tf_small_wanted(m, k, 1)) << v;
  }
  // on and require take every size (the kernel itself refuses what does not fit).
  for (const char* v : {"on", "require", "on,require", "auto,require"}) {
    const TfMode m = tf_mode_from(v, kOp);
    EXPECT_FALSE(m.off) << v;
    EXPECT_EQ(m.require, std::string(v).find("require") != std::string::npos) << v;
    for (LaStencilKind k : kKinds) EXPECT_TRUE(tf_small_wanted(m, k, 4096)) << v;
  }
}

TEST(SmallRuleTest, BadWordsAreRefusedSayingWhy) {
  const auto refused = [](const char* v, const std::string& says) {
    try {
      (void)tf_mode_from(v, kOp);
      ADD_FAILURE() << "'" << v << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << v;
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("SLUICE_CUDA_TF_SMALL"), std::string::npos) << e.what();
    }
  };
  refused("yes", "unknown word 'yes'");
  refused("on,onn", "unknown word 'onn'");
  refused("ON", "unknown word 'ON'");
  refused("off,on", "turns it off");
  refused("require,0", "turns it off");
}

}  // namespace
}  // namespace sluice::test
