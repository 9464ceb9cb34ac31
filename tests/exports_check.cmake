# libsluice.so exports sluice's symbols only (src/libsluice.map): a library loaded later in the
# same process must never bind to the copies of the standard library, nlohmann::json or
# boost::context that libsluice carries (the plugin loader puts libsluice in the global scope).
# It also links the C++ runtime as a shared library (READELF given): a private copy of libstdc++
# in libsluice miscounts exceptions that cross it (CMakeLists.txt says more).
# cmake -DLIB=<libsluice.so> -DNM=<nm> [-DREADELF=<readelf>] -P exports_check.cmake
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE _nm RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REPLACE "\n" ";" _lines "${_nm}")
set(_foreign "")
set(_count 0)
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^[0-9a-f]+ [A-Za-z] (.+)$")
    set(_sym ${CMAKE_MATCH_1})
    math(EXPR _count "${_count} + 1")
    # Mangled sluice names contain "6sluice" (a nested name) or start with "sluice_" (C).
    if(NOT _sym MATCHES "6sluice" AND NOT _sym MATCHES "^sluice_")
      list(APPEND _foreign ${_sym})
    endif()
  endif()
endforeach()
if(_count LESS 100)
  message(FATAL_ERROR "only ${_count} exported symbols found in ${LIB}: is it the library?")
endif()
if(_foreign)
  list(LENGTH _foreign _n)
  list(SUBLIST _foreign 0 20 _show)
  string(REPLACE ";" "\n  " _show "${_show}")
  message(FATAL_ERROR "${LIB} exports ${_n} symbols that are not sluice's (src/libsluice.map):\n  ${_show}")
endif()
if(READELF)
  execute_process(COMMAND ${READELF} -d ${LIB} OUTPUT_VARIABLE _dyn)
  if(NOT _dyn MATCHES "libstdc\\+\\+\\.so|libc\\+\\+\\.so")
    message(FATAL_ERROR "${LIB} does not link the C++ runtime as a shared library (no libstdc++.so "
                        "or libc++.so among its NEEDED entries): it carries a private copy; "
                        "build with a compiler that links it shared")
  endif()
endif()
message(STATUS "${LIB}: ${_count} exported symbols, all sluice's; shared C++ runtime")
