#pragma once
// The ranks of an SPMD run (MPI) as oa's distributed values see them. oa
// writes no distributed runtime of its own: a program started as
// `mpirun -np N ./program` has N processes, each with its own oa runtime and
// devices, and oa::dist's collectives are MPI's. Each exchange also agrees
// on failure: a rank whose part threw sends its message instead of its
// bytes, and every rank's caller gets the error naming that rank and the
// call; a rank that does not arrive within OA_DIST_TIMEOUT seconds is named
// the same way, never a hang.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "oa/core/error.hpp"

namespace oa::dist {

/// An oa::dist collective that failed: on some rank (rank() names the first,
/// call() the operation), or because ranks did not arrive in time. On the
/// rank whose own part failed, the original exception is nested in it
/// (std::rethrow_if_nested).
class error : public oa::error {
 public:
  error(const std::string& what, std::string call, int rank)
      : oa::error(what), call_(std::move(call)), rank_(rank) {}
  const std::string& call() const noexcept { return call_; }
  /// The first rank that failed or did not arrive; -1 when none is known.
  int rank() const noexcept { return rank_; }

 private:
  std::string call_;
  int rank_;
};

/// Whether this oa was built with MPI (OA_ENABLE_MPI).
bool available() noexcept;

class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// This rank among the run's ranks on its machine (node), and how many
  /// there are (for a split communicator too: the machine's, not its own).
  virtual int local_rank() const noexcept = 0;
  virtual int local_size() const noexcept = 0;
  /// Rank `r` here as the run numbers it (a split communicator's rank 1 may
  /// be the run's rank 3): what messages name.
  virtual int run_rank(int r) const = 0;

  /// Every rank's bytes, in rank order, on every rank: what `mine` returns
  /// here (its size may differ by rank). When `mine` throws on some rank,
  /// every rank throws oa::dist::error naming `call`, the first such rank
  /// and its message; so it does when the ranks pass different `layout`s
  /// (a key of what they take to be one value's layout: layout::key()).
  /// Every rank must call it, in the same order.
  virtual std::vector<std::vector<std::byte>> exchange(const std::string& call,
                                                       const std::function<std::vector<std::byte>()>& mine,
                                                       std::uint64_t layout = 0) = 0;

  /// Sends `counts[r]` bytes of `send` (the parts for ranks 0, 1, ...
  /// one after another) to each rank r (MPI_Alltoallv); what the ranks send
  /// here goes, in rank order, to the buffer `into(total bytes)` returns,
  /// and the bytes from each rank are returned. Counts that do not add up
  /// to `send`, or an `into` that throws, fail every rank's call as
  /// exchange() does.
  virtual std::vector<std::size_t> all_to_all(const std::string& call, std::span<const std::byte> send,
                                              const std::vector<std::size_t>& counts,
                                              const std::function<std::byte*(std::size_t)>& into) = 0;

  /// A broadcast under way (broadcast()): wait() finishes it, done() says,
  /// without waiting, whether it has finished, and moves it on (MPI
  /// progresses a non-blocking collective only when called). Every rank
  /// has arrived at a broadcast begun, so waiting for one has no deadline:
  /// what it waits for is the root's bytes. Destroying one unfinished waits
  /// for it: its buffer is written until then. Like every collective, a
  /// request is waited for and destroyed by the thread that calls them.
  class request {
   public:
    virtual ~request() = default;
    virtual void wait() = 0;
    virtual bool done() = 0;
  };

  /// Begins sending rank `root`'s bytes to every rank (MPI_Ibcast) in the
  /// buffer `buffer()` returns on each (for the root, filled): every rank
  /// passes as many bytes, and begins the same broadcasts in the same
  /// order; several may be under way at once, and other collectives may run
  /// meanwhile. The buffer is made, and the ranks agree on the call, the
  /// root and the size, before any byte moves: what fails or is wrong on
  /// any rank (making the buffer, a root out of range, a size of its own)
  /// fails every rank's call. No failure travels with the bytes: what can
  /// fail on one rank while they move is agreed on by an exchange() after.
  /// Destroying this communicator finishes its broadcasts under way.
  virtual std::unique_ptr<request> broadcast(const std::string& call, int root,
                                             const std::function<std::span<std::byte>()>& buffer) = 0;
  std::unique_ptr<request> broadcast(const std::string& call, int root, std::span<std::byte> bytes) {
    return broadcast(call, root, [bytes] { return bytes; });
  }

  /// The ranks with the same `color`, numbered in the order of their `key`
  /// (MPI_Comm_split): a communicator of their own, whose collectives are
  /// apart from this one's, and whose messages name ranks as the run does.
  /// A collective of every rank here. Distributed values made over it keep
  /// a reference to it: they must not outlive it.
  virtual std::unique_ptr<communicator> split(const std::string& call, int color, int key) = 0;

  /// split() once per `purpose`: a later call with the same purpose, color
  /// and key returns the communicator made the first time, with no
  /// collective (a product splits its grid's rows and columns once per
  /// grid, not once per product). `purpose` must be the same on every rank
  /// (say, the grid's shape), so that every rank finds it kept or none does.
  /// Kept as long as this communicator.
  virtual communicator& split_kept(const std::string& call, const std::string& purpose, int color, int key) = 0;
  /// How many communicators split_kept() keeps.
  virtual std::size_t kept_splits() const = 0;

  /// Bytes moved to and from other ranks by this rank so far, over every
  /// communicator of the run.
  virtual std::uint64_t network_bytes() const noexcept = 0;

  /// Waits for every rank (a collective with nothing to exchange).
  void barrier(const std::string& call = "oa::dist::barrier") {
    (void)exchange(call, [] { return std::vector<std::byte>{}; });
  }
};

/// Every process of the run (MPI_COMM_WORLD), MPI initialised on first use
/// when the program has not (and finalised at exit); a program started
/// outside mpirun is one rank. Where several ranks share a machine with
/// GPUs and the launcher did not choose (CUDA_VISIBLE_DEVICES unset), each
/// rank takes GPU local_rank() modulo the machine's GPUs: call it before
/// the program's first oa call, which starts CUDA. In a build without MPI,
/// an oa::error saying so.
communicator& world();

}  // namespace oa::dist
