#include "core/stage_graph.hpp"

#include <algorithm>
#include <functional>

#include "core/residency.hpp"

namespace oa::detail {

namespace {

/// What a stage touches: each value, and the bytes of host storage it has.
struct access {
  const value_state* v;
  const std::byte* begin = nullptr;
  const std::byte* end = nullptr;
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
    access a{v, nullptr, nullptr, writes};
    if (v->object && v->ops && v->ops->host_region) {
      const region r = residency::whole_region(*v);
      a.begin = r.data;
      a.end = r.data ? r.data + residency::span(r) : nullptr;
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
  return a.begin && b.begin && std::less<>{}(a.begin, b.end) && std::less<>{}(b.begin, a.end);
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
