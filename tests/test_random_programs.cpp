// Random straight-line programs over annotated library calls, each run under
// many runtime configurations and compared with the same steps run eagerly
// with the plain functions. The generator favours what the engine must
// order within one evaluation: a user vector read, then updated in place,
// then read again (its versions between updates the temporaries of a
// stage); lazy values overwritten (temporaries too); calls without a device
// function between calls with one; parts of the program forced early; the
// host writing a user vector between evaluations.
//
// Element-wise results are compared exactly: every step is one correctly
// rounded operation per element, whatever the device, chunking or order.
// Sums are compared within the error of a reordered sum.
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
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <oa/annotations/stl.hpp>
#include <oa/oa.hpp>

#include "random_programs.hpp"
#include "support.hpp"
#include "user_library/vecmath.hpp"
#include "user_library/vecmath_oa.hpp"

namespace {

using vec = std::vector<double>;
constexpr std::size_t none = SIZE_MAX;

// In-place updates with other argument roles than scale's: x += y (a mut
// argument and an input), x = y (an overwrite argument).
void add_into(std::span<double> x, std::span<const double> y) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}
void assign(std::span<double> x, std::span<const double> y) { std::copy(y.begin(), y.end(), x.begin()); }

inline constexpr auto add_into_oa = oa::annotate<"test::add_into">(
    oa::cpu(&add_into), oa::args(oa::mut<oa::split::contiguous>("x"), oa::in<oa::split::contiguous>("y")),
    oa::device_fn(oa::elementwise(oa::ops::add{})));
inline constexpr auto assign_oa = oa::annotate<"test::assign">(
    oa::cpu(&assign), oa::args(oa::overwrite<oa::split::contiguous>("x"), oa::in<oa::split::contiguous>("y")),
    oa::device_fn(oa::elementwise(oa::ops::identity{})));

// oa::stl callables: device-callable functors of the user's, and plain
// lambdas, whose calls run on the host.
struct shift {
  static constexpr bool oa_device_callable = true;
  double by;
  double operator()(double v) const { return v + by; }
};
struct halve {
  static constexpr bool oa_device_callable = true;
  void operator()(double& v) const { v *= 0.5; }
};
constexpr auto double_it = [](double v) { return v + v; };
constexpr auto negate_it = [](double& v) { v = -v; };

enum class op {
  add, mul, minus, negate, twice, shift,           // a new lazy vector
  scale, negate_in_place, halve, add_into, assign,  // a user vector updated in place
  dot, inner,                                       // a lazy double
  get_vector, get_dot,                              // a lazy value asked for
  evaluate, poke, host_negate                       // all evaluated (then the host writes a user vector)
};
bool makes_vector(op o) { return o <= op::shift; }
bool updates(op o) { return o >= op::scale && o <= op::assign; }
bool reduces(op o) { return o == op::dot || o == op::inner; }
bool evaluates(op o) { return o >= op::evaluate; }

/// Operands number the user vectors first (u0, u1, ...), then the lazy vectors (t0, t1, ...).
struct step {
  op what;
  std::size_t target = none;  // the lazy value written or asked for, the user vector updated or written
  std::size_t a = none, b = none;
  double k = 0;        // scale's factor, shift's offset, poke's value
  std::size_t at = 0;  // poke's index
};

struct program {
  std::uint64_t seed = 0;
  std::size_t n = 0;
  std::vector<vec> users;
  std::size_t vectors = 0, dots = 0;  // lazy slots
  std::vector<step> steps;

