# Optional: libstdc++'s own parallel-algorithm tests through oa_offload(... STDPAR).
#
#   cmake --preset release -DOA_LIBSTDCXX_PSTL_TESTS=<dir>
#
# <dir> holds a copy of libstdc++-v3/testsuite's pstl tests, laid out as there
# (<dir>/25_algorithms/pstl/..., <dir>/26_numerics/pstl/..., the harness in
# <dir>/util/pstl/). They are GCC's and are not part of oa: bring them from a
# GCC source tree of the installed g++'s version. Unset (the default), nothing
# here is built.
#
# Each test .cc is read for its DejaGnu lines:
#   dg-do run         an executable built with oa_offload(STDPAR), run by
#                     stdpar/run_check.cmake on the host device and on an
#                     emulated device of each OA_LIBSTDCXX_PSTL_EMULATED_MEMORY
#                     budget, every call oa takes offloaded
#                     (OA_STDPAR_MIN=0, OA_HOST_THRESHOLD=0);
#   dg-do preprocess  a target compiled with the wrappers by its test (compile
#   or compile        implies preprocess), not by the default build;
#   dg-options -ltbb  links oneTBB; dg-timeout-factor scales the test's timeout;
#   { target c++NN }  the C++ standard (17 unless a later one is named).
# Tests named in OA_LIBSTDCXX_PSTL_SKIP (paths relative to <dir>, without .cc)
# are left out; the reason belongs in README.md.

set(OA_LIBSTDCXX_PSTL_TESTS "" CACHE PATH "a copy of libstdc++-v3/testsuite's pstl tests to run through oa (empty: none)")
# 1 MiB pages the tests' larger ranges through several chunks; 8 MiB is the
# smallest budget that holds one unit of every oa::stl stage (a sort's run,
# a scan's block: whole blocks, however short the range), below which those
# stages run on the host.
set(OA_LIBSTDCXX_PSTL_EMULATED_MEMORY "1MiB;8MiB" CACHE STRING "emulated device budgets the libstdc++ pstl tests run on")
set(OA_LIBSTDCXX_PSTL_SKIP "" CACHE STRING "libstdc++ pstl tests (relative paths without .cc) to leave out")

function(oa_libstdcxx_pstl_suite dir)
  if(NOT EXISTS "${dir}/util/pstl/test_utils.h")
    message(FATAL_ERROR "OA_LIBSTDCXX_PSTL_TESTS=${dir}: no util/pstl/test_utils.h there (libstdc++'s pstl harness)")
  endif()
  if(NOT TBB_FOUND)
    message(FATAL_ERROR "OA_LIBSTDCXX_PSTL_TESTS: libstdc++'s parallel algorithms need oneTBB, which was not found")
  endif()
  file(GLOB_RECURSE sources RELATIVE "${dir}" CONFIGURE_DEPENDS "${dir}/*/pstl/*.cc")
  list(SORT sources)
  set(built 0)
  foreach(rel IN LISTS sources)
    string(REGEX REPLACE "\\.cc$" "" name "${rel}")
    if(name IN_LIST OA_LIBSTDCXX_PSTL_SKIP)
      message(STATUS "libstdc++ pstl: ${name} left out (OA_LIBSTDCXX_PSTL_SKIP)")
      continue()
    endif()
    file(STRINGS "${dir}/${rel}" directives REGEX "{ *dg-")
    oa_libstdcxx_pstl_test("${dir}" "${rel}" "${name}" "${directives}")
    math(EXPR built "${built} + 1")
  endforeach()
  message(STATUS "libstdc++ pstl: ${built} tests from ${dir}")
endfunction()

# One test file: its target and its tests (libstdcxx_pstl/<name>/host,
# .../emulated_<budget> for a program; .../compile for a preprocess or
# compile test).
function(oa_libstdcxx_pstl_test dir rel name directives)
  string(MAKE_C_IDENTIFIER "pstl_${name}" target)
  set(kind "")
  set(std 17)
  set(factor 1)
  set(tbb OFF)
  foreach(line IN LISTS directives)
    if(line MATCHES "dg-do +([a-z]+)")
      set(kind ${CMAKE_MATCH_1})
      if(line MATCHES "c\\+\\+([0-9]+)")
        set(std ${CMAKE_MATCH_1})
      endif()
    elseif(line MATCHES "dg-timeout-factor +([0-9]+)")
      set(factor ${CMAKE_MATCH_1})
    elseif(line MATCHES "dg-options .*-ltbb")
      set(tbb ON)
    endif()
  endforeach()
  if(kind STREQUAL "run")
    add_executable(${target} "${dir}/${rel}")
  elseif(kind STREQUAL "preprocess" OR kind STREQUAL "compile")
    add_library(${target} OBJECT EXCLUDE_FROM_ALL "${dir}/${rel}")
  else()
    message(FATAL_ERROR "libstdc++ pstl: ${rel} has no dg-do run, compile or preprocess line")
  endif()
  set_target_properties(${target} PROPERTIES CXX_STANDARD ${std} CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  # The harness: "pstl/test_utils.h" and "pstl/pstl_test_config.h".
  target_include_directories(${target} PRIVATE "${dir}/util")
  # Their own code is not oa's: its warnings stay quiet, as in GCC's testsuite.
  target_compile_options(${target} PRIVATE -w)
  if(tbb)
    target_link_libraries(${target} PRIVATE TBB::tbb)
  endif()
  oa_offload(${target} STDPAR)
  math(EXPR timeout "300 * ${factor}")
  set(test libstdcxx_pstl/${name})
  if(kind STREQUAL "run")
    set(runs host)
    foreach(memory IN LISTS OA_LIBSTDCXX_PSTL_EMULATED_MEMORY)
      list(APPEND runs emulated_${memory})
    endforeach()
    foreach(run IN LISTS runs)
      string(REGEX REPLACE "_.*" "" device ${run})
      string(REGEX REPLACE "^[a-z]+_?" "" memory ${run})
      add_test(NAME ${test}/${run}
               COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}> -DDEVICE=${device} -DMEMORY=${memory}
                       -DREPORT=${CMAKE_CURRENT_BINARY_DIR}/libstdcxx_pstl/${target}.${run}.json
                       -P ${CMAKE_CURRENT_SOURCE_DIR}/stdpar/run_check.cmake)
      set_tests_properties(${test}/${run} PROPERTIES LABELS libstdcxx_pstl TIMEOUT ${timeout})
    endforeach()
  else()
    # Built by its test; the lock keeps two builds of one tree apart.
    add_test(NAME ${test}/compile COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ${target})
    set_tests_properties(${test}/compile PROPERTIES LABELS libstdcxx_pstl TIMEOUT ${timeout}
                                                    RESOURCE_LOCK oa_libstdcxx_pstl_build)
  endif()
endfunction()

if(OA_LIBSTDCXX_PSTL_TESTS)
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/libstdcxx_pstl)
  oa_libstdcxx_pstl_suite("${OA_LIBSTDCXX_PSTL_TESTS}")
endif()
