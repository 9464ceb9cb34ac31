# Run by ctest (through the include file of sluice_add_test_suites, SluiceTestSuites.cmake): lists
# a test program's suites and writes the ctest file that registers one test per suite.
function(sluice_list_test_suites exe workdir cases exclude suffix list_file)
  set(negative "")
  if(NOT exclude STREQUAL "")
    set(negative "-${exclude}")
  endif()
  execute_process(COMMAND "${exe}" --gtest_list_tests "--gtest_filter=*.${cases}${negative}"
                  WORKING_DIRECTORY "${workdir}" TIMEOUT 60
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "listing the cases of ${exe} failed (${rc}):\n${out}\n${err}")
  endif()
  # Drop gtest's "# GetParam() = ..." notes (they may hold list separators), then walk the lines:
  # "Suite." starts a suite, "  Case" is one of its cases.
  string(REGEX REPLACE "[ \t]*#[^\n]*" "" out "${out}")
  string(REPLACE ";" "_" out "${out}")
  string(REPLACE "\n" ";" lines "${out}")
  set(suites "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ ]+)\\.$")
      set(suite "${CMAKE_MATCH_1}")
      list(APPEND suites "${suite}")
      set(enabled_${suite} 0)
    elseif(line MATCHES "^  ([^ ]+)$")
      set(case "${CMAKE_MATCH_1}")  # the next MATCHES resets CMAKE_MATCH_1
      # gtest skips a DISABLED_ case, or every case of a DISABLED_ suite, without a word.
      if(NOT suite MATCHES "^DISABLED_|/DISABLED_" AND NOT case MATCHES "^DISABLED_")
        math(EXPR enabled_${suite} "${enabled_${suite}} + 1")
      endif()
    endif()
  endforeach()
  set(text "")
  foreach(suite IN LISTS suites)
    set(name "${suite}${suffix}")
    string(APPEND text "add_test([==[${name}]==] [==[${exe}]==] "
           "[==[--gtest_filter=${suite}.${cases}${negative}]==] --all-skipped-exit=77)\n"
           "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${workdir}]==] "
           "SKIP_RETURN_CODE 77 COST ${enabled_${suite}}")
    if(enabled_${suite} EQUAL 0)
      string(APPEND text " DISABLED TRUE")
    endif()
    foreach(p IN LISTS ARGN)
      string(APPEND text " [==[${p}]==]")
    endforeach()
    string(APPEND text ")\n")
  endforeach()
  file(WRITE "${list_file}" "${text}")
endfunction()
