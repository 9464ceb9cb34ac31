// When a Replay key issues its body eagerly (src/graph/replay_policy.hpp), on made-up host times:
// the cheaper of replaying and issuing eagerly wins, each is measured again now and then, and a
// preempted (slow) sample does not flip the choice.

#include <gtest/gtest.h>

#include <string>

#include "graph/replay_policy.hpp"

namespace sluice::test {
namespace {

using detail::ReplayPolicy;
using Choice = ReplayPolicy::Choice;

/// Runs `runs` runs with fixed costs; returns the choices as a string of 'r' and 'e'.
std::string drive(ReplayPolicy& p, int runs, double replay_s, double eager_s) {
  std::string out;
  for (int i = 0; i < runs; ++i) {
    if (p.next() == Choice::eager) {
      p.ran_eagerly(eager_s);
      out += 'e';
    } else {
      p.replayed(replay_s, false);
      out += 'r';
    }
  }
  return out;
}

TEST(ReplayPolicyTest, ReplaysWhileReplayingIsCheaper) {
  ReplayPolicy p;
  p.replayed(1e-3, true);  // the first run instantiates: not a measurement
  const std::string s = drive(p, 600, 10e-6, 20e-6);
  // Two measured replays, one eager run to compare with, then replays until the recheck.
  EXPECT_EQ(s.substr(0, 3), "rre");
  EXPECT_EQ(s.find('e', 3), 3 + ReplayPolicy::kRecheck) << s;
  EXPECT_FALSE(p.eager_ahead());
}

TEST(ReplayPolicyTest, IssuesEagerlyWhileThatIsCheaperAndProbesLessOften) {
  ReplayPolicy p;
  p.replayed(1e-3, true);
  const std::string s = drive(p, 40, 30e-6, 20e-6);
  // rr, the eager comparison (then eager: 4 eager runs in all), a lost replay probe, 8 eager runs,
  // a probe, 16 eager runs, a probe...
  EXPECT_EQ(s.substr(0, 2), "rr");
  EXPECT_EQ(s.substr(2, 4), "eeee");
  EXPECT_EQ(s[6], 'r');
  EXPECT_EQ(s.substr(7, 8), std::string(8, 'e'));
  EXPECT_EQ(s[15], 'r');
  EXPECT_EQ(s.substr(16, 16), std::string(16, 'e'));
  EXPECT_EQ(s[32], 'r');
  EXPECT_TRUE(p.eager_ahead());
  // The gaps stop growing at kMaxBackoff.
  const std::string more = drive(p, 2000, 30e-6, 20e-6);
  std::size_t gap = 0, longest = 0;
  for (char c : more) {
    gap = c == 'e' ? gap + 1 : 0;
    longest = std::max(longest, gap);
  }
  EXPECT_EQ(longest, static_cast<std::size_t>(ReplayPolicy::kMaxBackoff));
}

TEST(ReplayPolicyTest, SwitchesBackWhenReplaysBecomeCheaper) {
  ReplayPolicy p;
  p.replayed(1e-3, true);
  (void)drive(p, 20, 30e-6, 20e-6);
  ASSERT_TRUE(p.eager_ahead());
  // The body's parameters stopped changing: replays now cost less. The next probes see it once
  // the older (dearer) replay samples are no longer the minimum.
  const std::string s = drive(p, 100, 10e-6, 20e-6);
  EXPECT_FALSE(p.eager_ahead());
  EXPECT_EQ(s.substr(s.size() - 20), std::string(20, 'r')) << s;
}

TEST(ReplayPolicyTest, OneSlowSampleDoesNotFlipTheChoice) {
  ReplayPolicy p;
  p.replayed(1e-3, true);
  (void)drive(p, 10, 10e-6, 20e-6);
  ASSERT_FALSE(p.eager_ahead());
  p.replayed(500e-6, false);  // preempted
  EXPECT_FALSE(p.eager_ahead());
  EXPECT_EQ(p.next(), Choice::replay);
  // Re-instantiations are not replays' costs either.
  p.replayed(5e-3, true);
  EXPECT_FALSE(p.eager_ahead());
}

}  // namespace
}  // namespace sluice::test
