// Backend support library, part of the chipdock backend kit (C++17).
//
// Errors: the plugin's cd_error object, the C++ exception used inside the
// plugin, and `guard`, which turns every exception into a cd_error at the
// ABI boundary. Every C++ backend needs exactly this, so the kit ships it
// (link chipdock::backend_support; its sources compile into the backend with
// the backend's own flags and hidden visibility).
//
// Inside the plugin a failure is thrown as `Error` (code + detail). A
// backend's slot trampolines run each slot under `guard("<slot>", ...)`, which
// catches everything and prefixes the slot name, so every message reads
// "memcpy_host_to_device: <detail>" and no exception ever crosses the ABI.
#ifndef CHIPDOCK_SUPPORT_ERROR_H_
#define CHIPDOCK_SUPPORT_ERROR_H_

#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "chipdock/cd_base.h"

// The ABI's opaque error type (declared in cd_base.h, defined by each plugin).
struct cd_error {
  cd_status_t code;
  std::string message;
  bool is_static;  // the out-of-memory fallback below, never deleted
};

namespace chipdock::support {

// Thrown inside the plugin; caught by `guard` or by a stream worker.
class Error : public std::exception {
 public:
  Error(cd_status_t code, std::string detail) : code_(code), detail_(std::move(detail)) {}
  cd_status_t code() const noexcept { return code_; }
  const char* what() const noexcept override { return detail_.c_str(); }

 private:
  cd_status_t code_;
  std::string detail_;
};

// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Throws Error(code, formatted detail).
[[noreturn]] void fail(cd_status_t code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

// A new cd_error owned by the caller. Never throws: if even the error cannot
// be allocated it returns a static out-of-memory error that error_destroy
// knows not to free.
cd_error* make_error(cd_status_t code, const std::string& message) noexcept;

// The cd_error for the exception currently being handled, message prefixed
// with `where`. Call only inside a catch block.
cd_error* error_from_current_exception(const char* where) noexcept;

// Throws INVALID_ARGUMENT if `p` is NULL ("<name> is NULL").
template <typename T>
void require_non_null(const T* p, const char* name) {
  if (p == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "%s is NULL", name);
}

// Runs `body` and converts its outcome into the ABI's error convention:
// NULL on success, a new cd_error on any exception. `body` may return void
// or a cd_error* (already made, e.g. an asynchronous error being handed
// over), which is passed through.
template <typename Body>
cd_error* guard(const char* where, Body&& body) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return nullptr;
    } else {
      return body();
    }
  } catch (...) {
    return error_from_current_exception(where);
  }
}

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_ERROR_H_
