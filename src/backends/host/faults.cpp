#include "backends/host/faults.hpp"

#include <stdexcept>
#include <string>

#include "sluice/error.hpp"
#include "sluice/host.hpp"

namespace sluice::detail::host {
namespace {

// Counts down to the failing call; 0 means disarmed. A CAS loop so that exactly one call fires.
bool fires(std::atomic<std::uint64_t>& countdown) {
  auto n = countdown.load();
  while (n != 0) {
    if (countdown.compare_exchange_weak(n, n - 1)) return n == 1;
  }
  return false;
}

std::atomic<std::uint64_t> allocation_countdown{0};
std::atomic<std::uint64_t> operation_countdown{0};

}  // namespace

Counters& counters() {
  static Counters c;
  return c;
}

void maybe_fail_allocation(std::size_t bytes) {
  if (fires(allocation_countdown)) {
    throw OutOfMemory(bytes, "host: injected allocation failure of " + std::to_string(bytes) +
                                 " bytes (sluice::host::fail_nth_allocation)");
  }
}

void maybe_fail_operation() {
  if (fires(operation_countdown)) {
    throw std::runtime_error("injected operation failure (sluice::host::fail_nth_operation)");
  }
}

}  // namespace sluice::detail::host

namespace sluice::host {

void fail_nth_allocation(std::uint64_t n) {
  detail::host::allocation_countdown.store(n);
}
void fail_nth_operation(std::uint64_t n) {
  detail::host::operation_countdown.store(n);
}
void clear_faults() {
  fail_nth_allocation(0);
  fail_nth_operation(0);
}

LiveCounts live_counts() {
  auto& c = detail::host::counters();
  return {c.device_allocations.load(), c.pinned_allocations.load(), c.streams.load()};
}

}  // namespace sluice::host
