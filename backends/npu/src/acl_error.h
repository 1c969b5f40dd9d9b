// AscendCL, aclnn and HCCL failures as chipdock errors. Every message names
// the call, the code, the code's name and aclGetRecentErrMsg() (or
// HcclGetErrorString), e.g.
//   "aclrtMalloc failed: 207001 ACL_ERROR_RT_MEMORY_ALLOCATION (EL0004: ...)".
#ifndef CHIPDOCK_NPU_ACL_ERROR_H_
#define CHIPDOCK_NPU_ACL_ERROR_H_

#include <cstdint>

#include "chipdock/cd_base.h"

namespace chipdock_npu {

// The name of an aclError / aclnnStatus code ("ACL_ERROR_RT_MEMORY_ALLOCATION",
// "ACLNN_ERR_PARAM_INVALID"), or "unknown error".
const char* acl_error_name(int32_t code) noexcept;

// The chipdock status an ACL/aclnn code maps to (memory codes ->
// OUT_OF_MEMORY, parameter codes -> INVALID_ARGUMENT, ... -> DEVICE_ERROR).
cd_status_t acl_error_status(int32_t code) noexcept;

// Throws chipdock::support::Error when `code` is not success.
void check_acl(int32_t code, const char* call);     // aclError
void check_aclnn(int32_t code, const char* call);   // aclnnStatus
void check_hccl(int32_t code, const char* call);    // HcclResult

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_ACL_ERROR_H_
