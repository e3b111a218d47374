#include "oa/core/report.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "oa/core/error.hpp"

namespace oa {

double busy_seconds(const std::vector<op_record>& ops, phase p) {
  std::vector<std::pair<double, double>> iv;
  for (const auto& o : ops)
    if (o.what == p) iv.emplace_back(o.begin, o.end);
  std::sort(iv.begin(), iv.end());
  double total = 0, cur_b = 0, cur_e = -1;
  for (auto [b, e] : iv) {
    if (b > cur_e) {
      if (cur_e > cur_b) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_b) total += cur_e - cur_b;
  return total;
}

void accumulate(stage_report& t, const stage_report& s, bool with_calls) {
  if (with_calls) t.calls.insert(t.calls.end(), s.calls.begin(), s.calls.end());
  // Each device named once ("emulated:0 + host"), whatever the stages' groups.
  for (std::size_t from = 0; from < s.device.size();) {
    const std::size_t to = std::min(s.device.find(" + ", from), s.device.size());
    const std::string name = s.device.substr(from, to - from);
    bool named = false;
    for (std::size_t f = 0; f < t.device.size();) {
      const std::size_t e = std::min(t.device.find(" + ", f), t.device.size());
      named = named || t.device.compare(f, e - f, name) == 0;
      f = e + 3;
    }
    if (!named) t.device += (t.device.empty() ? "" : " + ") + name;
    from = to + 3;
  }
  t.units = std::max(t.units, s.units);
  t.chunks += s.chunks;
  t.device_chunks += s.device_chunks;
  // Chunks by device over the stages: a stage on one device counts there.
  std::vector<std::pair<std::string, std::size_t>> by = s.chunks_by_device;
  if (by.empty() && s.device_chunks > 0) by.emplace_back(s.device, s.device_chunks);
  for (const auto& d : by) {
    auto it = std::find_if(t.chunks_by_device.begin(), t.chunks_by_device.end(),
                           [&](const auto& e) { return e.first == d.first; });
    if (it == t.chunks_by_device.end()) t.chunks_by_device.emplace_back(d);
    else it->second += d.second;
  }
  t.streams = std::max(t.streams, s.streams);
  t.sequential = t.sequential || s.sequential;
  t.h2d_bytes += s.h2d_bytes;
  t.d2h_bytes += s.d2h_bytes;
  t.peak_device_bytes = std::max(t.peak_device_bytes, s.peak_device_bytes);
  t.host_reruns += s.host_reruns;
  t.resident_bytes_saved += s.resident_bytes_saved;
  t.resident_bytes = std::max(t.resident_bytes, s.resident_bytes);
  t.evicted_bytes += s.evicted_bytes;
  t.rollback_bytes = std::max(t.rollback_bytes, s.rollback_bytes);
  t.h2d_seconds += s.h2d_seconds;
  t.compute_seconds += s.compute_seconds;
  t.d2h_seconds += s.d2h_seconds;
  t.fill_seconds += s.fill_seconds;
  t.drain_seconds += s.drain_seconds;
  t.prefault_seconds += s.prefault_seconds;
  t.seconds += s.seconds;
  if (t.error.empty()) t.error = s.error;
  if (t.device_fault.empty()) t.device_fault = s.device_fault;
  if (!s.tiling.empty()) t.tiling += (t.tiling.empty() ? "" : "; ") + s.tiling;
}

stage_report total(const std::vector<stage_report>& stages) {
  stage_report t;
  for (const auto& s : stages) accumulate(t, s);
  return t;
}

void run_log::add(stage_report r) {
  if (stages.size() >= kept_stages) {
    // Drop the oldest half at once: amortised constant time per stage.
    const std::size_t n = stages.size() / 2;
    for (std::size_t i = 0; i < n; ++i) accumulate(earlier, stages[i], false);
    stages.erase(stages.begin(), stages.begin() + static_cast<std::ptrdiff_t>(n));
    dropped += n;
  }
  stages.push_back(std::move(r));
}

void run_log::add_trace(std::vector<trace_event>& events) {
  const std::size_t room = kept_trace_events - std::min(kept_trace_events, trace.size());
  const std::size_t n = std::min(room, events.size());
  trace.insert(trace.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.begin() + static_cast<std::ptrdiff_t>(n)));
  dropped_trace_events += events.size() - n;
  events.clear();
}

stage_report run_log::total() const {
  stage_report t = earlier;
  for (const auto& s : stages) accumulate(t, s);
  return t;
}

void run_log::add_declined(const std::string& op, const std::string& reason, const std::string& dims) {
  for (auto& d : not_offloaded)
    if (d.op == op && d.reason == reason) {
      ++d.count;
      d.last = dims;
      return;
    }
  not_offloaded.push_back({op, reason, 1, dims});
}

void run_log::clear() { *this = run_log{}; }

namespace {
/// {"emulated:0": 12, "emulated:1": 48}: a spread stage's chunks per device.
nlohmann::json by_device(const stage_report& s) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [name, n] : s.chunks_by_device) o[name] = n;
  return o;
}

