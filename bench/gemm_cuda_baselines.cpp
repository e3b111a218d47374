#include "gemm_cuda_baselines.hpp"

#include <cublasXt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace oa_bench {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(s));
}

/// Device memory released on every path.
struct device_array {
  void* p = nullptr;
  explicit device_array(std::size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc (operands larger than the GPU?)"); }
  ~device_array() { cudaFree(p); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
};

template <class T, class Gemm>
double in_core(const T* a, const T* b, T* c, std::size_t n, Gemm gemm) {
  const std::size_t bytes = n * n * sizeof(T);
  device_array da(bytes), db(bytes), dc(bytes);
  check(cudaMemcpy(da.p, a, bytes, cudaMemcpyHostToDevice), "cudaMemcpy A");
  check(cudaMemcpy(db.p, b, bytes, cudaMemcpyHostToDevice), "cudaMemcpy B");
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  struct handle_guard {
    cublasHandle_t h;
    ~handle_guard() { cublasDestroy(h); }
  } guard{h};
  const T one = 1, zero = 0;
  const int ni = static_cast<int>(n);
  // One untimed product first: cuBLAS picks and loads its kernel.
  check(gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<const T*>(da.p), ni,
             static_cast<const T*>(db.p), ni, &zero, static_cast<T*>(dc.p), ni),
        "cuBLAS gemm");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const auto t0 = std::chrono::steady_clock::now();
  check(gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<const T*>(da.p), ni,
             static_cast<const T*>(db.p), ni, &zero, static_cast<T*>(dc.p), ni),
        "cuBLAS gemm");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check(cudaMemcpy(c, dc.p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy C");
  return s;
}

template <class T, class Gemm>
double xt(const T* a, const T* b, T* c, std::size_t n, Gemm gemm) {
  cublasXtHandle_t h = nullptr;
  check(cublasXtCreate(&h), "cublasXtCreate");
  struct handle_guard {
    cublasXtHandle_t h;
    ~handle_guard() { cublasXtDestroy(h); }
  } guard{h};
  int devices[] = {0};
  check(cublasXtDeviceSelect(h, 1, devices), "cublasXtDeviceSelect");
  const T one = 1, zero = 0;
  const auto t0 = std::chrono::steady_clock::now();
  check(gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n), "cublasXt gemm");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double cublas_in_core(const double* a, const double* b, double* c, std::size_t n) { return in_core(a, b, c, n, &cublasDgemm); }
double cublas_in_core(const float* a, const float* b, float* c, std::size_t n) { return in_core(a, b, c, n, &cublasSgemm); }
double cublasxt(const double* a, const double* b, double* c, std::size_t n) { return xt(a, b, c, n, &cublasXtDgemm); }
double cublasxt(const float* a, const float* b, float* c, std::size_t n) { return xt(a, b, c, n, &cublasXtSgemm); }

}  // namespace oa_bench
