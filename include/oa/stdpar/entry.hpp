#pragma once
// The engine's side of oa_offload(<target> STDPAR): standard algorithms
// called with std::execution::par or par_unseq over contiguous ranges of
// int32, int64, float or double, with no operation or a standard function
// object. Compiled into oa (src/stdpar/entry.cpp); declared here in C++17,
// so that the program keeps its own standard. Each entry runs its call
// through oa::stl's engine paths eagerly (finished when it returns) and
// returns true, or returns false with nothing written (below its family's
// OA_STDPAR_MIN, inside the engine's own threads, or a failure the
// engine could not recover from), noting why for the report: the caller then
// runs the standard algorithm.

#include <cstddef>
#include <cstdint>

namespace oa::stdpar::detail {

enum class elem : unsigned char { i32, i64, f32, f64 };

/// The operations the entries take: the standard function objects.
enum class op : unsigned char { plus, minus, multiplies, divides, negate, less, greater };

bool sort(const char* algorithm, elem t, void* first, std::size_t n, bool descending);
bool fill(const char* algorithm, elem t, void* first, std::size_t n, const void* value);
/// out[i] = in[i]; out may be in.
bool copy(const char* algorithm, elem t, const void* in, std::size_t n, void* out);
/// out[i] = f(in[i]) (f: negate); out may be in.
bool transform1(const char* algorithm, elem t, const void* in, std::size_t n, void* out, op f);
/// out[i] = f(a[i], b[i]); out may be a or b.
bool transform2(const char* algorithm, elem t, const void* a, const void* b, std::size_t n, void* out, op f);
/// *acc = reduce(init = *acc, in, f) (f: plus or multiplies).
bool reduce(const char* algorithm, elem t, const void* in, std::size_t n, op f, void* acc);
/// *acc = reduce(init = *acc, transform(a, b, t), r) (r: plus or multiplies).
bool transform_reduce2(const char* algorithm, elem t, const void* a, const void* b, std::size_t n, op r, op f,
                       void* acc);
/// *acc = reduce(init = *acc, transform(in, f), r) (f: negate).
bool transform_reduce1(const char* algorithm, elem t, const void* in, std::size_t n, op r, op f, void* acc);
/// Inclusive or exclusive scan with plus or multiplies into out (may be in);
/// `init` may be null for an inclusive scan.
bool scan(const char* algorithm, elem t, const void* in, std::size_t n, void* out, bool inclusive, const void* init,
          op f);
bool count(const char* algorithm, elem t, const void* in, std::size_t n, const void* value, std::int64_t* result);
/// The index of the first smallest (largest) element (n > 0).
bool extreme(const char* algorithm, elem t, const void* in, std::size_t n, bool largest, std::size_t* index);
/// A call the overloads left to the standard library, and why, for the report.
void fell_back(const char* algorithm, const char* reason) noexcept;

/// The kinds of call, each with its own threshold: what it costs the engine
/// against the standard library differs by kind.
enum class family : unsigned char { sort, elementwise, reduction, scan };
/// Whether a call of `n` elements goes to the engine (the entries above ask
/// it first): false, noted for the report, below the threshold of its family
/// or inside the engine's own work (an annotated function's chunk, where the
/// engine cannot wait for itself).
bool admit(const char* algorithm, family f, std::size_t n);
/// A call the engine failed (it left the caller's memory as it was), noted
/// for the report: the caller runs the standard algorithm.
void engine_failed(const char* algorithm, std::size_t n, const char* what) noexcept;

}  // namespace oa::stdpar::detail
