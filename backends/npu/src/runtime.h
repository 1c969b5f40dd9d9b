// The plug-in's runtime objects as kernels and collectives see them: the
// AscendCL stream behind a cd_stream, and the device's context bound to the
// calling thread. Implemented in runtime_streams.cpp / runtime_devices.cpp.
#ifndef CHIPDOCK_NPU_RUNTIME_H_
#define CHIPDOCK_NPU_RUNTIME_H_

#include <acl/acl.h>

#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_npu {

// The AscendCL stream of `stream` (throws INVALID_HANDLE for an unknown or
// destroyed one). Kernels enqueue on it.
aclrtStream native_stream(cd_stream* stream);

// The device ordinal `stream` belongs to.
int32_t stream_device(cd_stream* stream);

// Makes `device`'s context (one per device, shared by every thread) current
// on the calling thread; every slot that touches a device calls it first.
void bind_device(int32_t device);

// Number of devices (0 without CANN); never throws.
int32_t device_count() noexcept;

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_RUNTIME_H_
