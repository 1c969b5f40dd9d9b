// The device slots' work on AscendCL (runtime_devices.cpp); plugin.cpp puts
// them into the table under guard(). bind_device() and device_count() are
// in runtime.h, for every other part of the plug-in.
#ifndef CHIPDOCK_NPU_RUNTIME_DEVICES_H_
#define CHIPDOCK_NPU_RUNTIME_DEVICES_H_

#include <cstddef>
#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_npu {

// The device count; throws UNAVAILABLE with the reason when CANN is absent,
// incomplete or outside the supported range (device_get_count's contract).
int32_t checked_device_count();

// device_get_properties: name "<soc>" ("<soc> (<describe>)" on the test
// double), vendor "Huawei", architecture the SoC, runtime "CANN <version>".
void fill_properties(int32_t device, cd_device_properties* props);

// The calling thread's current device (0 until set); setting binds the context.
void set_current_device(int32_t device);
int32_t current_device() noexcept;

// aclrtSynchronizeDevice, then the first asynchronous error the device's
// streams raised since the last check (handed over), or NULL.
cd_error* synchronize_device(int32_t device);

// aclrtGetMemInfo(ACL_HBM_MEM).
void memory_info(int32_t device, size_t* free_bytes, size_t* total_bytes);

// plugin_shutdown's last step: resets the devices this plug-in set and
// finalizes AscendCL if this plug-in initialized it. Never throws.
void shutdown_devices() noexcept;

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_RUNTIME_DEVICES_H_
