// The plugin's entry point and its function table. Each slot runs under
// guard("<slot>", ...) so no exception crosses the ABI and every message
// starts with the slot name. The collective slots run on NCCL
// (collectives.cpp).
#include <cuda_runtime_api.h>

#include <cstring>
#include <type_traits>

#include "chipdock/device_api.h"
#include "collectives.h"
#include "core_link.h"
#include "cuda_check.h"
#include "error.h"
#include "kernels/kernels.h"
#include "resources.h"

using namespace chipdock_cuda;

namespace {

thread_local int32_t t_current_device = 0;

void copy_string(char* dst, size_t size, const std::string& src) {
  std::strncpy(dst, src.c_str(), size - 1);
  dst[size - 1] = '\0';
}

std::string cuda_version(int v) { return format("%d.%d", v / 1000, (v % 1000) / 10); }

// --- errors ---------------------------------------------------------------------

cd_status_t api_error_get_code(const cd_error* e) noexcept { return e ? e->code : CD_STATUS_INVALID_ARGUMENT; }
const char* api_error_get_message(const cd_error* e) noexcept {
  return e ? e->message.c_str() : "error_get_message: error is NULL";
}
void api_error_destroy(cd_error* e) noexcept {
  if (e != nullptr && !e->is_static) delete e;
}

// --- lifecycle and devices ---------------------------------------------------------

cd_error* api_plugin_shutdown() noexcept { return guard("plugin_shutdown", [] { destroy_all(); }); }

cd_error* api_device_get_count(int32_t* count) noexcept {
  return guard("device_get_count", [&] {
    require_non_null(count, "count");
    *count = device_count();
  });
}

void fill_properties(int32_t device, cd_device_properties* props) {
  require_non_null(props, "props");
  if (props->struct_size < CD_STRUCT_SIZE(cd_device_properties, next)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "struct_size %zu is too small", props->struct_size);
  }
  use_device(device);
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  // Fill a full-size copy, then hand over only what the caller's size holds.
  cd_device_properties full{};
  copy_string(full.name, sizeof(full.name), p.name);
  copy_string(full.vendor, sizeof(full.vendor), "NVIDIA");
  copy_string(full.architecture, sizeof(full.architecture), format("sm_%d%d", p.major, p.minor));
  copy_string(full.driver_version, sizeof(full.driver_version), "CUDA " + cuda_version(driver));
  copy_string(full.runtime_version, sizeof(full.runtime_version), "CUDA " + cuda_version(runtime));
  full.total_memory = p.totalGlobalMem;
  for (cd_dtype_t d = CD_DTYPE_FLOAT32; d <= CD_DTYPE_BOOL; ++d) full.supported_dtypes |= CD_DTYPE_BIT(d);
  full.compute_units = p.multiProcessorCount;
  full.dlpack_device_type = CD_DLPACK_CUDA;
  full.host_addressable = 0;
  const size_t head = CD_STRUCT_SIZE(cd_device_properties, next);
  const size_t n = props->struct_size < sizeof(full) ? props->struct_size : sizeof(full);
  std::memcpy(reinterpret_cast<char*>(props) + head, reinterpret_cast<char*>(&full) + head, n - head);
}

cd_error* api_device_get_properties(int32_t device, cd_device_properties* props) noexcept {
  return guard("device_get_properties", [&] { fill_properties(device, props); });
}

cd_error* api_device_set_current(int32_t device) noexcept {
  return guard("device_set_current", [&] {
    use_device(device);
    t_current_device = device;
  });
}

cd_error* api_device_get_current(int32_t* device) noexcept {
  return guard("device_get_current", [&] {
    require_non_null(device, "device");
    *device = t_current_device;
  });
}

cd_error* api_device_synchronize(int32_t device) noexcept {
  return guard("device_synchronize", [&] {
    use_device(device);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  });
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
    use_device(device);
    size_t f = 0, t = 0;
    check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
  });
}

cd_error* api_memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) noexcept {
  return guard("memory_set", [&] {
    use_device(device);
    check_range(device, ptr, bytes, "ptr");
    if (bytes == 0) return;
    cudaStream_t s = sync_stream(device);
    check(cudaMemsetAsync(ptr, value & 0xff, bytes, s), "cudaMemsetAsync");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  });
}

cd_error* api_memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes,
                               cd_stream* stream) noexcept {
  return guard("memory_set_async", [&] {
    cd_stream* s = live_stream(stream);
    use_device(device);
    check_range(device, ptr, bytes, "ptr");
    if (bytes == 0) return;
    check(cudaMemsetAsync(ptr, value & 0xff, bytes, s->stream), "cudaMemsetAsync");
  });
}

// --- copies -----------------------------------------------------------------------

