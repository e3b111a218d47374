#include "host/stream_worker.hpp"

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

#include "oa/core/error.hpp"
#include "oa/core/process_clock.hpp"
#include "oa/core/runtime.hpp"

namespace oa::detail {

namespace {

// Continuations set further tokens (an event waited on by a stream whose
// event...). Running them from a per-thread work list instead of recursing
// keeps the stack flat however long such a chain is.
thread_local std::vector<std::function<void()>>* pending_continuations = nullptr;

void run_continuations(std::vector<std::function<void()>> fns) {
  if (pending_continuations) {
    for (auto& f : fns) pending_continuations->push_back(std::move(f));
    return;
  }
  pending_continuations = &fns;
  while (!fns.empty()) {
    auto f = std::move(fns.back());
    fns.pop_back();
    f();
  }
  pending_continuations = nullptr;
}

/// What record_event hands out: the token of an event marker.
struct marker final : event_state {
  explicit marker(token t) : done(std::move(t)) {}
  token done;
};


}  // namespace

// --- completion -------------------------------------------------------------

void completion::set(std::exception_ptr error) {
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard lock(m_);
    done_ = true;
    error_ = std::move(error);
    fns.swap(then_);
    cv_.notify_all();  // under the lock: a woken waiter may drop the last reference
  }
  if (!fns.empty()) run_continuations(std::move(fns));
}

void completion::wait() const {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return done_; });
}

bool completion::done() const {
  std::lock_guard lock(m_);
  return done_;
}

std::exception_ptr completion::error() const {
  std::lock_guard lock(m_);
  return error_;
}

