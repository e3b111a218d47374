#include "core/chunk_work.hpp"

#include <algorithm>
#include <cstring>

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

void run_chunk(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
               const std::vector<region>& regions, split::range r, std::byte* partials, bool use_device_twin,
               const stream_view& stream, const std::vector<std::byte*>* buffers) {
  std::vector<region> args;
  std::size_t partial_offset = 0;
  for (std::size_t p = 0; p < s.calls.size(); ++p) {
    const call_node& n = nodes[static_cast<std::size_t>(s.calls[p])];
    const call_slots& cs = L.calls[p];
    args.clear();
    for (int idx : cs.regions) args.push_back(regions[static_cast<std::size_t>(idx)]);
    kernel_args ka{r, args.data(), nullptr};
    if (cs.partial >= 0) {
      ka.partial = partials + partial_offset;
      partial_offset += n.reduction->ops->partial_bytes;
    }
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
}

void run_fused_description(const stage& s, const std::vector<call_node>& nodes, const stage_layout& L,
                           std::vector<region> regs, split::range r, std::byte* partials,
                           const std::vector<std::size_t>& partial_offsets, unsigned grid) {
  std::vector<std::vector<std::byte>> scratch;
  for (std::size_t k = 0; k < L.values.size(); ++k) {
    const stage_value& v = L.values[k];
    if (v.cls != value_class::temporary) continue;
    scratch.emplace_back(std::max<std::size_t>(r.size() * v.v->shape.unit_bytes(), 1));
    regs[k] = v.v->ops->packed_region(scratch.back().data(), v.v->shape, r, v.v->state.get());
  }
  const std::vector<split::range> blocks = split::even_chunks(r.size(), grid);
  std::vector<std::byte> packed(std::max<std::size_t>(L.partial_bytes, 1));
  std::vector<region> sub(regs.size());
  for (unsigned b = 0; b < grid; ++b) {
    if (b < blocks.size()) {
      const split::range rb{r.begin + blocks[b].begin, r.begin + blocks[b].end};
      for (std::size_t k = 0; k < regs.size(); ++k) sub[k] = sub_region(regs[k], r, rb);
      run_chunk(s, nodes, L, sub, rb, packed.data(), true);
    } else {
      std::size_t at = 0;
      for (value_state* red : L.reductions) {
        void* identity = nullptr;
        const auto owner = red->ops->make(red->shape, red->state.get(), identity);
        std::memcpy(packed.data() + at, identity, red->ops->partial_bytes);
        at += red->ops->partial_bytes;
      }
    }
    std::size_t at = 0;
    for (std::size_t q = 0; q < L.reductions.size(); ++q) {
      const std::size_t pb = L.reductions[q]->ops->partial_bytes;
      std::memcpy(partials + partial_offsets[q] + b * pb, packed.data() + at, pb);
      at += pb;
    }
  }
}

}  // namespace oa::detail
