// The plug-in's entry point and its function table. Every slot runs under
// guard("<slot>", ...) so no exception crosses the ABI and every message
// starts with the slot's name: the device slots here, the memory, stream,
// event and callback slots in runtime_memory.cpp / runtime_streams.cpp
// (runtime_slots.h), the collective slots on HCCL in collectives.cpp.
//
// The entry only fills the table: CANN is opened on the first call that
// needs it (device_get_count, normally), so `import chipdock` works on a
// machine without CANN and the backend then lists 0 devices and the reason.
#include <type_traits>

#include "acl_api.h"
#include "chipdock/device_api.h"
#include "chipdock/support/core_link.h"
#include "chipdock/support/error.h"
#include "collectives.h"
#include "kernels/registry.h"
#include "runtime_devices.h"
#include "runtime_slots.h"

using namespace chipdock_npu;
using chipdock::support::guard;
using chipdock::support::require_non_null;

namespace {

// --- errors ---------------------------------------------------------------------

cd_status_t api_error_get_code(const cd_error* e) noexcept { return e ? e->code : CD_STATUS_INVALID_ARGUMENT; }
const char* api_error_get_message(const cd_error* e) noexcept {
  return e ? e->message.c_str() : "error_get_message: error is NULL";
}
void api_error_destroy(cd_error* e) noexcept {
  if (e != nullptr && !e->is_static) delete e;
}

// --- lifecycle and devices ---------------------------------------------------------

cd_error* api_plugin_shutdown() noexcept {
  return guard("plugin_shutdown", [] {
    // Communicators and streams first: both hold device resources.
    shutdown_collectives();
    shutdown_runtime();
    shutdown_devices();
  });
}

cd_error* api_device_get_count(int32_t* count) noexcept {
  return guard("device_get_count", [&] {
    require_non_null(count, "count");
    *count = checked_device_count();
  });
}

cd_error* api_device_get_properties(int32_t device, cd_device_properties* props) noexcept {
  return guard("device_get_properties", [&] { fill_properties(device, props); });
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

cd_error* api_memory_get_info(int32_t device, size_t* free_bytes, size_t* total_bytes) noexcept {
  return guard("memory_get_info", [&] { memory_info(device, free_bytes, total_bytes); });
}

// --- kernels ----------------------------------------------------------------------

cd_error* api_kernels_register(cd_kernel_registry* registry) noexcept {
  return guard("kernels_register", [&] {
    require_non_null(registry, "registry");
    // Without a usable runtime there is nothing to resolve the ops from:
    // no kernels, and the reason in the log (device_get_count reports it too).
    try {
      acl();
    } catch (const chipdock::support::Error& e) {
      chipdock::support::log_message(CD_LOG_INFO, std::string("npu: no kernels registered: ") + e.what());
      return;
    }
    register_all_kernels(registry);
  });
}

cd_plugin_api make_table() {
  cd_plugin_api t{};
  t.struct_size = sizeof(cd_plugin_api);
  t.abi_major = CD_ABI_VERSION_MAJOR;
  t.abi_minor = CD_ABI_VERSION_MINOR;
  t.name = "npu";
  t.device_type = "npu";
  t.version = CHIPDOCK_NPU_VERSION;
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
  t.memcpy_host_to_device = api_memcpy_host_to_device;
  t.memcpy_device_to_host = api_memcpy_device_to_host;
  t.memcpy_device_to_device = api_memcpy_device_to_device;
  t.memcpy_host_to_device_async = api_memcpy_host_to_device_async;
  t.memcpy_device_to_host_async = api_memcpy_device_to_host_async;
  t.memcpy_device_to_device_async = api_memcpy_device_to_device_async;
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
  t.comm_get_unique_id = api_comm_get_unique_id;
  t.comm_init_rank = api_comm_init_rank;
  t.comm_destroy = api_comm_destroy;
  t.comm_all_reduce = api_comm_all_reduce;
  t.comm_broadcast = api_comm_broadcast;
  t.comm_reduce = api_comm_reduce;
  t.comm_all_gather = api_comm_all_gather;
  t.comm_reduce_scatter = api_comm_reduce_scatter;
  t.comm_send = api_comm_send;
  t.comm_recv = api_comm_recv;
  t.comm_group_start = api_comm_group_start;
  t.comm_group_end = api_comm_group_end;
  return t;
}

}  // namespace

extern "C" CD_EXPORT const cd_plugin_api* chipdock_plugin_entry(const cd_core_api* core) {
  // Refuse a core of another major; never open CANN here (the ABI puts
  // probing in device_get_count).
  if (core == nullptr || core->struct_size < CD_STRUCT_SIZE(cd_core_api, abi_minor) ||
      core->abi_major != CD_ABI_VERSION_MAJOR) {
    return nullptr;
  }
  chipdock::support::set_core(core);
  static const cd_plugin_api table = make_table();
  return &table;
}

static_assert(std::is_same<decltype(&chipdock_plugin_entry), cd_plugin_entry_fn>::value,
              "chipdock_plugin_entry must have type cd_plugin_entry_fn");
