#pragma once
// What a block of code writes on stderr: file descriptor 2 itself, so the
// runtime's fprintf(stderr, ...) lines and std::cerr alike, sent to a
// temporary file while the capture lasts.

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>

namespace oa_test {

class stderr_capture {
 public:
  stderr_capture() : file_(std::tmpfile()) {
    if (!file_) throw std::runtime_error("stderr_capture: no temporary file");
    flush();
    saved_ = ::dup(STDERR_FILENO);
    if (saved_ < 0 || ::dup2(::fileno(file_), STDERR_FILENO) < 0)
      throw std::runtime_error("stderr_capture: cannot redirect stderr");
  }
  stderr_capture(const stderr_capture&) = delete;
  stderr_capture& operator=(const stderr_capture&) = delete;
  ~stderr_capture() {
    restore();
    std::fclose(file_);
  }

  /// Ends the capture; everything written on stderr since it began.
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  static void flush() {
    std::cerr.flush();
    std::fflush(stderr);
  }
  void restore() {
    if (saved_ < 0) return;
    flush();
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }

  std::FILE* file_;
  int saved_ = -1;
};

}  // namespace oa_test
