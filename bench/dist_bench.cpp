#include "dist_bench.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <oa/annotations/eigen_array.hpp>
#include <oa/dist.hpp>
#include <oa/oa.hpp>
#include <stdexcept>

#include "bench_data.hpp"
#include "bench_table.hpp"
#include "workloads.hpp"

#ifndef OA_VERSION
#define OA_VERSION "unknown"
#endif

namespace oa_bench {

bool under_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

namespace {

/// Element i of the generated data: the same whatever the number of ranks,
/// so runs on different numbers of ranks compute the same thing.
std::uint64_t mix(std::uint64_t seed, std::size_t i) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15u + i;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
template <class T>
T value_at(std::uint64_t seed, std::size_t i) {
  const std::uint64_t z = mix(seed, i);
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  else
    return static_cast<T>(static_cast<std::int64_t>(z % 2001) - 1000);
}

/// The largest resident size this process reached.
std::size_t peak_host_bytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::size_t>(ru.ru_maxrss) * 1024;
}

/// This process's resident size now (0 where /proc cannot say).
std::size_t host_bytes_now() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

struct measured {
  double seconds = std::numeric_limits<double>::infinity();  // the slowest rank's, best repeat
  std::optional<double> error;                               // --verify: largest relative error over ranks
  std::size_t peak = 0;                                      // this rank's peak resident size before --verify
  std::uint64_t network = 0;                                 // this rank's bytes to and from others in the runs
};

/// What the timed runs left: the peak before --verify, which may gather
/// everything to rank 0.
void after_runs(measured& m) { m.peak = peak_host_bytes(); }

/// `body` once per repeat, every rank starting together; a repeat takes
/// as long as its slowest rank (m.seconds: the best repeat's). A failure on
/// any rank fails every rank. m.network counts this rank's bytes while
/// `body` ran: not the barrier before it nor the times exchanged after.
template <class F>
void timed(oa::dist::communicator& c, const dist_options& opt, measured& m, F&& body) {
  double best = std::numeric_limits<double>::infinity();
  for (int rep = 1; rep <= opt.repeat; ++rep) {
    if (c.rank() == 0) announce_run(opt.workload, "oa on " + std::to_string(c.size()) + " ranks", rep, opt.repeat);
    c.barrier("oa-bench: " + opt.workload);
    std::exception_ptr failed;
    const std::uint64_t sent = c.network_bytes();
    const auto t0 = clock_type::now();
    try {
      body();
    } catch (...) {
      failed = std::current_exception();
    }
    const double mine = seconds_since(t0);
    m.network += c.network_bytes() - sent;
    const auto all = oa::dist::each_rank<double>(c, "oa-bench: " + opt.workload, [&] {
      if (failed) std::rethrow_exception(failed);
      return mine;
    });
    best = std::min(best, *std::max_element(all.begin(), all.end()));
  }
  m.seconds = best;
}

double largest(oa::dist::communicator& c, double mine) {
  const auto all = oa::dist::each_rank<double>(c, "oa-bench: --verify", [&] { return mine; });
  return *std::max_element(all.begin(), all.end());
}

double relative(double got, double want) { return std::abs(got - want) / std::max(1.0, std::abs(want)); }

/// A paging workload (blackscholes, haversine, crime) written once over an
/// array type, run over oa::dist::array: its array outputs stay in each
/// rank's block, crime's sum is a collective.
template <class A>
double call_paging(const workload_spec& w, const std::vector<A>& in, std::vector<A>& out) {
  out.assign(w.array_outputs, A{});
  if (w.name == "blackscholes") oa_workloads::blackscholes(in[0], in[1], in[2], in[3], in[4], out[0], out[1]);
  else if (w.name == "haversine") oa_workloads::haversine(in[0], in[1], out[0]);
  else if (w.name == "crime") return oa_workloads::crime_index(in[0], in[1], in[2]);
  else throw std::invalid_argument("--workload " + std::string(w.name) + ": not a paging workload");
  return 0;
}

measured paging(const dist_options& opt, const oa::dist::layout& l, oa::dist::communicator& c) {
  const workload_spec& w = find_workload(opt.workload);
  // Each rank draws its own block (a seed of its own): element-wise, a
  // block's results depend on its elements only.
  std::vector<Eigen::ArrayXd> in = make_inputs(w, l.count(c.rank()), opt.seed + 1000003u * static_cast<unsigned>(c.rank()));
  measured m;
  using A = oa::dist::array<double>;
  std::vector<A> out;
  double sum = 0;
  timed(c, opt, m, [&] {
    std::vector<A> h;
    for (auto& x : in) h.emplace_back(l, oa::ref(x), c);
    sum = call_paging(w, h, out);
    for (const A& o : out) (void)o.local().get();
  });
  after_runs(m);
  if (opt.verify) {  // each rank's block against Eigen's; a sum against the sum of the ranks' Eigen sums
    std::vector<Eigen::ArrayXd> want;
    const double mine = call_paging(w, in, want);
    double err = 0;
    for (std::size_t i = 0; i < out.size(); ++i) err = std::max(err, max_rel_error(out[i].local().get(), want[i]));
    if (w.scalar_outputs) {
      const auto sums = oa::dist::each_rank<double>(c, "oa-bench: --verify", [&] { return mine; });
      err = std::max(err, relative(sum, std::accumulate(sums.begin(), sums.end(), 0.0)));
    }
    m.error = largest(c, err);
  }
  return m;
}

template <class T>
measured transform_reduce(const dist_options& opt, std::size_t n, oa::dist::communicator& c) {
  const auto gen = [&](std::uint64_t k) {
    return oa::dist::generate<T>(n, [&, k](std::size_t i) { return value_at<T>(opt.seed + k, i); }, c);
  };
  const auto a = gen(0), b = gen(1), x = gen(2);
  measured m;
  T got{};
  timed(c, opt, m, [&] { got = oa::dist::transform_reduce(oa::dist::transform(a, b, std::plus<>{}), x, T(0)); });
  after_runs(m);
  if (opt.verify) {
    double err = 0;
    if (c.rank() == 0) {  // one process's sum, in order
      T want{};
      for (std::size_t i = 0; i < n; ++i)
        want += (value_at<T>(opt.seed, i) + value_at<T>(opt.seed + 1, i)) * value_at<T>(opt.seed + 2, i);
      err = relative(static_cast<double>(got), static_cast<double>(want));
    }
    m.error = largest(c, err);
  }
  return m;
}

/// `op` of the generated vector timed, up to each rank's block of the
/// result computed; the result kept for --verify.
template <class T, class Op>
oa::dist::vector<T> timed_vector_op(const dist_options& opt, std::size_t n, oa::dist::communicator& c, measured& m,
                                    Op op) {
  const auto x = oa::dist::generate<T>(n, [&](std::size_t i) { return value_at<T>(opt.seed, i); }, c);
  std::optional<oa::dist::vector<T>> s;
  timed(c, opt, m, [&] {
    s.emplace(op(x));
    (void)s->local().get();
  });
  after_runs(m);
  return std::move(*s);
}

template <class T>
measured scan(const dist_options& opt, std::size_t n, oa::dist::communicator& c) {
  measured m;
  const auto s = timed_vector_op<T>(opt, n, c, m, [](const auto& x) { return oa::dist::inclusive_scan(x); });
  if (opt.verify) {  // this rank's block against the sum of everything before it, then its own
    T acc{};
    for (std::size_t i = 0; i < s.offset(); ++i) acc += value_at<T>(opt.seed, i);
    double err = 0;
    const std::vector<T>& mine = s.local().get();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      acc += value_at<T>(opt.seed, s.offset() + i);
      err = std::max(err, relative(static_cast<double>(mine[i]), static_cast<double>(acc)));
    }
    m.error = largest(c, err);
  }
  return m;
}