  std::string operand(std::size_t id) const {
    return id < users.size() ? "u" + std::to_string(id) : "t" + std::to_string(id - users.size());
  }
  /// A step as a failure's message shows it.
  std::string text(const step& s) const {
    static constexpr const char* forms[] = {
        "{t} = add({a}, {b})",
        "{t} = mul({a}, {b})",
        "{t} = stl::transform({a}, {b}, minus)",
        "{t} = stl::transform({a}, negate)",
        "{t} = stl::transform({a}, v + v (host lambda))",
        "{t} = stl::transform({a}, shift{{k}})",
        "scale({u}, {k})",
        "stl::for_each({u}, v = -v (host lambda))",
        "stl::for_each({u}, halve)",
        "add_into({u}, {a})",
        "assign({u}, {a})",
        "{d} = dot({a}, {b})",
        "{d} = stl::transform_reduce({a}, {b}, 0.0)",
        "{t}.get()",
        "{d}.get()",
        "evaluate()",
        "evaluate(); {u}[{at}] = {k}",
        "evaluate(); for (double& v : {u}) v = -v",
    };
    std::ostringstream k;
    k << s.k;
    const std::pair<std::string, std::string> fields[] = {
        {"{t}", "t" + std::to_string(s.target)}, {"{d}", "d" + std::to_string(s.target)},
        {"{u}", operand(s.target)},              {"{a}", operand(s.a)},
        {"{b}", operand(s.b)},                   {"{k}", k.str()},
        {"{at}", std::to_string(s.at)},
    };
    std::string out = forms[static_cast<std::size_t>(s.what)];
    for (const auto& [field, value] : fields)
      for (std::size_t at = out.find(field); at != std::string::npos; at = out.find(field, at + value.size()))
        out.replace(at, field.size(), value);
    return out;
  }
  std::string text() const {
    std::ostringstream o;
    o << "seed " << seed << ", n = " << n << ", user vectors u0-u" << users.size() - 1 << ":\n";
    oa_random::list_steps(o, *this);
    return o.str();
  }
};

// ---- generation -----------------------------------------------------------------------------

class generator : oa_random::dice {
 public:
  explicit generator(std::uint64_t seed) : dice(seed) { p_.seed = seed; }

  program make() {
    static constexpr std::size_t sizes[] = {1, 2, 7, 255, 1000, 4096, 4097, 30011, 100003};
    p_.n = sizes[below(std::size(sizes))];
    p_.users.resize(3 + below(3));
    std::uniform_real_distribution<double> value(-1, 1);
    for (vec& u : p_.users) {
      u.resize(p_.n);
      for (double& x : u) x = value(g);
    }
    read_.assign(p_.users.size(), false);
    written_.assign(p_.users.size(), false);
    const std::size_t length = 4 + below(17);
    while (p_.steps.size() < length) {
      const std::size_t roll = below(100);
      if (roll < 12 && p_.steps.size() + 3 <= length) {
        hazard();
      } else if (roll < 42) {
        make_vector(any(), any());
      } else if (roll < 64) {
        update(to_update());
      } else if (roll < 80) {
        reduce(any());
      } else if (roll < 86) {
        force(op::evaluate);
      } else if (roll < 91 && p_.vectors > 0) {
        push({.what = op::get_vector, .target = below(p_.vectors)});
      } else if (roll < 94 && p_.dots > 0) {
        push({.what = op::get_dot, .target = below(p_.dots)});
      } else {
        force(roll < 97 ? op::poke : op::host_negate);
      }
    }
    return std::move(p_);
  }

 private:
  std::size_t user() { return below(p_.users.size()); }
  /// One of the user vectors `marked`, or none.
  std::size_t one_of(const std::vector<bool>& marked) {
    std::vector<std::size_t> ids;
    for (std::size_t u = 0; u < marked.size(); ++u)
      if (marked[u]) ids.push_back(u);
    return ids.empty() ? none : ids[below(ids.size())];
  }
  /// Often a user vector updated in this evaluation (read after its update), else any operand.
  std::size_t any() {
    if (const std::size_t u = one_of(written_); u != none && chance(50)) return u;
    if (p_.vectors > 0 && chance(35)) return p_.users.size() + below(p_.vectors);
    return user();
  }
  /// Often a user vector read in this evaluation (updated after the read), else any.
  std::size_t to_update() {
    const std::size_t u = one_of(read_);
    return u != none && chance(65) ? u : user();
  }
  /// A new lazy slot, or (making the value it held a temporary) one in use.
  std::size_t slot(std::size_t& used, std::size_t most) {
    return used == 0 || (used < most && chance(60)) ? used++ : below(used);
  }