void completion::then(std::function<void()> fn) {
  {
    std::lock_guard lock(m_);
    if (!done_) {
      then_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

// --- link timing ------------------------------------------------------------

std::chrono::steady_clock::time_point link_deadline(std::chrono::steady_clock::time_point begin, double seconds) {
  using clock = std::chrono::steady_clock;
  if (!(seconds > 0)) return begin;
  // Half the room left keeps the conversion below from rounding past the maximum.
  const double room = std::chrono::duration<double>(clock::time_point::max() - begin).count() / 2;
  if (!(seconds < room)) return clock::time_point::max();
  return begin + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

void sleep_until_deadline(std::chrono::steady_clock::time_point t) {
  using clock = std::chrono::steady_clock;
  // In steps of at most an hour: the library's sleep converts durations that
  // far ones would overflow.
  for (auto now = clock::now(); now < t; now = clock::now())
    std::this_thread::sleep_for(std::min<clock::duration>(t - now, std::chrono::hours(1)));
}

// --- fifo_engine ------------------------------------------------------------

namespace {
std::atomic<std::uint64_t> threads_started{0};
}

std::uint64_t engine_threads_started() noexcept { return threads_started.load(std::memory_order_relaxed); }

fifo_engine::fifo_engine(std::function<void(op&)> run) : run_(std::move(run)), thread_([this] { loop(); }) {
  threads_started.fetch_add(1, std::memory_order_relaxed);
}

fifo_engine::~fifo_engine() {
  {
    std::lock_guard lock(m_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void fifo_engine::push(op o) {
  {
    std::lock_guard lock(m_);
    queue_.push_back(std::move(o));
  }
  cv_.notify_one();
}

void fifo_engine::loop() {
  const engine_thread_scope engine_work;
  for (;;) {
    op o;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      o = std::move(queue_.front());
      queue_.pop_front();
    }
    run_(o);
  }
}

// --- stream_device ----------------------------------------------------------

stream_device::stream_device(std::string api) : api_(std::move(api)), epoch_(process_epoch()) {}

std::string stream_device::function_name(const char* method) const { return api_ + "::" + method; }

std::shared_ptr<stream_state> stream_device::find_stream(const char* method, stream_id s) const {
  {
    std::lock_guard lock(m_);
    auto it = streams_.find(s);
    if (it != streams_.end()) return it->second;
  }
  throw invalid_argument(function_name(method), "stream", "no stream with id " + std::to_string(s));
}

token stream_device::event_token(const char* method, const event& e) const {
  const auto* m = dynamic_cast<const marker*>(e.get());
  if (!m) throw invalid_argument(function_name(method), "e", e ? "not an event of this kind of device" : "null event");
  return m->done;
}

void stream_device::check_copy(const char* method, const region& dst, const region& src) const {
  auto fail = [&](const char* argument, const std::string& what) {
    throw invalid_argument(function_name(method), argument, what);
  };
  auto shape = [](const region& r) { return std::to_string(r.width) + "x" + std::to_string(r.rows); };
  if (src.width != dst.width || src.rows != dst.rows)
    fail("src", "shape " + shape(src) + " (width x rows) differs from dst's " + shape(dst));
  for (auto [r, name] : {std::pair<const region*, const char*>{&dst, "dst"}, {&src, "src"}}) {
    if (r->rows > 1 && r->pitch < r->width)
      fail(name, "pitch " + std::to_string(r->pitch) + " is less than width " + std::to_string(r->width));
    if (!r->data && r->bytes() != 0) fail(name, "null data");
  }
}

stream_id stream_device::create_stream() {
  std::lock_guard lock(m_);
  const stream_id id = next_id_;
  streams_.emplace(id, std::make_shared<stream_state>(id));
  try {
    stream_added(id);
  } catch (...) {
    streams_.erase(id);
    throw;
  }
  ++next_id_;
  return id;
}

void stream_device::destroy_stream(stream_id s) noexcept {
  std::shared_ptr<stream_state> st;
  {
    std::lock_guard lock(m_);
    auto it = streams_.find(s);
    if (it == streams_.end()) return;
    st = it->second;
  }
  wait_pending(*st);
  std::lock_guard lock(m_);
  streams_.erase(s);
  stream_removed(s);
}

void stream_device::submit(const std::shared_ptr<stream_state>& st, op o) {
  std::lock_guard lock(m_);
  {
    std::lock_guard slock(st->m);
    if (st->last && !st->last->done()) o.deps.push_back(st->last);
    for (auto& w : st->waits)
      if (!w->done()) o.deps.push_back(w);
  }
  token done = std::make_shared<completion>();
  o.stream = st;
  o.done = done;
  enqueue(std::move(o));
  // Only once queued: a failed enqueue must not leave a token nobody completes.
  std::lock_guard slock(st->m);
  st->last = std::move(done);
  st->waits.clear();  // the op waits for them; later ops wait for the op
}

void stream_device::execute(op& o) noexcept {
  for (auto& d : o.deps) d->wait();
  o.deps.clear();
  stream_state& st = *o.stream;
  // What the op's token carries: its failure, or the error it was skipped
  // for, so that an event after it says so even when a synchronize of the
  // stream takes the stream's error first.
  std::exception_ptr carried;
  bool skip;
  {
    std::lock_guard lock(st.m);
    skip = st.error != nullptr;
    if (skip) carried = st.error;
  }
  std::exception_ptr failure;
  if (!skip) {
    if (o.fault) {
      failure = o.fault;
    } else {
      const double begin = now();
      try {
        o.body();
      } catch (...) {
        failure = std::current_exception();
      }
      if (recording_.load(std::memory_order_relaxed)) {
        try {
          std::lock_guard lock(records_m_);
          records_.push_back({o.what, st.id, begin, now(), o.bytes, std::move(o.label)});
        } catch (...) {  // a lost record must not lose the op's completion
        }
      }
    }
  }
  if (failure) {
    std::lock_guard lock(st.m);
    if (!st.error) st.error = failure;
    carried = failure;
  }
  // Drop what the op holds (the kernel's captures, its fault, its stream)
  // before anyone sees it done: whoever waits may then free what it refers to,
  // and this thread never releases the last reference to an exception that
  // the waiter has used.
  failure = nullptr;
  token done = std::move(o.done);
  o = op{};
  done->set(std::move(carried));
}

void stream_device::wait_token(const std::shared_ptr<stream_state>& st, token t) {
  std::lock_guard lock(m_);
  std::lock_guard slock(st->m);
  if (t->done()) return;
  std::erase_if(st->waits, [](const token& w) { return w->done(); });
  st->waits.push_back(std::move(t));
}

void stream_device::fail_stream(stream_state& st, std::exception_ptr e) noexcept {
  std::lock_guard lock(st.m);
  if (!st.error) st.error = std::move(e);
}

token stream_device::work_done(stream_id s) { return event_token("work_done", record_event(s)); }

event stream_device::record_event(stream_id s) {
  auto st = find_stream("record_event", s);
  std::vector<token> deps;
  token own;                   // the stream's own last op, still running: whether it fails
  std::exception_ptr already;  // the stream's error now: the event follows a failure
  {
    std::lock_guard lock(m_);  // no op slips in between on another thread
    std::lock_guard slock(st->m);
    // Done already: its error, if any, is the stream's (or was taken by a synchronize since).
    if (st->last && !st->last->done()) own = st->last;
    already = st->error;
    if (st->last) deps.push_back(st->last);
    deps.insert(deps.end(), st->waits.begin(), st->waits.end());
  }
  auto done = std::make_shared<completion>();
  // The marker completes when its last dependency does, carrying the stream's
  // error at that moment (later failures or a synchronize cannot change it).
  struct join {
    join(std::size_t n, std::shared_ptr<stream_state> s, token d) : left(n), stream(std::move(s)), done(std::move(d)) {}
    std::atomic<std::size_t> left;
    std::shared_ptr<stream_state> stream;
    token done;
    std::mutex m;
    std::exception_ptr dep_error;  // the first error a dependency carried
  };
  auto j = std::make_shared<join>(deps.size() + 1, st, done);
  j->dep_error = std::move(already);
  auto arrive = [](join& state) {
    if (state.left.fetch_sub(1) != 1) return;
    std::exception_ptr error;
    {
      std::lock_guard lock(state.stream->m);
      error = state.stream->error;
    }
    if (!error) {
      std::lock_guard lock(state.m);
      error = std::move(state.dep_error);
    }
    // As in execute(): nothing of the stream stays behind on this thread.
    state.stream.reset();
    token t = std::move(state.done);
    t->set(std::move(error));
  };
  // The stream's own last op carries its failure (or the error it was
  // skipped for) even when a synchronize has taken the stream's error; what
  // the stream waited for on other streams keeps its error there.
  for (auto& d : deps)
    d->then([j, arrive, d, own = d == own] {
      if (std::exception_ptr e = own ? d->error() : nullptr) {
        std::lock_guard lock(j->m);
        if (!j->dep_error) j->dep_error = std::move(e);
      }
      arrive(*j);
    });
  arrive(*j);
  return std::make_shared<marker>(std::move(done));
}

void stream_device::wait_event(stream_id s, const event& e) {
  // A done event is nothing to wait for; its error stays with its own stream.
  wait_token(find_stream("wait_event", s), event_token("wait_event", e));
}

std::exception_ptr stream_device::synchronize_event(const event& e) {
  token t = event_token("synchronize_event", e);
  t->wait();
  return t->error();
}

void stream_device::wait_pending(stream_state& st) {
  std::vector<token> pending;
  {
    std::lock_guard lock(st.m);
    if (st.last) pending.push_back(st.last);
    pending.insert(pending.end(), st.waits.begin(), st.waits.end());
  }
  for (auto& t : pending) t->wait();
}

void stream_device::synchronize(stream_id s) {
  auto st = find_stream("synchronize", s);
  wait_pending(*st);
  std::exception_ptr error;
  {
    std::lock_guard lock(st->m);
    error = std::exchange(st->error, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void stream_device::wait_idle() {
  std::vector<std::shared_ptr<stream_state>> all;
  {
    std::lock_guard lock(m_);
    for (auto& [id, st] : streams_) all.push_back(st);
  }
  for (auto& st : all) wait_pending(*st);
}

void stream_device::set_recording(bool on) { recording_.store(on); }

std::vector<op_record> stream_device::take_records() {
  std::lock_guard lock(records_m_);
  return std::exchange(records_, {});
}

double stream_device::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

}  // namespace oa::detail
