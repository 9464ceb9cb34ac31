// The Chrome/Perfetto trace (sluice/observe.hpp): an observer that times every operation with
// two events on its stream and writes the JSON trace event format, one row per context, waits
// between contexts as flow arrows.

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "sluice/error.hpp"
#include "sluice/observe.hpp"
#include "sluice/platform.hpp"

namespace sluice {
namespace detail {
namespace {

double host_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class TraceObserver final : public Observer {
 public:
  explicit TraceObserver(std::string path) : path_(std::move(path)), origin_us_(host_us()) {}

  [[nodiscard]] bool wants_timing() const noexcept override { return true; }

  void issue_begin(const OpEvent& op) override {
    std::lock_guard lock(mutex_);
    issue_us_[op.timeline] = host_us();
  }

  void issue_end(const OpEvent& op, const OpSpan* span) override {
    std::lock_guard lock(mutex_);
    auto& c = contexts_[op.timeline];
    if (c.name.empty()) {
      c.name = std::string(op.context);
      c.device = op.device != nullptr ? op.device->to_string() : std::string();
    }
    Op rec;
    rec.seq = op.seq;
    rec.what = std::string(op.what);
    rec.where = std::string(op.where.file_name()) + ":" + std::to_string(op.where.line());
    rec.issued_us = issue_us_[op.timeline];
    if (span != nullptr) rec.span = *span;
    c.ops.push_back(std::move(rec));
  }

  void wait(const WaitEvent& w) override {
    std::lock_guard lock(mutex_);
    flows_.push_back(w);
  }

  void context_destroyed(std::uint64_t timeline) override {
    std::lock_guard lock(mutex_);
    if (auto it = contexts_.find(timeline); it != contexts_.end()) resolve(it->second);
  }

  /// Waits for every traced operation and writes the file; returns the operations written.
  std::size_t write() {
    std::lock_guard lock(mutex_);
    nlohmann::json events = nlohmann::json::array();
    std::size_t written = 0;
    // Flow ids: the waited operation's slice starts an arrow that ends at the wait.
    std::map<std::pair<std::uint64_t, std::uint64_t>, const Op*> by_point;
    for (auto& [timeline, c] : contexts_) {
      resolve(c);
      const int pid = 1;
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", pid},
                        {"tid", timeline},
                        {"args", {{"name", c.name + " (" + c.device + ")"}}}});
      for (const auto& op : c.ops) {
        events.push_back({{"ph", "X"},
                          {"name", op.what},
                          {"cat", "op"},
                          {"pid", pid},
                          {"tid", timeline},
                          {"ts", op.ts_us - origin_us_},
                          {"dur", op.dur_us},
                          {"args", {{"where", op.where}, {"seq", op.seq}, {"timed", op.timed}}}});
        by_point[{timeline, op.seq}] = &op;
        ++written;
      }
    }
    std::uint64_t id = 0;
    for (const auto& w : flows_) {
      // The waited point is the last traced operation at or before waited_seq.
      auto it = by_point.upper_bound({w.waited_timeline, w.waited_seq});
      if (it == by_point.begin()) continue;
      --it;
      if (it->first.first != w.waited_timeline) continue;
      auto to = by_point.find({w.timeline, w.seq});
      if (to == by_point.end()) continue;
      const Op& from = *it->second;
      ++id;
      events.push_back({{"ph", "s"},
                        {"name", "waits for"},
                        {"cat", "dependency"},
                        {"id", id},
                        {"pid", 1},
                        {"tid", w.waited_timeline},
                        {"ts", from.ts_us + from.dur_us - origin_us_}});
      events.push_back(
          {{"ph", "f"},
           {"bp", "e"},
           {"name", "waits for"},
           {"cat", "dependency"},
           {"id", id},
           {"pid", 1},
           {"tid", w.timeline},
           // the wait's end: where the waiting context goes on
           {"ts", to->second->ts_us + std::max(0.0, to->second->dur_us - 0.001) - origin_us_}});
    }
    std::ofstream out(path_);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << '\n';
    if (!out) {
      throw Error(Errc::invalid_argument,
                  "trace: cannot write '" + path_ + "'; give a path in a writable directory");
    }
    return written;
  }

 private:
  struct Op {
    std::uint64_t seq = 0;
    std::string what, where;
    double issued_us = 0;
    OpSpan span;
    bool resolved = false, timed = false;
    double ts_us = 0, dur_us = 0;
  };
  struct Ctx {
    std::string name, device;
    std::vector<Op> ops;
    std::shared_ptr<EventImpl> base;  // the first timed operation's start
    double base_us = 0;               // host time at its issue
  };

  /// Device times into the host clock: a context's first timed operation starts when it was
  /// issued (its queue was empty then, or the offset is that of the queue ahead of it), later
  /// ones at their distance from it on the device. Operations that could not be timed keep their
  /// issue time and no duration.
  static void resolve(Ctx& c) {
    for (auto& op : c.ops) {
      if (op.resolved) continue;
      op.resolved = true;
      op.ts_us = op.issued_us;
      if (!op.span.start || !op.span.end) continue;
      try {
        op.span.end->synchronize();
        if (!c.base) {
          c.base = op.span.start;
          c.base_us = op.issued_us;
        }
        op.ts_us = c.base_us + 1000.0 * op.span.start->elapsed_ms_since(*c.base);
        op.dur_us = 1000.0 * op.span.end->elapsed_ms_since(*op.span.start);
        op.timed = true;
      } catch (...) {
        // Failed work or a point that has no time (a capture): the issue time stands.
      }
      op.span = {};
    }
  }

  std::mutex mutex_;
  std::string path_;
  double origin_us_;
  std::map<std::uint64_t, double> issue_us_;  // per context, the operation being issued
  std::map<std::uint64_t, Ctx> contexts_;
  std::vector<WaitEvent> flows_;
};

struct TraceState {
  std::mutex mutex;
  std::shared_ptr<TraceObserver> observer;
};

TraceState& trace_state() {
  static auto* s = new TraceState;  // never destroyed: written from an exit handler
  return *s;
}

}  // namespace

void trace_from_environment() {
  const char* env = std::getenv("SLUICE_TRACE");
  if (env == nullptr || *env == '\0') return;
  // "%p" becomes the process id: every process of an mpirun job writes a file of its own.
  std::string path = env;
  if (const auto at = path.find("%p"); at != std::string::npos)
    path.replace(at, 2, std::to_string(static_cast<long>(getpid())));
  trace::start(path);
  std::atexit([] {
    try {
      (void)trace::stop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sluice: SLUICE_TRACE: %s\n", e.what());
    }
  });
}

}  // namespace detail

namespace trace {

void start(const std::string& path) {
  auto& s = detail::trace_state();
  std::lock_guard lock(s.mutex);
  if (s.observer) remove_observer(s.observer.get());
  s.observer = std::make_shared<detail::TraceObserver>(path);
  add_observer(s.observer);
}

std::size_t stop() {
  auto& s = detail::trace_state();
  std::shared_ptr<detail::TraceObserver> obs;
  {
    std::lock_guard lock(s.mutex);
    obs = std::move(s.observer);
    s.observer.reset();
  }
  if (!obs) return 0;
  remove_observer(obs.get());
  return obs->write();
}

bool active() noexcept {
  auto& s = detail::trace_state();
  std::lock_guard lock(s.mutex);
  return s.observer != nullptr;
}

}  // namespace trace
}  // namespace sluice
