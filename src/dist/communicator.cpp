// oa::dist's communicator over MPI: every collective is a non-blocking MPI
// one polled against the deadline (OA_DIST_TIMEOUT), with a status beside
// each rank's bytes so that a failure on one rank reaches every caller.

#include "oa/dist/communicator.hpp"

#include <filesystem>
#include <optional>
#include <string>

#include "dist/gpu_choice.hpp"

#include "oa/core/backoff.hpp"
#include "oa/core/config.hpp"
#include "oa/core/fnv1a.hpp"
#include "oa/core/runtime.hpp"
#include "core/runtime_state.hpp"

#if OA_HAS_MPI
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <tuple>
#include <mutex>
#include <map>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>
#endif

namespace oa::dist {

namespace detail {

int gpus_listed(const std::string& driver_dir) {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it(driver_dir, ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

std::optional<int> gpu_for(int local_rank, int local_size, int gpus) {
  if (local_size <= 1 || gpus <= 0) return std::nullopt;
  return local_rank % gpus;
}

}  // namespace detail

#if !OA_HAS_MPI

bool available() noexcept { return false; }

communicator& world() {
  throw oa::error(
      "oa::dist::world: this oa was built without MPI (configure it with -DOA_ENABLE_MPI=ON where MPI is "
      "installed, e.g. Debian's libopenmpi-dev): distributed values cannot be made");
}

#else

bool available() noexcept { return true; }

namespace {

using bytes = std::vector<std::byte>;

/// Ranks whose arrival is tracked one by one (a zero-byte message to every
/// other rank per collective) so that a deadline can name them; above it
/// the deadline says only that some rank did not arrive.
constexpr int named_ranks = 64;

std::string mpi_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return std::string(text, static_cast<std::size_t>(n));
}

/// Each rank's first message in every collective (and in each phase of
/// one): whether its part failed, its bytes, and which call and phase it
/// is in, by name, so that ranks in different ones say so.
struct header {
  std::uint64_t failed = 0, size = 0, layout = 0;
  std::uint64_t name_hash = 0, name_size = 0;  // of the whole name: a long one's text is cut, not these
  char call[96] = {};

  header(bool f, std::size_t n, std::uint64_t l, const std::string& name)
      : failed(f ? 1 : 0), size(n), layout(l), name_hash(hash_of(name)), name_size(name.size()) {
    std::memcpy(call, name.data(), std::min(name.size(), sizeof call - 1));
  }
  header() = default;
  std::string name() const {
    const std::string text(call, strnlen(call, sizeof call));
    return name_size > text.size() ? text + "..." : text;
  }
  bool same_call(const header& o) const {
    return name_hash == o.name_hash && name_size == o.name_size && std::strncmp(call, o.call, sizeof call) == 0;
  }

  static std::uint64_t hash_of(const std::string& s) { return oa::detail::fnv1a(s); }
};

/// What every communicator of the run shares: the thread level, whether
/// ranks were found out of step, which thread is in a collective, the bytes
/// moved.
struct run_state {
  int thread_level = MPI_THREAD_SINGLE;
  std::atomic<bool> broken{false};
  std::atomic<std::thread::id> owner{};
  std::atomic<std::uint64_t> network{0};
};

class mpi_comm final : public communicator {
 public:
  /// Over `comm` (ours to free), its ranks named by their rank in the run.
  mpi_comm(run_state& run, MPI_Comm comm, int local_rank, int local_size)
      : run_(run), comm_(comm), local_rank_(local_rank), local_size_(local_size) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    world_ranks_.resize(static_cast<std::size_t>(size_));
    MPI_Group mine, everyone;
    MPI_Comm_group(comm_, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &everyone);
    std::vector<int> ranks(world_ranks_.size());
    for (int r = 0; r < size_; ++r) ranks[static_cast<std::size_t>(r)] = r;
    MPI_Group_translate_ranks(mine, size_, ranks.data(), everyone, world_ranks_.data());
    MPI_Group_free(&mine);
    MPI_Group_free(&everyone);
  }
  ~mpi_comm() override;
  mpi_comm(const mpi_comm&) = delete;
  mpi_comm& operator=(const mpi_comm&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int local_rank() const noexcept override { return local_rank_; }
  int local_size() const noexcept override { return local_size_; }
  int run_rank(int r) const override {
    if (r < 0 || r >= size_)
      throw oa::invalid_argument("oa::dist::communicator::run_rank", "r",
                                 std::to_string(r) + " is not a rank here (0 to " + std::to_string(size_ - 1) + ")");
    return who(r);
  }
  std::uint64_t network_bytes() const noexcept override { return run_.network.load(std::memory_order_relaxed); }

  std::vector<bytes> exchange(const std::string& call, const std::function<bytes()>& mine,
                              std::uint64_t layout) override {
    const entry in(*this, call);
    return gather(call, mine, {}, layout);
  }

  std::vector<std::size_t> all_to_all(const std::string& call, std::span<const std::byte> send,
                                      const std::vector<std::size_t>& counts,
                                      const std::function<std::byte*(std::size_t)>& into) override {
    const entry in(*this, call);
    std::vector<int> send_counts(static_cast<std::size_t>(size_)), recv_counts(send_counts.size());
    std::vector<int> send_displs, recv_displs;
    const auto check_counts = [&] {
      if (counts.size() != send_counts.size())
        throw oa::error(call + ": " + std::to_string(counts.size()) + " counts for " + std::to_string(size_) + " ranks");
      for (std::size_t r = 0; r < counts.size(); ++r) send_counts[r] = count_of(call, counts[r], "to one rank");
      if (displacements(call, send_counts, send_displs, "from one rank") != send.size())
        throw oa::error(call + ": the counts do not add up to the " + std::to_string(send.size()) + " bytes to send");
      return bytes{};
    };
    (void)gather(call, check_counts, "(all-to-all counts)");
    MPI_Request req;
    {
      arrival tokens(*this, call);
      check(call, MPI_Ialltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm_, &req));
      wait(call, req, &tokens);
      tokens.done();
    }
    std::byte* recv = nullptr;
    const auto receive_into = [&] {
      recv = into(displacements(call, recv_counts, recv_displs, "to one rank"));
      return bytes{};
    };
    (void)gather(call, receive_into, "(all-to-all data)");
    arrival tokens(*this, call);
    check(call, MPI_Ialltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_BYTE, recv, recv_counts.data(),
                               recv_displs.data(), MPI_BYTE, comm_, &req));
    wait(call, req, &tokens);
    tokens.done();
    std::vector<std::size_t> from(recv_counts.size());
    std::uint64_t moved = 0;
    for (int r = 0; r < size_; ++r) {
      const auto k = static_cast<std::size_t>(r);
      from[k] = static_cast<std::size_t>(recv_counts[k]);
      if (r != rank_) moved += static_cast<std::uint64_t>(send_counts[k]) + from[k];
    }
    run_.network += moved;
    return from;
  }

