// Fused stage kernels: the generated CUDA source keeps temporaries in
// registers, touches device memory only for inputs and outputs, and compiles
// with NVRTC for the architectures oa targets (no GPU needed to compile).

#include <doctest/doctest.h>

#include <unistd.h>

#include <oa/annotations/eigen_array.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_source.hpp"
#include "core/planner.hpp"
#include "support.hpp"
#include "stderr_capture.hpp"
#include "expression_library.hpp"
#include "user_library/vecmath_oa.hpp"
#include "workloads.hpp"

#if defined(OA_HAS_CUDA)
#include "cuda/nvrtc_compiler.hpp"
#endif
#include "cuda/kernel_cache.hpp"

using Eigen::ArrayXd;
namespace d = oa::detail;

namespace {

struct recorded_stage {
  std::vector<d::call_node> nodes;
  std::vector<d::stage> stages;
  d::stage_layout layout;
  d::kernel_source kernel;

  recorded_stage() {
    nodes = d::current_graph()->take_pending();
    const auto live = d::live_calls(nodes);
    stages = d::form_stages(nodes, live);
    REQUIRE(!stages.empty());
    const auto needed = d::values_needed_on_host(nodes, live, stages);
    layout = d::layout_stage(stages.back(), nodes, d::placement_mode::fused, needed);
    kernel = d::generate_kernel(stages.back(), nodes, layout);
  }
};

std::size_t occurrences(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (auto p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

void check_compiles(const d::kernel_source& k) {
#if defined(OA_HAS_CUDA)
  for (const auto& [major, minor] : {std::pair{8, 0}, std::pair{9, 0}}) {
    CAPTURE(major);
    std::string log;
    try {
      const auto c = oa::cuda::compile(k, major, minor);
      CHECK(c.cubin.size() > 0);
      CHECK(c.name == k.name);
    } catch (const std::exception& e) {
      log = e.what();
    }
    CHECK_MESSAGE(log.empty(), log, "\n--- source ---\n", k.code);
  }
#else
  MESSAGE("built without the CUDA toolkit: NVRTC compilation not checked");
#endif
}

}  // namespace

TEST_CASE("Black-Scholes fuses into one kernel: 5 loads, 2 stores, temporaries in registers") {
  const ArrayXd x = ArrayXd::Constant(1000, 4.0);
  oa::lazy<ArrayXd> call, put;
  oa_workloads::blackscholes(oa::ref(x), oa::ref(x), oa::ref(x), oa::ref(x), oa::ref(x), call, put);
  recorded_stage r;
  REQUIRE(r.stages.size() == 1);
  // One input (the same array five times) and two outputs; an output reuses
  // the input's buffer once the input is dead (same element, same thread).
  CHECK(r.layout.buffer_bytes_per_unit == 2 * 8);
  CHECK(occurrences(r.kernel.code, "static_cast<const double*>") == 1);  // the same array, loaded once
  CHECK(occurrences(r.kernel.code, "double*>(b") - 1 == 2);               // two stores: call and put
  CHECK(occurrences(r.kernel.code, "oa::ops::") >= 32);
  CHECK_FALSE(r.kernel.uses_cub);
  check_compiles(r.kernel);
}

TEST_CASE("Haversine with distinct inputs, and the crime index with its reduction, compile") {
  SUBCASE("haversine") {
    const ArrayXd lat = ArrayXd::Random(500), lon = ArrayXd::Random(500);
    oa::lazy<ArrayXd> a;
    oa_workloads::haversine(oa::ref(lat), oa::ref(lon), a);
    recorded_stage r;
    CHECK(occurrences(r.kernel.code, "static_cast<const double*>") == 2);
    CHECK(r.layout.buffer_bytes_per_unit == 2 * 8);  // the output takes a dead input's buffer
    check_compiles(r.kernel);
  }
  SUBCASE("crime index") {
    const ArrayXd total = ArrayXd::Random(500), adults = ArrayXd::Random(500), robberies = ArrayXd::Random(500);
    auto ci = oa_workloads::crime_index(oa::ref(total), oa::ref(adults), oa::ref(robberies));
    recorded_stage r;
    CHECK(r.kernel.uses_cub);
    CHECK(r.layout.buffer_bytes_per_unit == 3 * 8);  // only the inputs: the sum is a partial per block
    CHECK(occurrences(r.kernel.code, "cub::BlockReduce") == 1);
    const auto partials = std::count_if(r.kernel.params.begin(), r.kernel.params.end(),
                                        [](const auto& p) { return p.what == d::kernel_param::kind::partials; });
    CHECK(partials == 1);
    check_compiles(r.kernel);
  }
}

TEST_CASE("lazy scalars become kernel parameters; in-place updates store to the caller's buffer") {
  std::vector<double> a(100, 1.0), b(100, 2.0);
  auto total = vecmath::oa::dot(a, b);
  oa::evaluate();  // the sum is ready: a literal; a pending one is a parameter
  const ArrayXd x = ArrayXd::Random(100);
  auto lx = oa::ref(x);
  auto s = oa::sum(lx);
  auto scaled = oa::eigen::detail::div_as<double>(lx, s);
  vecmath::oa::scale(a, 3.0);
  recorded_stage r;
  REQUIRE(r.stages.size() == 2);  // the sum; then x / sum, joined by the scale of a
  const auto scalars = std::count_if(r.kernel.params.begin(), r.kernel.params.end(),
                                     [](const auto& p) { return p.what == d::kernel_param::kind::scalar; });
  CHECK(scalars == 1);
  CHECK(occurrences(r.kernel.code, "double*>(b") - 2 == 2);  // stores: x / sum and the updated a
  check_compiles(r.kernel);
  (void)total;
  (void)scaled;
}

TEST_CASE("minCoeff and maxCoeff kernels combine with NaN-propagating min_nan and max_nan, per thread and per block") {
  const ArrayXd x = ArrayXd::Random(1000);
  auto lx = oa::ref(x);
  auto lo = oa::min_coeff(lx);
  auto hi = oa::max_coeff(lx);
  recorded_stage r;
  REQUIRE(r.stages.size() == 1);
  // Each reduction: the thread's accumulator and CUB's block reduction, both
  // with the NaN-propagating functor, from the identity (+inf, -inf).
  CHECK(occurrences(r.kernel.code, "oa::ops::min_nan{}") == 2);
  CHECK(occurrences(r.kernel.code, "oa::ops::max_nan{}") == 2);
  CHECK(occurrences(r.kernel.code, "oa::ops::min{}") == 0);
  CHECK(occurrences(r.kernel.code, "oa::ops::max{}") == 0);
  CHECK(occurrences(r.kernel.code, "__longlong_as_double(0x7ff0000000000000LL)") == 1);
  CHECK(occurrences(r.kernel.code, "__longlong_as_double(0xfff0000000000000LL)") == 1);
  check_compiles(r.kernel);
  (void)lo;
  (void)hi;
}

TEST_CASE("min_nan and max_nan: NaN from either side, in any order of combining; otherwise min and max") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const oa::ops::min_nan mn;
  const oa::ops::max_nan mx;
  for (const double v : {1.0, -inf, inf, nan}) {
    CHECK(std::isnan(mn(nan, v)));
    CHECK(std::isnan(mn(v, nan)));
    CHECK(std::isnan(mx(nan, v)));
    CHECK(std::isnan(mx(v, nan)));
  }
  CHECK(mn(2.0, -inf) == -inf);
  CHECK(mx(2.0, inf) == inf);
  CHECK(mn(3, 2) == 2);
  CHECK(mx(3, 2) == 3);
  // A tree of pairs (a block's reduction) and a left fold (a thread's) agree,
  // wherever the NaN is.
  for (std::size_t at = 0; at < 16; ++at) {
    std::vector<double> v(16);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = double(i) - 7.5;
    v[at] = nan;
    double fold = inf;
    for (double e : v) fold = mn(fold, e);
    for (std::size_t w = 1; w < v.size(); w *= 2)
      for (std::size_t i = 0; i + w < v.size(); i += 2 * w) v[i] = mn(v[i], v[i + w]);
    CHECK(std::isnan(fold));
    CHECK(std::isnan(v[0]));
  }
}

TEST_CASE("an expression's operations in the fused kernel: one temporary each, repeated ones once, lazy scalars as parameters") {
  using namespace expression_library;
  const std::vector<double> x(300, 0.5);
  SUBCASE("a density, then a cubic of it") {
    auto p = cubic(density(x, 0.0, 1.0), 0.25, 1.5, -0.02, 0.001);
    recorded_stage r;
    REQUIRE(r.stages.size() == 1);
    CHECK(r.layout.buffer_bytes_per_unit == 8);  // x's buffer, then the cubic's; the density stays in registers
    CHECK(occurrences(r.kernel.code, "oa::ops::exp{}") == 1);
    // z = (x - mean) / sd, used twice in -0.5 * z * z: computed once.
    CHECK(occurrences(r.kernel.code, "oa::ops::sub{}") == 1);
    CHECK(occurrences(r.kernel.code, "oa::ops::div{}") == 2);  // z, and the density
    CHECK(occurrences(r.kernel.code, "const auto e1_") == 6);  // the cubic: 3 multiplications, 3 additions
    check_compiles(r.kernel);
    (void)p;
  }
  SUBCASE("a clamp of selects, its bound a lazy sum") {
    std::vector<double> y = x;
    auto hi = sum_squares(x);
    clamp(y, 0.0, hi);
    recorded_stage r;
    REQUIRE(r.stages.size() == 2);  // the sum, then the clamp
    CHECK(occurrences(r.kernel.code, "oa::ops::select{}") == 2);
    const auto scalars = std::count_if(r.kernel.params.begin(), r.kernel.params.end(),
                                       [](const auto& p) { return p.what == d::kernel_param::kind::scalar; });
    CHECK(scalars == 1);
    check_compiles(r.kernel);
  }
}

namespace {

namespace fs = std::filesystem;

/// OA_KERNEL_CACHE set to a fresh folder while it lasts; the variable put
/// back and the folder removed after, whatever the test did.
class cache_folder {
 public:
  cache_folder() : dir_(fs::temp_directory_path() / ("oa_kernel_cache_" + std::to_string(::getpid()))) {
    if (const char* e = std::getenv("OA_KERNEL_CACHE")) saved_ = e;
    fs::remove_all(dir_);
    ::setenv("OA_KERNEL_CACHE", dir_.c_str(), 1);
  }
  cache_folder(const cache_folder&) = delete;
  cache_folder& operator=(const cache_folder&) = delete;
  ~cache_folder() {
    if (saved_)
      ::setenv("OA_KERNEL_CACHE", saved_->c_str(), 1);
    else
      ::unsetenv("OA_KERNEL_CACHE");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path());
    return out;
  }

