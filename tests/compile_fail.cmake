# Compiles SRC and expects it to fail with every regex of EXPECT in the
# diagnostics: annotation mistakes must be compile errors that name the
# function and the argument.
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${FLAGS} ${SRC}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but it must not")
endif()
foreach(pattern IN LISTS EXPECT)
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "the diagnostics of ${SRC} do not match '${pattern}':\n${err}")
  endif()
endforeach()
message(STATUS "${SRC}: rejected as expected")
