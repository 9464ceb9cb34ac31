// The dist tests' main: MPI set up around GoogleTest. The same program runs alone (one process,
// its ranks contexts of that process) and under `mpirun -np N` (tests/CMakeLists.txt), where
// every process runs every case and the communicators span them all. Process 0 prints the usual
// progress; the others print only their failures, named by process.

#include <gtest/gtest.h>

#include <cstdio>

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

}  // namespace

int main(int argc, char** argv) {
  sluice::dist::Environment env(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (const int p = sluice::dist::Environment::process_rank(); p != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(p));
  }
  return RUN_ALL_TESTS();
}
