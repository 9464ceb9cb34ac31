// The fluent handle's non-template steps, Timer, and Context::then (declared in context.hpp,
// defined here so that the context layer does not depend on the kernel layer).

#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

namespace sluice {

Fluent Context::then() const {
  return Fluent(*this);
}

Fluent& Fluent::then_record(Event& event, std::source_location loc) {
  event.record(ctx_, loc);
  return *this;
}

Fluent& Fluent::then_wait_for(const Context& other, std::source_location loc) {
  ctx_.wait_for(other, loc);
  return *this;
}

Fluent& Fluent::then_start_timer(Timer& timer, std::source_location loc) {
  timer.start(ctx_, loc);
  return *this;
}

Fluent& Fluent::then_stop_timer(Timer& timer, std::source_location loc) {
  timer.stop(ctx_, loc);
  return *this;
}

Fluent& Fluent::then_host_task(std::function<void()> fn, std::string_view what,
                               std::source_location loc) {
  ctx_.host_task(std::move(fn), what, loc);
  return *this;
}

rng::Philox& Fluent::generator(std::source_location loc) {
  if (!rng_) {
    throw Error(Errc::invalid_state,
                "then_populate_rand_*: no generator; call then_set_rng_seed(...) first, or pass "
                "one to then_uniform / then_normal",
                loc);
  }
  return *rng_;
}

void Fluent::block_host_until_done(std::source_location loc) {
  ctx_.synchronize(loc);
}

void Timer::start(const Context& ctx, std::source_location loc) {
  start_.record(ctx, loc);
  stop_ = Event(Event::Options{.timing = true});  // a restarted timer is running again
}

void Timer::stop(const Context& ctx, std::source_location loc) {
  if (!start_.recorded()) {
    throw Error(Errc::invalid_state, "Timer::stop: the timer was never started; start it first",
                loc);
  }
  stop_.record(ctx, loc);
}

double Timer::elapsed_ms(std::source_location loc) const {
  if (!start_.recorded() || !stop_.recorded()) {
    throw Error(Errc::invalid_state,
                std::string("Timer::elapsed_ms: the timer was ") +
                    (start_.recorded() ? "started but not stopped" : "never started") +
                    "; call then_start_timer and then_stop_timer first",
                loc);
  }
  return Event::elapsed_ms(start_, stop_, loc);
}

}  // namespace sluice
