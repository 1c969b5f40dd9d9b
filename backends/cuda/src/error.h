// Errors inside the plugin: the kit's backend-support library
// (chipdock/support/error.h, shared by every C++ backend) brought into this
// backend's namespace.
#ifndef CHIPDOCK_CUDA_ERROR_H_
#define CHIPDOCK_CUDA_ERROR_H_

#include "chipdock/support/error.h"

namespace chipdock_cuda {
using chipdock::support::Error;
using chipdock::support::error_from_current_exception;
using chipdock::support::fail;
using chipdock::support::format;
using chipdock::support::guard;
using chipdock::support::make_error;
using chipdock::support::require_non_null;
}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_ERROR_H_
