# Runs a program under some OA_* settings and checks how it ends: its exit
# status and one line of output.
#   -DPROGRAM=<path> -DARGS=<a|b|c> -DSET=<VAR=value|VAR=value>
#   -DEXPECT_RC=<status> -DEXPECT=<regex>
#   -DSTREAM=stderr (default; the whole of stderr must be that one line), stderr-first
#    (its first line: CLI11 adds a hint), stderr-all (anywhere in all of it) or stdout
#   -DALT_RC=<status> -DALT_EXPECT=<regex on stdout>: another accepted outcome
#    (a run on a machine with a GPU, say)
# Every other OA_* variable is unset, so the caller's environment cannot leak in.
foreach(v CONFIG DEVICE DEVICE_MEMORY STREAMS CHUNK_BYTES HOST_THRESHOLD REPORT TRACE LINK_GBPS FAIL_LAUNCH
          FAIL_COPY FAIL_STICKY EMULATED_DEVICE_FUNCTIONS EMULATED_FUSED SEQUENTIAL CUDA_STAGING PROGRESS VERBOSE
          STDPAR_MIN PLACEMENT PERF_MODELS DEVICES SPREAD SERIAL_STAGES)
  unset(ENV{OA_${v}})
endforeach()
string(REPLACE "|" ";" set_list "${SET}")
foreach(kv IN LISTS set_list)
  string(FIND "${kv}" "=" eq)
  string(SUBSTRING "${kv}" 0 ${eq} name)
  math(EXPR value_begin "${eq} + 1")
  string(SUBSTRING "${kv}" ${value_begin} -1 value)
  set(ENV{${name}} "${value}")
endforeach()
string(REPLACE "|" ";" arg_list "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${arg_list} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)

if(DEFINED ALT_RC AND rc STREQUAL "${ALT_RC}" AND out MATCHES "${ALT_EXPECT}")
  message(STATUS "exit status ${rc} with '${ALT_EXPECT}' on stdout (the other accepted outcome)")
  return()
endif()
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
if(STREAM STREQUAL "stdout")
  if(NOT out MATCHES "${EXPECT}")
    message(FATAL_ERROR "stdout does not match '${EXPECT}':\n${out}")
  endif()
elseif(STREAM STREQUAL "stderr-all")
  if(NOT err MATCHES "${EXPECT}")
    message(FATAL_ERROR "stderr does not match '${EXPECT}':\n${err}")
  endif()
elseif(STREAM STREQUAL "stderr-first")
  string(REGEX REPLACE "\n.*" "" line "${err}")
  if(NOT line MATCHES "${EXPECT}")
    message(FATAL_ERROR "stderr's first line does not match '${EXPECT}':\n${err}")
  endif()
else()
  string(REGEX REPLACE "\n$" "" line "${err}")
  if(line MATCHES "\n")
    message(FATAL_ERROR "expected one line on stderr, got:\n${err}")
  endif()
  if(NOT line MATCHES "${EXPECT}")
    message(FATAL_ERROR "stderr does not match '${EXPECT}':\n${err}")
  endif()
endif()