  void push(step s) {
    for (std::size_t id : {s.a, s.b})
      if (id < p_.users.size()) read_[id] = true;
    if (updates(s.what)) written_[s.target] = true;
    p_.steps.push_back(s);
  }

  void make_vector(std::size_t a, std::size_t b) {
    static constexpr op binary[] = {op::add, op::mul, op::add, op::mul, op::minus};
    static constexpr op unary[] = {op::negate, op::twice, op::shift};
    if (chance(80)) {
      push({.what = binary[below(std::size(binary))], .target = slot(p_.vectors, 8), .a = a, .b = b});
    } else {
      const op f = unary[below(std::size(unary))];
      push({.what = f, .target = slot(p_.vectors, 8), .a = a, .k = f == op::shift ? 0.5 : 0});
    }
  }

  void update(std::size_t u) {
    static constexpr double powers_of_two[] = {2.0, 0.5, -1.0, 0.25};
    const std::size_t roll = below(100);
    if (roll < 55) {
      push({.what = op::scale, .target = u, .k = powers_of_two[below(4)]});
    } else if (roll < 77) {
      push({.what = roll < 67 ? op::negate_in_place : op::halve, .target = u});
    } else {
      std::size_t a = any();
      while (a == u) a = any();  // another vector
      push({.what = roll < 90 ? op::add_into : op::assign, .target = u, .a = a});
    }
  }

  void reduce(std::size_t a) {
    push({.what = chance(50) ? op::dot : op::inner, .target = slot(p_.dots, 4), .a = a, .b = any()});
  }

  void force(op what) {
    static constexpr double values[] = {0.375, -0.75, 1.5};
    std::fill(read_.begin(), read_.end(), false);
    std::fill(written_.begin(), written_.end(), false);
    if (what == op::evaluate) push({.what = what});
    if (what == op::host_negate) push({.what = what, .target = user()});
    if (what == op::poke) push({.what = what, .target = user(), .k = values[below(3)], .at = below(p_.n)});
  }

  /// t = f(a, b); update(a); t' = g(a or b, a); [update(a);] d = dot(a, b):
  /// each read of a must see the version of its place in the program.
  void hazard() {
    const std::size_t a = user(), b = any();
    make_vector(a, b);
    update(a);
    make_vector(chance(50) ? a : b, a);
    if (chance(60)) update(a);
    reduce(a);
  }

  program p_;
  std::vector<bool> read_, written_;  // user vectors read, updated since the last evaluation
};

// ---- the eager reference and the lazy run ------------------------------------------------

struct reference {
  std::vector<vec> users, vectors;
  std::vector<double> dots, bounds;  // a dot, and the sum of |a_i b_i| (the scale of its rounding)

  explicit reference(const program& p) : users(p.users), vectors(p.vectors), dots(p.dots), bounds(p.dots) {}

  const vec& operand(std::size_t id) const {
    return id < users.size() ? users[id] : vectors[id - users.size()];
  }

