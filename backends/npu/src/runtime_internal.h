// What runtime_memory.cpp and runtime_streams.cpp share (not for kernels:
// those use runtime.h).
#ifndef CHIPDOCK_NPU_RUNTIME_INTERNAL_H_
#define CHIPDOCK_NPU_RUNTIME_INTERNAL_H_

#include <acl/acl.h>

#include <cstdint>
#include <functional>

#include "chipdock/device_api.h"

namespace chipdock_npu {

// The live stream behind `stream` (INVALID_ARGUMENT for NULL,
// INVALID_HANDLE for an unknown or destroyed one, INVALID_ARGUMENT when it
// belongs to another device than `device`), with its device's context bound.
aclrtStream bound_stream(cd_stream* stream, int32_t device, const char* what);

// Enqueues `work` on `stream` as the plug-in's own host callback: it runs
// after the work enqueued before it, on the callback mechanism's thread, and
// must not call the runtime (a failure is logged: nobody waits for it).
void enqueue_host_work(cd_stream* stream, std::function<void()> work);

// Refuses (INVALID_ARGUMENT) a call that would block the calling thread on
// `stream` from one of that stream's own host callbacks: the callback would
// wait for itself.
void refuse_inside_own_callback(cd_stream* stream, const char* call);

// plugin_shutdown's half for memory: waits for and frees the staging
// buffers of pageable uploads, frees what the core left allocated.
void release_memory() noexcept;

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_RUNTIME_INTERNAL_H_
