/*
 * chipdock device ABI, version 1 — the one header a backend implements.
 *
 * A backend is a shared library that exports exactly one symbol,
 * `chipdock_plugin_entry` (CD_PLUGIN_ENTRY_SYMBOL), plus a JSON manifest
 * beside it that the core reads before loading the library (see
 * device_api/docs/manifest.md). The core calls the entry once with its own
 * services and ABI version (cd_core_api); the plugin answers with a static
 * function table (cd_plugin_api) that states the ABI version it was built
 * against. Same major is required; minor differences are bridged by
 * `struct_size`: the core never calls a slot that lies beyond the plugin's
 * table size or is NULL.
 *
 * Conventions that hold for every function below unless it says otherwise:
 *   - Returns NULL on success, or a new cd_error* the CALLER owns and frees
 *     with error_destroy (see cd_base.h).
 *   - Out-pointers are written only on success. Pointer arguments must be
 *     non-NULL; a NULL pointer, an unknown ordinal or a destroyed handle is
 *     reported as an error (CD_STATUS_INVALID_ARGUMENT / _INVALID_HANDLE),
 *     never by crashing.
 *   - Thread-safety: every function may be called from any thread
 *     concurrently. Work enqueued on one stream from several threads runs in
 *     the order the enqueue calls returned.
 *   - No function calls exit() or abort(), and no C++ exception crosses it.
 *   - A NULL handle is CD_STATUS_INVALID_ARGUMENT; an unknown or destroyed
 *     one is CD_STATUS_INVALID_HANDLE.
 *   - A size of 0 bytes is a successful no-op, and its pointers may be NULL.
 *   - "device" arguments are ordinals in [0, device_get_count).
 *   - Device pointers are opaque to the core: it never dereferences them,
 *     and a plugin may hand out pointers that are not host addresses. The
 *     core does offset arithmetic on them (pointers into an allocation).
 *   - Every cd_error must be destroyed before the library is unloaded.
 *
 * Ordering model: work on a stream runs in enqueue order. Different streams
 * are unordered unless joined by event_record + stream_wait_event. The
 * synchronous (non-_async) memory functions complete before they return and
 * are NOT ordered with stream work: the caller synchronizes first.
 */
#ifndef CHIPDOCK_DEVICE_API_H_
#define CHIPDOCK_DEVICE_API_H_

#include "chipdock/cd_base.h"
#include "chipdock/cd_collectives.h"
#include "chipdock/cd_kernel.h"

CD_EXTERN_C_BEGIN

/* ------------------------------------------------------------------------ */
/* Device properties                                                          */
/* ------------------------------------------------------------------------ */

/* DLPack device types a plugin may report (values from dlpack.h). */
#define CD_DLPACK_NONE 0
#define CD_DLPACK_CPU 1
#define CD_DLPACK_CUDA 2
#define CD_DLPACK_CUDA_HOST 3
#define CD_DLPACK_ROCM 10
#define CD_DLPACK_EXT_DEV 12
#define CD_DLPACK_ONEAPI 14

/* Filled by device_get_properties. The caller sets struct_size (and next);
 * the plugin writes only the fields that lie within both its own and the
 * caller's struct_size, and NUL-terminates every string (truncating). */
typedef struct cd_device_properties {
  size_t struct_size;
  cd_extension* next;
  char name[256];            /* marketing name, e.g. "NVIDIA H200" */
  char vendor[64];           /* e.g. "NVIDIA" */
  char architecture[64];     /* e.g. "sm_90", "x86_64-avx512" */
  char driver_version[64];   /* "" when there is no driver */
  char runtime_version[64];  /* vendor runtime the plugin runs on */
  uint64_t total_memory;     /* bytes */
  uint64_t supported_dtypes; /* mask of CD_DTYPE_BIT(dtype) */
  int32_t compute_units;     /* SMs, cores, AI cores ... */
  int32_t dlpack_device_type;/* CD_DLPACK_*: how its memory is exported */
  int32_t host_addressable;  /* 1 if device pointers are host pointers */
  int32_t reserved;          /* 0 */
} cd_device_properties;

