#include "core/stage_graph.hpp"

#include <algorithm>
#include <cstdint>

#include "core/residency.hpp"

namespace oa::detail {

namespace {

/// What a stage touches: each value, and the bytes of host storage it has.
struct access {
  const value_state* v;
  // Addresses as integers: a value may claim more bytes than its storage
  // has (a malformed one fails later, with its own error), so no pointer
  // past its storage is formed.
  std::uintptr_t begin = 0, end = 0;
  bool writes = false;
};

std::vector<access> accesses(const stage& s, const std::vector<call_node>& nodes) {
  std::vector<access> out;
  const auto add = [&](const value_state* v, bool writes) {
    for (access& a : out)
      if (a.v == v) {
        a.writes = a.writes || writes;
        return;
      }
    access a{v, 0, 0, writes};
    // Only partitioned values have storage a region describes (a scalar or
    // a reduction is compared by value alone).
    if (v->object && v->ops && v->ops->kind == split::split_kind::partitioned && v->shape.units > 0) {
      const region r = residency::whole_region(*v);
      if (r.data && residency::span(r) > 0) {
        a.begin = reinterpret_cast<std::uintptr_t>(r.data);
        a.end = a.begin + std::min<std::uintptr_t>(residency::span(r), UINTPTR_MAX - a.begin);
      }
    }
    out.push_back(a);
  };
  for (int c : s.calls) {
    const call_node& n = nodes[static_cast<std::size_t>(c)];
    for (const auto& a : n.args) add(a.value.get(), a.role != arg_role::in);  // a mut writes its storage
    for (const auto& v : n.scalars) add(v.get(), false);
    n.for_each_output([&](const value_ptr& v) { add(v.get(), true); });
  }
  return out;
}

bool overlap(const access& a, const access& b) {
  if (a.v == b.v) return true;
  return a.begin && b.begin && a.begin < b.end && b.begin < a.end;
}

bool conflict(const std::vector<access>& x, const std::vector<access>& y) {
  for (const access& a : x)
    for (const access& b : y)
      if ((a.writes || b.writes) && overlap(a, b)) return true;
  return false;
}

}  // namespace

std::vector<std::vector<std::size_t>> stage_dependencies(const std::vector<stage>& stages,
                                                         const std::vector<call_node>& nodes) {
  std::vector<std::vector<access>> touched;
  touched.reserve(stages.size());
  for (const stage& s : stages) touched.push_back(accesses(s, nodes));
  std::vector<std::vector<std::size_t>> deps(stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (conflict(touched[j], touched[i])) deps[i].push_back(j);
  return deps;
}

}  // namespace oa::detail