  class pending;
  using communicator::broadcast;
  std::unique_ptr<request> broadcast(const std::string& call, int root,
                                     const std::function<std::span<std::byte>()>& buffer) override;

  communicator& split_kept(const std::string& call, const std::string& purpose, int color, int key) override {
    const auto k = std::make_tuple(purpose, color, key);
    {
      std::lock_guard lock(kept_m_);
      if (const auto it = kept_.find(k); it != kept_.end()) return *it->second;
    }
    auto made = split(call, color, key);
    std::lock_guard lock(kept_m_);
    return *kept_.emplace(k, std::move(made)).first->second;
  }

  std::size_t kept_splits() const override {
    std::lock_guard lock(kept_m_);
    return kept_.size();
  }

  std::unique_ptr<communicator> split(const std::string& call, int color, int key) override {
    const entry in(*this, call);
    // Every rank's arguments agreed first: a negative color (MPI_UNDEFINED
    // to MPI) would leave a rank without a communicator.
    (void)gather(call, [&]() -> bytes {
      if (color < 0) throw oa::invalid_argument(call.c_str(), "color", std::to_string(color) + " is negative");
      return {};
    }, "(split)");
    // MPI_Comm_split blocks: every rank has arrived (the exchange above),
    // so it waits for nothing but its own work.
    MPI_Comm part = MPI_COMM_NULL;
    check(call, MPI_Comm_split(comm_, color, key, &part));
    try {
      return std::make_unique<mpi_comm>(run_, part, local_rank_, local_size_);
    } catch (...) {
      MPI_Comm_free(&part);
      throw;
    }
  }

