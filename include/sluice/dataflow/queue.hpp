#pragma once
/// @file
/// `Queue`: where command groups are submitted (reference 004, "In-order and out-of-order
/// queues").

#include <cstddef>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/dataflow/handler.hpp"

namespace sluice::dataflow {

/// How to build a queue.
struct QueueOptions {
  std::optional<Device> device;  ///< default: sluice::default_device()
  /// Each command group waits for the one submitted before it (one context). Otherwise only
  /// what the accessors and `depends_on` require orders them, and independent ones overlap.
  bool in_order = false;
  /// Contexts an out-of-order queue spreads command groups over (0: 4).
  std::size_t contexts = 0;
  std::string name;  ///< shows up in error messages; default "queue#N"
};

namespace detail {
/// One command group being built; returned to a thread-local pool by `end_submit`.
SubmitState& begin_submit(QueueState& q, std::source_location loc);
/// Issues what the command group declared (a group without a kernel still orders: it completes
/// after its dependencies), returns its event and releases `s`.
Event end_submit(SubmitState& s, std::source_location loc);
/// Releases `s` after the command-group function threw.
void abandon_submit(SubmitState& s) noexcept;
std::shared_ptr<QueueState> make_queue(const QueueOptions& options, std::source_location loc);
}  // namespace detail

/// A queue of command groups on one device. Out-of-order (the default): the runtime orders
/// command groups only by their accessors, tracked USM and `depends_on`, and runs independent
/// ones concurrently on several contexts. In-order: one context, submission order.
///
/// Copies refer to the same queue. Thread safety: any number of threads may submit at once.
///
/// @code
/// sluice::dataflow::Queue q;                                  // out-of-order, default device
/// auto e = q.submit([&](sluice::dataflow::Handler& h) {
///   auto a = buf.get_access<sluice::dataflow::AccessMode::write>(h);
///   h.parallel_for(buf.get_range(), [=](sluice::dataflow::id<1> i) { a[i] = 2 * i; });
/// });
/// e.wait();
/// @endcode
class Queue {
 public:
  Queue() : Queue(QueueOptions{}) {}
  explicit Queue(const QueueOptions& options,
                 std::source_location loc = std::source_location::current())
      : state_(detail::make_queue(options, loc)) {}
  explicit Queue(const Device& device) : Queue(options_for(device)) {}

  /// Builds and issues one command group: `cgf(Handler&)` declares accessors and dependencies,
  /// then names one kernel. Returns at once with the command group's event.
  template <class CGF>
  Event submit(CGF&& cgf, std::source_location loc = std::source_location::current()) {
    detail::SubmitState& s = detail::begin_submit(*state_, loc);
    try {
      Handler h(s);
      cgf(h);
    } catch (...) {
      detail::abandon_submit(s);
      throw;
    }
    return detail::end_submit(s, loc);
  }

  /// Shortcuts: one kernel as a command group of its own, optionally after `deps`.
  template <int D, class F>
  Event parallel_for(range<D> r, F f, std::source_location loc = std::source_location::current()) {
    return submit([&](Handler& h) { h.parallel_for(r, std::move(f), loc); }, loc);
  }
  template <int D, class F>
  Event parallel_for(range<D> r, const std::vector<Event>& deps, F f,
                     std::source_location loc = std::source_location::current()) {
    return submit(
        [&](Handler& h) {
          h.depends_on(deps, loc);
          h.parallel_for(r, std::move(f), loc);
        },
        loc);
  }
  template <int D, class F>
  Event parallel_for(nd_range<D> r, F f,
                     std::source_location loc = std::source_location::current()) {
    return submit([&](Handler& h) { h.parallel_for(r, std::move(f), loc); }, loc);
  }
  template <class F>
  Event single_task(F f, std::source_location loc = std::source_location::current()) {
    return submit([&](Handler& h) { h.single_task(std::move(f), loc); }, loc);
  }
  template <class F>
  Event single_task(const Event& dep, F f,
                    std::source_location loc = std::source_location::current()) {
    return submit(
        [&](Handler& h) {
          h.depends_on(dep, loc);
          h.single_task(std::move(f), loc);
        },
        loc);
  }
  template <class F>
  Event single_task(const std::vector<Event>& deps, F f,
                    std::source_location loc = std::source_location::current()) {
    return submit(
        [&](Handler& h) {
          h.depends_on(deps, loc);
          h.single_task(std::move(f), loc);
        },
        loc);
  }

  /// Blocks until every command group submitted so far completed; throws WorkFailed (once) for
  /// a failed one, and Error if the calling thread holds a HostAccessor that one waits for.
  void wait(std::source_location loc = std::source_location::current()) const;

  [[nodiscard]] const Device& device() const noexcept;
  [[nodiscard]] bool in_order() const noexcept;
  /// The contexts command groups run on (one for an in-order queue).
  [[nodiscard]] std::span<const Context> contexts() const noexcept;

  /// Internal: the shared state.
  [[nodiscard]] detail::QueueState& state() const noexcept { return *state_; }

  friend bool operator==(const Queue& a, const Queue& b) noexcept { return a.state_ == b.state_; }

 private:
  static QueueOptions options_for(const Device& device) {
    QueueOptions o;  // field by field: user code built with -Wextra sees no missing initializer
    o.device = device;
    return o;
  }
  std::shared_ptr<detail::QueueState> state_;
};

}  // namespace sluice::dataflow
