# Unmodified Eigen programs rebuilt with oa_offload(): each of examples/eigen_gemm.cpp,
# eigen_blackscholes.cpp and eigen_haversine.cpp built as it is and offloaded, run
# side by side on the same input.
#
# Included from tests/CMakeLists.txt, this file declares the tests; run with
# -P, it is the check each test runs:
#   -DPLAIN=<program> -DOFFLOADED=<program> -DN=<the programs' argument> -DREPORT=<json path>
#   -DSET=<VAR=value|VAR=value>: the OA_* settings of both runs (every other OA_* unset)
#   -DOP=gemm|cwise: the report's operations the check is about (products, or
#    coefficient-wise assignments); the report may list others
#   -DEXPECT=paged -DSTAGES=<count> -DBUDGET=<bytes>: every one of the STAGES operations ran
#    through the engine on the emulated device, in more than one chunk, within BUDGET bytes
#   -DEXPECT=below -DSTAGES=<count>: none did; the report counts each as below the
#    operation's threshold (OA_OFFLOAD_GEMM_MIN, OA_OFFLOAD_ELEMENTS_MIN)
#   -DDIMS=<dims>: optional, the dims every stage of OP must report (e.g. elements=1000)
#   -DOP=stage -DCALLS=<f|g|...>: stages of annotated calls; those whose first call is one of
#    CALLS are the ones counted (others, CPU-only calls on the host, may be listed too)
# Both runs must print the same lines, their numbers agreeing within a relative
# tolerance: 1e-9 on lines of double results, 1e-4 on lines naming float
# (numbers below 1 in magnitude are held to it absolutely: entries near zero
# come from cancellation, in any summation order).