// Checks the device-side ranges of a copy in direction `kind`.
void check_copy(int32_t device, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  use_device(device);
  if (bytes == 0) return;
  require_non_null(dst, "dst");
  require_non_null(src, "src");
  if (kind != cudaMemcpyHostToDevice) check_range(device, src, bytes, "src");
  if (kind != cudaMemcpyDeviceToHost) check_range(device, dst, bytes, "dst");
}

void copy_sync(int32_t device, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  check_copy(device, dst, src, bytes, kind);
  if (bytes == 0) return;
  cudaStream_t s = sync_stream(device);
  check(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void copy_async(int32_t device, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                cd_stream* stream) {
  cd_stream* s = live_stream(stream);
  check_copy(device, dst, src, bytes, kind);
  if (bytes == 0) return;
  // With pageable host memory the runtime stages the copy and may return
  // only once the source has been read: allowed by the ABI.
  check(cudaMemcpyAsync(dst, src, bytes, kind, s->stream), "cudaMemcpyAsync");
}

cd_error* api_memcpy_h2d(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_host_to_device", [&] { copy_sync(device, dst, src, bytes, cudaMemcpyHostToDevice); });
}
cd_error* api_memcpy_d2h(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_device_to_host", [&] { copy_sync(device, dst, src, bytes, cudaMemcpyDeviceToHost); });
}
cd_error* api_memcpy_d2d(int32_t device, void* dst, const void* src, size_t bytes) noexcept {
  return guard("memcpy_device_to_device",
               [&] { copy_sync(device, dst, src, bytes, cudaMemcpyDeviceToDevice); });
}
cd_error* api_memcpy_h2d_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) noexcept {
  return guard("memcpy_host_to_device_async",
               [&] { copy_async(device, dst, src, bytes, cudaMemcpyHostToDevice, s); });
}
cd_error* api_memcpy_d2h_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) noexcept {
  return guard("memcpy_device_to_host_async",
               [&] { copy_async(device, dst, src, bytes, cudaMemcpyDeviceToHost, s); });
}
cd_error* api_memcpy_d2d_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) noexcept {
  return guard("memcpy_device_to_device_async",
               [&] { copy_async(device, dst, src, bytes, cudaMemcpyDeviceToDevice, s); });
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
  return guard("stream_synchronize", [&] {
    cd_stream* s = live_stream(stream);
    check(cudaSetDevice(s->device), "cudaSetDevice");
    check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
  });
}

cd_error* api_stream_query(cd_stream* stream, int32_t* is_complete) noexcept {
  return guard("stream_query", [&] {
    require_non_null(is_complete, "is_complete");
    const cudaError_t err = cudaStreamQuery(live_stream(stream)->stream);
    if (err != cudaErrorNotReady) check(err, "cudaStreamQuery");
    *is_complete = err == cudaSuccess ? 1 : 0;
  });
}

cd_error* api_stream_wait_event(cd_stream* stream, cd_event* event) noexcept {
  return guard("stream_wait_event", [&] {
    cd_stream* s = live_stream(stream);
    cd_event* e = live_event(event);
    if (e->device != s->device) {
      fail(CD_STATUS_INVALID_ARGUMENT, "event of device %d, stream of device %d", e->device, s->device);
    }
    check(cudaSetDevice(s->device), "cudaSetDevice");
    // A never-recorded CUDA event counts as complete: no wait, as the ABI asks.
    check(cudaStreamWaitEvent(s->stream, e->event, 0), "cudaStreamWaitEvent");
  });
}

cd_error* api_stream_add_host_callback(cd_stream* stream, cd_host_callback_fn fn, void* user_data) noexcept {
  return guard("stream_add_host_callback", [&] {
    cd_stream* s = live_stream(stream);
    if (fn == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "fn is NULL");
    check(cudaSetDevice(s->device), "cudaSetDevice");
    // Runs on the runtime's callback thread, in stream order.
    check(cudaLaunchHostFunc(s->stream, fn, user_data), "cudaLaunchHostFunc");
  });
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
  return guard("event_record", [&] {
    cd_event* e = live_event(event);
    cd_stream* s = live_stream(stream);
    if (e->device != s->device) {
      fail(CD_STATUS_INVALID_ARGUMENT, "event of device %d, stream of device %d", e->device, s->device);
    }
    check(cudaSetDevice(s->device), "cudaSetDevice");
    check(cudaEventRecord(e->event, s->stream), "cudaEventRecord");
    e->recorded = true;
  });
}

cd_error* api_event_synchronize(cd_event* event) noexcept {
  return guard("event_synchronize", [&] { check(cudaEventSynchronize(live_event(event)->event), "cudaEventSynchronize"); });
}

cd_error* api_event_query(cd_event* event, int32_t* is_complete) noexcept {
  return guard("event_query", [&] {
    require_non_null(is_complete, "is_complete");
    const cudaError_t err = cudaEventQuery(live_event(event)->event);
    if (err != cudaErrorNotReady) check(err, "cudaEventQuery");
    *is_complete = err == cudaSuccess ? 1 : 0;
  });
}