/* ------------------------------------------------------------------------ */
/* Flags                                                                      */
/* ------------------------------------------------------------------------ */
#define CD_STREAM_FLAGS_DEFAULT 0u
#define CD_EVENT_FLAGS_DEFAULT 0u       /* records a timestamp */
#define CD_EVENT_DISABLE_TIMING 1u      /* cheaper; elapsed_time refuses it */

/* A host function run by stream_add_host_callback. It runs on a thread the
 * plugin chooses: usually its own, but a backend that executes work
 * synchronously may run it on the enqueuing thread before
 * stream_add_host_callback returns, so a caller must not hold a lock the
 * callback takes. It must not synchronize the stream that runs it and must
 * return promptly. */
typedef void (*cd_host_callback_fn)(void* user_data);

/* ------------------------------------------------------------------------ */
/* The function table                                                         */
/* ------------------------------------------------------------------------ */

/* Slots are only ever appended. "Required" slots must be non-NULL or the
 * plugin is refused; an optional NULL slot makes the core report
 * "unimplemented by <backend>" (or use the fallback named beside it). */
typedef struct cd_plugin_api {
  size_t struct_size;        /* sizeof(cd_plugin_api) the plugin built with */
  cd_extension* next;
  int32_t abi_major;         /* CD_ABI_VERSION_MAJOR the plugin built with */
  int32_t abi_minor;         /* CD_ABI_VERSION_MINOR the plugin built with */
  const char* name;          /* backend name; must match the manifest */
  const char* device_type;   /* e.g. "cpu", "cuda"; must match the manifest */
  const char* version;       /* the backend's own version string */

  /* --- errors (required) ------------------------------------------------ */

  /* The code of `error` (a CD_STATUS_* other than OK). Never blocks. */
  cd_status_t (*error_get_code)(const cd_error* error);
  /* The message of `error`: NUL-terminated UTF-8 owned by `error`, valid
   * until error_destroy(error). Never NULL. Never blocks. */
  const char* (*error_get_message)(const cd_error* error);
  /* Frees `error`. NULL is a no-op. Never blocks. */
  void (*error_destroy)(cd_error* error);

  /* --- plugin lifecycle (optional) ------------------------------------- */

  /* Called once before the library is unloaded, after every stream, event,
   * communicator and allocation the core made has been released. No slot
   * but the three error slots is called afterwards (to read and free the
   * error this call may return). May block while the plugin joins its
   * threads. */
  cd_error* (*plugin_shutdown)(void);

  /* --- platform and devices -------------------------------------------- */

  /* Required. Number of devices. A plugin whose vendor runtime or driver is
   * missing or too old returns a CD_STATUS_UNAVAILABLE error whose message
   * says why; the core then lists the backend with zero devices and that
   * reason. Never blocks on device work. */
  cd_error* (*device_get_count)(int32_t* count);

  /* Required. Fills `props` (see cd_device_properties for the size rule);
   * a struct_size too small to hold `next` is CD_STATUS_INVALID_ARGUMENT.
   * Never blocks on device work. */
  cd_error* (*device_get_properties)(int32_t device, cd_device_properties* props);

  /* Optional. Makes `device` current for the calling thread (the device
   * that thread-bound vendor runtimes target). Per-thread state. */
  cd_error* (*device_set_current)(int32_t device);

  /* Optional. The calling thread's current device (0 if never set, even
   * when the plugin has no devices). */
  cd_error* (*device_get_current)(int32_t* device);

  /* Optional (fallback: synchronize every stream the core created). Blocks
   * until all work on every stream of `device` has completed; returns the
   * first asynchronous error raised by that work since the last check. */
  cd_error* (*device_synchronize)(int32_t device);

  /* --- memory ---------------------------------------------------------- */

  /* Required. Allocates `bytes` of device memory, aligned to at least 256
   * bytes, contents undefined. `bytes` == 0 yields *ptr == NULL. Returns
   * CD_STATUS_OUT_OF_MEMORY when the device has no room (the core then
   * frees its cache and retries once). The caller owns the allocation and
   * releases it with memory_free. Does not block on stream work. */
  cd_error* (*memory_allocate)(int32_t device, size_t bytes, void** ptr);

  /* Required. Frees an allocation made by memory_allocate on `device`
   * (NULL is a no-op). The caller guarantees no enqueued work still uses
   * it. An unknown pointer is CD_STATUS_INVALID_ARGUMENT. */
  cd_error* (*memory_free)(int32_t device, void* ptr);

  /* Optional (fallback: ordinary host memory). Allocates `bytes` of
   * page-locked host memory that async copies can use without staging;
   * host-addressable; owned by the caller, freed with host_memory_free. */
  cd_error* (*host_memory_allocate)(size_t bytes, void** ptr);

  /* Optional (required if host_memory_allocate is set). Frees it. */
  cd_error* (*host_memory_free)(void* ptr);

  /* Optional. Free and total bytes of device memory, as the device sees
   * them (other processes included). free <= total. */
  cd_error* (*memory_get_info)(int32_t device, size_t* free_bytes, size_t* total_bytes);

  /* Optional. Sets `bytes` bytes at `ptr` to the low byte of `value`.
   * Synchronous; not ordered with stream work. */
  cd_error* (*memory_set)(int32_t device, void* ptr, int32_t value, size_t bytes);

  /* Optional. The same, enqueued on `stream`; returns once enqueued. */
  cd_error* (*memory_set_async)(int32_t device, void* ptr, int32_t value, size_t bytes,
                                cd_stream* stream);

  /* Required. Synchronous copies: return after the bytes have arrived, and
   * are not ordered with stream work. Host pointers are any host memory.
   * A range that overruns an allocation the plugin knows of is
   * CD_STATUS_OUT_OF_RANGE (plugins that can check must). For
   * device_to_device both pointers belong to `device`; the ranges must not
   * overlap. */
  cd_error* (*memcpy_host_to_device)(int32_t device, void* dst, const void* src, size_t bytes);
  cd_error* (*memcpy_device_to_host)(int32_t device, void* dst, const void* src, size_t bytes);
  cd_error* (*memcpy_device_to_device)(int32_t device, void* dst, const void* src, size_t bytes);

  /* Optional (fallback: stream_synchronize, then the synchronous copy).
   * Enqueue the copy on `stream` and return. The host buffer must stay
   * valid and unmodified (h2d) or unread (d2h) until the copy completes;
   * with pageable memory a plugin may copy synchronously instead. */
  cd_error* (*memcpy_host_to_device_async)(int32_t device, void* dst, const void* src,
                                           size_t bytes, cd_stream* stream);
  cd_error* (*memcpy_device_to_host_async)(int32_t device, void* dst, const void* src,
                                           size_t bytes, cd_stream* stream);
  cd_error* (*memcpy_device_to_device_async)(int32_t device, void* dst, const void* src,
                                             size_t bytes, cd_stream* stream);

  /* --- streams ---------------------------------------------------------- */

  /* Required. Creates a stream on `device`. `flags` is
   * CD_STREAM_FLAGS_DEFAULT in v1 (others: CD_STATUS_INVALID_ARGUMENT).
   * The caller owns it and destroys it with stream_destroy. */
  cd_error* (*stream_create)(int32_t device, uint32_t flags, cd_stream** stream);

  /* Required. Destroys `stream`: blocks until its enqueued work has
   * completed, then releases it. Using the handle afterwards is an error
   * the plugin reports as CD_STATUS_INVALID_HANDLE where it can detect it. */
  cd_error* (*stream_destroy)(cd_stream* stream);

  /* Required. Blocks until all work enqueued on `stream` has completed.
   * Returns the first asynchronous error raised by that work (once). */
  cd_error* (*stream_synchronize)(cd_stream* stream);

  /* Optional (fallback: record an event and query it). Sets *is_complete to
   * 1 if all enqueued work has completed, else 0. Never blocks. */
  cd_error* (*stream_query)(cd_stream* stream, int32_t* is_complete);

  /* Optional (fallback: event_synchronize on the host). Makes all work
   * enqueued on `stream` after this call wait until `event`'s most recent
   * record has completed. Returns once enqueued. An event never recorded
   * imposes no wait. The event may have been recorded on any stream of
   * the same device. */
  cd_error* (*stream_wait_event)(cd_stream* stream, cd_event* event);

  /* Optional (fallback: the core records an event and runs `fn` on its own
   * host thread once the event completes). Enqueues `fn(user_data)`: it
   * runs after all work enqueued on `stream` before it has completed.
   * Callbacks of one stream run in enqueue order. Work enqueued after it
   * may start before it returns (an event + host thread cannot promise
   * more). Returns once enqueued. */
  cd_error* (*stream_add_host_callback)(cd_stream* stream, cd_host_callback_fn fn,
                                        void* user_data);

  /* --- events ----------------------------------------------------------- */

  /* Required. Creates an event on `device`; `flags` is a bitwise OR of
   * CD_EVENT_* flags. Owned by the caller, destroyed with event_destroy. A
   * new event counts as complete. */
  cd_error* (*event_create)(int32_t device, uint32_t flags, cd_event** event);

  /* Required. Destroys `event`. Does not wait for a pending record. */
  cd_error* (*event_destroy)(cd_event* event);

  /* Required. Captures the work enqueued on `stream` so far: the event
   * completes (and, with timing, takes its timestamp) when that work has
   * completed. Re-recording replaces the previous capture. Returns once
   * enqueued. The stream must belong to the event's device. */
  cd_error* (*event_record)(cd_event* event, cd_stream* stream);

  /* Required. Blocks until the event's most recent record has completed. */
  cd_error* (*event_synchronize)(cd_event* event);

  /* Required. Sets *is_complete to 1 if the most recent record has
   * completed (or the event was never recorded), else 0. Never blocks. */
  cd_error* (*event_query)(cd_event* event, int32_t* is_complete);

  /* Optional. Milliseconds between two completed, timing-enabled records,
   * `end` minus `start` (negative if `end` completed first). An event that
   * is not complete is CD_STATUS_NOT_READY; one made with
   * CD_EVENT_DISABLE_TIMING or never recorded is CD_STATUS_INVALID_ARGUMENT.
   * Never blocks. */
  cd_error* (*event_elapsed_time)(cd_event* start, cd_event* end, float* milliseconds);

  /* --- kernels ---------------------------------------------------------- */

  /* Optional (a backend with no kernels runs every op through the CPU
   * fallback policy). Called once after negotiation: the plugin calls
   * cd_core_api.kernel_register for each kernel it has. Runs on the
   * loading thread; must not block on device work. */
  cd_error* (*kernels_register)(cd_kernel_registry* registry);

  /* --- collectives (all optional) ----------------------------------------- */
  /* Semantics follow NCCL: buffers are device pointers on the
   * communicator's device; `count` is in elements of `dtype`; operations are
   * enqueued on `stream` and return once enqueued; every rank must call the
   * same operations in the same order. In-place is allowed where NCCL allows
   * it (send == recv for all_reduce/broadcast/reduce; for all_gather
   * send == recv + rank*count; for reduce_scatter send + rank*count == recv).
   */

  /* Creates a new clique id on the calling rank, to be sent to all ranks. */
  cd_error* (*comm_get_unique_id)(cd_comm_unique_id* id);
  /* Blocks until all `nranks` ranks have called it with the same `id`, so
   * ranks living in one process call it from separate threads. The caller
   * owns the communicator and destroys it with comm_destroy. A communicator
   * may be used from any thread, by one thread at a time. */
  cd_error* (*comm_init_rank)(int32_t device, int32_t nranks, const cd_comm_unique_id* id,
                              int32_t rank, cd_comm** comm);
  /* Destroys the communicator: blocks until its enqueued operations have
   * completed and, as NCCL's finalize does, until every rank has called
   * comm_destroy too (ranks in one process call it from separate threads).
   * The handle is invalid afterwards. */
  cd_error* (*comm_destroy)(cd_comm* comm);
  /* recv[i] = op over ranks of send[i], on every rank. */
  cd_error* (*comm_all_reduce)(const void* send, void* recv, size_t count, cd_dtype_t dtype,
                               cd_reduce_op_t op, cd_comm* comm, cd_stream* stream);
  /* recv = root's send, on every rank (send is read on root only). */
  cd_error* (*comm_broadcast)(const void* send, void* recv, size_t count, cd_dtype_t dtype,
                              int32_t root, cd_comm* comm, cd_stream* stream);
  /* recv on `root` = op over ranks of send; recv is unused elsewhere. */
  cd_error* (*comm_reduce)(const void* send, void* recv, size_t count, cd_dtype_t dtype,
                           cd_reduce_op_t op, int32_t root, cd_comm* comm, cd_stream* stream);
  /* recv[r*send_count + i] = send of rank r [i]. */
  cd_error* (*comm_all_gather)(const void* send, void* recv, size_t send_count,
                               cd_dtype_t dtype, cd_comm* comm, cd_stream* stream);
  /* recv[i] = op over ranks of send[rank*recv_count + i]. */
  cd_error* (*comm_reduce_scatter)(const void* send, void* recv, size_t recv_count,
                                   cd_dtype_t dtype, cd_reduce_op_t op, cd_comm* comm,
                                   cd_stream* stream);
  /* Point-to-point; each send must meet a recv on `peer` with equal count. */
  cd_error* (*comm_send)(const void* send, size_t count, cd_dtype_t dtype, int32_t peer,
                         cd_comm* comm, cd_stream* stream);
  cd_error* (*comm_recv)(void* recv, size_t count, cd_dtype_t dtype, int32_t peer,
                         cd_comm* comm, cd_stream* stream);
  /* Calls between group_start and group_end on the calling thread are
   * launched together at group_end. Groups nest. */
  cd_error* (*comm_group_start)(void);
  cd_error* (*comm_group_end)(void);
} cd_plugin_api;

