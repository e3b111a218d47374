# A host stage beside a device stage, seen in the trace: oa-bench's
# dag-ensemble on an emulated device with OA_TRACE, mode oa (the sort's
# merge on the host runs beside the prefix sum on the device) and mode
# serial (one stage at a time), each trace read by bench/trace_overlap.py.
foreach(mode oa serial)
  set(trace ${OUT}/trace-dag-ensemble-${mode}.json)
  file(REMOVE ${trace})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env OA_TRACE=${trace} ${OA_BENCH} --workload dag-ensemble
                          --elements 2Mi --device emulated --device-memory 8MiB --link-gbps 2 --repeat 1 --mode ${mode}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "oa-bench --mode ${mode} failed (${rc}):\n${out}${err}")
  endif()
  execute_process(COMMAND ${PYTHON} ${CHECK} ${trace} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("mode ${mode}: ${out}${err}")
  if(mode STREQUAL "oa" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "mode oa: no host stage beside a device stage in ${trace} (${rc})")
  endif()
  if(mode STREQUAL "serial" AND NOT rc EQUAL 1)
    message(FATAL_ERROR "mode serial: expected no host stage beside a device stage in ${trace} (${rc})")
  endif()
endforeach()
