#pragma once
// Error types of the runtime and the precondition macro that throws them.
//
// Every error names where it came from: the annotated function and the
// argument for bad input, the device and the operation for device failures.

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

namespace oa {

/// Base of every error the runtime throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input to an annotated call or a runtime API: names function and argument.
class invalid_argument : public error {
 public:
  invalid_argument(std::string function, std::string argument, const std::string& what)
      : error("oa: " + function + ": " + argument + ": " + what),
        function_(std::move(function)),
        argument_(std::move(argument)) {}
  const std::string& function() const noexcept { return function_; }
  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string function_;
  std::string argument_;
};

/// A configuration value that cannot be used (environment, JSON file or API).
class config_error : public error {
 public:
  using error::error;
};

/// The configured device cannot be made here (device 'cuda' without a usable
/// GPU): names the setting and the reason. Thrown where the device is first needed.
class device_unavailable : public config_error {
 public:
  using config_error::config_error;
};

/// The device cannot hold an allocation. The one error the engine recovers from
/// by itself (smaller chunks, fewer streams), see planner.
class device_out_of_memory : public error {
 public:
  device_out_of_memory(std::string device, std::size_t requested, std::size_t in_use, std::size_t budget)
      : error("oa: device '" + device + "': out of memory: requested " + std::to_string(requested) +
              " bytes with " + std::to_string(in_use) + " of " + std::to_string(budget) +
              " bytes in use"),
        requested_(requested) {}
  std::size_t requested() const noexcept { return requested_; }

 private:
  std::size_t requested_;
};

/// A device operation (copy or launch) that failed on the device. The engine
/// re-runs the affected chunk on the host. A sticky fault leaves the device
/// unusable (a CUDA kernel fault): later stages run on the host; after a
/// transient one the device keeps its work.
class device_fault : public error {
 public:
  explicit device_fault(const std::string& what, bool sticky = true) : error(what), sticky_(sticky) {}
  bool sticky() const noexcept { return sticky_; }

 private:
  bool sticky_;
};

/// The plan cannot be made: the budget cannot hold even one unit of a stage.
class plan_error : public error {
 public:
  using error::error;
};

/// A value whose computation was cancelled because a call it depends on failed.
class cancelled : public error {
 public:
  using error::error;
};

namespace detail {
[[noreturn]] void throw_invalid_argument(const char* function, const char* argument, const std::string& what);
/// The message of an exception (what() of a std::exception).
std::string message_of(const std::exception_ptr& e);
}  // namespace detail

}  // namespace oa

/// Precondition check: throws oa::invalid_argument naming function and argument.
#define OA_EXPECTS(cond, function, argument, what)                   \
  do {                                                               \
    if (!(cond)) ::oa::detail::throw_invalid_argument(function, argument, what); \
  } while (false)
