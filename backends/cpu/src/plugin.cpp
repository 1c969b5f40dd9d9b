// The plugin's entry point and its function table.
//
// Each slot is a noexcept trampoline that runs the real work under
// guard("<slot>", ...): arguments are checked, every C++ exception becomes a
// cd_error whose message starts with the slot name, and out-pointers are
// written only on success.
#include <type_traits>

#include "chipdock/device_api.h"
#include "core_link.h"
#include "device.h"
#include "error.h"
#include "event.h"
#include "kernels/kernels.h"
#include "memory.h"
#include "pinned.h"
#include "stream.h"
#include "transfer.h"

#ifndef CHIPDOCK_CPU_VERSION
#error "CHIPDOCK_CPU_VERSION must be defined by the build (see CMakeLists.txt)"
#endif

using namespace chipdock_cpu;

namespace {

// --- errors ---------------------------------------------------------------------

cd_status_t api_error_get_code(const cd_error* error) noexcept {
  return error != nullptr ? error->code : CD_STATUS_INVALID_ARGUMENT;
}

const char* api_error_get_message(const cd_error* error) noexcept {
  return error != nullptr ? error->message.c_str() : "error_get_message: error is NULL";
}

void api_error_destroy(cd_error* error) noexcept {
  if (error != nullptr && !error->is_static) delete error;
}

// --- lifecycle and devices ---------------------------------------------------------

cd_error* api_plugin_shutdown() noexcept {
  return guard("plugin_shutdown", [] { destroy_all_streams(); });
}

cd_error* api_device_get_count(int32_t* count) noexcept {
  return guard("device_get_count", [&] {
    require_non_null(count, "count");
    *count = device_count();
  });
}

cd_error* api_device_get_properties(int32_t device, cd_device_properties* props) noexcept {
  return guard("device_get_properties", [&] { get_properties(device, props); });
}

cd_error* api_device_set_current(int32_t device) noexcept {
  return guard("device_set_current", [&] { set_current_device(device); });
}

cd_error* api_device_get_current(int32_t* device) noexcept {
  return guard("device_get_current", [&] {
    require_non_null(device, "device");
    *device = current_device();
  });
}

cd_error* api_device_synchronize(int32_t device) noexcept {
  return guard("device_synchronize", [&] { return synchronize_device(device); });
}

// --- memory ---------------------------------------------------------------------

cd_error* api_memory_allocate(int32_t device, size_t bytes, void** ptr) noexcept {
  return guard("memory_allocate", [&] {
    require_non_null(ptr, "ptr");
    *ptr = memory_allocate(device, bytes);
  });
}

cd_error* api_memory_free(int32_t device, void* ptr) noexcept {
  return guard("memory_free", [&] { memory_free(device, ptr); });
}

cd_error* api_host_memory_allocate(size_t bytes, void** ptr) noexcept {
  return guard("host_memory_allocate", [&] {
    require_non_null(ptr, "ptr");
    *ptr = host_memory_allocate(bytes);
  });
}

cd_error* api_host_memory_free(void* ptr) noexcept {
  return guard("host_memory_free", [&] { host_memory_free(ptr); });
}

cd_error* api_memory_get_info(int32_t device, size_t* free_bytes, size_t* total_bytes) noexcept {
  return guard("memory_get_info", [&] {
    require_non_null(free_bytes, "free_bytes");
    require_non_null(total_bytes, "total_bytes");
    memory_get_info(device, free_bytes, total_bytes);
  });
}

cd_error* api_memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) noexcept {
  return guard("memory_set", [&] { memory_set(device, ptr, value, bytes); });
}

cd_error* api_memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes,
                               cd_stream* stream) noexcept {
  return guard("memory_set_async", [&] { memory_set_async(device, ptr, value, bytes, stream); });
}

// --- copies -----------------------------------------------------------------------

cd_error* api_memcpy_h2d(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_host_to_device",
               [&] { copy(Direction::kHostToDevice, device, dst, src, bytes); });
}

cd_error* api_memcpy_d2h(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_device_to_host",
               [&] { copy(Direction::kDeviceToHost, device, dst, src, bytes); });
}

cd_error* api_memcpy_d2d(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_device_to_device",
               [&] { copy(Direction::kDeviceToDevice, device, dst, src, bytes); });
}

cd_error* api_memcpy_h2d_async(int32_t device, void* dst, const void* src, size_t bytes,
                               cd_stream* stream) noexcept {
  return guard("memcpy_host_to_device_async", [&] {
    copy_async(Direction::kHostToDevice, device, dst, src, bytes, stream);
  });
}

cd_error* api_memcpy_d2h_async(int32_t device, void* dst, const void* src, size_t bytes,
                               cd_stream* stream) noexcept {
  return guard("memcpy_device_to_host_async", [&] {
    copy_async(Direction::kDeviceToHost, device, dst, src, bytes, stream);
  });
}

cd_error* api_memcpy_d2d_async(int32_t device, void* dst, const void* src, size_t bytes,
                               cd_stream* stream) noexcept {
  return guard("memcpy_device_to_device_async", [&] {
    copy_async(Direction::kDeviceToDevice, device, dst, src, bytes, stream);
  });
}

// --- streams ----------------------------------------------------------------------

cd_error* api_stream_create(int32_t device, uint32_t flags, cd_stream** stream) noexcept {
  return guard("stream_create", [&] {
    require_non_null(stream, "stream");
    *stream = stream_create(device, flags);
  });
}