template <class T>
measured sort(const dist_options& opt, std::size_t n, oa::dist::communicator& c) {
  measured m;
  const auto s = timed_vector_op<T>(opt, n, c, m, [](const auto& x) { return oa::dist::sort(x); });
  if (opt.verify) {  // on the gathered result, on rank 0
    const std::vector<T> all = s.gather(0);
    double err = 0;
    if (c.rank() == 0) {
      std::vector<T> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = value_at<T>(opt.seed, i);
      std::sort(want.begin(), want.end());
      err = all == want ? 0.0 : 1.0;
    }
    m.error = largest(c, err);
  }
  return m;
}

/// C = A B for n x n matrices over the grid nearest square: SUMMA, each
/// rank's products through oa::linalg::gemm.
measured gemm(const dist_options& opt, std::size_t n, oa::dist::communicator& c) {
  const auto fa = [&](std::size_t i, std::size_t j) { return value_at<double>(opt.seed, i * n + j); };
  const auto fb = [&](std::size_t i, std::size_t j) { return value_at<double>(opt.seed + 1, i * n + j); };
  const auto a = oa::dist::generate_matrix<double>(n, n, fa);
  const auto b = oa::dist::generate_matrix<double>(n, n, fb);
  measured m;
  std::optional<oa::dist::matrix<double>> p;
  timed(c, opt, m, [&] { p.emplace(oa::dist::gemm(a, b)); });
  after_runs(m);
  if (opt.verify) {  // against Eigen's product of the whole, on rank 0
    const Eigen::MatrixXd got = p->gather(0);
    double err = 0;
    if (c.rank() == 0) {
      Eigen::MatrixXd wa(n, n), wb(n, n);
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) wa(i, j) = fa(i, j), wb(i, j) = fb(i, j);
      const Eigen::MatrixXd want = wa * wb;
      err = (got - want).cwiseAbs().maxCoeff() / std::max(1.0, want.cwiseAbs().maxCoeff());
    }
    m.error = largest(c, err);
  }
  return m;
}

