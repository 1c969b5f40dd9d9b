#include "error.hpp"

namespace chipdock {

Error::Error(cd_status_t code, std::string backend, std::string call, std::string reason)
    : std::runtime_error("[" + backend + "] " + call + ": " + reason),
      code_(code),
      backend_(std::move(backend)),
      call_(std::move(call)),
      reason_(std::move(reason)) {}

void throw_invalid(const std::string& call, const std::string& reason) {
  throw Error(CD_STATUS_INVALID_ARGUMENT, "core", call, reason);
}

const char* status_name(cd_status_t code) noexcept {
  switch (code) {
    case CD_STATUS_OK: return "OK";
    case CD_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case CD_STATUS_INVALID_HANDLE: return "INVALID_HANDLE";
    case CD_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case CD_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case CD_STATUS_NOT_READY: return "NOT_READY";
    case CD_STATUS_DEVICE_ERROR: return "DEVICE_ERROR";
    case CD_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case CD_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case CD_STATUS_INTERNAL: return "INTERNAL";
    case kStatusPluginRefused: return "PLUGIN_REFUSED";
    default: return "UNKNOWN";
  }
}

}  // namespace chipdock