cd_error* api_stream_destroy(cd_stream* stream) noexcept {
  return guard("stream_destroy", [&] { stream_destroy(stream); });
}

cd_error* api_stream_synchronize(cd_stream* stream) noexcept {
  return guard("stream_synchronize", [&] { return stream_synchronize(stream); });
}

cd_error* api_stream_query(cd_stream* stream, int32_t* is_complete) noexcept {
  return guard("stream_query", [&] {
    require_non_null(is_complete, "is_complete");
    *is_complete = stream_query(stream) ? 1 : 0;
  });
}

cd_error* api_stream_wait_event(cd_stream* stream, cd_event* event) noexcept {
  return guard("stream_wait_event", [&] { stream_wait_event(stream, event); });
}

cd_error* api_stream_add_host_callback(cd_stream* stream, cd_host_callback_fn fn,
                                       void* user_data) noexcept {
  return guard("stream_add_host_callback",
               [&] { stream_add_host_callback(stream, fn, user_data); });
}

// --- events -----------------------------------------------------------------------

cd_error* api_event_create(int32_t device, uint32_t flags, cd_event** event) noexcept {
  return guard("event_create", [&] {
    require_non_null(event, "event");
    *event = event_create(device, flags);
  });
}

cd_error* api_event_destroy(cd_event* event) noexcept {
  return guard("event_destroy", [&] { event_destroy(event); });
}

cd_error* api_event_record(cd_event* event, cd_stream* stream) noexcept {
  return guard("event_record", [&] { event_record(event, stream); });
}

cd_error* api_event_synchronize(cd_event* event) noexcept {
  return guard("event_synchronize", [&] { event_synchronize(event); });
}

cd_error* api_event_query(cd_event* event, int32_t* is_complete) noexcept {
  return guard("event_query", [&] {
    require_non_null(is_complete, "is_complete");
    *is_complete = event_query(event) ? 1 : 0;
  });
}

cd_error* api_event_elapsed_time(cd_event* start, cd_event* end, float* ms) noexcept {
  return guard("event_elapsed_time", [&] {
    require_non_null(ms, "milliseconds");
    *ms = event_elapsed_ms(start, end);
  });
}

// --- kernels ----------------------------------------------------------------------

cd_error* api_kernels_register(cd_kernel_registry* registry) noexcept {
  return guard("kernels_register", [&] { register_all_kernels(registry); });
}

// The table. Collective slots stay NULL: they are optional, and the core
// reports them as unimplemented by "cpu".
cd_plugin_api make_table() {
  cd_plugin_api t{};
  t.struct_size = sizeof(cd_plugin_api);
  t.next = nullptr;
  t.abi_major = CD_ABI_VERSION_MAJOR;
  t.abi_minor = CD_ABI_VERSION_MINOR;
  t.name = "cpu";
  t.device_type = "cpu";
  t.version = CHIPDOCK_CPU_VERSION;
  t.error_get_code = api_error_get_code;
  t.error_get_message = api_error_get_message;
  t.error_destroy = api_error_destroy;
  t.plugin_shutdown = api_plugin_shutdown;
  t.device_get_count = api_device_get_count;
  t.device_get_properties = api_device_get_properties;
  t.device_set_current = api_device_set_current;
  t.device_get_current = api_device_get_current;
  t.device_synchronize = api_device_synchronize;
  t.memory_allocate = api_memory_allocate;
  t.memory_free = api_memory_free;
  t.host_memory_allocate = api_host_memory_allocate;
  t.host_memory_free = api_host_memory_free;
  t.memory_get_info = api_memory_get_info;
  t.memory_set = api_memory_set;
  t.memory_set_async = api_memory_set_async;
  t.memcpy_host_to_device = api_memcpy_h2d;
  t.memcpy_device_to_host = api_memcpy_d2h;
  t.memcpy_device_to_device = api_memcpy_d2d;
  t.memcpy_host_to_device_async = api_memcpy_h2d_async;
  t.memcpy_device_to_host_async = api_memcpy_d2h_async;
  t.memcpy_device_to_device_async = api_memcpy_d2d_async;
  t.stream_create = api_stream_create;
  t.stream_destroy = api_stream_destroy;
  t.stream_synchronize = api_stream_synchronize;
  t.stream_query = api_stream_query;
  t.stream_wait_event = api_stream_wait_event;
  t.stream_add_host_callback = api_stream_add_host_callback;
  t.event_create = api_event_create;
  t.event_destroy = api_event_destroy;
  t.event_record = api_event_record;
  t.event_synchronize = api_event_synchronize;
  t.event_query = api_event_query;
  t.event_elapsed_time = api_event_elapsed_time;
  t.kernels_register = api_kernels_register;
  return t;
}

}  // namespace

extern "C" CD_EXPORT const cd_plugin_api* chipdock_plugin_entry(const cd_core_api* core) {
  // Refuse a core of another major version (its structs may mean other
  // things) and a table too small to hold even the version fields.
  if (core == nullptr || core->struct_size < CD_STRUCT_SIZE(cd_core_api, abi_minor) ||
      core->abi_major != CD_ABI_VERSION_MAJOR) {
    return nullptr;
  }
  set_core(core);
  static const cd_plugin_api table = make_table();
  return &table;
}

// The entry matches the type the core looks it up as.
static_assert(std::is_same<decltype(&chipdock_plugin_entry), cd_plugin_entry_fn>::value,
              "chipdock_plugin_entry must have type cd_plugin_entry_fn");
