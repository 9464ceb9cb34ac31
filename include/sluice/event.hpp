#pragma once
/// @file
/// Events: recorded points on a context, for interop, cross-context waits and timing.

#include <memory>
#include <source_location>

#include "sluice/context.hpp"

namespace sluice {

class EventImpl;

/// A point recorded on a context. Cheap to copy (copies share the recorded point).
///
/// Most code never needs events: `Context::wait_for` and the dependency tracker order work.
/// They exist for timing and for interop with code that thinks in events.
///
/// @code
/// sluice::Event start({.timing = true}), stop({.timing = true});
/// start.record(ctx);
/// ... issue work on ctx ...
/// stop.record(ctx);
/// double ms = sluice::Event::elapsed_ms(start, stop);  // waits for stop
/// @endcode
class Event {
 public:
  struct Options {
    bool timing = false;  ///< timing costs a little on every backend; ask only when needed
  };

  Event() = default;
  explicit Event(Options options) : options_(options) {}

  /// Records the current end of `ctx`'s work. Re-recording moves the point.
  void record(const Context& ctx, std::source_location loc = std::source_location::current());
  /// True if recorded.
  [[nodiscard]] bool recorded() const noexcept { return impl_ != nullptr; }
  /// True once the recorded work completed (an unrecorded event is complete). Never throws for
  /// failed work. An event recorded inside a graph capture stands for work that runs only when
  /// the graph is launched: querying it is Error(invalid_state) (during the capture the capture is
  /// discarded, as `synchronize` there does).
  [[nodiscard]] bool query(std::source_location loc = std::source_location::current()) const;
  /// Blocks until the recorded work completed; throws WorkFailed, once, if it failed.
  /// Error(invalid_state) for an event recorded inside a graph capture (see `query`).
  void synchronize(std::source_location loc = std::source_location::current()) const;
  /// Milliseconds from `start` to `stop`, both recorded with timing; waits for `stop`.
  [[nodiscard]] static double elapsed_ms(
      const Event& start, const Event& stop,
      std::source_location loc = std::source_location::current());

  [[nodiscard]] const std::shared_ptr<EventImpl>& impl() const noexcept { return impl_; }

 private:
  friend class Graph;  // binds an event to an event record node
  Options options_{};
  std::shared_ptr<EventImpl> impl_;
};

}  // namespace sluice
