// Random programs whose stages run together on one device's streams (and a
// host stage beside them), each run under several configurations and
// compared with the same steps run eagerly with plain C++. Vectors come in
// groups of one length (calls over one length fuse into a stage; other
// lengths make other stages); the steps mix what only copies in
// (reductions) with what copies out (transforms), sorts and scans of
// doubles and 64-bit integers (on the host), stages reading an earlier
// one's result, in-place updates of vectors other stages read, and values
// asked for part-way.
//
// Element-wise results and sorts are compared exactly, integer scans and
// sums too; sums and scans of doubles within the error of a reordered sum.
//
// A failure names the configuration, the program (its seed reproduces it)
// and the smallest program found that still fails. OA_RANDOM_PROGRAMS and
// OA_RANDOM_SEED run more programs, or other ones; OA_RANDOM_CONFIG only the
// configurations whose names contain it.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>

#include "random_programs.hpp"
#include "support.hpp"
#include "user_library/vecmath.hpp"
#include "user_library/vecmath_oa.hpp"

namespace {

using real_vec = std::vector<double>;
using int_vec = std::vector<std::int64_t>;
constexpr std::size_t none = SIZE_MAX;

// Under a sanitizer the emulated device's kernels run far slower: fewer
// programs, and a slower link (so that the link still bounds the stages,
// as the scheduler's model needs).
constexpr std::size_t base_length = 70000;
constexpr double link_gbps = oa_random::sanitized ? 0.025 : 0.25;
constexpr std::uint64_t default_programs = oa_random::sanitized ? 8 : 40;
constexpr std::size_t budget = std::size_t{1} << 20;

struct halve {
  static constexpr bool oa_device_callable = true;
  void operator()(double& v) const { v *= 0.5; }
};
constexpr auto negate_real = [](double& v) { v = -v; };    // runs on the host
constexpr auto negate_int = [](std::int64_t& v) { v = -v; };

enum class op {
  neg, twice, minus, mul,   // a new lazy vector (minus, mul: doubles only)
  scan,                     // a new lazy vector: the prefix sums
  sum, sumsq, dot,          // a lazy scalar (sumsq, dot: doubles only)
  sort, scale, halve, host_negate,  // a user vector updated in place (scale, halve: doubles)
  get_vector, get_scalar, evaluate
};
bool makes_vector(op o) { return o <= op::scan; }
bool reduces(op o) { return o >= op::sum && o <= op::dot; }
bool evaluates(op o) { return o == op::evaluate; }

/// A vector operand: a user vector or a lazy slot, of doubles or integers.
struct vref {
  bool integer = false, lazy = false;
  std::size_t i = none;
  bool operator==(const vref&) const = default;
};

struct step {
  op what;
  bool integer = false;  // the element type of what it makes or updates
  std::size_t target = none;  // the lazy slot written or asked for, or the user vector updated
  vref a, b;
  double k = 0;  // scale's factor
};

struct program {
  std::uint64_t seed = 0;
  std::vector<std::size_t> lengths;  // of the length groups
  std::vector<real_vec> reals;       // user vectors
  std::vector<int_vec> ints;
  std::size_t real_slots = 0, int_slots = 0, real_scalars = 0, int_scalars = 0;
  std::vector<step> steps;

