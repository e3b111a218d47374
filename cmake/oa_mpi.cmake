# MPI for oa::dist (distributed values over the ranks of an SPMD run):
# OA_ENABLE_MPI=AUTO uses it where CMake's FindMPI finds it, ON requires it,
# OFF leaves it out (oa::dist::world() then says so). Sets OA_HAS_MPI.
set(OA_ENABLE_MPI AUTO CACHE STRING "Build oa::dist with MPI: AUTO, ON or OFF")
set_property(CACHE OA_ENABLE_MPI PROPERTY STRINGS AUTO ON OFF)

set(OA_HAS_MPI OFF)
if(NOT OA_ENABLE_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(OA_HAS_MPI ON)
    message(STATUS "oa: MPI ${MPI_CXX_VERSION} found (oa::dist); launcher ${MPIEXEC_EXECUTABLE}")
  elseif(OA_ENABLE_MPI STREQUAL "ON")
    message(FATAL_ERROR "oa: OA_ENABLE_MPI=ON but CMake's FindMPI found no MPI for C++ "
                        "(install Debian's libopenmpi-dev, or set MPI_HOME)")
  else()
    message(STATUS "oa: no MPI found: oa::dist refuses distributed values (OA_ENABLE_MPI=AUTO)")
  endif()
endif()
