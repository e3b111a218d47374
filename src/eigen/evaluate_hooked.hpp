#pragma once
// What every Eigen hook does once it has recorded its calls: evaluate them at
// once, and when the engine failed, leave the work to Eigen and say why.

#include <cstdio>
#include <exception>
#include <mutex>
#include <string>

#include "oa/core/runtime.hpp"

namespace oa::eigen_hooks {

/// Evaluates `g` (the hook's calls, after whatever the thread had recorded
/// before them); true when `result` was computed. Otherwise its error is
/// taken as handled (Eigen computes the work instead), the report notes it
/// under `op` and `dims`, and the first failure of each kind goes to stderr.
inline bool evaluate_hooked(oa::detail::graph& g, const oa::detail::value_ptr& result, const char* op,
                            const std::string& dims) {
  oa::detail::evaluate(g);
  if (result->status != oa::detail::value_status::failed) return true;
  g.delivered(result->error);
  std::string why = "an unknown exception";
  try {
    std::rethrow_exception(result->error);
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
  }
  oa::detail::note_not_offloaded(op, "the engine failed (Eigen computed it): " + why, dims);
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fprintf(stderr, "oa: an Eigen %s (%s) failed in the engine, and Eigen computed it: %s\n", op, dims.c_str(),
                 why.c_str());
  });
  return false;
}

}  // namespace oa::eigen_hooks
