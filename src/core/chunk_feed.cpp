#include "core/chunk_feed.hpp"

#include <algorithm>

namespace oa::detail {

chunk_feed::chunk_feed(std::size_t units, std::size_t chunk_units, std::size_t chunk_partial_bytes, int devices,
                       bool even, bool progress, std::string what)
    : chunk_units_(std::max<std::size_t>(chunk_units, 1)),
      // No units: one empty chunk, so that the stage's functions run as the
      // library's would on empty input (a reduction's value is theirs, not
      // the split type's identity).
      ranges_(units == 0 ? std::vector<split::range>{split::range{0, 0}} : split::chunks(units, chunk_units_)),
      even_(even && devices > 1),
      takers_(static_cast<std::size_t>(std::max(devices, 1))),
      progress_(progress, std::move(what), units == 0 ? 0 : ranges_.size()) {
  count_ = ranges_.size();
  partials_.assign(count_ * chunk_partial_bytes, std::byte{0});
  partial_entries_.assign(count_, 1);
  taken_.assign(count_, 0);
  for (std::size_t d = 0; d < takers_.size(); ++d) takers_[d].next_even = d;
}

// Device d declines the next chunk when the other active devices, at the
// rates they have shown, would finish every chunk left (this one included)
// and those they hold before d would finish this one after those it holds.
bool chunk_feed::others_first(int d, clock::time_point now) const {
  // Chunks per second once the chunks it held at its first finish have all
  // finished, counting only those after: not what its first chunks paid
  // once (its staging memory made, its pages touched), which would make a
  // fast device look slow and decline early; nor their burst (chunks that
  // waited behind that cost end together), which would make it look fast
  // and another decline early.
  const auto rate = [&](const taker& t) {
    const double s = std::chrono::duration<double>(now - t.settled).count();
    return t.finished > t.taken_by_first && s > 0 ? static_cast<double>(t.finished - t.taken_by_first) / s : 0.0;
  };
  const taker& me = takers_[static_cast<std::size_t>(d)];
  const double mine = rate(me);
  if (mine <= 0) return false;  // not measured yet: it takes chunks until it is
  double others = 0, held = 0;
  for (std::size_t e = 0; e < takers_.size(); ++e) {
    if (static_cast<int>(e) == d || !takers_[e].active) continue;
    const double r = rate(takers_[e]);
    if (r <= 0) continue;
    others += r;
    held += static_cast<double>(takers_[e].taken - takers_[e].finished);
  }
  if (others <= 0) return false;
  const double left = static_cast<double>(count_ - handed_);
  const double mine_done = static_cast<double>(me.taken - me.finished + 1) / mine;
  return (left + held) / others < mine_done;
}

std::optional<std::size_t> chunk_feed::take(int d) {
  std::lock_guard lock(mutex_);
  taker& t = takers_[static_cast<std::size_t>(d)];
  if (stopped_ || !t.active || handed_ == count_) return std::nullopt;
  std::size_t i = 0;
  const auto now = clock::now();
  if (even_) {
    if (t.next_even >= count_) return std::nullopt;
    i = t.next_even;
    t.next_even += takers_.size();
  } else {
    if (takers_.size() > 1 && others_first(d, now)) {
      t.active = false;  // the rest goes faster elsewhere; it only gets later
      return std::nullopt;
    }
    while (taken_[next_]) ++next_;
    i = next_;
  }
  taken_[i] = 1;
  ++handed_;
  ++t.taken;
  return i;
}

void chunk_feed::finished(int d) {
  std::lock_guard lock(mutex_);
  taker& t = takers_[static_cast<std::size_t>(d)];
  if (t.finished++ == 0) t.taken_by_first = t.taken;
  if (t.finished == t.taken_by_first) t.settled = clock::now();
  progress_.update(++finished_);
}

void chunk_feed::leave(int d) {
  std::lock_guard lock(mutex_);
  takers_[static_cast<std::size_t>(d)].active = false;
}

void chunk_feed::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
}

std::vector<std::size_t> chunk_feed::untaken() const {
  std::lock_guard lock(mutex_);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < count_; ++i)
    if (!taken_[i]) out.push_back(i);
  return out;
}

std::size_t chunk_feed::taken_by(int d) const {
  std::lock_guard lock(mutex_);
  return takers_[static_cast<std::size_t>(d)].taken;
}

}  // namespace oa::detail