  void apply(const step& s) {
    const std::size_t t = s.target;
    const auto each = [&](auto f) {  // a new vector, element by element
      const vec& a = operand(s.a);
      vec out(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], s.b == none ? 0.0 : operand(s.b)[i]);
      vectors[t] = std::move(out);
    };
    switch (s.what) {
      case op::add:
      case op::mul: {
        vec out(operand(s.a).size());
        (s.what == op::add ? vecmath::add : vecmath::mul)(operand(s.a), operand(s.b), out);
        vectors[t] = std::move(out);
        break;
      }
      case op::minus: each([](double x, double y) { return x - y; }); break;
      case op::negate: each([](double x, double) { return -x; }); break;
      case op::twice: each([](double x, double) { return double_it(x); }); break;
      case op::shift: each([&](double x, double) { return shift{s.k}(x); }); break;
      case op::scale: vecmath::scale(users[t], s.k); break;
      case op::negate_in_place:
      case op::host_negate: std::for_each(users[t].begin(), users[t].end(), negate_it); break;
      case op::halve: std::for_each(users[t].begin(), users[t].end(), halve{}); break;
      case op::add_into: add_into(users[t], operand(s.a)); break;
      case op::assign: assign(users[t], operand(s.a)); break;
      case op::dot:
      case op::inner: {
        const vec &a = operand(s.a), &b = operand(s.b);
        dots[t] = vecmath::dot(a, b);
        bounds[t] = 0;
        for (std::size_t i = 0; i < a.size(); ++i) bounds[t] += std::abs(a[i] * b[i]);
        break;
      }
      case op::poke: users[t][s.at] = s.k; break;
      case op::get_vector:
      case op::get_dot:
      case op::evaluate: break;
    }
  }
};

struct lazy_run {
  std::vector<vec> users;  // never resized: recorded calls hold their addresses
  std::vector<oa::lazy<vec>> vectors;
  std::vector<oa::lazy<double>> dots;

  explicit lazy_run(const program& p) : users(p.users), vectors(p.vectors), dots(p.dots) {}
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
  decltype(auto) with(std::size_t id, F&& f) {
    if (id < users.size()) return f(users[id]);
    return f(vectors[id - users.size()]);
  }
  template <class F>
  decltype(auto) with(std::size_t a, std::size_t b, F&& f) {
    return with(a, [&](auto& x) { return with(b, [&](auto& y) { return f(x, y); }); });
  }

  void apply(const step& s) {
    const std::size_t t = s.target;
    const auto make = [&](auto f) { vectors[t] = with(s.a, f); };
    const auto make2 = [&](auto f) { vectors[t] = with(s.a, s.b, f); };
    switch (s.what) {
      case op::add: make2([](auto& a, auto& b) { return vecmath::oa::add(a, b); }); break;
      case op::mul: make2([](auto& a, auto& b) { return vecmath::oa::mul(a, b); }); break;
      case op::minus: make2([](auto& a, auto& b) { return oa::stl::transform(a, b, std::minus<>{}); }); break;
      case op::negate: make([](auto& a) { return oa::stl::transform(a, std::negate<>{}); }); break;
      case op::twice: make([](auto& a) { return oa::stl::transform(a, double_it); }); break;
      case op::shift: make([&](auto& a) { return oa::stl::transform(a, shift{s.k}); }); break;
      case op::scale: vecmath::oa::scale(users[t], s.k); break;
      case op::negate_in_place: oa::stl::for_each(users[t], negate_it); break;
      case op::halve: oa::stl::for_each(users[t], halve{}); break;
      case op::add_into: with(s.a, [&](auto& y) { add_into_oa(users[t], y); }); break;
      case op::assign: with(s.a, [&](auto& y) { assign_oa(users[t], y); }); break;
      case op::dot: dots[t] = with(s.a, s.b, [](auto& a, auto& b) { return vecmath::oa::dot(a, b); }); break;
      case op::inner:
        dots[t] = with(s.a, s.b, [](auto& a, auto& b) { return oa::stl::transform_reduce(a, b, 0.0); });
        break;
      case op::get_vector: (void)vectors[t].get(); break;
      case op::get_dot: (void)dots[t].get(); break;
      case op::evaluate: oa::evaluate(); break;
      case op::poke: oa::evaluate(), users[t][s.at] = s.k; break;
      case op::host_negate:
        oa::evaluate();
        std::for_each(users[t].begin(), users[t].end(), negate_it);
        break;
    }
  }
};

// ---- comparison -----------------------------------------------------------------------------

using oa_random::difference;

