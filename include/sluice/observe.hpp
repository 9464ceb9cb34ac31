#pragma once
/// @file
/// Observing the work sluice issues: a hook at the one point every operation of every context
/// passes (its numbering), and two users of it — a Chrome/Perfetto trace (`SLUICE_TRACE=file.json`
/// or `trace::start`) and, on cuda, NVTX ranges for Nsight Systems (`SLUICE_NVTX=1`, or on by
/// itself when a tool injects NVTX).
///
/// @code
/// sluice::trace::start("run.json");  // or run the program with SLUICE_TRACE=run.json
/// ... issue work on any contexts ...
/// sluice::trace::stop();             // waits for the traced work, writes the file
/// @endcode
///
/// Open the file in https://ui.perfetto.dev or chrome://tracing: one row per context, each
/// operation a slice named by what it does, with its source line and number, and every wait one
/// context issued for another an arrow from the operation it waited for.
///
/// With no observer installed, issuing pays one relaxed atomic load.

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>

namespace sluice {

class EventImpl;
struct Device;

/// One operation of a context, as observers see it. Views are valid during the call only.
struct OpEvent {
  std::string_view context;  ///< the context's name
  std::uint64_t timeline = 0;  ///< the context's unique id
  std::uint64_t seq = 0;       ///< the operation's number on its context
  std::string_view what;       ///< e.g. "copy", "VecAXPY", "graph 'solve'"
  std::source_location where;  ///< the line that issued it
  const Device* device = nullptr;
};

/// Timed events around one operation on its stream (recorded only while an observer asks).
struct OpSpan {
  std::shared_ptr<EventImpl> start;
  std::shared_ptr<EventImpl> end;
};

/// A wait one context issued for another: operation `seq` of `timeline` (a "wait") makes the
/// context's later work follow operation `waited_seq` of `waited_timeline`.
struct WaitEvent {
  std::string_view context;
  std::uint64_t timeline = 0;
  std::uint64_t seq = 0;
  std::uint64_t waited_timeline = 0;
  std::uint64_t waited_seq = 0;
};

/// Receives the operations of every context. Calls come from the issuing thread with the
/// context's issue lock held: keep them short, and never issue work from them.
class Observer {
 public:
  virtual ~Observer() = default;
  /// True to have every operation timed with two events on its stream (costs a little).
  [[nodiscard]] virtual bool wants_timing() const noexcept { return false; }
  /// Before the operation is enqueued.
  virtual void issue_begin(const OpEvent& op) { (void)op; }
  /// After it was enqueued (also if enqueuing threw); `span` holds its timed events if any
  /// observer wants timing, else null.
  virtual void issue_end(const OpEvent& op, const OpSpan* span) {
    (void)op;
    (void)span;
  }
  virtual void wait(const WaitEvent& w) { (void)w; }
  /// A context is being destroyed; its work has completed.
  virtual void context_destroyed(std::uint64_t timeline) { (void)timeline; }
};

/// Installs an observer for every context (existing and future). Thread-safe.
void add_observer(std::shared_ptr<Observer> observer);
/// Removes an observer added before (no-op if absent). Thread-safe. Calls already in progress
/// on other threads may still reach it; they keep it alive until they return.
void remove_observer(const Observer* observer) noexcept;

/// A Chrome/Perfetto trace of all contexts' work (the JSON trace event format).
namespace trace {
/// Starts tracing into `path` (replacing a trace in progress). `SLUICE_TRACE=path` does the same
/// when the first context is made, and writes the file at exit.
void start(const std::string& path);
/// Waits for the traced work, writes the file and stops; returns the number of operations
/// written (0 if no trace was running). Throws Error if the file cannot be written.
std::size_t stop();
/// True while a trace runs.
[[nodiscard]] bool active() noexcept;
}  // namespace trace

}  // namespace sluice