cd_error* api_event_elapsed_time(cd_event* start, cd_event* end, float* ms) noexcept {
  return guard("event_elapsed_time", [&] {
    require_non_null(ms, "milliseconds");
    for (cd_event* e : {live_event(start), live_event(end)}) {
      if (e->flags & CD_EVENT_DISABLE_TIMING) fail(CD_STATUS_INVALID_ARGUMENT, "an event has timing disabled");
      if (!e->recorded) fail(CD_STATUS_INVALID_ARGUMENT, "an event was never recorded");
    }
    float value = 0.0f;
    check(cudaEventElapsedTime(&value, start->event, end->event), "cudaEventElapsedTime");
    *ms = value;
  });
}

// --- kernels ----------------------------------------------------------------------

cd_error* api_kernels_register(cd_kernel_registry* registry) noexcept {
  return guard("kernels_register", [&] { register_all_kernels(registry); });
}

// --- collectives (NCCL) --------------------------------------------------------------

cd_error* api_comm_get_unique_id(cd_comm_unique_id* id) noexcept {
  return guard("comm_get_unique_id", [&] { comm_get_unique_id(id); });
}

cd_error* api_comm_init_rank(int32_t device, int32_t nranks, const cd_comm_unique_id* id, int32_t rank,
                             cd_comm** comm) noexcept {
  return guard("comm_init_rank", [&] {
    require_non_null(comm, "comm");
    *comm = comm_init_rank(device, nranks, id, rank);
  });
}

cd_error* api_comm_destroy(cd_comm* comm) noexcept {
  return guard("comm_destroy", [&] { comm_destroy(comm); });
}

cd_error* api_comm_all_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                              cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_all_reduce", [&] { comm_all_reduce(send, recv, count, dtype, op, comm, stream); });
}

cd_error* api_comm_broadcast(const void* send, void* recv, size_t count, cd_dtype_t dtype, int32_t root,
                             cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_broadcast", [&] { comm_broadcast(send, recv, count, dtype, root, comm, stream); });
}

cd_error* api_comm_reduce(const void* send, void* recv, size_t count, cd_dtype_t dtype, cd_reduce_op_t op,
                          int32_t root, cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_reduce", [&] { comm_reduce(send, recv, count, dtype, op, root, comm, stream); });
}

cd_error* api_comm_all_gather(const void* send, void* recv, size_t send_count, cd_dtype_t dtype, cd_comm* comm,
                              cd_stream* stream) noexcept {
  return guard("comm_all_gather", [&] { comm_all_gather(send, recv, send_count, dtype, comm, stream); });
}

cd_error* api_comm_reduce_scatter(const void* send, void* recv, size_t recv_count, cd_dtype_t dtype,
                                  cd_reduce_op_t op, cd_comm* comm, cd_stream* stream) noexcept {
  return guard("comm_reduce_scatter",
               [&] { comm_reduce_scatter(send, recv, recv_count, dtype, op, comm, stream); });
}

cd_error* api_comm_send(const void* send, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm,
                        cd_stream* stream) noexcept {
  return guard("comm_send", [&] { comm_send(send, count, dtype, peer, comm, stream); });
}

cd_error* api_comm_recv(void* recv, size_t count, cd_dtype_t dtype, int32_t peer, cd_comm* comm,
                        cd_stream* stream) noexcept {
  return guard("comm_recv", [&] { comm_recv(recv, count, dtype, peer, comm, stream); });
}

cd_error* api_comm_group_start() noexcept { return guard("comm_group_start", [] { comm_group_start(); }); }
cd_error* api_comm_group_end() noexcept { return guard("comm_group_end", [] { comm_group_end(); }); }

cd_plugin_api make_table() {
  cd_plugin_api t{};
  t.struct_size = sizeof(cd_plugin_api);
  t.abi_major = CD_ABI_VERSION_MAJOR;
  t.abi_minor = CD_ABI_VERSION_MINOR;
  t.name = "cuda";
  t.device_type = "cuda";
  t.version = CHIPDOCK_CUDA_VERSION;
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
  // Refuse a core of another major; never probe the driver here (the ABI
  // puts that in device_get_count).
  if (core == nullptr || core->struct_size < CD_STRUCT_SIZE(cd_core_api, abi_minor) ||
      core->abi_major != CD_ABI_VERSION_MAJOR) {
    return nullptr;
  }
  set_core(core);
  static const cd_plugin_api table = make_table();
  return &table;
}

static_assert(std::is_same<decltype(&chipdock_plugin_entry), cd_plugin_entry_fn>::value,
              "chipdock_plugin_entry must have type cd_plugin_entry_fn");
