# Installs the build to a scratch prefix, then configures, builds and runs
# examples/consumer against it with find_package(oa): a program using oa::oa,
# a plain Eigen program built with oa_offload(), and a program using a
# header-only library rebuilt with oa_annotate().
file(REMOVE_RECURSE ${WORK_DIR})
macro(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endmacro()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
# The project enables no CUDA: the header-only library's GPU source is left out, and said so.
if(NOT err MATCHES "oa_annotate\\(stats_report_offload\\): GPU_SOURCES not built")
  message(FATAL_ERROR "no warning that the GPU sources were left out:\n${err}")
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
message(STATUS "installed oa found, linked and ran: ${out}")

# The offloaded program's 128 x 128 product (128 KiB an operand) paged
# through an emulated device of 64 KiB, as its report must show
# (OA_HOST_THRESHOLD=0: data this small would otherwise stay on the host).
unset(ENV{OA_CONFIG})
set(ENV{OA_DEVICE} emulated)
set(ENV{OA_DEVICE_MEMORY} 64KiB)
set(ENV{OA_OFFLOAD_GEMM_MIN} 0)
set(ENV{OA_HOST_THRESHOLD} 0)
set(ENV{OA_REPORT} ${WORK_DIR}/report.json)
run(${WORK_DIR}/build/consumer_offload)
file(READ ${WORK_DIR}/report.json report)
string(JSON op GET "${report}" stages 0 op)
string(JSON device GET "${report}" stages 0 device)
string(JSON peak GET "${report}" stages 0 peak_device_bytes)
if(NOT op STREQUAL "gemm" OR NOT device MATCHES "^emulated" OR peak GREATER 65536)
  message(FATAL_ERROR "expected a gemm stage on the emulated device within 65536 bytes:\n${report}")
endif()
message(STATUS "oa_offload() from the installed package: gemm on ${device}, peak ${peak} device bytes; ${out}")

# The header-only library's program and its annotated build print the same,
# the annotated one paged through a 256 KiB emulated device (the check of
# tests/offload_programs.cmake).
run(${CMAKE_COMMAND} -DPLAIN=${WORK_DIR}/build/stats_report -DOFFLOADED=${WORK_DIR}/build/stats_report_offload
    -DN=300000 "-DSET=OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_HOST_THRESHOLD=0"
    -DREPORT=${WORK_DIR}/stats_report.json -DOP=stage
    "-DCALLS=stats::dnorm|stats::pnorm|stats::cubic|stats::standardize|stats::clamp|stats::sum" -DEXPECT=paged
    -DSTAGES=11 -DBUDGET=262144 -P ${SOURCE_DIR}/tests/offload_programs.cmake)
message(STATUS "oa_annotate() of a header-only library from the installed package: ${out}")