  static std::string name(const vref& r) {
    return std::string(r.lazy ? (r.integer ? "s" : "t") : (r.integer ? "i" : "u")) + std::to_string(r.i);
  }
  std::string text(const step& s) const {
    const std::string a = name(s.a), b = s.b.i == none ? "" : name(s.b);
    const std::string t = (s.integer ? "s" : "t") + std::to_string(s.target);
    const std::string d = (s.integer ? "q" : "d") + std::to_string(s.target);
    const std::string u = (s.integer ? "i" : "u") + std::to_string(s.target);
    std::ostringstream k;
    k << s.k;
    switch (s.what) {
      case op::neg: return t + " = stl::transform(" + a + ", negate)";
      case op::twice: return t + " = stl::transform(" + a + ", " + a + ", plus)";
      case op::minus: return t + " = stl::transform(" + a + ", " + b + ", minus)";
      case op::mul: return t + " = vecmath::mul(" + a + ", " + b + ")";
      case op::scan: return t + " = stl::inclusive_scan(" + a + ")";
      case op::sum: return d + " = stl::reduce(" + a + ", 0)";
      case op::sumsq: return d + " = stl::transform_reduce(" + a + ", " + a + ", 0.0)";
      case op::dot: return d + " = vecmath::dot(" + a + ", " + b + ")";
      case op::sort: return "stl::sort(" + u + ")";
      case op::scale: return "vecmath::scale(" + u + ", " + k.str() + ")";
      case op::halve: return "stl::for_each(" + u + ", halve)";
      case op::host_negate: return "stl::for_each(" + u + ", v = -v (host lambda))";
      case op::get_vector: return t + ".get()";
      case op::get_scalar: return d + ".get()";
      case op::evaluate: return "evaluate()";
    }
    return "?";
  }
  std::string text() const {
    std::ostringstream o;
    o << "seed " << seed << ", lengths";
    for (std::size_t n : lengths) o << " " << n;
    o << "; doubles u0-u" << reals.size() - 1 << " of lengths";
    for (const auto& v : reals) o << " " << v.size();
    o << "; integers i0-i" << ints.size() - 1 << " of lengths";
    for (const auto& v : ints) o << " " << v.size();
    o << ":\n";
    oa_random::list_steps(o, *this);
    return o.str();
  }
};

// ---- generation -----------------------------------------------------------------------------

class generator : oa_random::dice {
 public:
  explicit generator(std::uint64_t seed) : dice(seed) { p_.seed = seed; }

  program make() {
    // Lengths of 1-2.5 times the base, none equal: each group its own
    // stages. Each vector is more than half the budget: a stage the device
    // could keep copies of for later stages runs alone.
    const std::size_t groups = 3 + below(2);
    for (std::size_t k = 0; k < groups; ++k)
      p_.lengths.push_back(base_length * (2 + below(4)) / 2 + 1001 * k + below(7));
    // Each group's branches mostly go one way, the groups both ways.
    for (std::size_t k = 0; k < groups; ++k) sums_.push_back(k % 2 == 0);
    std::uniform_real_distribution<double> value(-1, 1);
    std::uniform_int_distribution<std::int64_t> integer(-1000, 1000);
    // Two doubles per group (the operands of a binary call share a length),
    // one of them sometimes a copy of another (a sort of a copy).
    for (std::size_t k = 0; k < groups; ++k)
      for (int j = 0; j < 2; ++j) {
        real_vec u(p_.lengths[k]);
        for (double& x : u) x = value(g);
        if (j == 1 && chance(30)) u = p_.reals.back();
        p_.reals.push_back(std::move(u));
        real_group_.push_back(k);
      }
    for (std::size_t j = 0; j < 2; ++j) {
      const std::size_t k = below(groups);
      int_vec v(p_.lengths[k]);
      for (auto& x : v) x = integer(g);
      p_.ints.push_back(std::move(v));
      int_group_.push_back(k);
    }
    const std::size_t length = 8 + below(13);
    while (p_.steps.size() < length) {
      const std::size_t roll = below(100);
      const bool integer_step = chance(20);
      if (roll < 55) {
        branch(below(p_.lengths.size()));
      } else if (roll < 62) {
        make_vector(integer_step);
      } else if (roll < 68) {
        reduce(integer_step);
      } else if (roll < 76) {
        scan(integer_step);
      } else if (roll < 90) {
        update(integer_step);
      } else if (roll < 93) {
        push({.what = op::evaluate});
      } else if (roll < 97 && !vectors_.empty()) {
        const vref v = vectors_[below(vectors_.size())];
        push({.what = op::get_vector, .integer = v.integer, .target = v.i});
      } else if (p_.real_scalars + p_.int_scalars > 0) {
        const bool i = p_.real_scalars == 0 || (p_.int_scalars > 0 && chance(30));
        push({.what = op::get_scalar, .integer = i, .target = below(i ? p_.int_scalars : p_.real_scalars)});
      }
    }
    return std::move(p_);
  }

 private:

