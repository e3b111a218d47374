#pragma once
// oa: Offload Annotations for C++. Everything a program or an annotation
// header needs.
#include "oa/core/annotate.hpp"
#include "oa/core/annotated_name.hpp"
#include "oa/core/config.hpp"
#include "oa/core/device.hpp"
#include "oa/core/error.hpp"
#include "oa/core/lazy.hpp"
#include "oa/core/ops.hpp"
#include "oa/core/report.hpp"
#include "oa/core/runtime.hpp"
#include "oa/linalg/gemm.hpp"
#include "oa/split_types/all.hpp"
