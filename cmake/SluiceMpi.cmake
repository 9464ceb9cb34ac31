# Decides whether the dist layer talks MPI (SLUICE_MPI) and, on cuda, NCCL. Without MPI a program
# is one process (its ranks are contexts of that process); NCCL is used only by the cuda backend.
set(SLUICE_MPI "AUTO" CACHE STRING "MPI for the dist layer: AUTO (if found), ON or OFF")
set_property(CACHE SLUICE_MPI PROPERTY STRINGS AUTO ON OFF)
set(SLUICE_HAVE_MPI OFF)
if(NOT SLUICE_MPI STREQUAL "OFF")
  # The C API through the C++ compiler: no C language to enable, no C++ bindings needed.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(SLUICE_HAVE_MPI ON)
  elseif(SLUICE_MPI STREQUAL "ON")
    message(FATAL_ERROR "SLUICE_MPI=ON but no MPI was found; install libopenmpi-dev openmpi-bin "
                        "(scripts/install-deps) or configure with -DSLUICE_MPI=OFF")
  endif()
endif()
message(STATUS "sluice: MPI ${SLUICE_HAVE_MPI}")

# NCCL ships with the CUDA toolkit here (nccl.h, libnccl.so beside the runtime); elsewhere point
# CMAKE_PREFIX_PATH at an NCCL installation.
set(SLUICE_HAVE_NCCL OFF)
if(SLUICE_HAVE_CUDA)
  find_path(SLUICE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(SLUICE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(SLUICE_NCCL_INCLUDE_DIR AND SLUICE_NCCL_LIBRARY)
    set(SLUICE_HAVE_NCCL ON)
  endif()
  message(STATUS "sluice: NCCL ${SLUICE_HAVE_NCCL}")
endif()
