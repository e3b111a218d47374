// An Eigen program built with oa_offload(... PINNED_ALLOCATIONS PINNED_MIN
// 65536): float and double matrices and arrays of 64 KiB or more live in the
// pinned pool, smaller ones and other scalars in ordinary memory, and every
// block goes back where it came from.
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <oa/core/pinned.hpp>
#include <utility>

#include "support.hpp"

namespace {

std::size_t in_use() { return oa::pinned_memory().stats().in_use_bytes; }

template <class X>
bool pinned(const X& x) {
  return oa::is_pinned(x.data(), sizeof(typename X::Scalar) * static_cast<std::size_t>(x.size())) &&
         oa::pinned_memory().owns(x.data());
}

}  // namespace

TEST_CASE("PINNED_ALLOCATIONS: large float and double storage comes from the pool") {
  const std::size_t before = in_use();
  {
    Eigen::MatrixXd a = Eigen::MatrixXd::Random(300, 300);  // 720 KB
    CHECK(pinned(a));
    Eigen::ArrayXf f = Eigen::ArrayXf::Constant(100000, 2.0f);  // 400 KB
    CHECK(pinned(f));
    Eigen::ArrayXd at(8192);  // 64 KiB: the threshold
    CHECK(pinned(at));
    Eigen::ArrayXd below(8191);
    CHECK_FALSE(oa::is_pinned(below.data(), 8));
    Eigen::VectorXd small(100);
    CHECK_FALSE(oa::is_pinned(small.data(), 8));
    Eigen::Matrix<int, Eigen::Dynamic, Eigen::Dynamic> ints(300, 300);  // float and double only
    CHECK_FALSE(oa::is_pinned(ints.data(), 4));
    CHECK(in_use() >= before + 720000 + 400000 + 65536);

    // Computed into pinned memory, through the hooks, as Eigen computes it.
    const Eigen::MatrixXd b = Eigen::MatrixXd::Random(300, 300);
    const Eigen::MatrixXd c = a * b;
    CHECK(pinned(c));
    CHECK((c - a.lazyProduct(b)).norm() <= 1e-10 * c.norm());
    const Eigen::ArrayXf g = f * 3.0f + 1.0f;
    CHECK(pinned(g));
    CHECK(g(99999) == 7.0f);

    // Moved and swapped storage keeps its block; it is freed once.
    Eigen::MatrixXd moved = std::move(a);
    CHECK(pinned(moved));
    Eigen::MatrixXd other = Eigen::MatrixXd::Zero(400, 400);
    moved.swap(other);
    CHECK(pinned(moved));
    CHECK(pinned(other));
  }
  CHECK(in_use() == before);  // every block went back to the pool
}

TEST_CASE("PINNED_ALLOCATIONS: resizing moves storage into and out of the pool, keeping coefficients") {
  const std::size_t before = in_use();
  Eigen::ArrayXd a = Eigen::ArrayXd::LinSpaced(100, 0, 99);
  CHECK_FALSE(oa::is_pinned(a.data(), 8));
  a.conservativeResize(100000);  // grows into the pool
  CHECK(pinned(a));
  CHECK(a(0) == 0.0);
  CHECK(a(99) == 99.0);
  a.tail(99900).setConstant(-1);
  a.conservativeResize(200000);  // pool to pool
  CHECK(pinned(a));
  CHECK(a(99) == 99.0);
  CHECK(a(99999) == -1.0);
  a.conservativeResize(50);  // shrinks out of it
  CHECK_FALSE(oa::is_pinned(a.data(), 8));
  CHECK(a(49) == 49.0);
  CHECK(in_use() == before);
  a.resize(300000);
  CHECK(pinned(a));
  a.resize(10);
  CHECK_FALSE(oa::is_pinned(a.data(), 8));
  a.resize(0);
  CHECK(in_use() == before);
}

TEST_CASE("PINNED_ALLOCATIONS: the devices' staging slots are oa's own, not counted as the program's blocks") {
  // Pageable operands (below PINNED_MIN) go through the emulated device's
  // staging engine, whose pinned slots stay with the device: the program's
  // pool sees none of them (on a GPU, the default device's the same way).
  oa::config c = oa_test::emulated_config(std::size_t{1} << 20);
  c.offload_gemm_min = 0;
  oa_test::config_scope cs(c);
  const std::size_t before = in_use();
  {
    const Eigen::MatrixXd a = Eigen::MatrixXd::Random(90, 90), b = Eigen::MatrixXd::Random(90, 90);  // 64800 bytes
    CHECK_FALSE(oa::is_pinned(a.data(), 8));
    const Eigen::MatrixXd p = a * b;
    CHECK((p - a.lazyProduct(b)).norm() <= 1e-12 * p.norm());
    bool staged = false;
    for (const auto& r : oa::reports()) staged |= r.op == "gemm" && r.device == "emulated";
    CHECK(staged);
  }
  CHECK(in_use() == before);
}