/* The size of a v1.0 table: the smallest table a 1.x core accepts. */
#define CD_PLUGIN_API_SIZE_V1_0 CD_STRUCT_SIZE(cd_plugin_api, comm_group_end)

/* The entry symbol. Called once per load, on the loading thread, with the
 * core's services (valid until unload). Returns the plugin's table (static
 * storage, valid until unload), or NULL if the plugin refuses to run under
 * this core (for example another ABI major); the core then refuses it, and
 * its refusal quotes the last message the entry passed to cd_core_api.log
 * during the call (so log the reason before returning NULL). Must
 * not block on device work; probing for devices belongs in
 * device_get_count. */
#define CD_PLUGIN_ENTRY_SYMBOL "chipdock_plugin_entry"
typedef const cd_plugin_api* (*cd_plugin_entry_fn)(const cd_core_api* core);

/* The prototype every plugin defines (declared here so the definition is
 * type-checked). A plugin defines it with CD_EXPORT and nothing else. */
CD_EXPORT const cd_plugin_api* chipdock_plugin_entry(const cd_core_api* core);

/* ------------------------------------------------------------------------ */
/* Layout pins: a slot's offset never changes within a major version.        */
/* ------------------------------------------------------------------------ */
#define CD_SLOT_SIZE_ sizeof(void (*)(void))
#define CD_SLOTS_BEGIN_ offsetof(cd_plugin_api, error_get_code)
#define CD_PIN_SLOT_(field, index) \
  CD_STATIC_ASSERT(offsetof(cd_plugin_api, field) == CD_SLOTS_BEGIN_ + (index) * CD_SLOT_SIZE_, \
                   slot_##field)

/* Pinned across ALL majors: each side reads the other's version from here
 * before it knows which major the other speaks. */
#define CD_VERSION_OFFSET_ (sizeof(size_t) + sizeof(void*))
CD_STATIC_ASSERT(offsetof(cd_plugin_api, abi_major) == CD_VERSION_OFFSET_, plugin_abi_major_offset);
CD_STATIC_ASSERT(offsetof(cd_plugin_api, abi_minor) == CD_VERSION_OFFSET_ + 4, plugin_abi_minor_offset);
CD_STATIC_ASSERT(offsetof(cd_core_api, abi_major) == CD_VERSION_OFFSET_, core_abi_major_offset);
CD_STATIC_ASSERT(offsetof(cd_core_api, abi_minor) == CD_VERSION_OFFSET_ + 4, core_abi_minor_offset);
CD_STATIC_ASSERT(CD_SLOTS_BEGIN_ == offsetof(cd_plugin_api, version) + sizeof(const char*), slots_begin);
#if UINTPTR_MAX == 0xffffffffffffffffu
CD_STATIC_ASSERT(CD_SLOTS_BEGIN_ == 48, slots_begin_lp64);
#endif
CD_PIN_SLOT_(error_get_code, 0);
CD_PIN_SLOT_(error_get_message, 1);
CD_PIN_SLOT_(error_destroy, 2);
CD_PIN_SLOT_(plugin_shutdown, 3);
CD_PIN_SLOT_(device_get_count, 4);
CD_PIN_SLOT_(device_get_properties, 5);
CD_PIN_SLOT_(device_set_current, 6);
CD_PIN_SLOT_(device_get_current, 7);
CD_PIN_SLOT_(device_synchronize, 8);
CD_PIN_SLOT_(memory_allocate, 9);
CD_PIN_SLOT_(memory_free, 10);
CD_PIN_SLOT_(host_memory_allocate, 11);
CD_PIN_SLOT_(host_memory_free, 12);
CD_PIN_SLOT_(memory_get_info, 13);
CD_PIN_SLOT_(memory_set, 14);
CD_PIN_SLOT_(memory_set_async, 15);
CD_PIN_SLOT_(memcpy_host_to_device, 16);
CD_PIN_SLOT_(memcpy_device_to_host, 17);
CD_PIN_SLOT_(memcpy_device_to_device, 18);
CD_PIN_SLOT_(memcpy_host_to_device_async, 19);
CD_PIN_SLOT_(memcpy_device_to_host_async, 20);
CD_PIN_SLOT_(memcpy_device_to_device_async, 21);
CD_PIN_SLOT_(stream_create, 22);
CD_PIN_SLOT_(stream_destroy, 23);
CD_PIN_SLOT_(stream_synchronize, 24);
CD_PIN_SLOT_(stream_query, 25);
CD_PIN_SLOT_(stream_wait_event, 26);
CD_PIN_SLOT_(stream_add_host_callback, 27);
CD_PIN_SLOT_(event_create, 28);
CD_PIN_SLOT_(event_destroy, 29);
CD_PIN_SLOT_(event_record, 30);
CD_PIN_SLOT_(event_synchronize, 31);
CD_PIN_SLOT_(event_query, 32);
CD_PIN_SLOT_(event_elapsed_time, 33);
CD_PIN_SLOT_(kernels_register, 34);
CD_PIN_SLOT_(comm_get_unique_id, 35);
CD_PIN_SLOT_(comm_init_rank, 36);
CD_PIN_SLOT_(comm_destroy, 37);
CD_PIN_SLOT_(comm_all_reduce, 38);
CD_PIN_SLOT_(comm_broadcast, 39);
CD_PIN_SLOT_(comm_reduce, 40);
CD_PIN_SLOT_(comm_all_gather, 41);
CD_PIN_SLOT_(comm_reduce_scatter, 42);
CD_PIN_SLOT_(comm_send, 43);
CD_PIN_SLOT_(comm_recv, 44);
CD_PIN_SLOT_(comm_group_start, 45);
CD_PIN_SLOT_(comm_group_end, 46);

/* Layouts of the data structs (LP64 values; other models check alignment
 * only). */
#if UINTPTR_MAX == 0xffffffffffffffffu
CD_STATIC_ASSERT(sizeof(cd_tensor_view) == 64, tensor_view_size);
CD_STATIC_ASSERT(sizeof(cd_attribute) == 40, attribute_size);
CD_STATIC_ASSERT(sizeof(cd_kernel_context) == 80, kernel_context_size);
CD_STATIC_ASSERT(sizeof(cd_kernel_def) == 48, kernel_def_size);
CD_STATIC_ASSERT(sizeof(cd_device_properties) == 560, device_properties_size);
CD_STATIC_ASSERT(sizeof(cd_comm_unique_id) == 128, unique_id_size);
#endif

CD_EXTERN_C_END

#endif /* CHIPDOCK_DEVICE_API_H_ */
