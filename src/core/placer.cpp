#include "core/placer.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "core/residency.hpp"

namespace oa::detail {

stage_cost cost_of(const stage& s, const std::vector<call_node>& nodes,
                   const std::unordered_set<const value_state*>& needed_on_host, residency* resident,
                   const stage_layout* staged) {
  stage_cost c;
  for (int n : s.calls) {
    if (!c.op.empty()) c.op += " + ";
    c.op += nodes[static_cast<std::size_t>(n)].name;
  }
  if (s.contraction) {
    const contraction_desc& d = *nodes[static_cast<std::size_t>(s.calls.front())].contraction;
    c.in_bytes = static_cast<double>((d.m * d.k + d.k * d.n) * d.elem_bytes);
    c.out_bytes = static_cast<double>(d.m * d.n * d.elem_bytes);
    c.bytes = c.in_bytes + c.out_bytes;
    return c;
  }
  std::optional<stage_layout> own;
  if (!staged) own = layout_stage(s, nodes, placement_mode::staged, needed_on_host);
  const stage_layout& L = staged ? *staged : *own;
  const double units = static_cast<double>(s.units);
  for (const stage_value& v : L.values) {
    const double bytes = units * static_cast<double>(v.v->shape.unit_bytes());
    if (v.cls == value_class::temporary) continue;
    c.bytes += bytes;
    if (v.cls == value_class::output)
      c.out_bytes += bytes;
    else if (v.loaded && !(resident && resident->find(v.v)))
      c.in_bytes += bytes;
  }
  return c;
}

namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  return buf;
}

}  // namespace

std::string device_group::name() const {
  std::string out;
  for (device* d : devices) out += (out.empty() ? "" : " + ") + d->name();
  return out;
}

device_rates device_group::rates() const {
  device_rates sum{};
  for (device* d : devices) {
    const device_rates r = d->rates();
    sum.h2d += r.h2d;
    sum.d2h += r.d2h;
  }
  return sum;
}

placement place_by_cost(const stage_cost& c, const placement& capable, device& host, const perf_models& models,
                        double& predicted_seconds, const device_group& group) {
  predicted_seconds = 0;
  device& dev = *capable.where;
  if (&dev == &host || dev.kind() == device_kind::host) return capable;
  const std::string name = group.name();
  const auto on_device = models.predict(c.op, name, c.bytes);
  if (!on_device) return {&dev, "cost model: calibrating '" + c.op + "' on " + name};
  const auto on_host = models.predict(c.op, host.name(), c.bytes);
  if (!on_host) return {&host, "cost model: calibrating '" + c.op + "' on the host"};
  // The model holds what the link does not explain (learn()); the copies
  // this run needs come from the link model.
  const device_rates r = group.rates();
  const double in = r.h2d > 0 ? c.in_bytes / r.h2d : 0, out = r.d2h > 0 ? c.out_bytes / r.d2h : 0;
  const double device_seconds = *on_device + std::max(in, out);
  const std::string both = "cost model: host " + seconds_text(*on_host) + ", " + name + " " +
                           seconds_text(device_seconds) + " (predicted)";
  if (*on_host <= device_seconds) {
    predicted_seconds = *on_host;
    return {&host, both};
  }
  predicted_seconds = device_seconds;
  return {&dev, both};
}

void learn(perf_models& models, const stage_cost& c, const device_group& group, const stage_report& rep) {
  if (!rep.error.empty() || !rep.device_fault.empty() || rep.host_reruns > 0) return;
  if (group.devices.empty()) {
    models.record(c.op, "host", c.bytes, rep.seconds);
    return;
  }
  // On devices, the wall time less the busier copy direction: fixed costs
  // and the compute the copies did not hide, to which a prediction adds the
  // copies its own run needs (fewer where data is resident). Several
  // devices' busy times add up in the report: each was busy for its share.
  const double link = std::max(rep.h2d_seconds, rep.d2h_seconds) / static_cast<double>(group.devices.size());
  models.record(c.op, group.name(), c.bytes, std::max(rep.seconds - link, 1e-9));
}

}  // namespace oa::detail