nlohmann::json to_json(const stage_report& s) {
  return {{"calls", s.calls},
          {"evaluation", s.evaluation},
          {"stage", s.stage},
          {"op", s.op},
          {"dims", s.dims.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.dims)},
          {"device", s.device},
          {"placement", s.placement_reason},
          {"predicted_seconds", s.predicted_seconds},
          {"units", s.units},
          {"chunk_units", s.chunk_units},
          {"chunks", s.chunks},
          {"streams", s.streams},
          {"sequential", s.sequential},
          {"bytes_per_unit", s.bytes_per_unit},
          {"h2d_bytes", s.h2d_bytes},
          {"d2h_bytes", s.d2h_bytes},
          {"peak_device_bytes", s.peak_device_bytes},
          {"device_chunks", s.device_chunks},
          {"chunks_by_device", by_device(s)},
          {"host_reruns", s.host_reruns},
          {"device_fault", s.device_fault.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.device_fault)},
          {"rollback_bytes", s.rollback_bytes},
          {"resident_bytes_saved", s.resident_bytes_saved},
          {"resident_bytes", s.resident_bytes},
          {"evicted_bytes", s.evicted_bytes},
          {"h2d_seconds", s.h2d_seconds},
          {"compute_seconds", s.compute_seconds},
          {"d2h_seconds", s.d2h_seconds},
          {"fill_seconds", s.fill_seconds},
          {"drain_seconds", s.drain_seconds},
          {"prefault_seconds", s.prefault_seconds},
          {"seconds", s.seconds},
          {"tiling", s.tiling.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.tiling)},
          {"error", s.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.error)}};
}

void write_file(const std::string& path, const nlohmann::json& j, const char* what) {
  std::ofstream f(path);
  if (!f) throw config_error(std::string("oa: ") + what + ": cannot write '" + path + "'");
  f << j.dump(2) << '\n';
}
}  // namespace

void write_report_json(const std::string& path, const run_log& log) {
  nlohmann::json j;
  j["stages"] = nlohmann::json::array();
  for (const auto& s : log.stages) j["stages"].push_back(to_json(s));
  j["dropped_stages"] = log.dropped;  // older stages, counted in "total" only
  j["total"] = to_json(log.total());
  j["unobserved_errors"] = log.unobserved_errors;
  j["not_offloaded"] = nlohmann::json::array();
  for (const auto& d : log.not_offloaded)
    j["not_offloaded"].push_back({{"op", d.op}, {"reason", d.reason}, {"count", d.count}, {"last", d.last}});
  write_file(path, j, "OA_REPORT");
}

void write_trace_json(const std::string& path, const std::vector<trace_event>& events) {
  // Chrome trace format: a process per device, a thread (track) per stream or engine.
  std::map<std::string, int> pids;
  std::map<std::pair<std::string, std::string>, int> tids;
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& e : events) {
    auto [pit, pnew] = pids.emplace(e.device, static_cast<int>(pids.size()) + 1);
    if (pnew)
      ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pit->second}, {"args", {{"name", e.device}}}});
    auto [tit, tnew] = tids.emplace(std::make_pair(e.device, e.track), static_cast<int>(tids.size()) + 1);
    if (tnew)
      ev.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", pit->second},
                    {"tid", tit->second},
                    {"args", {{"name", e.track}}}});
    nlohmann::json x = {{"ph", "X"},
                        {"name", e.name},
                        {"pid", pit->second},
                        {"tid", tit->second},
                        {"ts", e.begin * 1e6},
                        {"dur", (e.end - e.begin) * 1e6}};
    if (e.bytes) x["args"]["bytes"] = e.bytes;
    if (!e.stage.empty()) x["args"]["stage"] = e.stage;
    ev.push_back(std::move(x));
  }
  write_file(path, {{"traceEvents", ev}, {"displayTimeUnit", "ms"}}, "OA_TRACE");
}

}  // namespace oa
