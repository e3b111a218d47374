#include "core/residency.hpp"

#include <algorithm>
#include <vector>

namespace oa::detail {

residency::residency(device& dev) : dev_(dev) { resume_pager(); }

void residency::pause_pager() noexcept {
  try {
    dev_.set_out_of_memory_handler({});
  } catch (...) {
  }
}

void residency::resume_pager() {
  dev_.set_out_of_memory_handler([this](std::size_t bytes) { return evict(bytes); });
}

residency::~residency() {
  dev_.set_out_of_memory_handler({});
  clear();
}

std::size_t residency::pinned_bytes() const noexcept {
  std::size_t b = 0;
  for (const value_state* v : pinned_)
    if (auto it = entries_.find(v); it != entries_.end()) b += it->second->copy.size();
  return b;
}

namespace {
bool overlaps(const region& a, const region& b) noexcept {
  const std::byte *a0 = a.data, *a1 = a.data + residency::span(a), *b0 = b.data, *b1 = b.data + residency::span(b);
  return a0 < b1 && b0 < a1;
}
bool same(const region& a, const region& b) noexcept {
  return a.data == b.data && a.width == b.width && a.rows == b.rows && (a.rows <= 1 || a.pitch == b.pitch);
}
}  // namespace

bool residency::evict(std::size_t bytes) noexcept {
  std::size_t freed = 0;
  // Kept copies first, oldest first: no one reads them now.
  while (freed < bytes && !kept_.empty()) {
    // Remembered, so that the scheduler stops counting on such a copy.
    constexpr std::size_t remembered = 64;
    try {
      std::erase_if(unread_, [&](const region& r) { return same(r, kept_.front().host); });
      if (unread_.size() == remembered) unread_.erase(unread_.begin());
      unread_.push_back(kept_.front().host);
    } catch (...) {
      // Not remembered: the copy is evicted all the same.
    }
    freed += kept_.front().copy.size();
    evicted_ += kept_.front().copy.size();
    kept_.erase(kept_.begin());
  }
  if (freed >= bytes) return true;
  std::vector<entry*> victims;
  for (auto& [v, e] : entries_)
    if (!pinned_.count(v)) victims.push_back(e.get());
  std::sort(victims.begin(), victims.end(),
            [](const entry* a, const entry* b) { return a->copy.size() > b->copy.size(); });
  for (entry* e : victims) {
    if (freed >= bytes) break;
    try {
      write_back(*e);
    } catch (...) {
      continue;  // the only copy: it stays, and so does the shortage
    }
    freed += e->copy.size();
    evicted_ += e->copy.size();
    entries_.erase(e->value.get());
  }
  return freed > 0;
}

residency::entry* residency::find(const value_state* v) noexcept {
  auto it = entries_.find(v);
  return it == entries_.end() ? nullptr : it->second.get();
}

residency::entry& residency::add(value_ptr v, device_buffer copy, const region& host, bool host_valid) {
  forget(host);
  auto e = std::make_unique<entry>();
  e->value = std::move(v);
  e->copy = std::move(copy);
  e->host = host;
  e->host_valid = host_valid;
  if (host_valid) e->print = fingerprint_of(host);
  entry& ref = *e;
  entries_[ref.value.get()] = std::move(e);
  return ref;
}

std::size_t residency::bytes() const noexcept {
  std::size_t b = 0;
  for (const auto& [v, e] : entries_) b += e->copy.size();
  return b;
}

region residency::in_copy(const entry& e, const region& host_chunk) noexcept {
  const std::size_t offset = static_cast<std::size_t>(host_chunk.data - e.host.data);
  return {e.copy.data() + offset, host_chunk.width, host_chunk.rows, host_chunk.pitch};
}

region residency::whole_region(const value_state& v) { return v.ops->host_region(v.object, {0, v.shape.units}); }

void residency::write_back(entry& e) {
  if (e.host_valid) return;
  const oa::stream s(dev_);
  // The copy has the host layout: the same region, moved.
  dev_.copy_to_host_async(e.host, in_copy(e, e.host), s.id());
  dev_.synchronize(s.id());
  e.host_valid = true;
  e.print = fingerprint_of(e.host);
}

void residency::release_pinned() {
  for (const value_state* v : pinned_)
    if (auto it = entries_.find(v); it != entries_.end()) write_back(*it->second);
  pinned_.clear();
}

void residency::drop(const value_state* v) {
  pinned_.erase(v);
  entries_.erase(v);
}

void residency::rekey(const value_state* from, value_ptr to) {
  auto it = entries_.find(from);
  if (it == entries_.end()) return;
  std::unique_ptr<entry> e = std::move(it->second);
  entries_.erase(it);
  pinned_.erase(from);
  e->value = std::move(to);
  e->host_valid = true;
  e->print = fingerprint_of(e->host);
  entries_[e->value.get()] = std::move(e);
}

void residency::clear() noexcept {
  pinned_.clear();
  entries_.clear();
  kept_.clear();
}

void residency::forget(const region& host) noexcept {
  std::erase_if(kept_, [&](const kept& k) { return overlaps(k.host, host); });
}

void residency::retire(entry& e) noexcept {
  if (!e.host_valid || !e.host.data || e.host.bytes() == 0 || !e.copy.data()) return;
  forget(e.host);
  // The fingerprint of when the host held the copy's bytes: a stage that
  // wrote the storage since (on the host, or another device) leaves the
  // copy stale, and adopt() finds it so.
  kept_.push_back({std::move(e.copy), e.host, e.print});
}

void residency::end_evaluation() noexcept {
  pinned_.clear();
  for (auto& [v, e] : entries_) retire(*e);
  entries_.clear();
}

residency::entry* residency::adopt(const value_ptr& v) {
  if (entry* e = find(v.get())) return e;
  if (kept_.empty() || !v->object) return nullptr;
  const region host = whole_region(*v);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (!same(it->host, host)) continue;
    const fingerprint now = fingerprint_of(host);
    if (now != it->print) {
      kept_.erase(it);  // the program wrote the storage since
      return nullptr;
    }
    device_buffer copy = std::move(it->copy);
    kept_.erase(it);
    std::erase_if(unread_, [&](const region& r) { return same(r, host); });  // a copy kept and read: it pays
    entry& e = add(v, std::move(copy), host, false);
    e.host_valid = true;
    e.print = now;  // just taken: not again
    return &e;
  }
  return nullptr;
}

bool residency::holds_kept(const value_state& v) const noexcept {
  if (kept_.empty() || !v.object) return false;
  const region host = whole_region(v);
  for (const kept& k : kept_)
    if (same(k.host, host)) return true;
  return false;
}

bool residency::keeping_pays(const value_state& v) const noexcept {
  if (unread_.empty() || !v.object) return true;
  const region host = whole_region(v);
  return std::none_of(unread_.begin(), unread_.end(), [&](const region& r) { return same(r, host); });
}

std::size_t residency::kept_bytes() const noexcept {
  std::size_t b = 0;
  for (const kept& k : kept_) b += k.copy.size();
  return b;
}

}  // namespace oa::detail
