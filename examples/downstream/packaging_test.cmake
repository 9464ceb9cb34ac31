# The packaging test (cmake -P): install a sluice build into a scratch prefix, then configure,
# build and run the downstream project against it.
#   -DSLUICE_BUILD_DIR=  a configured and built sluice tree
#   -DDOWNSTREAM_SOURCE_DIR=  examples/downstream
#   -DWORK_DIR=  scratch directory (emptied first)
#   -DGENERATOR=, -DCXX_COMPILER=, -DBUILD_TYPE=  as the sluice build used
#   -DHAVE_CUDA=  whether that build made the cuda module
#   -DEXTRA_PREFIX_PATH=  where that build found its dependencies (the consumer needs Boost too)
foreach(var SLUICE_BUILD_DIR DOWNSTREAM_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "packaging_test.cmake needs -D${var}=...")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message(STATUS "$ ${ARGV}\n${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "packaging test: command failed (${rc}): ${ARGV}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${SLUICE_BUILD_DIR} --prefix ${prefix} --config ${BUILD_TYPE})
foreach(f include/sluice/sluice.hpp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "packaging test: ${f} was not installed")
  endif()
endforeach()
# The consumer finds sluice's own dependencies (Boost.Context) where the build found them.
if(EXTRA_PREFIX_PATH)
  string(REPLACE ";" ":" extra "${EXTRA_PREFIX_PATH}")
  set(ENV{CMAKE_PREFIX_PATH} "${extra}")
endif()
run(${CMAKE_COMMAND} -S ${DOWNSTREAM_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
# Where the cuda backend was built, its module is installed beside libsluice and both programs
# load it from there, not from the build tree.
file(GLOB module ${prefix}/lib*/libsluice-cuda.so)
if(HAVE_CUDA AND NOT module)
  message(FATAL_ERROR "packaging test: the cuda module libsluice-cuda.so was not installed")
endif()
foreach(program downstream downstream_static)
  run(${WORK_DIR}/build/${program})
  if(module AND NOT last_output MATCHES "backend cuda: [0-9]+ devices \\(module ${module}\\)")
    message(FATAL_ERROR "packaging test: ${program} did not load the installed ${module}")
  endif()
endforeach()
if(EXISTS ${prefix}/bin/sluice)
  run(${prefix}/bin/sluice devices)
endif()