 private:
  fs::path dir_;
  std::optional<std::string> saved_;
};

std::vector<char> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_bytes(const fs::path& p, const std::vector<char>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("kernel cache entries: read back only whole and for exactly their key; any damage is a miss") {
  const cache_folder cache;
  const std::string dir = cache.dir().string(), key = "nvrtc 13.0\n--gpu-architecture=sm_90\nk\nsource";
  std::vector<char> cubin(3000);
  for (std::size_t i = 0; i < cubin.size(); ++i) cubin[i] = static_cast<char>(i * 7 + 1);
  CHECK(!oa::cuda::cached_cubin(dir, "k", key));  // nothing yet
  std::string why;
  REQUIRE(oa::cuda::keep_cubin(dir, "k", key, cubin, why));
  REQUIRE(cache.entries().size() == 1);  // no temporary file left
  const fs::path entry = cache.entries().front();
  CHECK(entry.filename().string().rfind("k-", 0) == 0);
  CHECK(oa::cuda::cached_cubin(dir, "k", key) == cubin);
  CHECK(!oa::cuda::cached_cubin(dir, "k", key + " "));  // another key: its own file, absent
  // A name that is no identifier stays inside the folder.
  REQUIRE(oa::cuda::keep_cubin(dir, "../up/k", key, cubin, why));
  CHECK(cache.entries().size() == 2);
  CHECK(oa::cuda::cached_cubin(dir, "../up/k", key) == cubin);
  const std::vector<char> whole = file_bytes(entry);
  const auto damaged = [&](std::vector<char> bytes) {
    put_bytes(entry, bytes);
    return !oa::cuda::cached_cubin(dir, "k", key);
  };
  const std::size_t key_at = 16, size_at = key_at + key.size(), body_at = size_at + 16;
  std::vector<char> b = whole;
  b[0] = 'X';
  CHECK(damaged(b));  // not an entry
  b = whole;
  b[key_at + 3] ^= 1;
  CHECK(damaged(b));  // another key under this file name
  b = whole;
  b.resize(whole.size() - 1);
  CHECK(damaged(b));  // truncated
  b = whole;
  b.push_back('x');
  CHECK(damaged(b));  // trailing bytes
  b = whole;
  for (int i = 0; i < 8; ++i) b[size_at + static_cast<std::size_t>(i)] = static_cast<char>(0x7f);
  CHECK(damaged(b));  // a size past the file (never allocated)
  b = whole;
  b[body_at + 1000] ^= 0x10;
  CHECK(damaged(b));  // the body changed after it was written: its checksum
  b.assign(whole.begin(), whole.begin() + 10);
  CHECK(damaged(b));
  CHECK(damaged({}));
  put_bytes(entry, whole);
  CHECK(oa::cuda::cached_cubin(dir, "k", key) == cubin);
  // A folder that cannot be made: false, and why.
  { std::ofstream(cache.dir() / "file") << "x"; }
  CHECK(!oa::cuda::keep_cubin((cache.dir() / "file" / "sub").string(), "k", key, cubin, why));
  CHECK(why.find("cannot create") != std::string::npos);
}

#if defined(OA_HAS_CUDA)
TEST_CASE("the kernel cache: a kernel compiled once is read back; a damaged or another key's entry is compiled afresh") {
  const ArrayXd x = ArrayXd::Constant(100, 2.0);
  oa::lazy<ArrayXd> call, put;
  oa_workloads::blackscholes(oa::ref(x), oa::ref(x), oa::ref(x), oa::ref(x), oa::ref(x), call, put);
  recorded_stage r;
  const cache_folder cache;
  const auto first = oa::cuda::compile(r.kernel, 9, 0);
  CHECK(!first.from_cache);
  REQUIRE(cache.entries().size() == 1);
  const fs::path entry = cache.entries().front();
  CHECK(entry.filename().string().rfind(r.kernel.name, 0) == 0);
  const auto again = oa::cuda::compile(r.kernel, 9, 0);
  CHECK(again.from_cache);
  CHECK(again.cubin == first.cubin);
  // Refresh (what a CUBIN the driver refuses gets): compiled, and kept.
  CHECK(!oa::cuda::compile(r.kernel, 9, 0, oa::cuda::kernel_cache_use::refresh).from_cache);
  CHECK(oa::cuda::compile(r.kernel, 9, 0).from_cache);
  // Another architecture is another key: its own entry.
  CHECK(!oa::cuda::compile(r.kernel, 8, 0).from_cache);
  CHECK(cache.entries().size() == 2);
  // A damaged entry is compiled afresh and replaced.
  const auto size = fs::file_size(entry);
  fs::resize_file(entry, size - 7);
  const auto after_truncation = oa::cuda::compile(r.kernel, 9, 0);
  CHECK(!after_truncation.from_cache);
  CHECK(after_truncation.cubin == first.cubin);
  CHECK(fs::file_size(entry) == size);
  CHECK(oa::cuda::compile(r.kernel, 9, 0).from_cache);
  // Off: nothing read or written.
  ::setenv("OA_KERNEL_CACHE", "off", 1);
  fs::remove_all(cache.dir());
  CHECK(!oa::cuda::compile(r.kernel, 9, 0).from_cache);
  CHECK(!fs::exists(cache.dir()));
  // A folder that cannot be made (under a file): compiled all the same, said
  // on stderr (once a process), no error.
  fs::create_directories(cache.dir());
  { std::ofstream(cache.dir() / "file") << "x"; }
  ::setenv("OA_KERNEL_CACHE", (cache.dir() / "file" / "kernels").c_str(), 1);
  std::string log;
  {
    oa_test::stderr_capture err;
    CHECK(oa::cuda::compile(r.kernel, 9, 0).cubin == first.cubin);
    CHECK(!oa::cuda::compile(r.kernel, 9, 0).from_cache);
    log = err.text();
  }
  CHECK(log.find("kernel cache cannot be kept") != std::string::npos);
}
#endif
