// Errors inside the core. The core is C++ and may throw internally; only the
// Python binding turns an Error into an exception the user sees, and no
// exception ever crosses the plugin ABI (plugins return cd_error*).
#pragma once

#include <stdexcept>
#include <string>

#include "chipdock/cd_base.h"

namespace chipdock {

// Core-only status codes, beyond the ABI's CD_STATUS_* range.
constexpr cd_status_t kStatusPluginRefused = 1000;

class Error : public std::runtime_error {
 public:
  // `backend` is the backend name ("cpu") or "core"; `call` is the ABI slot
  // or API function that failed; `reason` says why.
  Error(cd_status_t code, std::string backend, std::string call, std::string reason);

  cd_status_t code() const noexcept { return code_; }
  const std::string& backend() const noexcept { return backend_; }
  const std::string& call() const noexcept { return call_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  cd_status_t code_;
  std::string backend_;
  std::string call_;
  std::string reason_;
};

// Shorthand for argument errors raised by the core itself.
[[noreturn]] void throw_invalid(const std::string& call, const std::string& reason);

const char* status_name(cd_status_t code) noexcept;

}  // namespace chipdock
