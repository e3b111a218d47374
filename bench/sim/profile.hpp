#pragma once
// A GPU's profile: every parameter with its value, unit and provenance
// (measured, fitted or assumed) and where it comes from.

#include <map>
#include <string>
#include <vector>

namespace oa_sim {

struct parameter {
  double value = 0;
  std::string unit;
  std::string provenance;  // measured | fitted | assumed
  std::string source;      // the record, fit or reasoning behind the value
};

struct profile {
  std::string name;
  std::string path;
  std::map<std::string, parameter> params;

  /// The value of `key`; throws std::invalid_argument naming the profile and key when absent.
  double operator[](const std::string& key) const;
  void set(const std::string& key, double value, const std::string& provenance, const std::string& source);
};

/// Reads a profile written by save_profile (or by hand); throws
/// std::runtime_error naming the file for a missing file, bad JSON, or a
/// parameter without value or with an unknown provenance.
profile load_profile(const std::string& path);
void save_profile(const profile& p, const std::string& path);

/// The parameters every model reads; load_profile checks they are present.
const std::vector<std::string>& required_parameters();

}  // namespace oa_sim
