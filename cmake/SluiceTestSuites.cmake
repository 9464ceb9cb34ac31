# One ctest test per gtest suite of a test program (a process per suite, not per case).
#
#   sluice_add_test_suites(<target> [CASES <pattern>] [EXCLUDE <patterns>] [SUFFIX <suffix>]
#                          [PROPERTIES <name> <value>...])
#
# Each suite S of <target> whose cases match `S.<CASES>` and none of EXCLUDE (gtest filter
# patterns, `:`-separated) becomes test `S<SUFFIX>`, running `<target> --gtest_filter=...` in the
# target's directory. Starting a test program costs about 0.2 s (its libraries' initializers, the
# registration of every case), which was most of CI's test time with a process per case. A suite
# whose every case skipped reports as skipped (tests/support/test_main.cpp's exit code 77); a
# suite that ran some cases passes and lists the skipped ones in its output; a suite of disabled
# cases only is registered disabled. The list is taken when ctest starts (as gtest_discover_tests'
# PRE_TEST mode does), again only when the program is newer than the list.
set(_sluice_test_suites_script "${CMAKE_CURRENT_LIST_DIR}/SluiceTestSuitesList.cmake")

function(sluice_add_test_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "CASES;EXCLUDE;SUFFIX" "PROPERTIES")
  if(NOT arg_CASES)
    set(arg_CASES "*")
  endif()
  string(REGEX REPLACE "[^A-Za-z0-9_.-]" "_" file "${target}${arg_SUFFIX}_suites")
  set(base "${CMAKE_CURRENT_BINARY_DIR}/${file}")
  # Properties as bracket arguments: values such as ENVIRONMENT's hold `;` and `=`.
  set(props "")
  foreach(p IN LISTS arg_PROPERTIES)
    string(APPEND props " [==[${p}]==]")
  endforeach()
  file(GENERATE OUTPUT "${base}_include.cmake" CONTENT
"set(_exe [==[$<TARGET_FILE:${target}>]==])
set(_list [==[${base}.cmake]==])
if(NOT EXISTS \"\${_exe}\")
  add_test([==[${target}${arg_SUFFIX}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])
else()
  if(NOT EXISTS \"\${_list}\" OR NOT \"\${_list}\" IS_NEWER_THAN \"\${_exe}\" OR
     NOT \"\${_list}\" IS_NEWER_THAN \"\${CMAKE_CURRENT_LIST_FILE}\")
    include([==[${_sluice_test_suites_script}]==])
    sluice_list_test_suites(\"\${_exe}\" [==[${CMAKE_CURRENT_BINARY_DIR}]==] [==[${arg_CASES}]==]
                            [==[${arg_EXCLUDE}]==] [==[${arg_SUFFIX}]==] \"\${_list}\"${props})
  endif()
  include(\"\${_list}\")
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${base}_include.cmake")
endfunction()
