#pragma once
// oa-bench's JSON Lines output: one record per (run, mode).

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace oa_bench {

/// Appends one JSON object per line to --json's file.
class json_sink {
 public:
  explicit json_sink(const std::string& path) : path_(path), out_(path, std::ios::app) {
    if (!out_) throw std::runtime_error("--json: cannot open '" + path + "' for appending");
  }
  void write(const nlohmann::json& j) {
    out_ << j.dump() << '\n' << std::flush;
    if (!out_) throw std::runtime_error("--json: cannot write '" + path_ + "'");
  }

 private:
  std::string path_;
  std::ofstream out_;
};

/// This machine's name, for records.
inline std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace oa_bench
