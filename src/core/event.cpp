#include "sluice/event.hpp"

#include "core/context_impl.hpp"

namespace sluice {

void Event::record(const Context& ctx, std::source_location loc) {
  impl_ = ctx.impl().record(options_.timing, loc);
}

namespace {
/// The host cannot wait for work a capture recorded: refused through the capture while it
/// records (which discards it), an Error naming it afterwards.
void refuse_if_captured(const EventImpl& point, std::string_view what, std::source_location loc) {
  if (auto* sink = point.capture_sink()) sink->refuse_host_wait(point, what, loc);
}
}  // namespace

bool Event::query(std::source_location loc) const {
  if (impl_ == nullptr) return true;
  refuse_if_captured(*impl_, "Event::query", loc);
  return impl_->query();
}

void Event::synchronize(std::source_location loc) const {
  if (impl_ == nullptr) return;
  auto point = impl_->moves() ? impl_->current_point() : impl_;  // a graph node's: its latest
  if (point == nullptr) return;
  refuse_if_captured(*point, "Event::synchronize", loc);
  point->synchronize();
  if (!point->failures) return;
  if (auto f = point->failures->at_or_before(point->seq); f && !f->reported.exchange(true)) {
    throw WorkFailed(f->operation, f->issued_at, f->cause, f->skipped.load());
  }
}

double Event::elapsed_ms(const Event& start, const Event& stop, std::source_location loc) {
  if (!start.recorded() || !stop.recorded()) {
    throw Error(Errc::invalid_state, "Event::elapsed_ms needs two recorded events", loc);
  }
  if (!start.options_.timing || !stop.options_.timing) {
    throw Error(Errc::invalid_argument,
                "Event::elapsed_ms needs events made with Event::Options{.timing = true}", loc);
  }
  if (start.impl_->device != stop.impl_->device) {
    throw Error(Errc::invalid_argument,
                "Event::elapsed_ms: the events were recorded on different devices (" +
                    start.impl_->device.to_string() + ", " + stop.impl_->device.to_string() + ")",
                loc);
  }
  stop.synchronize(loc);
  return stop.impl_->elapsed_ms_since(*start.impl_);
}

}  // namespace sluice