  std::size_t group(const vref& r) const {
    if (!r.lazy) return r.integer ? int_group_[r.i] : real_group_[r.i];
    return (r.integer ? int_slot_group_ : real_slot_group_)[r.i];
  }
  /// An operand of the type, in `g` (any group when none): often an earlier
  /// stage's result (a stage that depends on it), else a user vector.
  vref operand(bool integer, std::size_t g = none) {
    std::vector<vref> lazy, users;
    for (const vref& v : vectors_)
      if (v.integer == integer && (g == none || group(v) == g) && !scans_[v]) lazy.push_back(v);
    const std::size_t count = integer ? p_.ints.size() : p_.reals.size();
    for (std::size_t i = 0; i < count; ++i)
      if (const vref u{integer, false, i}; g == none || group(u) == g) users.push_back(u);
    if (!lazy.empty() && (users.empty() || chance(40))) return lazy[below(lazy.size())];
    if (users.empty()) return {};
    return users[below(users.size())];
  }
  /// A lazy slot of the type, new or (the value it held a temporary) in use.
  std::size_t slot(bool integer) {
    std::size_t& used = integer ? p_.int_slots : p_.real_slots;
    return used == 0 || (used < 8 && chance(70)) ? used++ : below(used);
  }
  void made(const step& s, std::size_t g) {
    const vref v{s.integer, true, s.target};
    auto& groups = s.integer ? int_slot_group_ : real_slot_group_;
    if (groups.size() <= s.target) groups.resize(s.target + 1);
    groups[s.target] = g;
    scans_.erase(v);
    if (std::find(vectors_.begin(), vectors_.end(), v) == vectors_.end()) vectors_.push_back(v);
    // A scan of doubles is compared within a tolerance: nothing reads it (an
    // exact comparison of what does would fail on its last bits).
    if (s.what == op::scan && !s.integer) scans_[v] = true;
  }
  void push(const step& s) { p_.steps.push_back(s); }

  void make_vector(bool integer) {
    const vref a = operand(integer);
    step s{.what = op::neg, .integer = integer, .a = a};
    const std::size_t roll = below(100);
    if (roll < 30) {
      s.what = op::neg;
    } else if (roll < 55 || integer) {
      s.what = op::twice;
    } else {
      s.what = roll < 75 ? op::minus : op::mul;
      s.b = operand(false, group(a));
    }
    s.target = slot(integer);
    push(s);
    made(s, group(a));
  }
  /// Calls over one length group (one stage) whose copies go one way: sums
  /// (copies in only), or two or three results of one operand (copies out
  /// more than in). Branches of other groups, either way, run together.
  void branch(std::size_t g) {
    const vref a = operand(false, g);
    if (sums_[g] == chance(85)) {
      for (std::size_t n = 1 + below(2); n-- > 0;) {
        step s{.what = chance(50) ? op::sumsq : op::dot, .a = a};
        s.b = s.what == op::sumsq ? a : operand(false, g);
        s.target = scalar(false);
        push(s);
      }
    } else {
      for (std::size_t n = 2 + below(2); n-- > 0;) {
        static constexpr op unary[] = {op::neg, op::twice, op::minus, op::mul};
        step s{.what = unary[below(std::size(unary))], .a = a};
        if (s.what == op::minus || s.what == op::mul) s.b = operand(false, g);
        s.target = slot(false);
        push(s);
        made(s, g);
      }
    }
  }
  std::size_t scalar(bool integer) {
    std::size_t& used = integer ? p_.int_scalars : p_.real_scalars;
    return used == 0 || (used < 6 && chance(70)) ? used++ : below(used);
  }
  void scan(bool integer) {
    const vref a = operand(integer);
    step s{.what = op::scan, .integer = integer, .target = slot(integer), .a = a};
    push(s);
    made(s, group(a));
  }
  void reduce(bool integer) {
    const vref a = operand(integer);
    step s{.what = op::sum, .integer = integer, .a = a};
    if (!integer && chance(65)) {
      s.what = chance(50) ? op::sumsq : op::dot;
      s.b = s.what == op::sumsq ? a : operand(false, group(a));
    }
    s.target = scalar(integer);
    push(s);
  }
  void update(bool integer) {
    static constexpr double powers_of_two[] = {2.0, 0.5, -1.0, 0.25};
    const std::size_t u = below(integer ? p_.ints.size() : p_.reals.size());
    step s{.what = op::sort, .integer = integer, .target = u};
    const std::size_t roll = below(100);
    if (integer) {
      s.what = roll < 70 ? op::sort : op::host_negate;
    } else if (roll < 35) {
      s.what = op::sort;
    } else if (roll < 65) {
      s.what = op::scale, s.k = powers_of_two[below(4)];
    } else {
      s.what = roll < 85 ? op::halve : op::host_negate;
    }
    push(s);
  }