/// What step `s` makes visible: the value asked for, or everything after an evaluation.
std::string difference(const program& p, const step& s, lazy_run& got, const reference& want) {
  std::string d;
  const auto vector = [&](std::size_t t) {
    if (d.empty() && got.vectors[t].valid())
      d = difference("t" + std::to_string(t), got.vectors[t].get(), want.vectors[t]);
  };
  const auto dot = [&](std::size_t t) {
    if (d.empty() && got.dots[t].valid())
      d = difference("d" + std::to_string(t), got.dots[t].get(), want.dots[t], want.bounds[t], 1e-12);
  };
  if (s.what == op::get_vector) vector(s.target);
  if (s.what == op::get_dot) dot(s.target);
  if (!evaluates(s.what)) return d;
  for (std::size_t u = 0; u < p.users.size() && d.empty(); ++u)
    d = difference(p.operand(u), got.users[u], want.users[u]);
  for (std::size_t t = 0; t < p.vectors; ++t) vector(t);
  for (std::size_t t = 0; t < p.dots; ++t) dot(t);
  return d;
}

/// Runs `p` under `c` (on devices of its own) beside the reference: the first
/// difference found, naming the step after which it showed; empty if none.
std::string run(const program& p, const oa::config& c) {
  oa_test::config_scope scope(c);
  reference want(p);
  lazy_run got(p);
  return oa_random::first_difference(p, step{.what = op::evaluate}, want, got);  // then the final comparison
}

/// Whether every step reads only lazy slots written before it, and pokes within n.
bool well_formed(const program& p) {
  std::vector<bool> vectors(p.vectors), dots(p.dots);
  const auto defined = [&](std::size_t id) {
    return id == none || id < p.users.size() || vectors[id - p.users.size()];
  };
  for (const step& s : p.steps) {
    if (!defined(s.a) || !defined(s.b) || (s.what == op::poke && s.at >= p.n)) return false;
    if ((s.what == op::get_vector && !vectors[s.target]) || (s.what == op::get_dot && !dots[s.target]))
      return false;
    if (makes_vector(s.what)) vectors[s.target] = true;
    if (reduces(s.what)) dots[s.target] = true;
  }
  return true;
}

/// A program failing under `c` made as small as it still fails: steps
/// dropped one at a time, then fewer elements.
program shrink(program p, const oa::config& c) {
  return oa_random::shrink(
      std::move(p), [&](const program& q) { return well_formed(q) && !run(q, c).empty(); },
      [](const program& p) {
        std::vector<program> out;
        for (std::size_t n : {1, 2, 7, 255, 4097}) {
          if (n >= p.n) break;
          program& q = out.emplace_back(p);
          q.n = n;
          for (vec& u : q.users) u.resize(n);
        }
        return out;
      });
}

// ---- configurations -----------------------------------------------------------------------

using oa_random::configuration;

