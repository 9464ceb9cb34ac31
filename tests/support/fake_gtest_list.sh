#!/bin/sh
# Stands in for a test program's --gtest_list_tests, filter applied (suites_list_test.cmake).
printf 'A.\n  one\n  DISABLED_two\nB.\n  DISABLED_x\nDISABLED_C.\n  y\n'
printf 'Backends/P.\n  c/host  # GetParam() = "host;x"\n  d/host  # GetParam() = "host"\n'
