// The calls of calls.hpp built as a plain program builds them: no oa.
#define STDPAR_CALLS stdpar_plain
#include "calls.hpp"

std::vector<double> plain_i32(std::size_t n) { return stdpar_plain::run<std::int32_t>(n); }
std::vector<double> plain_i64(std::size_t n) { return stdpar_plain::run<std::int64_t>(n); }
std::vector<double> plain_f32(std::size_t n) { return stdpar_plain::run<float>(n); }
std::vector<double> plain_f64(std::size_t n) { return stdpar_plain::run<double>(n); }
