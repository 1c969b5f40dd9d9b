// The AscendCL, nnopbase and HCCL functions the plug-in calls, resolved at
// run time from the vendor libraries (never linked: a machine without CANN
// must still import chipdock and see the reason).
//
// Prototypes come from the real headers (the torch-npu wheel's
// torch_npu/include, fetched at build time, or a CANN install's with
// -DCHIPDOCK_NPU_CANN_INCLUDE=): every pointer below is declared with
// decltype of the real function, so a signature that drifts fails to compile.
// aclnn's own functions are not in those headers; they are declared in
// aclnn_api.h (ours) and resolved per op by the kernel registry.
#ifndef CHIPDOCK_NPU_ACL_API_H_
#define CHIPDOCK_NPU_ACL_API_H_

#include <acl/acl.h>
#include <hccl/hccl.h>

#include <string>

#include "aclnn_api.h"

namespace chipdock_npu {

// libascendcl.so: functions without which the backend cannot run.
#define CD_NPU_ACL_REQUIRED(X)                                                                 \
  X(aclInit) X(aclFinalize) X(aclrtSetDevice) X(aclrtResetDevice) X(aclrtGetDeviceCount)       \
  X(aclrtSetCurrentContext) X(aclrtGetCurrentContext) X(aclrtGetSocName) X(aclrtGetMemInfo)    \
  X(aclrtMalloc) X(aclrtFree) X(aclrtMallocHost) X(aclrtFreeHost) X(aclrtMemcpy)               \
  X(aclrtMemcpyAsync) X(aclrtMemset) X(aclrtMemsetAsync) X(aclrtCreateStreamWithConfig)        \
  X(aclrtDestroyStream) X(aclrtSynchronizeStream) X(aclrtStreamQuery) X(aclrtSynchronizeDevice) \
  X(aclrtCreateEventWithFlag) X(aclrtDestroyEvent) X(aclrtRecordEvent)                         \
  X(aclrtQueryEventStatus) X(aclrtSynchronizeEvent) X(aclrtStreamWaitEvent)                    \
  X(aclrtEventElapsedTime) X(aclrtSubscribeReport) X(aclrtUnSubscribeReport)                   \
  X(aclrtLaunchCallback) X(aclrtProcessReport) X(aclGetRecentErrMsg) X(aclrtGetVersion)

// libascendcl.so: newer or optional functions (NULL when the runtime lacks them).
#define CD_NPU_ACL_OPTIONAL(X) X(aclrtLaunchHostFunc) X(aclsysGetVersionStr) X(aclrtGetDeviceInfo)

// libnnopbase.so: aclnn's descriptors (declared in aclnn_api.h).
#define CD_NPU_NNOPBASE(X)                                                                     \
  X(aclCreateTensor) X(aclDestroyTensor) X(aclCreateScalar) X(aclDestroyScalar)              \
  X(aclCreateIntArray) X(aclDestroyIntArray) X(aclCreateFloatArray) X(aclDestroyFloatArray)  \
  X(aclCreateBoolArray) X(aclDestroyBoolArray) X(aclCreateTensorList) X(aclDestroyTensorList)

// libhccl.so (NULL when HCCL is absent: collectives then report why).
#define CD_NPU_HCCL(X)                                                                         \
  X(HcclGetRootInfo) X(HcclCommInitRootInfo) X(HcclCommDestroy) X(HcclAllReduce)             \
  X(HcclBroadcast) X(HcclReduce) X(HcclAllGather) X(HcclReduceScatter) X(HcclSend)           \
  X(HcclRecv) X(HcclGetErrorString) X(HcclGetCommAsyncError) X(HcclGetRankSize)              \
  X(HcclGetRankId)
#define CD_NPU_HCCL_OPTIONAL(X) X(HcclGroupStart) X(HcclGroupEnd) X(HcclBatchSendRecv)

#define CD_NPU_DECLARE_POINTER_(name) decltype(&::name) name = nullptr;

// The resolved AscendCL runtime. `describe` is the simulated runtime's
// self-description ("simulated Ascend runtime (test double)"), or empty for
// a real CANN: every check, doctor and report line quotes it when set.
struct AclApi {
  CD_NPU_ACL_REQUIRED(CD_NPU_DECLARE_POINTER_)
  CD_NPU_ACL_OPTIONAL(CD_NPU_DECLARE_POINTER_)
  CD_NPU_NNOPBASE(CD_NPU_DECLARE_POINTER_)
  std::string library_path;    // the libascendcl.so that was opened
  std::string cann_version;    // aclsysGetVersionStr's, e.g. "8.3.RC1"
  std::string describe;        // non-empty only for the test double
};

struct HcclApi {
  CD_NPU_HCCL(CD_NPU_DECLARE_POINTER_)
  CD_NPU_HCCL_OPTIONAL(CD_NPU_DECLARE_POINTER_)
  std::string library_path;
};

#undef CD_NPU_DECLARE_POINTER_

// The runtime, loaded and version-checked on first use (thread-safe). Throws
// chipdock::support::Error(CD_STATUS_UNAVAILABLE, reason) when CANN is
// absent, incomplete or outside the declared range; the reason names what
// was looked for, where, and both versions.
const AclApi& acl();

// HCCL, loaded on first use; throws UNAVAILABLE with the reason if absent.
const HcclApi& hccl();

// The op libraries' handle for dlsym of aclnnXxx symbols (libopapi.so or
// CANN >= 8.5's split libopapi_*.so); empty when none could be opened.
// `where` receives the libraries that were searched (for reasons).
void* opapi_symbol(const char* name, std::string* where);

// The runtime's explanation of the last failure on this thread
// (aclGetRecentErrMsg), or "" when it has none.
std::string recent_error_message();

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_ACL_API_H_
