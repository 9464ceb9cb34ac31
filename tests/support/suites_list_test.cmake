# The per-suite registration (cmake/SluiceTestSuitesList.cmake) on a made-up listing: enabled
# cases counted, suites of disabled cases only registered disabled (run, they would pass having
# run nothing), parameter notes with list separators dropped, and the filter of each suite.
#   cmake -DSOURCE_DIR=... -DOUT=... -P suites_list_test.cmake
include(${SOURCE_DIR}/cmake/SluiceTestSuitesList.cmake)
sluice_list_test_suites(${SOURCE_DIR}/tests/support/fake_gtest_list.sh ${OUT} "*" "*/cuda" ""
                        ${OUT}/fake_suites.cmake LABELS x)
file(READ ${OUT}/fake_suites.cmake text)
foreach(expect
    "add_test([==[A]==] [==[${SOURCE_DIR}/tests/support/fake_gtest_list.sh]==] [==[--gtest_filter=A.*-*/cuda]==] --all-skipped-exit=77)"
    "[==[A]==] PROPERTIES WORKING_DIRECTORY [==[${OUT}]==] SKIP_RETURN_CODE 77 COST 1 [==[LABELS]==]"
    "[==[B]==] PROPERTIES WORKING_DIRECTORY [==[${OUT}]==] SKIP_RETURN_CODE 77 COST 0 DISABLED TRUE"
    "[==[DISABLED_C]==] PROPERTIES WORKING_DIRECTORY [==[${OUT}]==] SKIP_RETURN_CODE 77 COST 0 DISABLED TRUE"
    "[==[Backends/P]==] PROPERTIES WORKING_DIRECTORY [==[${OUT}]==] SKIP_RETURN_CODE 77 COST 2 ")
  string(FIND "${text}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected in the registration:\n${expect}\ngot:\n${text}")
  endif()
endforeach()
message(STATUS "per-suite registration: as expected")
