// Memset and copies between host and device memory, synchronous and
// enqueued on a stream. Ranges are validated when the call is made (so the
// error comes back right away); enqueued work re-checks only that its
// allocations were not freed meanwhile.
#ifndef CHIPDOCK_CPU_TRANSFER_H_
#define CHIPDOCK_CPU_TRANSFER_H_

#include <cstddef>
#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_cpu {

enum class Direction { kHostToDevice, kDeviceToHost, kDeviceToDevice };

void memory_set(int32_t device, void* ptr, int32_t value, size_t bytes);
void memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes,
                      cd_stream* stream);

void copy(Direction direction, int32_t device, void* dst, const void* src, size_t bytes);
void copy_async(Direction direction, int32_t device, void* dst, const void* src,
                size_t bytes, cd_stream* stream);

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_TRANSFER_H_
