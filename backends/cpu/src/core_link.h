// The core's services, kept from the entry call: the kit's backend-support
// library (chipdock/support/core_link.h) brought into this backend's namespace.
#ifndef CHIPDOCK_CPU_CORE_LINK_H_
#define CHIPDOCK_CPU_CORE_LINK_H_

#include "chipdock/support/core_link.h"

namespace chipdock_cpu {
using chipdock::support::core;
using chipdock::support::core_has;
using chipdock::support::log_message;
using chipdock::support::set_core;
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_CORE_LINK_H_
