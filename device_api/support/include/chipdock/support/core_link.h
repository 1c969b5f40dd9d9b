// Backend support library, part of the chipdock backend kit (C++17).
//
// The core's services (cd_core_api), kept from the entry call so that
// kernels can be registered and messages logged later.
#ifndef CHIPDOCK_SUPPORT_CORE_LINK_H_
#define CHIPDOCK_SUPPORT_CORE_LINK_H_

#include <string>

#include "chipdock/cd_kernel.h"

namespace chipdock::support {

// Remembers `core` (valid until the library is unloaded, per the ABI).
void set_core(const cd_core_api* core) noexcept;

// The core's table, or NULL before the entry was called.
const cd_core_api* core() noexcept;

// True if the core's table is large enough to hold `slot_end` bytes
// (use CD_STRUCT_SIZE(cd_core_api, <slot>)). Older cores have smaller tables.
bool core_has(size_t slot_end) noexcept;

// Forwards `message` to the core's log if it has one. Never throws.
void log_message(cd_log_level_t level, const std::string& message) noexcept;

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_CORE_LINK_H_