template <class T>
measured typed(const dist_options& opt, std::size_t n, oa::dist::communicator& c) {
  if (opt.workload == "transform_reduce") return transform_reduce<T>(opt, n, c);
  if (opt.workload == "scan") return scan<T>(opt, n, c);
  return sort<T>(opt, n, c);
}

}  // namespace

bool run_dist(const dist_options& opt, json_sink* sink) {
  if (!oa::dist::available())
    throw std::invalid_argument("started by an MPI launcher, but this oa was built without MPI (OA_ENABLE_MPI)");
  const std::vector<std::string> known{"blackscholes", "haversine", "crime", "transform_reduce", "scan", "sort", "gemm"};
  if (std::find(known.begin(), known.end(), opt.workload) == known.end())
    throw std::invalid_argument("--workload " + opt.workload +
                                ": not distributed over ranks yet (under an MPI launcher: blackscholes, haversine, "
                                "crime, transform_reduce, scan, sort, gemm)");
  for (const auto& mode : opt.modes)
    if (mode != "oa")
      throw std::invalid_argument("--mode " + mode + ": under an MPI launcher oa-bench runs mode oa on distributed values");
  if (opt.workload == "gemm" && opt.per_rank)
    throw std::invalid_argument("--per-rank: gemm's --n is the matrices' size, not cut over the ranks");
  if (opt.workload == "gemm" && opt.type != "double")
    throw std::invalid_argument("--type " + opt.type + ": the distributed gemm is double");
  const bool array_workload = opt.workload == "blackscholes" || opt.workload == "haversine" || opt.workload == "crime";
  if (opt.type != "double" && opt.type != "int64" && !array_workload && opt.workload != "gemm")
    throw std::invalid_argument("--type " + opt.type + ": distributed workloads take double or int64");
  configure_oa_mode(opt, false);
  oa::dist::communicator& c = oa::dist::world();
  const std::size_t ranks = static_cast<std::size_t>(c.size());
  // gemm: n x n matrices (--n); its "elements" are C's.
  const std::size_t n = opt.workload == "gemm" ? opt.elements : opt.per_rank ? opt.elements * ranks : opt.elements;
  const oa::dist::layout l = oa::dist::layout::even(n, c.size());
  if (c.rank() == 0 && opt.workload == "gemm") {
    const oa::dist::grid g = oa::dist::grid::near_square(c.size());
    std::cerr << "gemm: " << n << " x " << n << " matrices over a " << g.rows << " x " << g.cols << " grid of ranks\n";
  } else if (c.rank() == 0) {
    std::cerr << opt.workload << ": " << n << " elements over " << ranks << " ranks (" << l.count(0)
              << " on rank 0)\n";
  }
  (void)oa::current_device();  // made before any run is timed
  // What the process holds before the workload makes its data (libraries,
  // MPI's shared memory, the device): the run's own peak is above it.
  const std::size_t start = host_bytes_now();
  const measured m = opt.workload == "gemm"           ? gemm(opt, n, c)
                     : array_workload                 ? paging(opt, l, c)
                     : opt.type == "int64"          ? typed<std::int64_t>(opt, n, c)
                                                    : typed<double>(opt, n, c);
  // Of one run: every repeat moves the same.
  const std::uint64_t moved = m.network / static_cast<std::uint64_t>(std::max(1, opt.repeat));
  const auto moved_all = oa::dist::each_rank<std::uint64_t>(c, "oa-bench", [&] { return moved; });
  // Peaks before --verify, which may gather everything to rank 0.
  const auto peak_all = oa::dist::each_rank<std::uint64_t>(c, "oa-bench", [&] { return m.peak; });
  const auto added_all = oa::dist::each_rank<std::uint64_t>(c, "oa-bench", [&] {
    return static_cast<std::uint64_t>(m.peak - std::min(m.peak, start));
  });
  // Each byte between ranks is counted by the rank that sent it and the rank that took it.
  const std::uint64_t network = std::accumulate(moved_all.begin(), moved_all.end(), std::uint64_t{0}) / 2;
  const std::uint64_t peak = *std::max_element(peak_all.begin(), peak_all.end());
  const std::uint64_t added = *std::max_element(added_all.begin(), added_all.end());
  const bool exact = opt.type == "int64" && !array_workload && opt.workload != "gemm";
  const bool ok = !m.error || *m.error <= (exact ? 0.0 : 1e-9);
  if (c.rank() != 0) return ok;

  // gemm's rates are of floating-point operations (2 n^3), the others' of elements.
  const bool product = opt.workload == "gemm";
  const double work = product ? 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n)
                              : static_cast<double>(n);
  const double total_rate = work / m.seconds;
  // The most a rank holds: the largest block (a vector's blocks differ by
  // one; a product's C blocks are cut over the grid's rows and columns).
  const auto ceil_div = [](std::size_t a, std::size_t b) { return (a + b - 1) / b; };
  std::size_t per_rank = ceil_div(n, ranks);
  if (product) {
    const oa::dist::grid g = oa::dist::grid::near_square(static_cast<int>(ranks));
    per_rank = ceil_div(n, static_cast<std::size_t>(g.rows)) * ceil_div(n, static_cast<std::size_t>(g.cols));
  }
  std::cout << (emulated_run(opt) ? "(emulated devices: not GPU timings)\n" : "")
            << (product ? "workload          ranks           n    per rank    seconds    GFLOP/s  per rank   network  peak host"
                        : "workload          ranks    elements    per rank    seconds    Melem/s  per rank   network  peak host")
            << "  run's peak   error\n"
            << std::string(124, '-') << '\n'
            << format("%-16s %6zu %11zu %11zu %10.4f %10.1f %9.1f %9s %10s %11s %7s\n", opt.workload.c_str(), ranks,
                      n, per_rank, m.seconds, total_rate / (product ? 1e9 : 1e6),
                      total_rate / (product ? 1e9 : 1e6) / static_cast<double>(ranks),
                      format_bytes(static_cast<double>(network)).c_str(),
                      format_bytes(static_cast<double>(peak)).c_str(),
                      format_bytes(static_cast<double>(added)).c_str(),
                      m.error ? format("%.1e", *m.error).c_str() : "-");
  if (sink) {
    nlohmann::json r;
    r["workload"] = opt.workload;
    r["mode"] = "oa";
    r["type"] = array_workload || product ? "double" : opt.type;
    r["ranks"] = ranks;
    r["elements"] = n;
    r["elements_per_rank"] = per_rank;
    r["per_rank"] = opt.per_rank;
    r["seconds"] = m.seconds;
    if (product) {
      r["n"] = n;
      r["elements"] = n * n;
      r["gflops"] = total_rate / 1e9;
      r["gflops_per_rank"] = total_rate / 1e9 / static_cast<double>(ranks);
    } else {
      r["elements_per_second"] = total_rate;
      r["elements_per_second_per_rank"] = total_rate / static_cast<double>(ranks);
    }
    r["network_bytes"] = network;
    r["peak_host_bytes"] = peak;    // the largest peak resident size of a rank
    r["run_peak_host_bytes"] = added;  // the largest of a rank's peak above what it held before the workload
    r["max_rel_error"] = m.error ? nlohmann::json(*m.error) : nlohmann::json(nullptr);
    r["device"] = oa::current_device().name();
    r["emulated"] = emulated_run(opt);
    r["link_gbps"] = opt.link_gbps;
    r["device_memory_budget"] = oa::current_device().memory_budget();
    r["repeat"] = opt.repeat;
    r["seed"] = opt.seed;
    r["hostname"] = hostname();
    r["oa_version"] = OA_VERSION;
    r["timestamp"] = utc_timestamp();
    sink->write(r);
  }
  return ok;
}

}  // namespace oa_bench
