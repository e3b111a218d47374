#include "core/chunk_work.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

#include "core/stage_plan.hpp"

#include "oa/core/error.hpp"

namespace oa::detail {

namespace {

std::size_t c_type_size(const std::string& t) {
  if (t == "double" || t == "long long" || t == "unsigned long long") return 8;
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "short" || t == "unsigned short") return 2;
  return 1;  // bool, char
}

/// Units [rb) of a region that holds units [r) (units run along its width).
region sub_region(const region& g, split::range r, split::range rb) {
  if (!g.data || r.size() == 0) return g;
  const std::size_t unit = g.width / r.size();
  return {g.data + (rb.begin - r.begin) * unit, rb.size() * unit, g.rows, g.pitch};
}

/// Copies `from` to `to` (regions of host memory of one shape).
void copy_rows(const region& to, const region& from) {
  for (std::size_t row = 0; row < from.rows; ++row)
    std::memcpy(to.data + row * to.pitch, from.data + row * from.pitch, from.width);
}

}  // namespace

std::vector<region> chunk_regions(const stage_layout& L, const std::vector<std::byte*>& buffers, split::range r) {
  std::vector<region> out(L.values.size());
  for (std::size_t i = 0; i < L.values.size(); ++i) {
    const stage_value& v = L.values[i];
    if (v.buffer >= 0)
      out[i] = v.v->ops->packed_region(buffers[static_cast<std::size_t>(v.buffer)], v.v->shape, r, v.v->state.get());
    else if (v.v->object)  // viewed in place: inputs, outputs, versions of the caller's data
      out[i] = v.v->ops->host_region(v.v->object, r);
  }
  return out;
}

unsigned fused_grid(std::size_t elements) {
  const std::size_t block = kernel_source::block_size;
  return static_cast<unsigned>(std::clamp<std::size_t>((elements + block - 1) / block, 1, max_blocks_per_chunk));
}

std::shared_ptr<const generated_kernel> kernel_for_chunk(const kernel_source& ks,
                                                         const std::shared_ptr<const std::string>& source,
                                                         const stage& s, const std::vector<call_node>& nodes,
                                                         const std::vector<std::byte*>& buffers,
                                                         std::byte* partials, std::size_t elements,
                                                         const std::vector<std::size_t>& partial_offsets) {
  auto k = std::make_shared<generated_kernel>();
  k->name = ks.name;
  k->source = source;
  k->block = kernel_source::block_size;
  k->grid = fused_grid(elements);
  auto push = [&](const void* p, std::size_t size) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, p, size);
    k->args.push_back(bits);
    k->arg_sizes.push_back(static_cast<std::uint8_t>(size));
  };
  for (const kernel_param& p : ks.params) {
    switch (p.what) {
      case kernel_param::kind::elements: {
        const unsigned long long n = elements;
        push(&n, sizeof n);
        break;
      }
      case kernel_param::kind::buffer: {
        const void* b = buffers[static_cast<std::size_t>(p.index)];
        k->pointer_args.push_back(k->args.size());
        push(&b, sizeof b);
        break;
      }
      case kernel_param::kind::scalar: {
        const call_node& n = nodes[static_cast<std::size_t>(s.calls[static_cast<std::size_t>(p.call)])];
        push(n.scalars[static_cast<std::size_t>(p.index)]->object, c_type_size(p.type));
        break;
      }
      case kernel_param::kind::partials: {
        const void* b = partials + partial_offsets[static_cast<std::size_t>(p.index)];
        k->pointer_args.push_back(k->args.size());
        push(&b, sizeof b);
        break;
      }
    }
  }
  return k;
}

namespace {

/// Call `p` of the stage over units `r` of `regions`, its reduction partial
/// (if it has one) at `partial`.
void run_call(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L, std::size_t p,
              const std::vector<region>& regions, split::range r, std::byte* partial, bool use_device_twin,
              const stream_view& stream, const std::vector<std::byte*>* buffers) {
  const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
  const call_slots& cs = L.calls[p];
  std::vector<region> args;
  args.reserve(cs.regions.size());
  for (int idx : cs.regions) args.push_back(regions[static_cast<std::size_t>(idx)]);
  kernel_args ka{r, args.data(), cs.partial >= 0 ? partial : nullptr};
  if (cs.scratch >= 0 && buffers) {
    const auto b = static_cast<std::size_t>(cs.scratch);
    ka.scratch = (*buffers)[b];
    ka.scratch_bytes = L.buffer_unit_bytes[b] * r.size() + L.buffer_fixed_bytes[b];
  }
  try {
    if (!use_device_twin)
      n.cpu(ka);
    else if (!n.kernel)
      n.device_twin(ka);
    else if (stream.dev && stream.dev->kind() == device_kind::cuda)
      n.kernel->gpu(ka, stream);
    else
      n.kernel->twin(ka);
  } catch (const device_fault&) {
    throw;  // the device is lost (a GPU entry's sticky fault): the chunk re-runs on the host
  } catch (...) {
    throw call_failed{p, std::current_exception()};
  }
}

}  // namespace

