// Must not compile: a mut argument updates the caller's object; a temporary
// that owns its elements (a std::vector) has no caller to see the update. (A
// temporary std::span, a view of the caller's storage, is taken: the
// runtime tests of test_overwrite.cpp pass them.)
#include <vector>

#include "mut_scale.hpp"

int main() {
  scale(std::vector<double>(10, 1.0), 2.0);
  return 0;
}