if(NOT CMAKE_SCRIPT_MODE_FILE)
  set(_offload_programs_check ${CMAKE_CURRENT_LIST_FILE})
  # Test <name>: oa_example_<program> and oa_example_<program>_offload with argument <n>.
  function(oa_offload_program_test name program n set)
    if(NOT TARGET oa_example_${program} OR NOT TARGET oa_example_${program}_offload)
      return()
    endif()
    add_test(NAME ${name}
             COMMAND ${CMAKE_COMMAND} -DPLAIN=$<TARGET_FILE:oa_example_${program}>
                     -DOFFLOADED=$<TARGET_FILE:oa_example_${program}_offload> -DN=${n} "-DSET=${set}"
                     -DREPORT=${CMAKE_CURRENT_BINARY_DIR}/${name}.json ${ARGN} -P ${_offload_programs_check})
    set_tests_properties(${name} PROPERTIES LABELS unit)
  endfunction()

  # 300 x 300 doubles are 720 KB a matrix: paged through a 256 KiB device.
  # OA_HOST_THRESHOLD=0: the block product's 900 KB would otherwise count as
  # small enough for the host device. Its two matrix-vector products run
  # through the engine too (on the host's cores: reported, not counted here).
  oa_offload_program_test(example_eigen_gemm_paged eigen_gemm 300
                          "OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_OFFLOAD_GEMM_MIN=0|OA_OFFLOAD_GEMV_MIN=0|OA_HOST_THRESHOLD=0"
                          -DOP=gemm -DEXPECT=paged -DSTAGES=4 -DBUDGET=262144)
  # 64^3 multiply-adds are far below the default threshold: Eigen keeps every product.
  oa_offload_program_test(example_eigen_gemm_below_threshold eigen_gemm 64 "" -DOP=gemm -DEXPECT=below -DSTAGES=4)

  # The workloads: arrays of 100000 doubles are 800 KB each, paged through a
  # 256 KiB device, one stage per statement. Each program runs its statements
  # twice: on random inputs, then on WORKLOADS.md's constant check inputs
  # (32 statements for Black-Scholes, 16 for Haversine).
  set(_paged_cwise "OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_HOST_THRESHOLD=0|OA_OFFLOAD_ELEMENTS_MIN=0")
  oa_offload_program_test(example_eigen_blackscholes_paged eigen_blackscholes 100000 "${_paged_cwise}"
                          -DOP=cwise -DEXPECT=paged -DSTAGES=64 -DBUDGET=262144 -DDIMS=elements=100000)
  oa_offload_program_test(example_eigen_haversine_paged eigen_haversine 100000 "${_paged_cwise}"
                          -DOP=cwise -DEXPECT=paged -DSTAGES=32 -DBUDGET=262144 -DDIMS=elements=100000)
  # 1000 coefficients are far below the default OA_OFFLOAD_ELEMENTS_MIN: Eigen keeps every statement.
  oa_offload_program_test(example_eigen_blackscholes_below_threshold eigen_blackscholes 1000 ""
                          -DOP=cwise -DEXPECT=below -DSTAGES=64)
  oa_offload_program_test(example_eigen_haversine_below_threshold eigen_haversine 1000 ""
                          -DOP=cwise -DEXPECT=below -DSTAGES=32)

  # A program that configures Eigen in its source (a throwing eigen_assert, int
  # indices, a matrix plugin, NaN-initialised matrices): 300 x 300 doubles
  # (720 KB) paged through a 1 MiB device, its product and its
  # coefficient-wise statement each one stage; its assertion fires through
  # both kinds of statement, in both builds.
  set(_configured "OA_DEVICE=emulated|OA_DEVICE_MEMORY=1MiB|OA_HOST_THRESHOLD=0|OA_OFFLOAD_GEMM_MIN=0|OA_OFFLOAD_ELEMENTS_MIN=0")
  oa_offload_program_test(example_eigen_configured_gemm eigen_configured 300 "${_configured}"
                          -DOP=gemm -DEXPECT=paged -DSTAGES=1 -DBUDGET=1048576)
  oa_offload_program_test(example_eigen_configured_cwise eigen_configured 300 "${_configured}"
                          -DOP=cwise -DEXPECT=paged -DSTAGES=1 -DBUDGET=1048576 -DDIMS=elements=90000)

  # A standard-parallelism program rebuilt with oa_offload(... STDPAR): arrays
  # of 2000000 doubles (16 MB) paged through an 8 MiB device. Its fills,
  # copies, additions, sums, dot product, scan, sorts and count run through
  # the engine, every family's threshold at 0 (19 stages; sort's merge and
  # the reductions' init on the host); its lambdas (scale, triad) stay with
  # the standard library.
  oa_offload_program_test(example_stdpar_stream_paged stdpar_stream 2000000
                          "OA_DEVICE=emulated|OA_DEVICE_MEMORY=8MiB|OA_HOST_THRESHOLD=0|OA_STDPAR_MIN=0" -DOP=stage
                          "-DCALLS=std::fill|std::copy (into the caller's range)|std::transform (binary)|std::reduce|std::transform_reduce (binary)|oa::stl::scan (block totals)|oa::stl::scan|oa::stl::sort (runs)|std::count"
                          -DEXPECT=paged -DSTAGES=19 -DBUDGET=8388608)

  # A third-party library's program rebuilt with its annotations (oa_annotate):
  # series of 300000 samples (2.4 MB) paged through a 256 KiB device; the
  # element-wise call and the two hand-written kernels (their emulated twins
  # are geo's own functions) in chunks, geo::total (CPU only) on the host.
  oa_offload_program_test(example_geo_survey_paged geo_survey 300000
                          "OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_HOST_THRESHOLD=0"
                          -DOP=stage "-DCALLS=geo::rescale|geo::calibrate|geo::clamp" -DEXPECT=paged -DSTAGES=3
                          -DBUDGET=262144)
  oa_offload_program_test(example_geo_survey_fused geo_survey 300000
                          "OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_HOST_THRESHOLD=0|OA_EMULATED_FUSED=1"
                          -DOP=stage "-DCALLS=geo::rescale|geo::calibrate|geo::clamp" -DEXPECT=paged -DSTAGES=3
                          -DBUDGET=262144)
  # A header-only library's program rebuilt with its annotations: 300000
  # samples (2.4 MB) paged through a 256 KiB device, every call in chunks:
  # the expressions, the hand-written kernel (its emulated twin is stats' own
  # function) and the sums (one per printed line); again with
  # OA_EMULATED_FUSED=1, where each expression is a generated kernel.
  set(_stats_calls "-DCALLS=stats::dnorm|stats::pnorm|stats::cubic|stats::standardize|stats::clamp|stats::sum")
  oa_offload_program_test(example_stats_report_paged stats_report 300000
                          "OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_HOST_THRESHOLD=0"
                          -DOP=stage "${_stats_calls}" -DEXPECT=paged -DSTAGES=11 -DBUDGET=262144)
  oa_offload_program_test(example_stats_report_fused stats_report 300000
                          "OA_DEVICE=emulated|OA_DEVICE_MEMORY=256KiB|OA_HOST_THRESHOLD=0|OA_EMULATED_FUSED=1"
                          -DOP=stage "${_stats_calls}" -DEXPECT=paged -DSTAGES=11 -DBUDGET=262144)
  return()