  program p_;
  std::vector<std::size_t> real_group_, int_group_, real_slot_group_, int_slot_group_;
  std::vector<vref> vectors_;  // lazy slots written
  std::vector<bool> sums_;     // the way a group's branches mostly go: sums, or results out
  struct vref_less {
    bool operator()(const vref& x, const vref& y) const {
      return std::tie(x.integer, x.lazy, x.i) < std::tie(y.integer, y.lazy, y.i);
    }
  };
  std::map<vref, bool, vref_less> scans_;
};

// ---- the eager reference and the lazy run ------------------------------------------------

struct reference {
  std::vector<real_vec> reals, real_slots, scan_bounds;  // a double scan's prefix sums of |x_i|
  std::vector<int_vec> ints, int_slots;
  std::vector<double> real_scalars, bounds;  // a sum, and the sum of its terms' magnitudes
  std::vector<std::int64_t> int_scalars;

  explicit reference(const program& p)
      : reals(p.reals), real_slots(p.real_slots), scan_bounds(p.real_slots), ints(p.ints), int_slots(p.int_slots),
        real_scalars(p.real_scalars), bounds(p.real_scalars), int_scalars(p.int_scalars) {}

  const real_vec& real(const vref& r) const { return r.lazy ? real_slots[r.i] : reals[r.i]; }
  const int_vec& integer(const vref& r) const { return r.lazy ? int_slots[r.i] : ints[r.i]; }

  template <class V, class F>
  static V each(const V& a, const V* b, F f) {
    V out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b ? (*b)[i] : a[i]);
    return out;
  }

  void apply(const step& s) {
    const std::size_t t = s.target;
    const auto made = [&](auto f) {
      if (s.integer) {
        int_slots[t] = each(integer(s.a), static_cast<const int_vec*>(nullptr), f);
      } else {
        real_slots[t] = each(real(s.a), s.b.i == none ? nullptr : &real(s.b), f);
        scan_bounds[t].clear();
      }
    };
    switch (s.what) {
      case op::neg: made([](auto x, auto) { return -x; }); break;
      case op::twice: made([](auto x, auto) { return x + x; }); break;
      case op::minus: made([](auto x, auto y) { return x - y; }); break;
      case op::mul: {
        real_vec out(real(s.a).size());
        vecmath::mul(real(s.a), real(s.b), out);
        real_slots[t] = std::move(out);
        scan_bounds[t].clear();
        break;
      }
      case op::scan:
        if (s.integer) {
          int_vec out(integer(s.a).size());
          std::inclusive_scan(integer(s.a).begin(), integer(s.a).end(), out.begin());
          int_slots[t] = std::move(out);
        } else {
          const real_vec& a = real(s.a);
          real_vec out(a.size()), bound(a.size());
          double sum = 0, magnitude = 0;
          for (std::size_t i = 0; i < a.size(); ++i) out[i] = sum += a[i], bound[i] = magnitude += std::abs(a[i]);
          real_slots[t] = std::move(out);
          scan_bounds[t] = std::move(bound);
        }
        break;
      case op::sum:
        if (s.integer) {
          int_scalars[t] = std::accumulate(integer(s.a).begin(), integer(s.a).end(), std::int64_t{0});
        } else {
          real_scalars[t] = bounds[t] = 0;
          for (double x : real(s.a)) real_scalars[t] += x, bounds[t] += std::abs(x);
        }
        break;
      case op::sumsq:
      case op::dot: {
        const real_vec &a = real(s.a), &b = real(s.b);
        real_scalars[t] = vecmath::dot(a, b);
        bounds[t] = 0;
        for (std::size_t i = 0; i < a.size(); ++i) bounds[t] += std::abs(a[i] * b[i]);
        break;
      }
      case op::sort:
        if (s.integer) std::sort(ints[t].begin(), ints[t].end());
        else std::sort(reals[t].begin(), reals[t].end());
        break;
      case op::scale: vecmath::scale(reals[t], s.k); break;
      case op::halve: std::for_each(reals[t].begin(), reals[t].end(), halve{}); break;
      case op::host_negate:
        if (s.integer) std::for_each(ints[t].begin(), ints[t].end(), negate_int);
        else std::for_each(reals[t].begin(), reals[t].end(), negate_real);
        break;
      case op::get_vector:
      case op::get_scalar:
      case op::evaluate: break;
    }
  }
};

