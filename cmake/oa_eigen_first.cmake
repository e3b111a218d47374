# Wrapper headers that put oa's Eigen hooks right after the program's own
# #include of Eigen (oa_offload's include path; see cmake/oa_offload.cmake).
#
# For every public module header of the Eigen found (Eigen/Core, Eigen/Dense,
# ..., unsupported/Eigen/..., also as eigen3/Eigen/... for programs that name
# that directory), writes <out>/<the same path>:
#
#   #include_next <Eigen/Dense>          // Eigen, configured by the program's own macros
#   #include "oa/eigen/offload.hpp"      // then the hooks, before the program's code
#
# so that the program's include order and configuration macros (eigen_assert,
# EIGEN_DEFAULT_DENSE_INDEX_TYPE, EIGEN_MATRIX_PLUGIN, ...) stand as in its
# plain build, and the hooks are still declared before any instantiation.
function(oa_write_eigen_wrappers out eigen_include_dir)
  file(GLOB _core RELATIVE ${eigen_include_dir} LIST_DIRECTORIES false ${eigen_include_dir}/Eigen/*)
  file(GLOB _unsupported RELATIVE ${eigen_include_dir} LIST_DIRECTORIES false
       ${eigen_include_dir}/unsupported/Eigen/* ${eigen_include_dir}/unsupported/Eigen/CXX11/*)
  set(_written 0)
  foreach(_module IN LISTS _core _unsupported)
    get_filename_component(_name ${_module} NAME)
    if(_name MATCHES "\\.")  # module headers have no extension; others are internal
      continue()
    endif()
    set(_paths ${_module})
    if(_module MATCHES "^Eigen/")
      list(APPEND _paths eigen3/${_module})
    endif()
    foreach(_path IN LISTS _paths)
      set(_text "// ${_path} under oa_offload: Eigen as the program configured it, then oa's\n"
                "// Eigen hooks before any of the program's code (cmake/oa_eigen_first.cmake).\n"
                "#pragma GCC system_header\n"
                "#include_next <${_path}>\n"
                "#include \"oa/eigen/offload.hpp\"\n")
      string(JOIN "" _text ${_text})
      # Rewritten only when it changes, so that reconfiguring rebuilds nothing.
      set(_file ${out}/${_path})
      set(_old "")
      if(EXISTS ${_file})
        file(READ ${_file} _old)
      endif()
      if(NOT _old STREQUAL _text)
        file(WRITE ${_file} "${_text}")
      endif()
      math(EXPR _written "${_written} + 1")
    endforeach()
  endforeach()
  if(_written EQUAL 0)
    message(FATAL_ERROR "oa: no Eigen module headers under ${eigen_include_dir} to wrap for oa_offload")
  endif()
endfunction()
