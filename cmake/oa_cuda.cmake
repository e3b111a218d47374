# CUDA toolkit detection. Works on machines without a GPU or driver: only the
# compiler and the toolkit libraries are looked for, never libcuda.
include(CheckLanguage)

set(OA_HAS_CUDA OFF)
if(NOT OA_ENABLE_CUDA STREQUAL "OFF")
  # CMake takes the CUDAARCHS environment variable when it is set.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 80 90)  # never "native": it fails without a GPU
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    # oa's headers are C++20, which nvcc 12+ takes; CMake before 3.26 does not
    # know the flag for it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(OA_HAS_CUDA ON)
    message(STATUS "oa: CUDA toolkit ${CUDAToolkit_VERSION} found at ${CUDAToolkit_BIN_DIR}")
  elseif(OA_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "oa: OA_ENABLE_CUDA=ON but no CUDA compiler and toolkit were found "
                        "(set CMAKE_CUDA_COMPILER or CUDAToolkit_ROOT)")
  else()
    message(STATUS "oa: CUDA toolkit not found; building the host and emulated devices only")
  endif()
endif()

# The CUDA parts of the runtime: NVRTC for generated kernels. Nothing here
# links libcuda: the runtime library loads the driver when a GPU is used.
function(oa_configure_cuda target)
  if(NOT OA_HAS_CUDA)
    return()
  endif()
  set(dirs ${CUDAToolkit_INCLUDE_DIRS})
  foreach(d IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS ${d}/cccl)
      list(APPEND dirs ${d}/cccl)
    endif()
  endforeach()
  list(JOIN dirs ":" dirs_joined)
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src/cuda/nvrtc_compiler.cpp
                                   ${PROJECT_SOURCE_DIR}/src/cuda/cuda_device.cpp
                                   ${PROJECT_SOURCE_DIR}/src/cuda/cuda_rates.cpp
                                   ${PROJECT_SOURCE_DIR}/src/cuda/gemm_cublas.cpp
                                   ${PROJECT_SOURCE_DIR}/src/cuda/stl_cub.cu)
  target_compile_definitions(${target} PUBLIC OA_HAS_CUDA=1 PRIVATE OA_CUDA_INCLUDE_DIRS="${dirs_joined}")
  # CUDA::nvrtc carries CUDA::cuda_driver (libcuda) as a dependency; NVRTC
  # itself does not need the driver, so its library is linked alone.
  # The toolkit's own library folders first: CUDAToolkit_LIBRARY_DIR can name
  # a system folder (CMake 4 may resolve it to /usr/local/lib).
  set(nvrtc_hints)
  foreach(root IN ITEMS "${CUDAToolkit_TARGET_DIR}" "${CUDAToolkit_ROOT}" "${CUDAToolkit_BIN_DIR}/..")
    if(root AND NOT root STREQUAL "/..")
      list(APPEND nvrtc_hints ${root}/lib64 ${root}/lib ${root}/targets/${CMAKE_SYSTEM_PROCESSOR}-linux/lib
                              ${root}/targets/sbsa-linux/lib)
    endif()
  endforeach()
  find_library(OA_NVRTC_LIBRARY nvrtc HINTS ${nvrtc_hints} ${CUDAToolkit_LIBRARY_DIR})
  if(NOT OA_NVRTC_LIBRARY)
    list(REMOVE_DUPLICATES nvrtc_hints)
    message(FATAL_ERROR "oa: libnvrtc not found in the CUDA toolkit (looked in ${nvrtc_hints};"
                        "${CUDAToolkit_LIBRARY_DIR}); set OA_NVRTC_LIBRARY to its path")
  endif()
  message(STATUS "oa: NVRTC: ${OA_NVRTC_LIBRARY}")
  target_link_libraries(${target} PUBLIC CUDA::cudart CUDA::cublas ${OA_NVRTC_LIBRARY})
endfunction()
