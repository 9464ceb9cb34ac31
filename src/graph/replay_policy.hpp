#pragma once
// When a Replay key runs its body eagerly instead of capturing, comparing, updating and
// launching: whenever the measured host time of its recent replays exceeds that of issuing the
// body eagerly. A replay that must apply many changed parameters can cost more than the eager
// issue it replaces (on cuda every changed node is a cudaGraphExec*SetParams call on top of the
// capture); the user asked for speed, so the cheaper of the two runs, and both give the same
// results. Measurements are host time (the work itself runs asynchronously either way).

#include <algorithm>
#include <array>
#include <cstdint>

namespace sluice::detail {

class ReplayPolicy {
 public:
  enum class Choice : std::uint8_t { replay, eager };

  /// What the next run of the key does.
  [[nodiscard]] Choice next() const noexcept {
    if (replays_ < kWarmReplays) return Choice::replay;  // the executable first, then a baseline
    if (eager_runs_ == 0) return Choice::eager;          // one eager run to compare with
    if (eager_ahead_) return eager_left_ > 0 ? Choice::eager : Choice::replay;  // then a probe
    // Replaying wins: measure the eager cost again now and then (the body may have changed).
    return since_eager_ >= kRecheck ? Choice::eager : Choice::replay;
  }

  /// A replay took `seconds` of host time (capture to launch); `instantiated`: it built an
  /// executable (first run or another topology), which says nothing about later replays.
  void replayed(double seconds, bool instantiated) noexcept {
    ++since_eager_;
    if (instantiated) return;
    ++replays_;
    push(replay_, seconds);
    if (eager_runs_ == 0) return;
    if (best(replay_) <= best(eager_)) {
      eager_ahead_ = false;
      backoff_ = kFirstBackoff;
      return;
    }
    // Eager is cheaper: eager runs until the next replay probe, longer after each lost probe.
    backoff_ = eager_ahead_ ? std::min(backoff_ * 2, kMaxBackoff) : kFirstBackoff;
    eager_ahead_ = true;
    eager_left_ = backoff_;
  }

  /// The body ran eagerly in `seconds` of host time.
  void ran_eagerly(double seconds) noexcept {
    ++eager_runs_;
    since_eager_ = 0;
    push(eager_, seconds);
    if (eager_ahead_) {
      if (eager_left_ > 0) --eager_left_;
      return;
    }
    if (best(eager_) < best(replay_)) {  // a probe while replaying (or the first comparison)
      eager_ahead_ = true;
      backoff_ = kFirstBackoff;
      eager_left_ = backoff_ - 1;  // this run was the first of them
    }
  }

  /// Whether eager issue is the cheaper one now.
  [[nodiscard]] bool eager_ahead() const noexcept { return eager_ahead_; }
  [[nodiscard]] double replay_seconds() const noexcept { return best(replay_); }
  [[nodiscard]] double eager_seconds() const noexcept { return best(eager_); }

  /// Measured replays before the first comparison (the instantiating run does not count).
  static constexpr int kWarmReplays = 2;
  /// Eager runs between two replay probes while eager wins: doubled at every lost probe.
  static constexpr int kFirstBackoff = 4;
  static constexpr int kMaxBackoff = 256;
  /// Replays between two eager probes while replaying wins.
  static constexpr int kRecheck = 512;

 private:
  /// The last few samples; a comparison uses their minimum (a preempted run is slow, never fast).
  using Samples = std::array<double, 4>;
  static void push(Samples& s, double v) noexcept {
    std::rotate(s.rbegin(), s.rbegin() + 1, s.rend());
    s[0] = v;
  }
  static double best(const Samples& s) noexcept {
    double b = 0;
    for (double v : s) {
      if (v > 0 && (b == 0 || v < b)) b = v;
    }
    return b;
  }

  Samples replay_{};
  Samples eager_{};
  int replays_ = 0;      // measured replays (not instantiating)
  int eager_runs_ = 0;   // eager runs so far
  int since_eager_ = 0;  // runs since the last eager one
  bool eager_ahead_ = false;
  int eager_left_ = 0;  // eager runs before the next replay probe
  int backoff_ = kFirstBackoff;
};

}  // namespace sluice::detail
