// Devices: count, ordinal checks, properties, the per-thread current device
// and device-wide synchronization. Every device is the host CPU; they differ
// only by ordinal (and by their separate memory accounting).
#ifndef CHIPDOCK_CPU_DEVICE_H_
#define CHIPDOCK_CPU_DEVICE_H_

#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_cpu {

// Number of devices. Throws UNAVAILABLE when the environment is invalid.
int32_t device_count();

// Throws INVALID_ARGUMENT unless `device` is in [0, device_count).
void check_device(int32_t device);

// Fills the fields of `props` that lie within props->struct_size.
void get_properties(int32_t device, cd_device_properties* props);

// The calling thread's current device (0 until set).
void set_current_device(int32_t device);
int32_t current_device();

// Waits for every live stream of `device`; returns the first asynchronous
// error found (ownership to the caller) or NULL.
cd_error* synchronize_device(int32_t device);

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_DEVICE_H_
