// Eigen's products, taken from its GEMM functor and its matrix-vector kernel
// (oa/eigen/offload.hpp), as engine contractions: C += alpha A B on the
// caller's memory, recorded and evaluated at once (an Eigen statement must
// hold its value when it ends).
// The operands are borrowed blocks of Eigen's storage, alive for the call.
// When the engine cannot run it, Eigen does: the engine leaves C as it was
// on failure, and the reason goes to the report.

// First: Eigen storage this unit frees may come from the pinned pool.
#include "oa/eigen/pinned_storage.hpp"

#include <string>

#include "oa/core/runtime.hpp"
#include "eigen/evaluate_hooked.hpp"
#include "oa/eigen/hooks.hpp"
#include "oa/linalg/gemm.hpp"

namespace oa::eigen_hooks {

namespace {

matrix_block block_of(const matrix_arg& m, std::size_t elem_bytes) {
  return {static_cast<std::byte*>(const_cast<void*>(m.data)), static_cast<std::size_t>(m.rows),
          static_cast<std::size_t>(m.cols), static_cast<std::size_t>(m.outer_stride), m.row_major, elem_bytes};
}

matrix_block storage(const void* object) { return *static_cast<const matrix_block*>(object); }

// A borrowed block as an engine value, split by columns like oa::linalg's
// matrices: enough for the engine's checks and for residency.
split::shape shape_of(const void* object) {
  const matrix_block& b = storage(object);
  return {b.cols, b.rows, b.elem_bytes};
}
region host_region(const void* object, split::range r) {
  const matrix_block& b = storage(object);
  return b.sub(0, r.begin, b.rows, r.size()).as_region();
}
template <bool RowMajor>
region packed_region(std::byte* buffer, const split::shape& s, split::range r, const void*) {
  const matrix_block packed{buffer, s.inner, r.size(), RowMajor ? r.size() : s.inner, RowMajor, s.elem_bytes};
  return packed.as_region();
}
template <bool RowMajor>
constexpr detail::value_ops borrowed_ops{"cols", split::split_kind::partitioned, &shape_of, &host_region,
                                         &packed_region<RowMajor>, nullptr, nullptr, 0};

detail::value_ptr borrowed(const matrix_block& b, std::string label) {
  auto v = std::make_shared<detail::value_state>();
  v->label = std::move(label);
  v->ops = b.row_major ? &borrowed_ops<true> : &borrowed_ops<false>;
  v->shape = shape_of(&b);
  v->object = const_cast<matrix_block*>(&b);
  v->user_storage = true;
  return v;
}

std::string dims_of(const gemm_call& c) {
  return "m=" + std::to_string(c.c.rows) + " n=" + std::to_string(c.c.cols) + " k=" + std::to_string(c.a.cols);
}

template <class S>
bool run(const gemm_call& call, bool gemv) {
  const char* op = gemv ? "gemv" : "gemm";
  const matrix_block a = block_of(call.a, sizeof(S)), b = block_of(call.b, sizeof(S)), c = block_of(call.c, sizeof(S));
  const auto g = detail::current_graph();
  detail::value_ptr result;
  {
    std::lock_guard lock(g->mutex());
    detail::call_node node;
    node.name = std::string("Eigen::") + op;
    node.report_op = op;
    node.units = c.cols;
    detail::value_ptr va = borrowed(a, "A of " + node.name), vb = borrowed(b, (gemv ? "x of " : "B of ") + node.name),
                      vc = borrowed(c, (gemv ? "y of " : "C of ") + node.name);
    result = std::make_shared<detail::value_state>();
    result->label = vc->label + " (updated in place)";
    result->ops = vc->ops;
    result->shape = vc->shape;
    result->object = vc->object;
    result->user_storage = true;
    result->status = detail::value_status::pending;
    result->owner = g->weak_from_this();
    node.args.push_back({detail::arg_role::in, va, nullptr});
    node.args.push_back({detail::arg_role::in, vb, nullptr});
    node.args.push_back({detail::arg_role::mut, vc, result});

    auto d = std::make_shared<detail::contraction_desc>();
    d->m = c.rows, d->n = c.cols, d->k = a.cols;
    d->reads_c = true;  // Eigen accumulates into C
    d->reads_once = gemv;
    d->elem_bytes = sizeof(S);
    d->storage = {&storage, &storage, &storage};
    const S alpha = static_cast<S>(call.alpha);
    d->cpu = linalg::detail::cpu_step<S>(alpha, S(1), false, false);
    d->device = linalg::detail::gpu_step<S>(alpha, S(1), false, false);
    d->type_name = sizeof(S) == 8 ? "double" : "float";
    node.contraction = std::move(d);
    result->producer = g->add(std::move(node));
  }
  return evaluate_hooked(*g, result, op, dims_of(call));
}

}  // namespace

bool gemm(const gemm_call& call) {
  if (detail::in_engine_thread()) {
    detail::note_not_offloaded("gemm", "called inside the engine (an annotated CPU function)", dims_of(call));
    return false;
  }
  const double multiply_adds = double(call.c.rows) * double(call.c.cols) * double(call.a.cols);
  if (!detail::offload_gemm_wanted(multiply_adds)) return false;
  return call.scalar == scalar_type::f64 ? run<double>(call, false) : run<float>(call, false);
}

bool gemv(const gemm_call& call) {
  if (detail::in_engine_thread()) {
    detail::note_not_offloaded("gemv", "called inside the engine (an annotated CPU function)", dims_of(call));
    return false;
  }
  if (!detail::offload_gemv_wanted(double(call.a.rows) * double(call.a.cols))) return false;
  return call.scalar == scalar_type::f64 ? run<double>(call, true) : run<float>(call, true);
}

}  // namespace oa::eigen_hooks
