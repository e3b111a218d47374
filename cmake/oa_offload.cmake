# oa_offload(<target> [NO_PRODUCTS] [NO_CWISE] [NO_REDUCTIONS]
#            [PINNED_ALLOCATIONS [PINNED_MIN <bytes>]] [STDPAR])
#
# Recompiles an unmodified Eigen program so that its large dense products run
# through oa's engine: <target>'s C++ include path starts with wrappers of
# Eigen's module headers (cmake/oa_eigen_first.cmake), so that wherever a
# translation unit includes Eigen (<Eigen/Core>, <Eigen/Dense>,
# <unsupported/Eigen/...>, <eigen3/Eigen/...>), Eigen comes in as the
# program configured it and the hooks (oa/eigen/offload.hpp) right after,
# before any of its code; and <target> links oa.
# Which hooks are compiled in comes as -D flags (NO_PRODUCTS: none for
# products, -DOA_OFFLOAD_PRODUCTS=0; NO_CWISE: coefficient-wise assignments;
# NO_REDUCTIONS: sum, minCoeff, ...); thresholds and devices are run-time
# settings (OA_OFFLOAD_GEMM_MIN, OA_OFFLOAD_ELEMENTS_MIN, OA_DEVICE, ..., see
# README.md).
# PINNED_ALLOCATIONS: the program's float and double matrices and arrays of
# PINNED_MIN bytes or more (default 1 MiB) take their memory from oa's pinned
# pool (oa::pinned_memory()): they cross the link to a GPU with no staging
# copy (-DOA_OFFLOAD_PINNED_ALLOCATIONS=<bytes>, see oa/eigen/pinned_storage.hpp).
#
# STDPAR: the standard parallel algorithms as well. <algorithm>, <numeric>
# and <execution> are wrapped the same way (include/oa/stdpar/first/): after
# the standard headers come overloads for std::execution::par and par_unseq
# (oa/stdpar/overloads.hpp), so that an unmodified program's calls over
# contiguous ranges of int32, int64, float and double with no operation or a
# standard function object run through oa's engine, eagerly, and every other
# call as in the plain build. The program builds as C++17 or later. Its CUDA
# sources get the wrappers too: there, compiled as C++20, the program's
# device-callable functors (extended __host__ __device__ lambdas without
# captures, classes marked oa_device_callable) go to the engine as well.
#
# It must reach every translation unit that uses Eigen, libraries of the
# program included: a unit built without the hooks instantiates Eigen's
# product templates differently, and the linker keeps one of the two, so
# which one a product gets would depend on link order. Eigen's own
# configuration may come as #defines in the sources before they include
# Eigen (eigen_assert, EIGEN_DEFAULT_DENSE_INDEX_TYPE, EIGEN_MATRIX_PLUGIN,
# ...) or as compile definitions, as in the plain build. The Eigen hooks
# leave CUDA sources of the target as they are.
function(oa_offload target)
  cmake_parse_arguments(OFF "NO_PRODUCTS;NO_CWISE;NO_REDUCTIONS;PINNED_ALLOCATIONS;STDPAR" "PINNED_MIN" "" ${ARGN})
  if(OFF_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "oa_offload(${target}): unknown arguments ${OFF_UNPARSED_ARGUMENTS}")
  endif()
  if(DEFINED OFF_PINNED_MIN AND NOT OFF_PINNED_ALLOCATIONS)
    message(FATAL_ERROR "oa_offload(${target}): PINNED_MIN ${OFF_PINNED_MIN} without PINNED_ALLOCATIONS")
  endif()
  if(DEFINED OFF_PINNED_MIN AND NOT OFF_PINNED_MIN MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "oa_offload(${target}): PINNED_MIN '${OFF_PINNED_MIN}' is not a positive number of bytes")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "oa_offload(${target}): no such target")
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    message(FATAL_ERROR "oa_offload(${target}): an interface library compiles nothing; offload the targets that use it")
  endif()
  if(NOT TARGET oa::offload)
    message(FATAL_ERROR "oa_offload(${target}): oa::offload is not defined (find_package(oa) or add_subdirectory(oa) first)")
  endif()
  # The hooks build as C++14 or later: the program keeps its own standard.
  target_link_libraries(${target} PRIVATE oa::offload)
  get_property(_first GLOBAL PROPERTY OA_EIGEN_FIRST_DIR)
  if(NOT _first OR NOT IS_DIRECTORY "${_first}")
    message(FATAL_ERROR "oa_offload(${target}): the Eigen wrapper headers are missing ('${_first}'): "
                        "reinstall oa or reconfigure its build")
  endif()
  target_include_directories(${target} BEFORE PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${_first}>")
  if(OFF_STDPAR)
    get_property(_stdpar GLOBAL PROPERTY OA_STDPAR_FIRST_DIR)
    if(NOT _stdpar OR NOT IS_DIRECTORY "${_stdpar}" OR NOT TARGET oa::stdpar)
      message(FATAL_ERROR "oa_offload(${target} STDPAR): the standard-algorithm wrappers are missing "
                          "('${_stdpar}'): reinstall oa or reconfigure its build")
    endif()
    target_include_directories(${target} BEFORE PRIVATE "$<$<COMPILE_LANGUAGE:CXX,CUDA>:${_stdpar}>")
    target_link_libraries(${target} PRIVATE oa::stdpar)
    # CUDA units call oa::stl themselves (a kernel over the program's functor):
    # they see oa's headers, without C++20 forced on the target's C++ units.
    target_include_directories(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:$<TARGET_PROPERTY:oa::oa,INTERFACE_INCLUDE_DIRECTORIES>>")
    target_compile_definitions(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:$<TARGET_PROPERTY:oa::oa,INTERFACE_COMPILE_DEFINITIONS>>")
    target_compile_definitions(${target} PRIVATE OA_OFFLOAD_STDPAR=1)
  endif()
  target_compile_definitions(${target} PRIVATE OA_OFFLOAD=1)
  foreach(_part PRODUCTS CWISE REDUCTIONS)
    if(OFF_NO_${_part})
      target_compile_definitions(${target} PRIVATE OA_OFFLOAD_${_part}=0)
    endif()
  endforeach()
  if(OFF_PINNED_ALLOCATIONS)
    if(NOT DEFINED OFF_PINNED_MIN)
      set(OFF_PINNED_MIN 1048576)
    endif()
    target_compile_definitions(${target} PRIVATE OA_OFFLOAD_PINNED_ALLOCATIONS=${OFF_PINNED_MIN})
  endif()
endfunction()
