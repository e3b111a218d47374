// The engine's side of oa_offload(<target> STDPAR): each entry runs one
// standard algorithm call through oa::stl's engine paths over the caller's
// memory, eagerly. Results go into the caller's output range chunk by chunk
// (copy_into: written in place, its old values not copied in); a failure
// leaves the caller's memory as it was (the engine's undo log), so the
// caller can run the standard algorithm instead.

#include "oa/stdpar/entry.hpp"

#include <cstring>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <utility>

#include "oa/annotations/stl.hpp"
#include "oa/oa.hpp"

namespace oa::stdpar::detail {

namespace {

template <class T>
std::span<T> range(void* p, std::size_t n) {
  return {static_cast<T*>(p), n};
}
template <class T>
std::span<const T> range(const void* p, std::size_t n) {
  return {static_cast<const T*>(p), n};
}

/// Calls f with a value of the element type `t` names.
template <class F>
bool with_type(elem t, F&& f) {
  switch (t) {
    case elem::i32:
      return f(std::int32_t{});
    case elem::i64:
      return f(std::int64_t{});
    case elem::f32:
      return f(float{});
    case elem::f64:
      return f(double{});
  }
  return false;
}

/// Calls f with the standard function object `o` names (of the arithmetic
/// ones: plus, minus, multiplies, divides).
template <class F>
bool with_arithmetic(op o, F&& f) {
  switch (o) {
    case op::plus:
      return f(std::plus<>{});
    case op::minus:
      return f(std::minus<>{});
    case op::multiplies:
      return f(std::multiplies<>{});
    case op::divides:
      return f(std::divides<>{});
    default:
      return false;
  }
}

/// The reductions oa's engine merges: plus and multiplies (only these are
/// instantiated: the engine has no reduction for the others).
template <class F>
bool with_reduction(op o, F&& f) {
  switch (o) {
    case op::plus:
      return f(std::plus<>{});
    case op::multiplies:
      return f(std::multiplies<>{});
    default:
      return false;
  }
}

/// Runs `work` (which records calls and evaluates them) through the engine:
/// false, noting why, when the call stays with the standard library.
template <class Work>
bool run(const char* algorithm, family f, std::size_t n, Work&& work) {
  if (!admit(algorithm, f, n)) return false;
  try {
    // `work` runs what it records before returning: calls that update the
    // caller's memory are recorded with spans local to it.
    return work();
  } catch (const std::exception& e) {
    engine_failed(algorithm, n, e.what());
    return false;
  }
}

/// Writes a lazy result into the caller's range, and runs it while the span
/// the call was recorded with (its caller's object) is alive. The result's
/// handle is gone by then: nothing holds it, so the engine does not copy it
/// back to the host (the caller's range is all that comes back).
template <class T, class Lazy>
bool into(void* out, std::size_t n, Lazy&& result) {
  auto dst = range<T>(out, n);
  {
    auto held = std::forward<Lazy>(result);
    oa::stl::detail::copy_into<T>(dst, std::move(held));
  }
  oa::evaluate();
  return true;
}

}  // namespace

bool admit(const char* algorithm, family f, std::size_t n) {
  // Inside an annotated function's chunk the engine cannot wait for itself.
  if (oa::detail::in_engine_thread()) {
    fell_back(algorithm, "called inside the engine's own work (an annotated function's chunk)");
    return false;
  }
  const oa::stdpar_thresholds min = oa::current_config().stdpar_min;
  const auto [threshold, name] = [&]() -> std::pair<std::uint64_t, const char*> {
    switch (f) {
      case family::sort:
        return {min.sort, "sort"};
      case family::elementwise:
        return {min.elementwise, "elementwise"};
      case family::reduction:
        return {min.reduction, "reduction"};
      case family::scan:
        return {min.scan, "scan"};
    }
    return {0, "?"};
  }();
  if (n < threshold) {
    oa::detail::note_not_offloaded(
        algorithm, std::string("below OA_STDPAR_MIN for ") + name + " (" + std::to_string(threshold) + " elements)",
        "elements=" + std::to_string(n));
    return false;
  }
  return true;
}

void engine_failed(const char* algorithm, std::size_t n, const char* what) noexcept {
  try {
    // The engine left the caller's memory as it was: the standard library runs the call.
    oa::detail::note_not_offloaded(algorithm, std::string("the engine failed: ") + what,
                                   "elements=" + std::to_string(n));
  } catch (...) {
    // The report misses one line; the call itself still runs.
  }
}

void fell_back(const char* algorithm, const char* reason) noexcept {
  try {
    // Configures the runtime (from OA_REPORT, ...) if nothing has yet: a
    // program none of whose calls oa ran still gets its report at exit.
    (void)oa::current_config();
    oa::detail::note_not_offloaded(algorithm, reason, "");
  } catch (...) {
    // The report misses one line; the call itself still runs.
  }
}

bool sort(const char* algorithm, elem t, void* first, std::size_t n, bool descending) {
  return run(algorithm, family::sort, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      auto r = range<T>(first, n);  // the calls' object: alive until they have run
      descending ? oa::stl::sort(r, std::greater<>{}) : oa::stl::sort(r, std::less<>{});
      oa::evaluate();
      return true;
    });
  });
}