void run_chunk(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
               const std::vector<region>& regions, split::range r, std::byte* partials, bool use_device_twin,
               const stream_view& stream, const std::vector<std::byte*>* buffers) {
  std::size_t partial_offset = 0;  // the calls' partials side by side, in call order
  for (std::size_t p = 0; p < s.calls.size(); ++p) {
    run_call(s, nodes, L, p, regions, r, partials + partial_offset, use_device_twin, stream, buffers);
    if (L.calls[p].partial >= 0)
      partial_offset += nodes[static_cast<std::size_t>(s.calls[p])].reduction->ops->partial_bytes;
  }
}

void run_fused_description(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
                           const std::vector<region>& regs, split::range r, std::byte* partials,
                           const std::vector<std::size_t>& partial_offsets, unsigned grid) {
  const std::vector<split::range> blocks = split::even_chunks(r.size(), grid);
  // Consecutive blocks run a pass at a time, so that the host calls the
  // twins over thousands of elements, not a GPU block's few hundred, and a
  // pass's values stay in the cache from one call to the next: each
  // element-wise call runs once over the pass, each reduction once per
  // block, into that block's partial (the kernel's partials, the same bits).
  // A temporary lives within its elements, so one pass's worth of it is
  // reused pass after pass.
  std::size_t unit_bytes = 0;
  for (const stage_value& v : L.values) unit_bytes += v.v->shape.unit_bytes();
  const std::size_t pass_units = std::max<std::size_t>(1, fused_pass_bytes / std::max<std::size_t>(unit_bytes, 1));
  std::vector<std::pair<std::size_t, std::size_t>> passes;  // [first block, last block)
  std::size_t widest = 0;
  for (std::size_t b0 = 0; b0 < blocks.size();) {
    std::size_t b1 = b0 + 1, units = blocks[b0].size();
    while (b1 < blocks.size() && units + blocks[b1].size() <= pass_units) units += blocks[b1++].size();
    passes.emplace_back(b0, b1);
    widest = std::max(widest, units);
    b0 = b1;
  }
  std::vector<std::pair<std::size_t, std::unique_ptr<std::byte[]>>> scratch;  // value, one pass's bytes
  for (std::size_t k = 0; k < L.values.size(); ++k) {
    const stage_value& v = L.values[k];
    if (v.cls == value_class::temporary)
      scratch.emplace_back(k, std::make_unique_for_overwrite<std::byte[]>(
                                  std::max<std::size_t>(widest * v.v->shape.unit_bytes(), 1)));
  }
  // A call that updates a value (a mut argument) writes where its new version
  // lies; when that is not where the version it updates lies (one is a
  // temporary, the other a buffer), the call takes a copy of the old there
  // first. The kernel holds both in registers and leaves the old one's
  // buffer as it was.
  std::unordered_map<const value_state*, std::size_t> index;
  for (std::size_t k = 0; k < L.values.size(); ++k) index.emplace(L.values[k].v, k);
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> updates(s.calls.size());  // call: (old, new)
  for (std::size_t p = 0; p < s.calls.size(); ++p)
    for (const node_arg& a : nodes[static_cast<std::size_t>(s.calls[p])].args)
      if (a.role == arg_role::mut) updates[p].emplace_back(index.at(a.value.get()), index.at(a.new_value.get()));
  std::vector<region> in_pass(regs.size()), in_block(regs.size()), in_call;
  for (const auto& [b0, b1] : passes) {
    const split::range pass{r.begin + blocks[b0].begin, r.begin + blocks[b1 - 1].end};
    for (std::size_t k = 0; k < regs.size(); ++k) in_pass[k] = sub_region(regs[k], r, pass);
    for (const auto& [k, bytes] : scratch) {
      const value_state& v = *L.values[k].v;
      in_pass[k] = v.ops->packed_region(bytes.get(), v.shape, pass, v.state.get());
    }
    for (std::size_t p = 0; p < s.calls.size(); ++p) {
      const int q = L.calls[p].partial;
      if (q < 0) {
        const std::vector<region>* at = &in_pass;
        for (const auto& [from, to] : updates[p]) {
          if (!in_pass[from].data || !in_pass[to].data || in_pass[from].data == in_pass[to].data) continue;
          if (at == &in_pass) at = &(in_call = in_pass);
          copy_rows(in_pass[to], in_pass[from]);
          in_call[from] = in_pass[to];
        }
        run_call(s, nodes, L, p, *at, pass, nullptr, true, {}, nullptr);
        continue;
      }
      const std::size_t pb = L.reductions[static_cast<std::size_t>(q)]->ops->partial_bytes;
      for (std::size_t b = b0; b < b1; ++b) {
        const split::range rb{r.begin + blocks[b].begin, r.begin + blocks[b].end};
        for (std::size_t k = 0; k < regs.size(); ++k) in_block[k] = sub_region(in_pass[k], pass, rb);
        run_call(s, nodes, L, p, in_block, rb, partials + partial_offsets[static_cast<std::size_t>(q)] + b * pb, true,
                 {}, nullptr);
      }
    }
  }
  // Blocks that get no unit hold their reductions' identities.
  for (std::size_t q = 0; q < L.reductions.size(); ++q) {
    const value_state* red = L.reductions[q];
    const std::size_t pb = red->ops->partial_bytes;
    for (std::size_t b = blocks.size(); b < grid; ++b) {
      void* identity = nullptr;
      const auto owner = red->ops->make(red->shape, red->state.get(), identity);
      std::memcpy(partials + partial_offsets[q] + b * pb, identity, pb);
    }
  }
}

}  // namespace oa::detail
