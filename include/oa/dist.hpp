#pragma once
// oa::dist: distributed values over the ranks of an SPMD run (MPI). See
// README, "Past one machine".

#include "oa/dist/algorithms.hpp"
#include "oa/dist/array.hpp"
#include "oa/dist/communicator.hpp"
#include "oa/dist/layout.hpp"
#include "oa/dist/matrix.hpp"
#include "oa/dist/sort.hpp"
#include "oa/dist/vector.hpp"
