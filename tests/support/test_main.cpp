// The test programs' main: gtest's own, plus one flag of ours. `--all-skipped-exit=N` (passed by
// the per-suite ctest registration, cmake/SluiceTestSuites.cmake) makes a run in which every
// selected case skipped exit with N, which ctest then reports as skipped rather than passed. A
// flag, not an environment variable: the tests that start this program again as a child must see
// its plain exit status.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);  // removes gtest's flags, leaves ours
  constexpr std::string_view flag = "--all-skipped-exit=";
  int skipped_exit = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(flag)) skipped_exit = std::atoi(argv[i] + flag.size());
  }
  const int rc = RUN_ALL_TESTS();
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  if (rc == 0 && skipped_exit != 0 && unit.successful_test_count() == 0 &&
      unit.skipped_test_count() > 0)
    return skipped_exit;
  return rc;
}