std::vector<configuration> configurations() {
  using C = oa::config;
  const oa::config plain = oa_test::emulated_config(64 << 10);  // out of core from n = 4096
  oa::config fused = plain;
  fused.emulated_fused = true;
  std::vector<configuration> out = {{"host", oa_test::host_config()},
                                    {"emulated 1 MiB", oa_test::emulated_config(1 << 20)},
                                    {"emulated 64 KiB", plain},
                                    {"emulated fused 64 KiB", fused}};
  const auto add = [&](const char* name, oa::config c, auto&& change) {
    change(c);
    out.push_back({name, c});
  };
  add("emulated fused 1 MiB", fused, [](C& c) { c.device_memory = 1 << 20; });
  add("emulated 64 KiB, 4 streams", plain, [](C& c) { c.streams = 4; });
  add("emulated fused 64 KiB, 4 streams", fused, [](C& c) { c.streams = 4; });
  add("emulated 64 KiB, device functions' twins", plain, [](C& c) { c.emulated_device_functions = true; });
  add("emulated 64 KiB, serial stages", plain, [](C& c) { c.serial_stages = true; });
  add("emulated 64 KiB, sequential", plain, [](C& c) { c.sequential = true; });
  add("emulated 64 KiB, no kept copies", plain, [](C& c) { c.keep_copies = false; });
  add("emulated 64 KiB, 4 KiB chunks", plain, [](C& c) { c.chunk_bytes = 4096; });
  // Stages of less than 1 MiB on the host, larger ones on the device: both in one program.
  add("emulated 64 KiB, host below 1 MiB", plain, [](C& c) { c.host_threshold = 1 << 20; });
  add("emulated 64 KiB, placed by cost", plain, [](C& c) { c.placement = "cost"; });
  // A link with rates: chunks sized by the time model of the link.
  add("emulated 64 KiB, 64 GB/s link", plain, [](C& c) { c.link_gbps = 64; });
  add("emulated fused 64 KiB, 64 GB/s link", fused, [](C& c) { c.link_gbps = 64; });
  // Transient faults: the chunk runs again on the host, from the data as it was before it.
  add("emulated 64 KiB, 3rd launch fails", plain, [](C& c) { c.fail_launch = 3; });
  add("emulated fused 64 KiB, 5th copy fails", fused, [](C& c) { c.fail_copy = 5; });
  // Several devices (each of 64 KiB) share a stage's chunks.
  add("two emulated devices", plain, [](C& c) { c.devices = "emulated:memory=64KiB,emulated:memory=64KiB"; });
  add("two emulated devices, fused, even spread", fused, [](C& c) {
    c.devices = "emulated:memory=64KiB,emulated:memory=64KiB", c.spread = "even";
  });
  add("emulated and host", plain, [](C& c) { c.devices = "emulated:memory=64KiB,host"; });
  return out;
}

using oa_random::from_environment;

}  // namespace

TEST_CASE("random programs: every configuration computes what the plain functions compute") {
  const std::uint64_t programs = from_environment("OA_RANDOM_PROGRAMS", oa_random::sanitized ? 15 : 60);
  const std::uint64_t first_seed = from_environment("OA_RANDOM_SEED", 1);
  const char* only = std::getenv("OA_RANDOM_CONFIG");
  const std::vector<configuration> configs = configurations();
  for (std::uint64_t seed = first_seed; seed < first_seed + programs; ++seed) {
    const program p = generator(seed).make();
    for (const configuration& c : configs) {
      if (only && c.name.find(only) == std::string::npos) continue;
      if (const std::string d = run(p, c.c); !d.empty()) {
        const program small = shrink(p, c.c);
        FAIL_CHECK(c.name << ": " << p.text() << d << "\nsmallest failing program: " << small.text()
                          << run(small, c.c));
      }
    }
  }
}

TEST_CASE("random programs: the generator makes the orderings the engine must keep") {
  // Among the programs the test above runs by default: every kind of step; a
  // user vector read, updated, then read again within one evaluation; a lazy
  // slot overwritten.
  std::vector<bool> seen(static_cast<std::size_t>(op::host_negate) + 1);
  int hazards = 0, overwritten = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    const program p = generator(seed).make();
    std::vector<int> state(p.users.size());  // 0: untouched, 1: read, 2: updated after a read
    std::vector<bool> used(p.vectors);
    bool hazard = false, overwrite = false;
    for (const step& s : p.steps) {
      seen[static_cast<std::size_t>(s.what)] = true;
      if (evaluates(s.what)) std::fill(state.begin(), state.end(), 0);
      for (std::size_t id : {s.a, s.b})
        if (id < p.users.size()) hazard = hazard || state[id] == 2, state[id] = std::max(state[id], 1);
      if (updates(s.what) && state[s.target] == 1) state[s.target] = 2;
      if (makes_vector(s.what)) overwrite = overwrite || used[s.target], used[s.target] = true;
    }
    hazards += hazard, overwritten += overwrite;
  }
  for (std::size_t k = 0; k < seen.size(); ++k) {
    CAPTURE(k);
    CHECK(seen[k]);
  }
  CHECK(hazards >= 20);
  CHECK(overwritten >= 20);
}
