# Decides whether the cuda backend is built. It compiles wherever nvcc is found, GPU or not.
set(SLUICE_HAVE_CUDA OFF)
if(NOT SLUICE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper; override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    # The shared runtime everywhere: the cuda module and a program's own .cu files must share one
    # (a kernel registered with one runtime cannot be launched through another).
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      # CMake 3.25 (Debian 12) knows no nvcc flag for CUDA20 and refuses to generate; nvcc 12+
      # takes -std=c++20.
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(SLUICE_HAVE_CUDA ON)
  elseif(SLUICE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SLUICE_CUDA=ON but no CUDA compiler was found; install the CUDA toolkit "
                        "or configure with -DSLUICE_CUDA=OFF")
  endif()
endif()
message(STATUS "sluice: cuda backend ${SLUICE_HAVE_CUDA}")
