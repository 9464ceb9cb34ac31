// The dist tests' main: MPI set up around GoogleTest. The same program runs alone (one process,
// its ranks contexts of that process) and under `mpirun -np N` (tests/CMakeLists.txt), where
// every process runs every test and the communicators span them all.

#include <gtest/gtest.h>

#include "sluice/dist.hpp"

int main(int argc, char** argv) {
  sluice::dist::Environment env(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (sluice::dist::Environment::process_rank() != 0) {
    // Other processes report failures only: one copy of the progress lines is enough.
    GTEST_FLAG_SET(brief, true);
  }
  return RUN_ALL_TESTS();
}
