// The dist tests' main: MPI set up around GoogleTest. The same program runs alone (one process,
// its ranks contexts of that process) and under `mpirun -np N` (tests/CMakeLists.txt), where
// every process runs every case and the communicators span them all. Process 0 prints the usual
// progress; the others print only their failures, named by process. SLUICE_TEST_CASE_TIMEOUT
// (seconds; scripts/gpu-dist sets it) ends a process whose case runs longer, naming the case:
// a hang fails instead of waiting for an outer timeout that says nothing.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "sluice/dist.hpp"

namespace {

class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int process) : process_(process) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[process %d] %s:%d: Failure\n%s\n", process_,
                 r.file_name() != nullptr ? r.file_name() : "?", r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[process %d] FAILED %s.%s\n", process_, info.test_suite_name(),
                   info.name());
    }
  }

 private:
  int process_;
};

/// Names a case after which this thread still counts an exception in flight: the Environment
/// would fail the process at exit for it (and leave MPI unfinalized).
class InFlightCheck : public ::testing::EmptyTestEventListener {
 public:
  explicit InFlightCheck(int process) : process_(process) {}
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (const int n = std::uncaught_exceptions(); n != seen_) {
      std::fprintf(stderr, "[process %d] %d exception(s) counted in flight after %s.%s\n", process_,
                   n, info.test_suite_name(), info.name());
      seen_ = n;
    }
  }

 private:
  int process_;
  int seen_ = 0;
};

/// Ends the process (status 124, as timeout(1) does) when a case runs past `seconds`.
class CaseWatchdog : public ::testing::EmptyTestEventListener {
 public:
  CaseWatchdog(int process, double seconds) : process_(process), seconds_(seconds) {
    thread_ = std::thread([this] { watch(); });
  }
  ~CaseWatchdog() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard lock(mutex_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds_));
    running_ = true;
    wake_.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard lock(mutex_);
    running_ = false;
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (!running_) {
        wake_.wait(lock);
        continue;
      }
      if (wake_.wait_until(lock, deadline_) == std::cv_status::timeout && running_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(
            stderr, "[process %d] TIMEOUT: %s ran past %g s (SLUICE_TEST_CASE_TIMEOUT): it hangs\n",
            process_, name_.c_str(), seconds_);
        std::fflush(stderr);
        std::fflush(stdout);
        std::_Exit(124);
      }
    }
  }

  int process_;
  double seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  sluice::dist::Environment env(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (const int p = sluice::dist::Environment::process_rank(); p != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(p));
  }
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new InFlightCheck(sluice::dist::Environment::process_rank()));
  if (const char* t = std::getenv("SLUICE_TEST_CASE_TIMEOUT"); t != nullptr && std::atof(t) > 0) {
    ::testing::UnitTest::GetInstance()->listeners().Append(
        new CaseWatchdog(sluice::dist::Environment::process_rank(), std::atof(t)));
  }
  return RUN_ALL_TESTS();
}