 private:
  /// A collective under way on this rank: one thread at a time, and none
  /// begun inside another's local part (a call evaluated for it), since the
  /// other ranks could not tell which is which.
  class entry {
   public:
    entry(mpi_comm& w, const std::string& call) : w_(w) {
      w.usable(call);
      int main_thread = 1;
      if (w.run_.thread_level < MPI_THREAD_SERIALIZED && (MPI_Is_thread_main(&main_thread), !main_thread))
        throw error(call + ": called from a thread other than the one that initialised MPI, whose thread level "
                           "allows only that one (initialise MPI with MPI_THREAD_SERIALIZED or let oa do it)",
                    call, -1);
      std::thread::id none;
      if (!w.run_.owner.compare_exchange_strong(none, std::this_thread::get_id()))
        throw error(none == std::this_thread::get_id()
                        ? call + ": called inside another oa::dist collective's local part (a call evaluated for "
                                 "it): collectives are called by the program, one after another"
                        : call + ": called while another thread of this rank is in an oa::dist collective (or "
                                 "from a function evaluated for one, on oa's threads): collectives are called by "
                                 "the program, one thread at a time, in the same order on every rank",
                    call, -1);
    }
    ~entry() { w_.run_.owner.store(std::thread::id{}); }
    entry(const entry&) = delete;
    entry& operator=(const entry&) = delete;

   private:
    mpi_comm& w_;
  };

  /// Every rank reaching a collective, posted before its local part: a
  /// barrier begun (done once all have begun it), and zero-byte messages
  /// from every rank to every other that name, past the deadline, the ranks
  /// that have not (up to named_ranks ranks).
  struct arrival {
    mpi_comm& w;
    MPI_Request all = MPI_REQUEST_NULL;
    std::vector<MPI_Request> reqs;  // receives by rank (this one's a null request), then sends
    std::vector<char> token;
    bool everyone = false;
    arrival(mpi_comm& world, const std::string& call) : w(world) {
      if (w.size_ == 1) {
        everyone = true;
        return;
      }
      w.check(call, MPI_Ibarrier(w.comm_, &all));
      if (w.size_ > named_ranks) return;
      const int tag = 1 + static_cast<int>(w.tag_++ % 30000);
      token.assign(static_cast<std::size_t>(w.size_), 0);
      reqs.assign(2 * static_cast<std::size_t>(w.size_), MPI_REQUEST_NULL);
      for (int r = 0; r < w.size_; ++r) {
        if (r == w.rank_) continue;
        const auto k = static_cast<std::size_t>(r);
        w.check(call, MPI_Irecv(&token[k], 0, MPI_CHAR, r, tag, w.comm_, &reqs[k]));
        w.check(call, MPI_Isend(nullptr, 0, MPI_CHAR, r, tag, w.comm_, &reqs[static_cast<std::size_t>(w.size_) + k]));
      }
    }
    /// Whether every rank has reached the collective.
    bool arrived() {
      if (!everyone) {
        int done = 0;
        MPI_Test(&all, &done, MPI_STATUS_IGNORE);
        everyone = done != 0;
      }
      return everyone;
    }
    /// The ranks whose message has not come, as "rank 1, rank 3".
    std::string missing() {
      std::string out;
      for (int r = 0; r < static_cast<int>(reqs.size()) / 2; ++r) {
        int came = 1;
        if (reqs[static_cast<std::size_t>(r)] != MPI_REQUEST_NULL)
          MPI_Test(&reqs[static_cast<std::size_t>(r)], &came, MPI_STATUS_IGNORE);
        if (!came) out += (out.empty() ? "rank " : ", rank ") + std::to_string(w.world_ranks_[static_cast<std::size_t>(r)]);
      }
      return out;
    }
    /// The collective completed: every rank arrived, its messages are in.
    void done() {
      if (all != MPI_REQUEST_NULL) MPI_Wait(&all, MPI_STATUS_IGNORE);
      if (!reqs.empty()) MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      reqs.clear();
    }
  };