struct lazy_run {
  std::vector<real_vec> reals;  // never resized: recorded calls hold their addresses
  std::vector<int_vec> ints;
  std::vector<oa::lazy<real_vec>> real_slots;
  std::vector<oa::lazy<int_vec>> int_slots;
  std::vector<oa::lazy<double>> real_scalars;
  std::vector<oa::lazy<std::int64_t>> int_scalars;

  explicit lazy_run(const program& p)
      : reals(p.reals), ints(p.ints), real_slots(p.real_slots), int_slots(p.int_slots),
        real_scalars(p.real_scalars), int_scalars(p.int_scalars) {}
  lazy_run(const lazy_run&) = delete;
  lazy_run& operator=(const lazy_run&) = delete;
  // Nothing pending may outlive the vectors its calls read (a run that stopped early).
  ~lazy_run() {
    try {
      oa::evaluate();
    } catch (...) {
    }
  }

  /// f(operand): the user's vector or the lazy one.
  template <class F>
  decltype(auto) with_int(const vref& r, F&& f) {
    if (r.lazy) return f(int_slots[r.i]);
    return f(ints[r.i]);
  }
  template <class F>
  decltype(auto) with_real(const vref& r, F&& f) {
    if (r.lazy) return f(real_slots[r.i]);
    return f(reals[r.i]);
  }
  template <class F>
  decltype(auto) with_reals(const vref& a, const vref& b, F&& f) {
    return with_real(a, [&](auto& x) { return with_real(b, [&](auto& y) { return f(x, y); }); });
  }

  void apply(const step& s) {
    const std::size_t t = s.target;
    // A new vector of the step's type from f(a).
    const auto make = [&](auto f) {
      if (s.integer) int_slots[t] = with_int(s.a, f);
      else real_slots[t] = with_real(s.a, f);
    };
    switch (s.what) {
      case op::neg: make([](auto& a) { return oa::stl::transform(a, std::negate<>{}); }); break;
      case op::twice: make([](auto& a) { return oa::stl::transform(a, a, std::plus<>{}); }); break;
      case op::minus:
        real_slots[t] = with_reals(s.a, s.b, [](auto& a, auto& b) { return oa::stl::transform(a, b, std::minus<>{}); });
        break;
      case op::mul: real_slots[t] = with_reals(s.a, s.b, [](auto& a, auto& b) { return vecmath::oa::mul(a, b); }); break;
      case op::scan: make([](auto& a) { return oa::stl::inclusive_scan(a); }); break;
      case op::sum:
        if (s.integer) int_scalars[t] = with_int(s.a, [](auto& a) { return oa::stl::reduce(a, std::int64_t{0}); });
        else real_scalars[t] = with_real(s.a, [](auto& a) { return oa::stl::reduce(a, 0.0); });
        break;
      case op::sumsq:
        real_scalars[t] = with_real(s.a, [](auto& a) { return oa::stl::transform_reduce(a, a, 0.0); });
        break;
      case op::dot: real_scalars[t] = with_reals(s.a, s.b, [](auto& a, auto& b) { return vecmath::oa::dot(a, b); }); break;
      case op::sort:
        if (s.integer) oa::stl::sort(ints[t]);
        else oa::stl::sort(reals[t]);
        break;
      case op::scale: vecmath::oa::scale(reals[t], s.k); break;
      case op::halve: oa::stl::for_each(reals[t], halve{}); break;
      case op::host_negate:
        if (s.integer) oa::stl::for_each(ints[t], negate_int);
        else oa::stl::for_each(reals[t], negate_real);
        break;
      case op::get_vector:
        if (s.integer) (void)int_slots[t].get();
        else (void)real_slots[t].get();
        break;
      case op::get_scalar:
        if (s.integer) (void)int_scalars[t].get();
        else (void)real_scalars[t].get();
        break;
      case op::evaluate: oa::evaluate(); break;
    }
  }
};

