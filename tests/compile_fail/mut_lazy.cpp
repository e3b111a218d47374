// Must not compile: a mut argument takes the caller's object, not a lazy value.
#include <vector>

#include "mut_scale.hpp"

int main() {
  oa::lazy<std::vector<double>> x = oa::hold(std::vector<double>(10, 1.0));
  scale(x, 2.0);
  return 0;
}