  /// Rank r here, as the run numbers it (what messages say).
  int who(int r) const { return world_ranks_[static_cast<std::size_t>(r)]; }
  /// " of 4" for the run's ranks, " of ranks 1, 3" for some of them.
  std::string of_ranks() const {
    int everyone = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &everyone);
    if (everyone == size_) return " of " + std::to_string(size_);
    std::string out = " of ranks";
    for (int r = 0; r < size_ && r < 16; ++r) out += (r ? ", " : " ") + std::to_string(who(r));
    return size_ > 16 ? out + ", ... (" + std::to_string(size_) + " in all)" : out;
  }

  static bytes text_bytes(const std::string& s) {
    bytes b(s.size());
    std::memcpy(b.data(), s.data(), s.size());
    return b;
  }

  void check(const std::string& call, int code) {
    if (code == MPI_SUCCESS) return;
    run_.broken = true;
    throw error(call + ": MPI failed: " + mpi_text(code), call, -1);
  }

  void usable(const std::string& call) const {
    if (run_.broken)
      throw error(call + ": an earlier oa::dist collective found the ranks out of step; the run cannot go on "
                  "(it is aborted at exit)",
                  call, -1);
  }

  /// MPI's counts and displacements are ints.
  static int count_of(const std::string& call, std::size_t n, const char* where) {
    if (n > static_cast<std::size_t>(INT_MAX))
      throw error(call + ": " + std::to_string(n) + " bytes " + where + " in one exchange, more than MPI's " +
                      std::to_string(INT_MAX) + " (an int)",
                  call, -1);
    return static_cast<int>(n);
  }

  /// The displacements of `counts` laid end to end; their total.
  static std::size_t displacements(const std::string& call, const std::vector<int>& counts, std::vector<int>& displs,
                                   const char* where) {
    displs.assign(counts.size(), 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      displs[r] = count_of(call, total, where);
      total += static_cast<std::size_t>(counts[r]);
    }
    (void)count_of(call, total, where);
    return total;
  }