// ---- comparison -----------------------------------------------------------------------------

using oa_random::difference;

/// What step `s` makes visible: the value asked for, or everything after an evaluation.
std::string difference(const program& p, const step& s, lazy_run& got, const reference& want) {
  std::string d;
  const auto real = [&](std::size_t t) {
    if (d.empty() && got.real_slots[t].valid())
      d = difference("t" + std::to_string(t), got.real_slots[t].get(), want.real_slots[t], want.scan_bounds[t], 1e-11);
  };
  const auto integer = [&](std::size_t t) {
    if (d.empty() && got.int_slots[t].valid())
      d = difference("s" + std::to_string(t), got.int_slots[t].get(), want.int_slots[t]);
  };
  const auto real_scalar = [&](std::size_t t) {
    if (d.empty() && got.real_scalars[t].valid())
      d = difference("d" + std::to_string(t), got.real_scalars[t].get(), want.real_scalars[t], want.bounds[t], 1e-11);
  };
  const auto int_scalar = [&](std::size_t t) {
    if (d.empty() && got.int_scalars[t].valid() && got.int_scalars[t].get() != want.int_scalars[t])
      d = "q" + std::to_string(t) + " = " + std::to_string(got.int_scalars[t].get()) + ", want " +
          std::to_string(want.int_scalars[t]);
  };
  if (s.what == op::get_vector) s.integer ? integer(s.target) : real(s.target);
  if (s.what == op::get_scalar) s.integer ? int_scalar(s.target) : real_scalar(s.target);
  if (!evaluates(s.what)) return d;
  for (std::size_t u = 0; u < p.reals.size() && d.empty(); ++u)
    d = difference("u" + std::to_string(u), got.reals[u], want.reals[u]);
  for (std::size_t u = 0; u < p.ints.size() && d.empty(); ++u)
    d = difference("i" + std::to_string(u), got.ints[u], want.ints[u]);
  for (std::size_t t = 0; t < p.real_slots; ++t) real(t);
  for (std::size_t t = 0; t < p.int_slots; ++t) integer(t);
  for (std::size_t t = 0; t < p.real_scalars; ++t) real_scalar(t);
  for (std::size_t t = 0; t < p.int_scalars; ++t) int_scalar(t);
  return d;
}

/// How the stages of a run went: those run together with others, and host
/// stages followed by a device stage of their evaluation (what the host
/// lane runs beside it, where the next stage does not read it).
struct tally {
  std::size_t together = 0, host_then_device = 0;
};

tally count(const std::vector<oa::stage_report>& reps) {
  tally t;
  for (std::size_t i = 0; i < reps.size(); ++i) {
    t.together += reps[i].placement_reason.find("together with stages") != std::string::npos;
    const auto on_host = [](const oa::stage_report& r) { return r.device.find("host") != std::string::npos; };
    if (i + 1 < reps.size() && on_host(reps[i]) && reps[i].units > 1 && reps[i + 1].evaluation == reps[i].evaluation &&
        !on_host(reps[i + 1]))
      ++t.host_then_device;
  }
  return t;
}

/// Runs `p` under `c` beside the reference: the first difference found,
/// naming the step after which it showed; empty if none.
std::string run(const program& p, const oa::config& c, tally* seen = nullptr) {
  oa_test::config_scope scope(c);
  reference want(p);
  std::string out;
  {
    lazy_run got(p);
    out = oa_random::first_difference(p, step{.what = op::evaluate}, want, got);  // then the final comparison
  }
  if (seen) *seen = count(oa::reports());
  return out;
}

/// Whether every step reads only lazy slots written before it.
bool well_formed(const program& p) {
  std::vector<bool> reals(p.real_slots), ints(p.int_slots), real_scalars(p.real_scalars), int_scalars(p.int_scalars);
  const auto defined = [&](const vref& r) { return r.i == none || !r.lazy || (r.integer ? ints : reals)[r.i]; };
  for (const step& s : p.steps) {
    if (!defined(s.a) || !defined(s.b)) return false;
    if (s.what == op::get_vector && !(s.integer ? ints : reals)[s.target]) return false;
    if (s.what == op::get_scalar && !(s.integer ? int_scalars : real_scalars)[s.target]) return false;
    if (makes_vector(s.what)) (s.integer ? ints : reals)[s.target] = true;
    if (reduces(s.what)) (s.integer ? int_scalars : real_scalars)[s.target] = true;
  }
  return true;
}

