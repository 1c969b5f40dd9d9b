// Errors: formatting, construction, and the mapping from C++ exceptions to
// cd_error (see error.h).
#include "chipdock/support/error.h"

#include <cstdarg>
#include <cstdio>
#include <system_error>

namespace chipdock::support {
namespace {

std::string vformat(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(&out[0], out.size(), fmt, args);
  out.resize(static_cast<size_t>(n));
  return out;
}

// Returned when the error object itself cannot be allocated. The caller
// still "owns" it by the ABI's rule; error_destroy recognises and keeps it.
cd_error g_static_oom{CD_STATUS_OUT_OF_MEMORY,
                      "out of host memory while reporting an error", true};

}  // namespace

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vformat(fmt, args);
  va_end(args);
  return out;
}

void fail(cd_status_t code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string detail = vformat(fmt, args);
  va_end(args);
  throw Error(code, std::move(detail));
}

cd_error* make_error(cd_status_t code, const std::string& message) noexcept {
  try {
    return new cd_error{code, message, false};
  } catch (...) {
    return &g_static_oom;
  }
}

cd_error* error_from_current_exception(const char* where) noexcept {
  // Building the message may itself throw bad_alloc; make_error's fallback
  // then covers us, so nothing escapes.
  try {
    const std::string prefix = std::string(where) + ": ";
    try {
      throw;
    } catch (const Error& e) {
      return make_error(e.code(), prefix + e.what());
    } catch (const std::bad_alloc&) {
      return make_error(CD_STATUS_OUT_OF_MEMORY, prefix + "out of host memory");
    } catch (const std::system_error& e) {
      // Thread creation and mutexes report resource exhaustion this way.
      return make_error(CD_STATUS_DEVICE_ERROR, prefix + "system error: " + e.what());
    } catch (const std::exception& e) {
      return make_error(CD_STATUS_INTERNAL, prefix + "internal error: " + e.what());
    } catch (...) {
      return make_error(CD_STATUS_INTERNAL, prefix + "internal error: unknown exception");
    }
  } catch (...) {
    return &g_static_oom;
  }
}

}  // namespace chipdock::support
