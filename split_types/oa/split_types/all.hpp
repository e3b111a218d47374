#pragma once
// Every split type of oa.
#include "oa/split_types/blocks.hpp"
#include "oa/split_types/broadcast.hpp"
#include "oa/split_types/contiguous.hpp"
#include "oa/split_types/indexed.hpp"
#include "oa/split_types/matrix.hpp"
#include "oa/split_types/reduce.hpp"
#include "oa/split_types/split.hpp"
