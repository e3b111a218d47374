#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>

// The tests compile kernels with NVRTC to check them; they leave the user's
// kernel cache alone (unless OA_KERNEL_CACHE names one).
static const int kernel_cache_off = [] { return ::setenv("OA_KERNEL_CACHE", "off", 0); }();