bool fill(const char* algorithm, elem t, void* first, std::size_t n, const void* value) {
  return run(algorithm, family::elementwise, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      auto r = range<T>(first, n);  // the call's object: alive until it has run
      oa::stl::fill(r, *static_cast<const T*>(value));
      oa::evaluate();
      return true;
    });
  });
}

bool copy(const char* algorithm, elem t, const void* in, std::size_t n, void* out) {
  return run(algorithm, family::elementwise, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return into<T>(out, n, range<T>(in, n));
    });
  });
}

bool transform1(const char* algorithm, elem t, const void* in, std::size_t n, void* out, op f) {
  if (f != op::negate) return false;
  return run(algorithm, family::elementwise, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return into<T>(out, n, oa::stl::transform(range<T>(in, n), std::negate<>{}));
    });
  });
}

bool transform2(const char* algorithm, elem t, const void* a, const void* b, std::size_t n, void* out, op f) {
  return run(algorithm, family::elementwise, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return with_arithmetic(f, [&](auto fn) {
        return into<T>(out, n, oa::stl::transform(range<T>(a, n), range<T>(b, n), fn));
      });
    });
  });
}

bool reduce(const char* algorithm, elem t, const void* in, std::size_t n, op f, void* acc) {
  return run(algorithm, family::reduction, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return with_reduction(f, [&](auto fn) {
        T* result = static_cast<T*>(acc);
        *result = oa::stl::reduce(range<T>(in, n), *result, fn).get();
        return true;
      });
    });
  });
}

bool transform_reduce2(const char* algorithm, elem t, const void* a, const void* b, std::size_t n, op r, op f,
                       void* acc) {
  return run(algorithm, family::reduction, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return with_reduction(r, [&](auto rfn) {
        return with_arithmetic(f, [&](auto tfn) {
          T* result = static_cast<T*>(acc);
          *result = oa::stl::transform_reduce(range<T>(a, n), range<T>(b, n), *result, rfn, tfn).get();
          return true;
        });
      });
    });
  });
}

bool transform_reduce1(const char* algorithm, elem t, const void* in, std::size_t n, op r, op f, void* acc) {
  if (f != op::negate) return false;
  return run(algorithm, family::reduction, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return with_reduction(r, [&](auto rfn) {
        T* result = static_cast<T*>(acc);
        *result = oa::stl::transform_reduce(range<T>(in, n), *result, rfn, std::negate<>{}).get();
        return true;
      });
    });
  });
}

bool scan(const char* algorithm, elem t, const void* in, std::size_t n, void* out, bool inclusive, const void* init,
          op f) {
  return run(algorithm, family::scan, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      return with_reduction(f, [&](auto fn) {
        const auto src = range<T>(in, n);
        if (!inclusive) return into<T>(out, n, oa::stl::exclusive_scan(src, *static_cast<const T*>(init), fn));
        if (init) return into<T>(out, n, oa::stl::inclusive_scan(src, fn, *static_cast<const T*>(init)));
        return into<T>(out, n, oa::stl::inclusive_scan(src, fn));
      });
    });
  });
}

bool count(const char* algorithm, elem t, const void* in, std::size_t n, const void* value, std::int64_t* result) {
  return run(algorithm, family::reduction, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      *result = oa::stl::count(range<T>(in, n), *static_cast<const T*>(value)).get();
      return true;
    });
  });
}

bool extreme(const char* algorithm, elem t, const void* in, std::size_t n, bool largest, std::size_t* index) {
  return run(algorithm, family::reduction, n, [&] {
    return with_type(t, [&](auto v) {
      using T = decltype(v);
      const auto r = range<T>(in, n);
      const auto p = largest ? oa::stl::max_element(r).get() : oa::stl::min_element(r).get();
      *index = static_cast<std::size_t>(p.index);
      return true;
    });
  });
}

}  // namespace oa::stdpar::detail
