// CUDA errors are classified without a GPU: sticky ones (a kernel fault
// corrupts the context) end the device; the others are errors of the call.

#include <doctest/doctest.h>

#include "oa/cuda/error.hpp"

using oa::cuda::detail::is_sticky;
using oa::cuda::detail::throw_cuda;

TEST_CASE("kernel faults and a lost device are sticky; misuse and resource errors are not") {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
                        cudaErrorIllegalInstruction, cudaErrorAssert, cudaErrorECCUncorrectable, cudaErrorNoDevice}) {
    CAPTURE(static_cast<int>(e));
    CHECK(is_sticky(e));
  }
  for (cudaError_t e : {cudaErrorInvalidValue, cudaErrorLaunchOutOfResources, cudaErrorMemoryAllocation,
                        cudaErrorInvalidResourceHandle, cudaErrorNotReady, cudaErrorInvalidConfiguration}) {
    CAPTURE(static_cast<int>(e));
    CHECK_FALSE(is_sticky(e));
  }
  CHECK(is_sticky(CUBLAS_STATUS_EXECUTION_FAILED));
  CHECK_FALSE(is_sticky(CUBLAS_STATUS_INVALID_VALUE));
}

TEST_CASE("a sticky error throws a device fault, another an ordinary error naming the call") {
  try {
    throw_cuda(cudaErrorIllegalAddress, "cudaMemcpyAsync(...)", "here.cpp", 7);
    FAIL("no exception");
  } catch (const oa::cuda::cuda_fault& e) {
    CHECK(e.code() == static_cast<int>(cudaErrorIllegalAddress));
    CHECK(std::string(e.what()).find("cudaMemcpyAsync") != std::string::npos);
    CHECK(std::string(e.what()).find("cannot be used any more") != std::string::npos);
  }
  try {
    throw_cuda(cudaErrorInvalidValue, "cudaMemcpyAsync(...)", "here.cpp", 7);
    FAIL("no exception");
  } catch (const oa::device_fault&) {
    FAIL("a misuse must not end the device");
  } catch (const oa::cuda::cuda_error& e) {
    CHECK(e.code() == static_cast<int>(cudaErrorInvalidValue));
    CHECK(std::string(e.what()).find("cudaErrorInvalidValue") != std::string::npos);
  }
}
