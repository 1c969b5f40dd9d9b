// The memory, copy, memset, stream, event and host-callback slots of the
// plug-in's table (device_api.h's cd_plugin_api), on AscendCL. plugin.cpp
// puts them into the table; each runs under guard("<slot>", ...) itself, so
// every message starts with the slot's name and no exception crosses the ABI.
//
// Implemented in runtime_memory.cpp (memory, memset, copies) and
// runtime_streams.cpp (streams, events, callbacks). Every slot binds the
// device's context first (bind_device, runtime.h).
#ifndef CHIPDOCK_NPU_RUNTIME_SLOTS_H_
#define CHIPDOCK_NPU_RUNTIME_SLOTS_H_

#include <cstddef>
#include <cstdint>

#include "chipdock/device_api.h"

namespace chipdock_npu {

// --- memory (runtime_memory.cpp) --------------------------------------------
cd_error* api_memory_allocate(int32_t device, size_t bytes, void** ptr) noexcept;
cd_error* api_memory_free(int32_t device, void* ptr) noexcept;
cd_error* api_host_memory_allocate(size_t bytes, void** ptr) noexcept;
cd_error* api_host_memory_free(void* ptr) noexcept;
cd_error* api_memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) noexcept;
cd_error* api_memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes,
                               cd_stream* stream) noexcept;
cd_error* api_memcpy_host_to_device(int32_t device, void* dst, const void* src, size_t bytes) noexcept;
cd_error* api_memcpy_device_to_host(int32_t device, void* dst, const void* src, size_t bytes) noexcept;
cd_error* api_memcpy_device_to_device(int32_t device, void* dst, const void* src, size_t bytes) noexcept;
cd_error* api_memcpy_host_to_device_async(int32_t device, void* dst, const void* src, size_t bytes,
                                          cd_stream* stream) noexcept;
cd_error* api_memcpy_device_to_host_async(int32_t device, void* dst, const void* src, size_t bytes,
                                          cd_stream* stream) noexcept;
cd_error* api_memcpy_device_to_device_async(int32_t device, void* dst, const void* src, size_t bytes,
                                            cd_stream* stream) noexcept;

// --- streams (runtime_streams.cpp) ------------------------------------------
cd_error* api_stream_create(int32_t device, uint32_t flags, cd_stream** stream) noexcept;
cd_error* api_stream_destroy(cd_stream* stream) noexcept;
cd_error* api_stream_synchronize(cd_stream* stream) noexcept;
cd_error* api_stream_query(cd_stream* stream, int32_t* is_complete) noexcept;
cd_error* api_stream_wait_event(cd_stream* stream, cd_event* event) noexcept;
cd_error* api_stream_add_host_callback(cd_stream* stream, cd_host_callback_fn fn, void* user_data) noexcept;

// --- events (runtime_streams.cpp) -------------------------------------------
cd_error* api_event_create(int32_t device, uint32_t flags, cd_event** event) noexcept;
cd_error* api_event_destroy(cd_event* event) noexcept;
cd_error* api_event_record(cd_event* event, cd_stream* stream) noexcept;
cd_error* api_event_synchronize(cd_event* event) noexcept;
cd_error* api_event_query(cd_event* event, int32_t* is_complete) noexcept;
cd_error* api_event_elapsed_time(cd_event* start, cd_event* end, float* milliseconds) noexcept;

// --- for runtime_devices.cpp -----------------------------------------------------
// device_synchronize's asynchronous error: after aclrtSynchronizeDevice, the
// first failure that work on `device`'s streams raised since the last check
// (a failed callback launch, a failed async copy), handed over once, or NULL.
cd_error* take_device_async_error(int32_t device) noexcept;

// --- lifecycle ----------------------------------------------------------------
// Called by plugin_shutdown (after the core released every stream, event and
// allocation): stops and joins the callback report thread, frees what the
// core left behind. Never throws.
void shutdown_runtime() noexcept;

}  // namespace chipdock_npu

#endif  // CHIPDOCK_NPU_RUNTIME_SLOTS_H_
