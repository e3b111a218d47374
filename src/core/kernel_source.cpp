#include "core/kernel_source.hpp"

#include <functional>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "oa/core/error.hpp"

namespace oa::detail {

namespace {
std::mutex observer_mutex;
std::function<void(const kernel_source&)> observer;
}  // namespace

void set_kernel_observer(std::function<void(const kernel_source&)> f) {
  std::lock_guard lock(observer_mutex);
  observer = std::move(f);
}

bool fusable(const stage& s, const std::vector<call_node>& nodes) {
  for (int c : s.calls)
    if (!nodes[static_cast<std::size_t>(c)].elementwise) return false;
  return !s.calls.empty();
}

kernel_source generate_kernel(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L) {
  if (!fusable(s, nodes)) throw error("oa: generate_kernel: a call of the stage has no element-wise device function");
  kernel_source k;
  std::unordered_map<const value_state*, int> index;
  for (std::size_t i = 0; i < L.values.size(); ++i) index.emplace(L.values[i].v, static_cast<int>(i));

  // Parameters: element count, the buffers, lazy scalars, reduction partials.
  k.params.push_back({kernel_param::kind::elements, -1, -1, {}});
  for (std::size_t b = 0; b < L.buffer_unit_bytes.size(); ++b)
    k.params.push_back({kernel_param::kind::buffer, static_cast<int>(b), -1, {}});
  std::ostringstream sig, body, tail;
  sig << "unsigned long long n";
  for (std::size_t b = 0; b < L.buffer_unit_bytes.size(); ++b) sig << ", void* __restrict__ b" << b;

  std::vector<bool> loaded(L.values.size(), false);
  int reductions = 0;
  std::string accumulators;  // declared before the loop, with the identity
  auto value_of = [&](int vi, const std::string& type) {
    const stage_value& v = L.values[static_cast<std::size_t>(vi)];
    if (!loaded[static_cast<std::size_t>(vi)]) {
      if (v.buffer < 0) throw error("oa: generate_kernel: " + v.v->label + " is read before it is written");
      body << "    const " << type << " x" << vi << " = static_cast<const " << type << "*>(b" << v.buffer << ")[i];\n";
      loaded[static_cast<std::size_t>(vi)] = true;
    }
    return "x" + std::to_string(vi);
  };

  for (std::size_t p = 0; p < s.calls.size(); ++p) {
    const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
    const elementwise_desc& d = *n.elementwise;
    std::vector<std::string> operands;
    for (const auto& o : d.operands) {
      if (o.arg >= 0) {
        operands.push_back(value_of(L.calls[p].regions[static_cast<std::size_t>(o.arg)], o.type));
      } else if (o.scalar >= 0) {
        const std::string name = "s" + std::to_string(p) + "_" + std::to_string(o.scalar);
        sig << ", " << o.type << " " << name;
        k.params.push_back({kernel_param::kind::scalar, o.scalar, static_cast<int>(p), o.type});
        operands.push_back(name);
      } else {
        operands.push_back("static_cast<" + o.type + ">(" + o.literal + ")");
      }
    }
    const auto apply = [](const std::string& op, const std::vector<std::string>& args) {
      std::string c = "oa::ops::" + op + "{}(";
      for (std::size_t i = 0; i < args.size(); ++i) c += (i ? ", " : "") + args[i];
      return c + ")";
    };
    std::string call;
    if (d.steps.empty()) {
      call = apply(d.op, operands);
    } else {
      // An expression: a temporary per step, as oa::ops computes it on the host.
      for (std::size_t k = 0; k < d.steps.size(); ++k) {
        std::vector<std::string> in;
        for (int j : d.steps[k].inputs)
          in.push_back(j >= 0 ? operands.at(static_cast<std::size_t>(j))
                              : "e" + std::to_string(p) + "_" + std::to_string(-1 - j));
        call = "e" + std::to_string(p) + "_" + std::to_string(k);
        body << "    const auto " << call << " = " << apply(d.steps[k].op, in) << ";\n";
      }
    }
    if (d.out_arg >= 0) {
      // The value written: the result of an out, the new version of a mut.
      const node_arg& a = n.args[static_cast<std::size_t>(d.out_arg)];
      const value_state* written = a.role == arg_role::mut ? a.new_value.get() : a.value.get();
      const int vo = index.at(written);
      const stage_value& v = L.values[static_cast<std::size_t>(vo)];
      body << "    const " << d.out_type << " x" << vo << " = static_cast<" << d.out_type << ">(" << call << ");\n";
      loaded[static_cast<std::size_t>(vo)] = true;
      if (v.cls == value_class::output)
        body << "    static_cast<" << d.out_type << "*>(b" << v.buffer << ")[i] = x" << vo << ";\n";
    } else {
      const int r = reductions++;
      k.params.push_back({kernel_param::kind::partials, r, static_cast<int>(p), d.out_type});
      sig << ", " << d.out_type << "* __restrict__ partials" << r;
      k.uses_cub = true;
      tail << "  {\n"
           << "    using reduce_t = cub::BlockReduce<" << d.out_type << ", " << kernel_source::block_size << ">;\n"
           << "    __shared__ typename reduce_t::TempStorage storage;\n"
           << "    const " << d.out_type << " block = reduce_t(storage).Reduce(acc" << r << ", oa::ops::" << d.reduce_op
           << "{});\n"
           << "    if (threadIdx.x == 0) partials" << r << "[blockIdx.x] = block;\n"
           << "    __syncthreads();\n"
           << "  }\n";
      body << "    acc" << r << " = static_cast<" << d.out_type << ">(oa::ops::" << d.reduce_op << "{}(acc" << r
           << ", static_cast<" << d.out_type << ">(" << call << ")));\n";
      accumulators += "  " + d.out_type + " acc" + std::to_string(r) + " = static_cast<" + d.out_type + ">(" +
                      d.reduce_identity + ");\n";
    }
  }

  std::ostringstream src;
  src << "// Generated by oa: one fused kernel for a stage of " << s.calls.size() << " element-wise calls.\n";
  if (k.uses_cub) src << "#include <cub/block/block_reduce.cuh>\n";
  src << ops_header_source() << "\n";
  std::size_t h = std::hash<std::string>{}(sig.str() + body.str() + tail.str());
  k.name = "oa_stage_" + std::to_string(h);
  src << "extern \"C\" __global__ void __launch_bounds__(" << kernel_source::block_size << ") " << k.name << "("
      << sig.str() << ") {\n"
      << accumulators
      << "  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;\n"
      << "  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;"
         " i += stride) {\n"
      << body.str() << "  }\n"
      << tail.str() << "}\n";
  k.code = src.str();
  std::lock_guard lock(observer_mutex);
  if (observer) observer(k);
  return k;
}

}  // namespace oa::detail
