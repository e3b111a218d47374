// Every call of calls.hpp instantiated for each element type: what the
// syntax checks with other compilers (clang++) compile.
#define STDPAR_CALLS stdpar_other_compiler
#include "calls.hpp"

template std::vector<double> stdpar_other_compiler::run<std::int32_t>(std::size_t);
template std::vector<double> stdpar_other_compiler::run<std::int64_t>(std::size_t);
template std::vector<double> stdpar_other_compiler::run<float>(std::size_t);
template std::vector<double> stdpar_other_compiler::run<double>(std::size_t);