  /// Polls `req` until it completes. The deadline is for every rank to
  /// reach the collective: a rank's own part (its local evaluation) takes
  /// as long as it takes once it has. Past the deadline the ranks cannot
  /// agree on anything (MPI cannot cancel a collective begun, and its
  /// buffers would be written after this call returned): the error, naming
  /// the ranks that did not arrive, goes to stderr and the run is aborted.
  /// The poll spins briefly, then sleeps (up to half a millisecond) so that
  /// a rank waiting for others leaves the cores to ranks still computing.
  /// Without `tokens` (a broadcast, begun once every rank had arrived)
  /// there is no deadline.
  void wait(const std::string& call, MPI_Request& req, arrival* tokens) {
    const double limit = oa::current_config().dist_timeout;
    // Where the deadline was set, for the message (read here, not while
    // another thread of this rank may hold the runtime in an evaluation).
    std::string source = tokens && limit > 0 ? oa::detail::setting_origin("dist_timeout") : std::string();
    if (source.ends_with("(default)")) source += "; OA_DIST_TIMEOUT sets it";
    const auto start = std::chrono::steady_clock::now();
    // Another rank is usually near: yield first, then sleep up to 500 us.
    oa::detail::backoff wait({.spins = 0, .yields = 64, .first = std::chrono::microseconds(10),
                              .most = std::chrono::microseconds(500)});
    for (;;) {
      int done = 0;
      check(call, MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (done) return;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (tokens && limit > 0 && waited > limit && !tokens->arrived()) {
        std::string missing = tokens->missing();
        if (missing.empty()) missing = "a rank";
        std::ostringstream what;
        what << "oa: " << call << ": " << missing << of_ranks() << " did not arrive within " << limit << " s ("
             << source << "); this is rank " << who(rank_)
             << "; the run is aborted\n";
        std::fputs(what.str().c_str(), stderr);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      wait.pause();
    }
  }

  /// Every rank's bytes from `mine` and failure flag, after headers that
  /// check the ranks are in the same collective; a failure anywhere is
  /// thrown on every rank, naming the first rank that failed (on that rank,
  /// with its own exception nested).
  std::vector<bytes> gather(const std::string& call, const std::function<bytes()>& mine,
                            const std::string& phase = {}, std::uint64_t layout = 0) {
    arrival tokens(*this, call);
    std::exception_ptr own;
    bytes payload;
    try {
      payload = mine();
      if (payload.size() > static_cast<std::size_t>(INT_MAX))
        (void)count_of(call, payload.size(), "from one rank");
    } catch (const std::exception& e) {
      own = std::current_exception();
      payload = text_bytes(e.what());
    } catch (...) {
      own = std::current_exception();
      payload = text_bytes("an exception of a type not derived from std::exception");
    }
    const std::string mine_name = phase.empty() ? call : call + " " + phase;
    const header mine_h(own != nullptr, payload.size(), layout, mine_name);
    std::vector<header> heads(static_cast<std::size_t>(size_));
    MPI_Request req;
    check(call, MPI_Iallgather(&mine_h, sizeof(header), MPI_BYTE, heads.data(), sizeof(header), MPI_BYTE, comm_, &req));
    wait(call, req, &tokens);
    for (int r = 0; r < size_; ++r) {
      const header& h = heads[static_cast<std::size_t>(r)];
      if (h.same_call(mine_h)) continue;
      tokens.done();
      run_.broken = true;
      throw error(call + ": rank " + std::to_string(who(r)) + " is in " + h.name() + ", this rank in " +
                      mine_name + ": every rank calls the same oa::dist collectives in the same order",
                  call, who(r));
    }
    // Ranks in step that take one value to be laid out differently: every
    // rank sees it in the headers and fails alike, before the bytes move
    // (unless a rank failed: its message, which says more, moves instead).
    const bool any_failed =
        std::any_of(heads.begin(), heads.end(), [](const header& h) { return h.failed != 0; });
    for (int r = 1; r < size_ && !any_failed; ++r)
      if (heads[static_cast<std::size_t>(r)].layout != heads[0].layout) {
        tokens.done();
        throw error(call + ": rank " + std::to_string(who(r)) + " takes the value's layout or the call's arguments "
                           "to be other than rank " + std::to_string(who(0)) + " does: every rank makes a "
                           "distributed value with the same layout and passes a collective the same arguments",
                    call, who(r));
      }
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs;
    for (std::size_t r = 0; r < counts.size(); ++r) counts[r] = static_cast<int>(heads[r].size);
    bytes all;
    try {
      all.resize(displacements(call, counts, displs, "to one rank"));
    } catch (...) {
      tokens.done();
      throw;  // every rank computed the same total from the same headers
    }
    check(call, MPI_Iallgatherv(payload.data(), static_cast<int>(payload.size()), MPI_BYTE, all.data(), counts.data(),
                                displs.data(), MPI_BYTE, comm_, &req));
    wait(call, req, &tokens);
    tokens.done();
    run_.network += payload.size() * static_cast<std::uint64_t>(size_ - 1) + (all.size() - payload.size());
    int first = -1, failures = 0;
    for (int r = 0; r < size_; ++r)
      if (heads[static_cast<std::size_t>(r)].failed) {
        if (first < 0) first = r;
        ++failures;
      }
    if (first >= 0) {
      const auto k = static_cast<std::size_t>(first);
      const std::string message(reinterpret_cast<const char*>(all.data() + displs[k]), static_cast<std::size_t>(counts[k]));
      const std::string what = call + ": rank " + std::to_string(who(first)) + of_ranks() + " failed" +
                               (failures > 1 ? " (and " + std::to_string(failures - 1) + " more)" : "") + ": " +
                               message;
      if (own) {
        try {
          std::rethrow_exception(own);
        } catch (...) {
          std::throw_with_nested(error(what, call, who(first)));
        }
      }
      throw error(what, call, who(first));
    }
    std::vector<bytes> out(static_cast<std::size_t>(size_));
    for (std::size_t r = 0; r < out.size(); ++r) out[r].assign(all.data() + displs[r], all.data() + displs[r] + counts[r]);
    return out;
  }

  run_state& run_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::vector<int> world_ranks_;  // by rank here: the rank in the run, which messages name
  std::uint64_t tag_ = 0;
  std::vector<pending*> pending_;  // broadcasts begun here whose requests are alive
  mutable std::mutex kept_m_;
  std::map<std::tuple<std::string, int, int>, std::unique_ptr<communicator>> kept_;  // split_kept()
};

/// A broadcast under way: MPI's request, moved on by done() and finished by
/// wait(), or, unfinished, by the destructor or its communicator's end (its
/// buffer is written until then).
class mpi_comm::pending final : public communicator::request {
 public:
  pending(mpi_comm& c, std::string call) : c_(&c), call_(std::move(call)) { c.pending_.push_back(this); }
  ~pending() override {
    finish();
    if (c_) std::erase(c_->pending_, this);
  }
  void wait() override {
    if (!c_) return;  // finished when its communicator ended
    const entry in(*c_, call_);
    c_->wait(call_, req_, nullptr);
  }
  bool done() override {
    if (!c_ || req_ == MPI_REQUEST_NULL) return true;
    const entry in(*c_, call_);
    int finished = 0;
    c_->check(call_, MPI_Test(&req_, &finished, MPI_STATUS_IGNORE));
    return finished != 0;
  }
  /// Waits for it, unless it ended; a failure then ends the run: nothing
  /// can say to the caller that its buffer is still being written.
  void finish() noexcept {
    if (!c_ || req_ == MPI_REQUEST_NULL) return;
    try {
      c_->wait(call_, req_, nullptr);
    } catch (...) {
      std::fputs(("oa: " + call_ + ": a broadcast failed while its buffer was being released; the run is aborted\n").c_str(),
                 stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  /// Its communicator ends: finished (unless MPI has: nothing is under
  /// way then), and on its own from now.
  void detach(bool mpi_ended) noexcept {
    if (!mpi_ended) finish();
    c_ = nullptr;
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  mpi_comm* c_;
  std::string call_;
};

/// Broadcasts still under way finish first: a request may outlive its
/// communicator.
mpi_comm::~mpi_comm() {
  kept_.clear();  // communicators split from this one go first, while MPI is up
  int done = 0;
  MPI_Finalized(&done);
  for (pending* p : std::exchange(pending_, {})) p->detach(done != 0);
  if (!done) MPI_Comm_free(&comm_);
}

std::unique_ptr<communicator::request> mpi_comm::broadcast(const std::string& call, int root,
                                                           const std::function<std::span<std::byte>()>& buffer_of) {
  const entry in(*this, call);
  std::span<std::byte> buffer;
  // The ranks agree on the call, its root and its size before any byte
  // moves (a header, as every collective's): a bad root or size on any
  // rank, or ranks in different collectives, fail every rank's call.
  const auto said = gather(call, [&] {
    if (root < 0 || root >= size_)
      throw oa::invalid_argument(call.c_str(), "root", std::to_string(root) + " is not a rank of " + std::to_string(size_));
    buffer = buffer_of();
    (void)count_of(call, buffer.size(), "in one broadcast");
    const std::uint64_t mine[2] = {static_cast<std::uint64_t>(root), buffer.size()};
    bytes b(sizeof mine);
    std::memcpy(b.data(), mine, sizeof mine);
    return b;
  }, "(broadcast)");
  for (int r = 1; r < size_; ++r)
    if (said[static_cast<std::size_t>(r)] != said[0]) {
      const auto at = [&](int k, int i) {
        std::uint64_t v[2];
        std::memcpy(v, said[static_cast<std::size_t>(k)].data(), sizeof v);
        return v[i];
      };
      throw error(call + ": rank " + std::to_string(who(r)) + " broadcasts " + std::to_string(at(r, 1)) +
                      " bytes from root " + std::to_string(at(r, 0)) + ", rank " + std::to_string(who(0)) + " " +
                      std::to_string(at(0, 1)) + " bytes from root " + std::to_string(at(0, 0)) +
                      ": every rank passes the same root and as many bytes",
                  call, who(r));
    }
  auto p = std::make_unique<pending>(*this, call);
  check(call, MPI_Ibcast(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, root, comm_, &p->req_));
  if (size_ > 1) run_.network += rank_ == root ? buffer.size() * static_cast<std::uint64_t>(size_ - 1) : buffer.size();
  return p;
}

/// The run: MPI initialised when the program has not (finalised at exit
/// then), and oa's own duplicate of its world, so that our messages never
/// meet the program's. Made on first use, never destroyed (MPI ends in an
/// exit handler, after the program's last use of it).
struct the_run {
  run_state state;
  bool we_initialised = false;
  std::unique_ptr<mpi_comm> world;

  the_run() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &state.thread_level) != MPI_SUCCESS)
        throw error("oa::dist::world: MPI_Init_thread failed", "oa::dist::world", -1);
      we_initialised = true;
    } else {
      MPI_Query_thread(&state.thread_level);
    }
    MPI_Comm dup = MPI_COMM_NULL;
    if (int code = MPI_Comm_dup(MPI_COMM_WORLD, &dup); code != MPI_SUCCESS)
      throw error("oa::dist::world: MPI_Comm_dup failed: " + mpi_text(code), "oa::dist::world", -1);
    // The ranks on this node: each takes a GPU of its own unless the
    // launcher chose (CUDA_VISIBLE_DEVICES), set before CUDA starts.
    int local_rank = 0, local_size = 1, me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm node;
    if (MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_rank(node, &local_rank);
      MPI_Comm_size(node, &local_size);
      MPI_Comm_free(&node);
    }
    if (!std::getenv("CUDA_VISIBLE_DEVICES"))
      if (const auto gpu = detail::gpu_for(local_rank, local_size, detail::gpus_listed()))
        ::setenv("CUDA_VISIBLE_DEVICES", std::to_string(*gpu).c_str(), 0);
    world = std::make_unique<mpi_comm>(state, dup, local_rank, local_size);
  }

  /// At exit: MPI finalised when oa began it; after ranks were found in
  /// different collectives they cannot be trusted to end together, so the
  /// whole run is aborted instead.
  void end() noexcept {
    int done = 0;
    MPI_Finalized(&done);
    if (done) return;
    if (state.broken) MPI_Abort(MPI_COMM_WORLD, 1);
    world.reset();
    if (we_initialised) MPI_Finalize();
  }
};

the_run* run_of_process = nullptr;

mpi_comm& the_world() {
  static mpi_comm* const w = [] {
    run_of_process = new the_run();
    std::atexit([] { run_of_process->end(); });
    return run_of_process->world.get();
  }();
  return *w;
}

}  // namespace

communicator& world() { return the_world(); }

#endif

}  // namespace oa::dist