endif()

# ---- the check (cmake -P) ---------------------------------------------------------

cmake_policy(VERSION 3.25)  # if() takes quoted strings as strings (CMP0054)

# Every OA_* variable of the caller's environment is unset: none may leak in.
execute_process(COMMAND ${CMAKE_COMMAND} -E environment OUTPUT_VARIABLE environment)
string(REGEX MATCHALL "(^|\n)OA_[A-Za-z0-9_]*=" inherited "${environment}")
foreach(name IN LISTS inherited)
  string(REGEX REPLACE "[\n=]" "" name "${name}")
  unset(ENV{${name}})
endforeach()
string(REPLACE "|" ";" set_list "${SET}")
foreach(kv IN LISTS set_list)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${kv}")
  set(ENV{${CMAKE_MATCH_1}} "${CMAKE_MATCH_2}")
endforeach()

function(run_program program out_var)
  execute_process(COMMAND ${program} ${N} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${program} ${N}: exit status ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
run_program(${PLAIN} plain)
file(REMOVE ${REPORT})
set(ENV{OA_REPORT} ${REPORT})
run_program(${OFFLOADED} offloaded)

# -- the printed numbers --
set(number_re "[-+]?[0-9]\\.[0-9]+e[-+][0-9]+")

function(pow10 k out_var)
  string(REPEAT "0" ${k} zeros)
  set(${out_var} "1${zeros}" PARENT_SCOPE)
endfunction()

# A number printed by %.*e as an integer mantissa and a decimal exponent.
function(parse_number text mantissa_var exponent_var)
  string(REGEX MATCH "^([-+]?)([0-9])\\.([0-9]+)e([-+])([0-9]+)$" _ "${text}")
  set(sign "${CMAKE_MATCH_1}")
  set(first "${CMAKE_MATCH_2}")
  set(fraction "${CMAKE_MATCH_3}")
  set(exp_sign "${CMAKE_MATCH_4}")
  set(exp "${CMAKE_MATCH_5}")
  # Without leading zeros, which math() would not take as decimal.
  string(REGEX REPLACE "^0+" "" digits "${first}${fraction}")
  string(REGEX REPLACE "^0+" "" exp "${exp}")
  if(digits STREQUAL "")
    set(digits 0)
  endif()
  if(exp STREQUAL "")
    set(exp 0)
  endif()
  string(LENGTH "${fraction}" fraction_digits)
  math(EXPR exponent "${exp_sign}${exp} - ${fraction_digits}")
  if(sign STREQUAL "-")
    set(digits "-${digits}")
  endif()
  set(${mantissa_var} ${digits} PARENT_SCOPE)
  set(${exponent_var} ${exponent} PARENT_SCOPE)
endfunction()

# Whether |a - b| <= 10^-t max(|a|, |b|, 1), in 64-bit integers: both
# mantissas brought to the larger exponent R (the smaller number loses
# digits far below the tolerance), then D = |a' - b'| and S = max(|a'|, |b'|)
# in units of 10^R.
function(agree a b t out_var)
  parse_number(${a} ma ea)
  parse_number(${b} mb eb)
  if(ea GREATER eb)
    set(r ${ea})
  else()
    set(r ${eb})
  endif()
  foreach(x a b)
    math(EXPR shift "${r} - ${e${x}}")
    if(shift GREATER 18)
      set(m${x} 0)
    else()
      pow10(${shift} p)
      math(EXPR m${x} "${m${x}} / ${p}")
    endif()
    string(REGEX REPLACE "^-" "" abs_${x} "${m${x}}")
  endforeach()
  math(EXPR d "${ma} - (${mb})")
  string(REGEX REPLACE "^-" "" d "${d}")
  if(abs_a GREATER abs_b)
    set(s ${abs_a})
  else()
    set(s ${abs_b})
  endif()
  # Is S 10^R at least 1?
  math(EXPR minus_r "0 - (${r})")
  if(minus_r LESS_EQUAL 0)
    set(at_least_one TRUE)
  elseif(minus_r GREATER 18)
    set(at_least_one FALSE)
  else()
    pow10(${minus_r} one)
    if(s GREATER_EQUAL one)
      set(at_least_one TRUE)
    else()
      set(at_least_one FALSE)
    endif()
  endif()
  if(at_least_one)
    pow10(${t} p)
    math(EXPR limit "${s} / ${p}")  # relative: D <= S / 10^t
  else()
    math(EXPR k "${minus_r} - ${t}")  # absolute: D 10^R <= 10^-t
    if(k GREATER 18)
      set(${out_var} TRUE PARENT_SCOPE)
      return()
    elseif(k LESS 0)
      set(limit 0)
    else()
      pow10(${k} limit)
    endif()
  endif()
  if(d LESS_EQUAL limit)
    set(${out_var} TRUE PARENT_SCOPE)
  else()
    set(${out_var} FALSE PARENT_SCOPE)
  endif()
endfunction()

string(REGEX REPLACE "\n$" "" plain "${plain}")
string(REGEX REPLACE "\n$" "" offloaded "${offloaded}")
string(REPLACE "\n" ";" plain_lines "${plain}")
string(REPLACE "\n" ";" offloaded_lines "${offloaded}")
list(LENGTH plain_lines line_count)
list(LENGTH offloaded_lines offloaded_count)
if(line_count EQUAL 0 OR NOT line_count EQUAL offloaded_count)
  message(FATAL_ERROR "${line_count} lines from ${PLAIN}, ${offloaded_count} from ${OFFLOADED}:\n"
                      "--- plain:\n${plain}\n--- offloaded:\n${offloaded}")
endif()
set(compared 0)
math(EXPR last_line "${line_count} - 1")
foreach(i RANGE ${last_line})
  list(GET plain_lines ${i} p)
  list(GET offloaded_lines ${i} o)
  string(REGEX REPLACE "${number_re}" "#" p_text "${p}")
  string(REGEX REPLACE "${number_re}" "#" o_text "${o}")
  if(NOT p_text STREQUAL o_text)
    message(FATAL_ERROR "the builds print different lines:\n  plain:     ${p}\n  offloaded: ${o}")
  endif()
  if(p MATCHES " float ")
    set(t 4)
  else()
    set(t 9)
  endif()
  string(REGEX MATCHALL "${number_re}" p_numbers "${p}")
  string(REGEX MATCHALL "${number_re}" o_numbers "${o}")
  foreach(a b IN ZIP_LISTS p_numbers o_numbers)
    agree(${a} ${b} ${t} ok)
    if(NOT ok)
      message(FATAL_ERROR "${a} (plain) and ${b} (offloaded) differ by more than 1e-${t}:\n"
                          "  plain:     ${p}\n  offloaded: ${o}")
    endif()
    math(EXPR compared "${compared} + 1")
  endforeach()
endforeach()
if(compared EQUAL 0)
  message(FATAL_ERROR "no numbers to compare in:\n${plain}")
endif()

# -- the report --
if(NOT EXISTS ${REPORT})
  message(FATAL_ERROR "${OFFLOADED} wrote no report to ${REPORT}")
endif()
file(READ ${REPORT} report)
# string(JSON <var> <mode> <the JSON in variable doc> <path...>): the JSON goes
# by name, since the report's text has semicolons.
macro(json var mode doc)
  string(JSON ${var} ERROR_VARIABLE json_error ${mode} "${${doc}}" ${ARGN})
  if(json_error)
    message(FATAL_ERROR "${REPORT}: ${json_error}")
  endif()
endmacro()
json(stage_count LENGTH report stages)
json(declined_count LENGTH report not_offloaded)
if(OP STREQUAL "gemm")
  set(threshold OA_OFFLOAD_GEMM_MIN)
  set(what "products")
elseif(OP STREQUAL "cwise")
  set(threshold OA_OFFLOAD_ELEMENTS_MIN)
  set(what "coefficient-wise assignments")
elseif(OP STREQUAL "stage")
  set(threshold OA_HOST_THRESHOLD)
  set(what "annotated calls")
  string(REPLACE "|" ";" calls "${CALLS}")
else()
  message(FATAL_ERROR "OP must be gemm, cwise or stage, not '${OP}'")
endif()
# Only OP's stages count: the report may list other Eigen operations.
set(op_stages 0)
if(stage_count GREATER 0)
  math(EXPR last "${stage_count} - 1")
  foreach(i RANGE ${last})
    json(stage GET report stages ${i})
    json(op GET stage op)
    if(NOT op STREQUAL OP)
      continue()
    endif()
    if(OP STREQUAL "stage")
      json(first GET stage calls 0)
      if(NOT first IN_LIST calls)
        continue()
      endif()
    endif()
    math(EXPR op_stages "${op_stages} + 1")
    foreach(key dims device chunks peak_device_bytes)
      json(${key} GET stage ${key})
    endforeach()
    if(OP STREQUAL "stage")
      set(dims "${first}")
    endif()
    json(error_type TYPE stage error)
    if(NOT error_type STREQUAL "NULL")
      message(FATAL_ERROR "${OP} ${dims} failed in the engine:\n${stage}")
    endif()
    if(DEFINED DIMS AND NOT dims STREQUAL DIMS)
      message(FATAL_ERROR "${OP} stage ${i} reports dims '${dims}', expected '${DIMS}':\n${stage}")
    endif()
    if(EXPECT STREQUAL "paged" AND (NOT device MATCHES "^emulated" OR peak_device_bytes GREATER BUDGET OR chunks LESS 2))
      message(FATAL_ERROR "${OP} ${dims} on '${device}': ${chunks} chunks, peak ${peak_device_bytes} device bytes; "
                          "expected it paged through the emulated device within ${BUDGET}")
    endif()
    message(STATUS "${OP} ${dims} on ${device}: ${chunks} chunks, peak ${peak_device_bytes} device bytes")
  endforeach()
endif()
set(op_declined 0)
set(op_below 0)
if(declined_count GREATER 0)
  math(EXPR last "${declined_count} - 1")
  foreach(i RANGE ${last})
    json(op GET report not_offloaded ${i} op)
    json(reason GET report not_offloaded ${i} reason)
    json(count GET report not_offloaded ${i} count)
    if(op STREQUAL OP)
      math(EXPR op_declined "${op_declined} + ${count}")
      if(reason MATCHES "^below ${threshold}")
        math(EXPR op_below "${op_below} + ${count}")
      endif()
    endif()
  endforeach()
endif()

if(EXPECT STREQUAL "paged")
  if(NOT op_stages EQUAL STAGES OR NOT op_declined EQUAL 0)
    message(FATAL_ERROR "${op_stages} ${what} through the engine and ${op_declined} left to Eigen; "
                        "expected ${STAGES} and none:\n${report}")
  endif()
elseif(EXPECT STREQUAL "below")
  if(NOT op_stages EQUAL 0 OR NOT op_below EQUAL STAGES)
    message(FATAL_ERROR "${op_stages} ${what} through the engine and ${op_below} below ${threshold}; "
                        "expected none and ${STAGES}:\n${report}")
  endif()
  message(STATUS "${op_below} ${what} below ${threshold}, left to Eigen")
else()
  message(FATAL_ERROR "EXPECT must be paged or below, not '${EXPECT}'")
endif()
message(STATUS "${compared} numbers agree between ${PLAIN} and ${OFFLOADED}")
