// Eigen with EIGEN_USE_BLAS calls dgemm_/sgemm_ (and dgemv_/sgemv_ when a
// side is a vector): defined here to forward to NVBLAS's (the CPU BLAS's for
// gemv), loaded with dlopen when the mode first runs, so that no other run
// of oa-bench loads NVBLAS or reads its configuration. This unit has its own
// copy of Eigen's templates (the rest of oa-bench calls no BLAS).
#define Eigen oa_bench_eigen_nvblas
#define EIGEN_USE_BLAS
#include <dlfcn.h>
#include <unistd.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>

#include "gemm_nvblas.hpp"

namespace {

using dgemm_fn = void (*)(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
                          const int*, const double*, const int*, const double*, double*, const int*);
using sgemm_fn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                          const int*, const float*, const int*, const float*, float*, const int*);
using dgemv_fn = void (*)(const char*, const int*, const int*, const double*, const double*, const int*, const double*,
                          const int*, const double*, double*, const int*);
using sgemv_fn = void (*)(const char*, const int*, const int*, const float*, const float*, const int*, const float*,
                          const int*, const float*, float*, const int*);
dgemm_fn nv_dgemm = nullptr;
sgemm_fn nv_sgemm = nullptr;
dgemv_fn cpu_dgemv = nullptr;  // Eigen's products of a vector: NVBLAS leaves those to the CPU BLAS
sgemv_fn cpu_sgemv = nullptr;

std::string cpu_blas() {
  if (const char* p = std::getenv("OA_BENCH_CPU_BLAS"); p && *p) return p;
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
                        "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", "/usr/lib/x86_64-linux-gnu/libblas.so.3",
                        "/usr/lib64/libopenblas.so.0", "/usr/lib64/libblas.so.3"})
    if (::access(p, R_OK) == 0) return p;
  throw std::runtime_error(
      "NVBLAS needs a CPU BLAS library for NVBLAS_CPU_BLAS_LIB: none found; set OA_BENCH_CPU_BLAS to one "
      "(libopenblas.so, libblas.so.3)");
}

/// Writes an NVBLAS configuration for GPU 0 and loads NVBLAS, once.
void load_nvblas() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    try {
      const std::string conf = "/tmp/oa-bench-nvblas-" + std::to_string(::getpid()) + ".conf";
      const std::string cpu = cpu_blas();
      std::ofstream f(conf);
      f << "NVBLAS_CPU_BLAS_LIB " << cpu << "\nNVBLAS_GPU_LIST 0\nNVBLAS_AUTOPIN_MEM_ENABLED\n";
      if (!f) throw std::runtime_error("cannot write " + conf);
      f.close();
      ::setenv("NVBLAS_CONFIG_FILE", conf.c_str(), 1);
      void* lib = ::dlopen("libnvblas.so", RTLD_NOW | RTLD_LOCAL);
      if (!lib) lib = ::dlopen("libnvblas.so.13", RTLD_NOW | RTLD_LOCAL);
      if (!lib) throw std::runtime_error(std::string("cannot load NVBLAS: ") + ::dlerror());
      nv_dgemm = reinterpret_cast<dgemm_fn>(::dlsym(lib, "dgemm_"));
      nv_sgemm = reinterpret_cast<sgemm_fn>(::dlsym(lib, "sgemm_"));
      if (!nv_dgemm || !nv_sgemm) throw std::runtime_error("NVBLAS has no dgemm_/sgemm_");
      void* cpu_lib = ::dlopen(cpu.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!cpu_lib) throw std::runtime_error("cannot load the CPU BLAS " + cpu + ": " + ::dlerror());
      cpu_dgemv = reinterpret_cast<dgemv_fn>(::dlsym(cpu_lib, "dgemv_"));
      cpu_sgemv = reinterpret_cast<sgemv_fn>(::dlsym(cpu_lib, "sgemv_"));
      if (!cpu_dgemv || !cpu_sgemv) throw std::runtime_error("the CPU BLAS " + cpu + " has no dgemv_/sgemv_");
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw std::runtime_error(failure);
}

template <class S>
double product(const S* a, const S* b, S* c, std::size_t n) {
  load_nvblas();
  using mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const auto N = static_cast<Eigen::Index>(n);
  const auto t0 = std::chrono::steady_clock::now();
  Eigen::Map<mat>(c, N, N).noalias() = Eigen::Map<const mat>(a, N, N) * Eigen::Map<const mat>(b, N, N);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {
int dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
           const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
           const int* ldc) {
  nv_dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return 0;
}
int sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
           const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
           const int* ldc) {
  nv_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return 0;
}
int dgemv_(const char* t, const int* m, const int* n, const double* alpha, const double* a, const int* lda,
           const double* x, const int* incx, const double* beta, double* y, const int* incy) {
  cpu_dgemv(t, m, n, alpha, a, lda, x, incx, beta, y, incy);
  return 0;
}
int sgemv_(const char* t, const int* m, const int* n, const float* alpha, const float* a, const int* lda,
           const float* x, const int* incx, const float* beta, float* y, const int* incy) {
  cpu_sgemv(t, m, n, alpha, a, lda, x, incx, beta, y, incy);
  return 0;
}
}

namespace oa_bench {
double nvblas_product(const double* a, const double* b, double* c, std::size_t n) { return product(a, b, c, n); }
double nvblas_product(const float* a, const float* b, float* c, std::size_t n) { return product(a, b, c, n); }
}  // namespace oa_bench
