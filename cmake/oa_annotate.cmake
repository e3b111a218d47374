# oa_annotate(<target> LIBRARY <library> NAMESPACE <ns> HEADERS <header>...
#             ANNOTATIONS <file> [GPU_SOURCES <file>...])
#
# Rebuilds a program that uses a C++ library so that the library's annotated
# functions run through oa, without a change to the program's source or the
# library's:
#   - a compiled library's sources are compiled again, in a static library
#     <library>_oa, with its namespace renamed <ns>_plain (a compile
#     definition <ns>=<ns>_plain). A header-only library (an INTERFACE
#     target) has nothing to compile again: the program compiles it, renamed
#     by the headers below;
#   - GPU_SOURCES (the annotations' kernels, built when the CUDA toolkit is
#     found; then OA_ANNOTATIONS_GPU=1 is defined) are compiled with the same
#     rename and the library's usage requirements, into <library>_oa (for a
#     header-only library, a static library oa_annotate makes of them alone),
#     in the C++ standard the library asks for, at least 17;
#   - for each of HEADERS (as the program includes them, e.g. geo/series.hpp)
#     a header of the same name, found first, includes the library's under the
#     renamed namespace, then ANNOTATIONS, which opens <ns> again: the library
#     (using namespace <ns>_plain) with the annotated functions in front;
#   - <target> compiles with those headers and links <library>_oa and oa.
# It relies on: #include_next (GCC, Clang); the namespace's name appearing in
# the library's headers and sources only as that namespace; the program
# including the library through HEADERS (a header of the library reached
# only from another library header is renamed with it). Qualified calls
# (ns::f(...)) reach the annotated functions. An unqualified call finds the
# library's own function by argument-dependent lookup (the types live in
# ns_plain): alone, it runs on the CPU; with a using-declaration or
# using-directive that also finds the annotated one, it is ambiguous (a
# compile error naming both).
# GPU_SOURCES need oa built with CUDA and the CUDA language enabled; without,
# a warning says they are left out.
function(oa_annotate target)
  cmake_parse_arguments(ANN "" "LIBRARY;NAMESPACE;ANNOTATIONS" "HEADERS;GPU_SOURCES" ${ARGN})
  set(_fn "oa_annotate(${target})")
  if(ANN_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${_fn}: unknown arguments ${ANN_UNPARSED_ARGUMENTS}")
  endif()
  foreach(_req LIBRARY NAMESPACE HEADERS ANNOTATIONS)
    if(NOT ANN_${_req})
      message(FATAL_ERROR "${_fn}: ${_req} is required")
    endif()
  endforeach()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${_fn}: no such target")
  endif()
  if(NOT TARGET ${ANN_LIBRARY})
    message(FATAL_ERROR "${_fn}: LIBRARY ${ANN_LIBRARY} is not a target of this project")
  endif()
  get_target_property(_aliased ${ANN_LIBRARY} ALIASED_TARGET)
  if(_aliased)
    set(ANN_LIBRARY ${_aliased})
  endif()
  get_target_property(_imported ${ANN_LIBRARY} IMPORTED)
  if(_imported)
    message(FATAL_ERROR "${_fn}: LIBRARY ${ANN_LIBRARY} is imported (found installed): its sources must be built "
                        "again with the namespace renamed, so it must be a target this project builds")
  endif()
  get_target_property(_library_type ${ANN_LIBRARY} TYPE)
  if(NOT ANN_NAMESPACE MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${_fn}: NAMESPACE must be one identifier (a top-level namespace), not '${ANN_NAMESPACE}'")
  endif()
  get_filename_component(_annotations "${ANN_ANNOTATIONS}" ABSOLUTE)
  if(NOT EXISTS "${_annotations}")
    message(FATAL_ERROR "${_fn}: ANNOTATIONS ${_annotations} does not exist")
  endif()

  # GPU sources need the CUDA language (enabled by oa's own build when the
  # toolkit is found; a project using an installed oa enables it itself).
  get_property(_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(_gpu OFF)
  if(OA_HAS_CUDA AND ANN_GPU_SOURCES AND "CUDA" IN_LIST _languages)
    set(_gpu ON)
  elseif(ANN_GPU_SOURCES AND NOT TARGET ${ANN_LIBRARY}_oa)
    if(NOT OA_HAS_CUDA)
      set(_why "oa was built without the CUDA toolkit")
    else()
      set(_why "the CUDA language is not enabled in this project (project(... CUDA) or enable_language(CUDA))")
    endif()
    message(WARNING "${_fn}: GPU_SOURCES not built: ${_why}; the annotations' GPU versions are left out "
                    "(OA_ANNOTATIONS_GPU is not defined)")
  endif()

  # The library, renamed: built once, shared by every target annotated with it.
  set(_renamed ${ANN_LIBRARY}_oa)
  if(NOT TARGET ${_renamed})
    set(_gpu_abs)
    if(_gpu)
      foreach(_s IN LISTS ANN_GPU_SOURCES)
        get_filename_component(_s "${_s}" ABSOLUTE)
        list(APPEND _gpu_abs "${_s}")
      endforeach()
    endif()
    if(_library_type STREQUAL "INTERFACE_LIBRARY" AND NOT _gpu)
      # Header-only: the program compiles the library where it includes it,
      # renamed by the generated headers; nothing to build again.
      add_library(${_renamed} INTERFACE)
      target_link_libraries(${_renamed} INTERFACE ${ANN_LIBRARY} oa::oa)
    elseif(_library_type STREQUAL "INTERFACE_LIBRARY")
      # Header-only with GPU sources: they alone are compiled here, with the
      # library's usage requirements and the rename.
      add_library(${_renamed} STATIC ${_gpu_abs})
      target_link_libraries(${_renamed} PUBLIC ${ANN_LIBRARY} oa::oa)
      target_compile_definitions(${_renamed} PRIVATE ${ANN_NAMESPACE}=${ANN_NAMESPACE}_plain)
      set(_features_of ${ANN_LIBRARY} INTERFACE_COMPILE_FEATURES)
    else()
      get_target_property(_sources ${ANN_LIBRARY} SOURCES)
      get_target_property(_dir ${ANN_LIBRARY} SOURCE_DIR)
      set(_abs)
      foreach(_s IN LISTS _sources)
        if(IS_ABSOLUTE "${_s}" OR _s MATCHES "^\\$<")  # generator expressions as they are
          list(APPEND _abs "${_s}")
        else()
          list(APPEND _abs "${_dir}/${_s}")
        endif()
      endforeach()
      add_library(${_renamed} STATIC ${_abs} ${_gpu_abs})
      # The library's own build settings, and the rename.
      target_compile_definitions(${_renamed}
        PUBLIC $<TARGET_PROPERTY:${ANN_LIBRARY},INTERFACE_COMPILE_DEFINITIONS>
        PRIVATE $<TARGET_PROPERTY:${ANN_LIBRARY},COMPILE_DEFINITIONS> ${ANN_NAMESPACE}=${ANN_NAMESPACE}_plain)
      target_compile_options(${_renamed}
        PUBLIC $<TARGET_PROPERTY:${ANN_LIBRARY},INTERFACE_COMPILE_OPTIONS>
        PRIVATE $<TARGET_PROPERTY:${ANN_LIBRARY},COMPILE_OPTIONS>)
      target_include_directories(${_renamed}
        PUBLIC $<TARGET_PROPERTY:${ANN_LIBRARY},INTERFACE_INCLUDE_DIRECTORIES>
        PRIVATE $<TARGET_PROPERTY:${ANN_LIBRARY},INCLUDE_DIRECTORIES>)
      # Its link dependencies, private ones included: the copy is static.
      target_link_libraries(${_renamed} PUBLIC $<TARGET_PROPERTY:${ANN_LIBRARY},LINK_LIBRARIES> oa::oa)
      set_target_properties(${_renamed} PROPERTIES POSITION_INDEPENDENT_CODE ON)
      get_target_property(_features ${ANN_LIBRARY} COMPILE_FEATURES)
      if(_features)
        target_compile_features(${_renamed} PUBLIC ${_features})
      endif()
      set(_features_of ${ANN_LIBRARY} COMPILE_FEATURES)
    endif()
    if(_gpu)
      # The kernels see the library's headers: its C++ standard, at least 17.
      get_target_property(_features ${_features_of})
      set(_cuda_standard 17)
      foreach(_std 20 23)
        if("cxx_std_${_std}" IN_LIST _features)
          set(_cuda_standard ${_std})
        endif()
      endforeach()
      target_compile_definitions(${_renamed} PUBLIC OA_ANNOTATIONS_GPU=1)
      set_target_properties(${_renamed} PROPERTIES CUDA_STANDARD ${_cuda_standard} CUDA_STANDARD_REQUIRED ON
                                                   POSITION_INDEPENDENT_CODE ON)
      target_link_libraries(${_renamed} PUBLIC CUDA::cudart)
    endif()
  endif()

  # The headers the program includes, each: the library's under the renamed
  # namespace, then the annotations.
  set(_shims ${CMAKE_BINARY_DIR}/oa_annotate/${ANN_LIBRARY})
  foreach(_h IN LISTS ANN_HEADERS)
    file(CONFIGURE OUTPUT ${_shims}/${_h} @ONLY CONTENT
"#pragma once
// Generated by oa_annotate(): ${ANN_LIBRARY}'s <${_h}> with namespace ${ANN_NAMESPACE}
// renamed ${ANN_NAMESPACE}_plain, then its annotations, which open ${ANN_NAMESPACE} again.
#define ${ANN_NAMESPACE} ${ANN_NAMESPACE}_plain
#include_next <${_h}>
#undef ${ANN_NAMESPACE}
#include \"${_annotations}\"
")
  endforeach()
  target_include_directories(${target} BEFORE PRIVATE ${_shims})
  target_link_libraries(${target} PRIVATE ${_renamed})
  target_compile_features(${target} PRIVATE cxx_std_20)
endfunction()
