// 03 — errors.
//
// Misuse throws sluice::Error at the call. A failure inside queued work (here a host task that
// throws) cannot be thrown where it happens, so it is reported at the next call that waits on the
// work, exactly once, naming the operation and the line that issued it. Later work on the failed
// context is skipped until the failure is reported.

#include <cstdio>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

int main() {
  bool ok = true;
  sluice::Context ctx;

  // Misuse: reported at once, with what to do about it.
  try {
    std::vector<int> small(3), large(4);
    sluice::copy(ctx, small, large);
    ok = false;
  } catch (const sluice::Error& e) {
    std::printf("misuse:  %s\n", e.what());
  }

  // A failure of queued work.
  int later_ran = 0;
  const unsigned line = std::source_location::current().line() + 1;
  ctx.host_task([] { throw std::runtime_error("disk full"); }, "save checkpoint");
  ctx.host_task([&] { ++later_ran; }, "report progress");  // skipped: it follows the failure
  try {
    ctx.synchronize();
    ok = false;
  } catch (const sluice::WorkFailed& e) {
    std::printf("failure: %s\n", e.what());
    ok = ok && e.operation() == "save checkpoint" && e.issued_at().line() == line &&
         e.cause() == "disk full" && e.skipped() == 1 && later_ran == 0;
  }

  // Reported once: waiting again does not throw, and the context runs new work.
  ctx.synchronize();
  ctx.host_task([&] { ++later_ran; }, "retry");
  ctx.synchronize();
  ok = ok && later_ran == 1;

  // A failure nobody waited for is not lost: when its context is destroyed it goes to the
  // unreported-failure handler (by default, standard error).
  std::string orphan;
  auto previous = sluice::set_unreported_failure_handler([&](const std::string& m) { orphan = m; });
  {
    sluice::Context scratch(ctx.device());
    scratch.host_task([] { throw std::runtime_error("never waited for"); }, "orphan");
  }
  sluice::set_unreported_failure_handler(previous);
  std::printf("handler: %s\n", orphan.c_str());
  ok = ok && orphan.find("orphan") != std::string::npos;

  std::printf("%s\n", ok ? "errors behaved as documented" : "UNEXPECTED behaviour");
  return ok ? 0 : 1;
}
