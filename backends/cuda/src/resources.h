// Streams, events, device allocations and pinned host memory: the plugin's
// handles wrap CUDA objects, and registries of live handles and allocations
// let slots report a destroyed handle or a foreign pointer as an error
// instead of crashing inside the driver.
#ifndef CHIPDOCK_CUDA_RESOURCES_H_
#define CHIPDOCK_CUDA_RESOURCES_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "chipdock/device_api.h"

struct cd_stream {
  int32_t device;
  cudaStream_t stream;
};

struct cd_event {
  int32_t device;
  uint32_t flags;
  cudaEvent_t event;
  std::atomic<bool> recorded;  // elapsed_time refuses an event never recorded
};

namespace chipdock_cuda {

// Stream and event handles: validated against the live set (throws
// INVALID_ARGUMENT for NULL, INVALID_HANDLE for unknown/destroyed).
cd_stream* stream_create(int32_t device, uint32_t flags);
void stream_destroy(cd_stream* stream);
cd_stream* live_stream(cd_stream* stream);
cd_event* event_create(int32_t device, uint32_t flags);
void event_destroy(cd_event* event);
cd_event* live_event(cd_event* event);
void destroy_all();  // plugin_shutdown: whatever the core leaked

// Device allocations. check_range throws OUT_OF_RANGE when [ptr, ptr+bytes)
// is not inside one live allocation of `device`.
void* memory_allocate(int32_t device, size_t bytes);
void memory_free(int32_t device, void* ptr);
void check_range(int32_t device, const void* ptr, size_t bytes, const char* what);

// Page-locked host memory (cudaMallocHost).
void* host_memory_allocate(size_t bytes);
void host_memory_free(void* ptr);

// A private non-blocking stream of `device` for the synchronous slots, so
// they neither wait for nor are waited on by the caller's streams.
cudaStream_t sync_stream(int32_t device);

// A device's cuBLASLt state (kernels/blas.cu): one handle and one workspace,
// made on first use (with `device` current) and released by destroy_all.
// Whoever enqueues work that uses the workspace holds `mutex` meanwhile and
// orders its stream after `last_use` (recorded by the previous user), so two
// streams never use the workspace at once.
struct BlasDevice {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaEvent_t last_use = nullptr;
  cudaStream_t last_stream = nullptr;
};
BlasDevice& blas_device(int32_t device);

}  // namespace chipdock_cuda

#endif  // CHIPDOCK_CUDA_RESOURCES_H_