/// A program failing under `c` made as small as it still fails: steps
/// dropped one at a time, then shorter vectors (each length group cut alike).
program shrink(program p, const oa::config& c) {
  return oa_random::shrink(
      std::move(p), [&](const program& q) { return well_formed(q) && !run(q, c).empty(); },
      [](const program& p) {
        std::vector<program> out;
        for (std::size_t divisor : {64, 16, 4, 2}) {
          program& q = out.emplace_back(p);
          for (std::size_t& n : q.lengths) n = std::max<std::size_t>(1, n / divisor);
          const auto cut = [&](auto& v) {
            const auto at = std::find(p.lengths.begin(), p.lengths.end(), v.size());
            if (at != p.lengths.end()) v.resize(q.lengths[static_cast<std::size_t>(at - p.lengths.begin())]);
          };
          for (auto& v : q.reals) cut(v);
          for (auto& v : q.ints) cut(v);
        }
        return out;
      });
}

// ---- configurations -----------------------------------------------------------------------

using oa_random::configuration;

std::vector<configuration> configurations() {
  using C = oa::config;
  const oa::config dag = oa_test::emulated_config(budget, link_gbps);  // a throttled link: stages together
  std::ostringstream slow, fast;
  slow << "emulated:memory=1MiB:link_gbps=" << link_gbps;
  fast << "emulated:memory=1MiB:link_gbps=" << 4 * link_gbps;
  std::vector<configuration> out = {{"emulated, throttled link", dag}};
  const auto add = [&](const char* name, auto&& change) {
    oa::config c = dag;
    change(c);
    out.push_back({name, c});
  };
  add("emulated, throttled link, serial stages", [](C& c) { c.serial_stages = true; });
  add("emulated fused, throttled link", [](C& c) { c.emulated_fused = true; });
  add("emulated, throttled link, 4 streams", [](C& c) { c.streams = 4; });
  add("two emulated devices", [&](C& c) { c.devices = slow.str() + "," + fast.str(); });
  add("emulated and host", [&](C& c) { c.devices = slow.str() + ",host"; });
  return out;
}

using oa_random::from_environment;

}  // namespace

TEST_CASE("random DAG programs: stages together compute what plain C++ computes") {
  const std::uint64_t programs = from_environment("OA_RANDOM_PROGRAMS", default_programs);
  const std::uint64_t first_seed = from_environment("OA_RANDOM_SEED", 1);
  const char* only = std::getenv("OA_RANDOM_CONFIG");
  const std::vector<configuration> configs = configurations();
  std::size_t together = 0, host_then_device = 0, runs = 0;  // programs, under the first configuration
  std::vector<std::size_t> together_in(configs.size());   // programs with stages together, per configuration
  for (std::uint64_t seed = first_seed; seed < first_seed + programs; ++seed) {
    const program p = generator(seed).make();
    for (std::size_t k = 0; k < configs.size(); ++k) {
      const configuration& c = configs[k];
      if (only && c.name.find(only) == std::string::npos) continue;
      tally seen;
      if (const std::string d = run(p, c.c, &seen); !d.empty()) {
        const program small = shrink(p, c.c);
        FAIL_CHECK(c.name << ": " << p.text() << d << "\nsmallest failing program: " << small.text()
                          << run(small, c.c));
      }
      if (k == 1) CHECK_MESSAGE(seen.together == 0, "serial stages ran together: " << p.text());
      together_in[k] += seen.together > 0;
      if (k != 0) continue;
      ++runs;
      together += seen.together > 0;
      host_then_device += seen.host_then_device > 0;
    }
  }
  MESSAGE(together << " of " << runs << " programs ran stages together, " << host_then_device
                   << " a host stage then a device stage");
  for (std::size_t k = 0; k < configs.size(); ++k) MESSAGE(configs[k].name << ": " << together_in[k] << " programs with stages together");
  // The point of these programs: many run stages together (about a third;
  // whether they do follows the kernels' measured times too: a margin),
  // some a host stage beside the device.
  if (runs >= 8) {
    CHECK(together * 5 >= runs);
    CHECK(host_then_device >= 1);
  }
}
