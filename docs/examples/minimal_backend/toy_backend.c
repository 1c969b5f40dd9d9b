/*
 * toy_backend.c: a complete chipdock backend in one C99 file.
 *
 * The "device" is the host. Device memory is malloc'ed host memory, and every
 * stream runs synchronously: each enqueue does its work before it returns.
 * That satisfies the ordering model in device_api.h, because work that is
 * already done is ordered with everything. Kernels and collectives are left
 * out (their slots stay NULL), so the core runs ops through its CPU fallback.
 *
 * To start a real backend, copy this file and keep its shape: check the
 * arguments, call the vendor runtime, turn its failures into cd_errors. Every
 * slot follows the rules device_api.h states once for all: return NULL or a
 * new cd_error* the CALLER owns (freed with error_destroy); report a bad
 * pointer, ordinal or handle as an error, never crash or exit(); write
 * out-pointers only on success; be callable from any thread (here one mutex
 * guards all shared state). Builds as C99 and as C++17.
 *
 * The TOY_* macros at the end plant one fault each for the core's loader
 * tests (core/tests/plugins/build.py). A real backend has none of them.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, posix_memalign */

#include <pthread.h>
#include <signal.h> /* raise: only the TOY_CRASH_IN_ENTRY test hook */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chipdock/device_api.h"

#define TOY_VERSION "0.1.0"                /* keep in step with CMakeLists.txt */
#define TOY_MAX_DEVICES 64
#define TOY_DEVICE_BYTES ((size_t)1 << 30) /* each toy device holds 1 GiB */
#define TOY_ALIGNMENT 256                  /* what memory_allocate promises */

/* ---- errors -------------------------------------------------------------- */
/* The plugin defines cd_error. If even an error cannot be allocated, the
 * static one below is returned; error_destroy knows not to free it. */
struct cd_error {
  cd_status_t code;
  char message[256]; /* longer messages are truncated */
};
static cd_error toy_oom_error = {CD_STATUS_OUT_OF_MEMORY, "out of host memory"};

#if defined(__GNUC__) /* lets the compiler check every message's format */
static cd_error* toy_error(cd_status_t code, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
#endif
static cd_error* toy_error(cd_status_t code, const char* format, ...) {
  va_list args;
  cd_error* error = (cd_error*)malloc(sizeof(cd_error));
  if (error == NULL) return &toy_oom_error;
  error->code = code;
  va_start(args, format);
  vsnprintf(error->message, sizeof(error->message), format, args);
  va_end(args);
  return error;
}

/* Error paths stay one line long: return the error of `expr`, or a new one
 * when `cond` does not hold. */
#define TOY_TRY(expr) \
  do { cd_error* toy_e_ = (expr); if (toy_e_ != NULL) return toy_e_; } while (0)
#define TOY_CHECK(cond, code, ...) \
  do { if (!(cond)) return toy_error((code), __VA_ARGS__); } while (0)
#define TOY_BAD CD_STATUS_INVALID_ARGUMENT

static cd_status_t toy_error_get_code(const cd_error* error) {
  return error != NULL ? error->code : TOY_BAD;
}
static const char* toy_error_get_message(const cd_error* error) {
  return error != NULL ? error->message : "(NULL error)"; /* never NULL */
}
static void toy_error_destroy(cd_error* error) {
  if (error != &toy_oom_error) free(error);
}

/* ---- bookkeeping --------------------------------------------------------- */
/* Every allocation, stream and event handed out is on one list, so a bad
 * free or a destroyed handle is reported instead of corrupting memory. A
 * real backend would use a hash map; the point is to check, not to trust. */
enum { TOY_ALLOCATION = 1, TOY_STREAM = 2, TOY_EVENT = 3 };
typedef struct toy_object {
  struct toy_object* next;
  int32_t kind;
  int32_t device;
} toy_object;
typedef struct toy_allocation {
  toy_object head;
  char* base;
  size_t bytes;
} toy_allocation;
struct cd_stream { toy_object head; };
struct cd_event {
  toy_object head;
  uint32_t flags;
  int32_t recorded; /* 0 until the first event_record */
  double time_ms;   /* CLOCK_MONOTONIC at the last record */
};

static pthread_mutex_t toy_lock = PTHREAD_MUTEX_INITIALIZER;
static toy_object* toy_live = NULL;      /* guarded by toy_lock */
static size_t toy_used[TOY_MAX_DEVICES]; /* guarded by toy_lock */

/* The link that points at the live `handle` of `kind`, or NULL. Lock held. */
static toy_object** toy_find(const void* handle, int32_t kind) {
  toy_object** link;
  for (link = &toy_live; *link != NULL; link = &(*link)->next)
    if ((const void*)*link == handle && (*link)->kind == kind) return link;
  return NULL;
}

/* The allocation of `device` that contains address `p`, or NULL. Lock held. */
static toy_allocation* toy_find_allocation(int32_t device, uintptr_t p) {
  toy_object* o;
  for (o = toy_live; o != NULL; o = o->next) {
    toy_allocation* a = (toy_allocation*)o;
    if (o->kind == TOY_ALLOCATION && o->device == device && p >= (uintptr_t)a->base &&
        p - (uintptr_t)a->base < a->bytes)
      return a;
  }
  return NULL;
}

/* NULL if [ptr, ptr + bytes) lies inside one allocation of `device`. */
static cd_error* toy_check_range(int32_t device, const void* ptr, size_t bytes) {
  size_t room = 0;
  toy_allocation* a;
  pthread_mutex_lock(&toy_lock);
  a = toy_find_allocation(device, (uintptr_t)ptr);
  if (a != NULL) room = a->bytes - (size_t)((uintptr_t)ptr - (uintptr_t)a->base);
  pthread_mutex_unlock(&toy_lock);
  TOY_CHECK(a != NULL, TOY_BAD, "%p is not memory of toy:%d", ptr, (int)device);
  TOY_CHECK(bytes <= room, CD_STATUS_OUT_OF_RANGE,
            "%zu bytes at %p overrun the allocation (%zu bytes left)", bytes, ptr, room);
  return NULL;
}

/* NULL if `handle` is a live object of `kind` on `device` (-1: any device). */
static cd_error* toy_check_handle(const void* handle, int32_t kind, int32_t device) {
  const char* what = kind == TOY_STREAM ? "stream" : "event";
  toy_object** link;
  int32_t owner;
  pthread_mutex_lock(&toy_lock);
  link = toy_find(handle, kind);
  owner = link != NULL ? (*link)->device : -1;
  pthread_mutex_unlock(&toy_lock);
  TOY_CHECK(link != NULL, CD_STATUS_INVALID_HANDLE, "%s %p is unknown or destroyed", what,
            handle);
  TOY_CHECK(device < 0 || owner == device, TOY_BAD, "%s %p belongs to toy:%d, not toy:%d",
            what, handle, (int)owner, (int)device);
  return NULL;
}

/* ---- devices ------------------------------------------------------------- */
/* A real backend asks its runtime here. If the runtime or driver is missing
 * or too old, it returns CD_STATUS_UNAVAILABLE and says why: the core then
 * lists the backend with zero devices and that reason. */
static cd_error* toy_device_get_count(int32_t* count) {
  const char* env = getenv("TOY_DEVICES");
  long n = 1;
  char* end = NULL;
  TOY_CHECK(count != NULL, TOY_BAD, "count is NULL");
#ifdef TOY_NO_DEVICES_REASON /* test hook: a vendor runtime that is not there */
  (void)env, (void)n, (void)end;
  return toy_error(CD_STATUS_UNAVAILABLE, "%s", TOY_NO_DEVICES_REASON);
#else
  if (env != NULL && *env != '\0') n = strtol(env, &end, 10);
  TOY_CHECK(end == NULL || (*end == '\0' && n >= 0 && n <= TOY_MAX_DEVICES),
            CD_STATUS_UNAVAILABLE, "TOY_DEVICES='%s' is not in [0, %d]", env, TOY_MAX_DEVICES);
  *count = (int32_t)n;
  return NULL;
#endif
}

static cd_error* toy_check_device(int32_t device) {
  int32_t count = 0;
  TOY_TRY(toy_device_get_count(&count));
  TOY_CHECK(device >= 0 && device < count, TOY_BAD, "no device toy:%d (there are %d)",
            (int)device, (int)count);
  return NULL;
}

static cd_error* toy_device_get_properties(int32_t device, cd_device_properties* props) {
  const size_t head = offsetof(cd_device_properties, name);
  cd_device_properties mine;
  size_t size;
  int32_t dtype;
  TOY_TRY(toy_check_device(device));
  TOY_CHECK(props != NULL && props->struct_size >= CD_STRUCT_SIZE(cd_device_properties, reserved),
            TOY_BAD, "props is NULL or smaller than in v1.0");
  memset(&mine, 0, sizeof(mine));
  snprintf(mine.name, sizeof(mine.name), "chipdock toy device %d", (int)device);
#ifdef TOY_DEVICE_NAME_OVERRIDE /* test hook (core/tests/plugins/build.py): a hostile device name */
  snprintf(mine.name, sizeof(mine.name), "%s", TOY_DEVICE_NAME_OVERRIDE);
#endif
  snprintf(mine.vendor, sizeof(mine.vendor), "chipdock");
  snprintf(mine.architecture, sizeof(mine.architecture), "host");
  mine.total_memory = TOY_DEVICE_BYTES;
  for (dtype = 1; dtype < CD_DTYPE_COUNT; ++dtype) /* memory can hold any dtype */
    mine.supported_dtypes |= CD_DTYPE_BIT(dtype);
  mine.compute_units = 1;
  mine.dlpack_device_type = CD_DLPACK_CPU;
  mine.host_addressable = 1;
  /* The size rule: write only the fields both sides know, and never the
   * header (struct_size, next), which belongs to the caller. */
  size = props->struct_size < sizeof(mine) ? props->struct_size : sizeof(mine);
  memcpy((char*)props + head, (const char*)&mine + head, size - head);
  return NULL;
}

/* Work is done before its enqueue returns, so no device ever has work left. */
static cd_error* toy_device_synchronize(int32_t device) { return toy_check_device(device); }

/* ---- memory -------------------------------------------------------------- */
static cd_error* toy_memory_allocate(int32_t device, size_t bytes, void** ptr) {
  toy_allocation* a = NULL;
  void* base = NULL;
  cd_error* error = NULL;
  TOY_TRY(toy_check_device(device));
  TOY_CHECK(ptr != NULL, TOY_BAD, "ptr is NULL");
  if (bytes == 0) { *ptr = NULL; return NULL; }
  pthread_mutex_lock(&toy_lock);
  if (bytes > TOY_DEVICE_BYTES - toy_used[device]) {
    error = toy_error(CD_STATUS_OUT_OF_MEMORY, "%zu bytes do not fit on toy:%d (%zu of %zu "
                      "in use)", bytes, (int)device, toy_used[device], TOY_DEVICE_BYTES);
  } else if ((a = (toy_allocation*)malloc(sizeof(*a))) == NULL ||
             posix_memalign(&base, TOY_ALIGNMENT, bytes) != 0) {
    free(a);
    error = toy_error(CD_STATUS_OUT_OF_MEMORY, "host memory exhausted (%zu bytes)", bytes);
  } else {
    a->head.kind = TOY_ALLOCATION;
    a->head.device = device;
    a->head.next = toy_live;
    a->base = (char*)base;
    a->bytes = bytes;
    toy_live = &a->head;
    toy_used[device] += bytes;
    *ptr = base;
  }
  pthread_mutex_unlock(&toy_lock);
  return error;
}

static cd_error* toy_memory_free(int32_t device, void* ptr) {
  toy_allocation* a;
  TOY_TRY(toy_check_device(device));
  if (ptr == NULL) return NULL;
  pthread_mutex_lock(&toy_lock);
  a = toy_find_allocation(device, (uintptr_t)ptr);
  if (a != NULL && a->base == (char*)ptr) {
    *toy_find(a, TOY_ALLOCATION) = a->head.next; /* unlink */
    toy_used[device] -= a->bytes;
  } else {
    a = NULL; /* unknown, already freed, or an interior pointer */
  }
  pthread_mutex_unlock(&toy_lock);
  TOY_CHECK(a != NULL, TOY_BAD, "%p is not an allocation of toy:%d", ptr, (int)device);
  free(a->base);
  free(a);
  return NULL;
}

static cd_error* toy_memory_get_info(int32_t device, size_t* free_bytes, size_t* total_bytes) {
  TOY_TRY(toy_check_device(device));
  TOY_CHECK(free_bytes != NULL && total_bytes != NULL, TOY_BAD, "NULL output");
  pthread_mutex_lock(&toy_lock);
  *free_bytes = TOY_DEVICE_BYTES - toy_used[device];
  pthread_mutex_unlock(&toy_lock);
  *total_bytes = TOY_DEVICE_BYTES;
  return NULL;
}

static cd_error* toy_memory_set(int32_t device, void* ptr, int32_t value, size_t bytes) {
  TOY_TRY(toy_check_device(device));
  if (bytes == 0) return NULL;
  TOY_TRY(toy_check_range(device, ptr, bytes));
  memset(ptr, value & 0xff, bytes);
  return NULL;
}

/* One body for the six copies. A zero-byte copy is a no-op. */
static cd_error* toy_copy(int32_t device, void* dst, int dst_on_device, const void* src,
                          int src_on_device, size_t bytes) {
  TOY_TRY(toy_check_device(device));
  if (bytes == 0) return NULL;
  TOY_CHECK(dst != NULL && src != NULL, TOY_BAD, "NULL pointer");
  if (dst_on_device) TOY_TRY(toy_check_range(device, dst, bytes));
  if (src_on_device) TOY_TRY(toy_check_range(device, src, bytes));
  TOY_CHECK(!dst_on_device || !src_on_device || (uintptr_t)dst >= (uintptr_t)src + bytes ||
            (uintptr_t)src >= (uintptr_t)dst + bytes, TOY_BAD, "the ranges overlap");
  memcpy(dst, src, bytes);
  return NULL;
}
static cd_error* toy_memcpy_h2d(int32_t device, void* dst, const void* src, size_t bytes) {
  return toy_copy(device, dst, 1, src, 0, bytes);
}
static cd_error* toy_memcpy_d2h(int32_t device, void* dst, const void* src, size_t bytes) {
  return toy_copy(device, dst, 0, src, 1, bytes);
}
static cd_error* toy_memcpy_d2d(int32_t device, void* dst, const void* src, size_t bytes) {
  return toy_copy(device, dst, 1, src, 1, bytes);
}

/* The _async forms: a real backend enqueues the work and returns. The toy
 * checks the stream and does the work at once ("enqueued and complete"). */
static cd_error* toy_memory_set_async(int32_t device, void* ptr, int32_t value, size_t bytes,
                                      cd_stream* stream) {
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, device));
  return toy_memory_set(device, ptr, value, bytes);
}
static cd_error* toy_memcpy_h2d_async(int32_t device, void* dst, const void* src,
                                      size_t bytes, cd_stream* stream) {
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, device));
  return toy_copy(device, dst, 1, src, 0, bytes);
}
static cd_error* toy_memcpy_d2h_async(int32_t device, void* dst, const void* src,
                                      size_t bytes, cd_stream* stream) {
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, device));
  return toy_copy(device, dst, 0, src, 1, bytes);
}
static cd_error* toy_memcpy_d2d_async(int32_t device, void* dst, const void* src,
                                      size_t bytes, cd_stream* stream) {
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, device));
  return toy_copy(device, dst, 1, src, 1, bytes);
}

/* ---- streams and events -------------------------------------------------- */
/* A new tracked stream or event of `size` bytes; the caller owns it. */
static cd_error* toy_create(int32_t device, int32_t kind, size_t size, toy_object** out) {
  toy_object* o;
  TOY_TRY(toy_check_device(device));
  if ((o = (toy_object*)calloc(1, size)) == NULL) return &toy_oom_error;
  o->kind = kind;
  o->device = device;
  pthread_mutex_lock(&toy_lock);
  o->next = toy_live;
  toy_live = o;
  pthread_mutex_unlock(&toy_lock);
  *out = o;
  return NULL;
}

/* A toy stream never has pending work, so destroy need not wait. */
static cd_error* toy_destroy(void* handle, int32_t kind) {
  toy_object** link;
  toy_object* o = NULL;
  pthread_mutex_lock(&toy_lock);
  if ((link = toy_find(handle, kind)) != NULL) {
    o = *link;
    *link = o->next;
  }
  pthread_mutex_unlock(&toy_lock);
  TOY_CHECK(o != NULL, CD_STATUS_INVALID_HANDLE, "%p is unknown or destroyed", handle);
  free(o);
  return NULL;
}

/* Nothing is ever pending: synchronize only checks, query always says done. */
static cd_error* toy_query(const void* handle, int32_t kind, int32_t* is_complete) {
  TOY_TRY(toy_check_handle(handle, kind, -1));
  TOY_CHECK(is_complete != NULL, TOY_BAD, "is_complete is NULL");
  *is_complete = 1;
  return NULL;
}

static cd_error* toy_stream_create(int32_t device, uint32_t flags, cd_stream** stream) {
  toy_object* o;
  TOY_CHECK(flags == CD_STREAM_FLAGS_DEFAULT, TOY_BAD, "unknown stream flags 0x%x",
            (unsigned)flags);
  TOY_CHECK(stream != NULL, TOY_BAD, "stream is NULL");
  TOY_TRY(toy_create(device, TOY_STREAM, sizeof(cd_stream), &o));
  *stream = (cd_stream*)o;
  return NULL;
}
static cd_error* toy_stream_destroy(cd_stream* stream) { return toy_destroy(stream, TOY_STREAM); }
static cd_error* toy_stream_synchronize(cd_stream* stream) {
  return toy_check_handle(stream, TOY_STREAM, -1);
}
static cd_error* toy_stream_query(cd_stream* stream, int32_t* is_complete) {
  return toy_query(stream, TOY_STREAM, is_complete);
}
/* The event's recorded work is complete already: there is nothing to wait for. */
static cd_error* toy_stream_wait_event(cd_stream* stream, cd_event* event) {
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, -1));
  return toy_check_handle(event, TOY_EVENT, stream->head.device);
}
/* All earlier work on the stream is complete, so the callback runs now, on
 * the calling thread and outside the lock (it may call into the plugin). */
static cd_error* toy_stream_add_host_callback(cd_stream* stream, cd_host_callback_fn fn,
                                              void* user_data) {
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, -1));
  TOY_CHECK(fn != NULL, TOY_BAD, "fn is NULL");
  fn(user_data);
  return NULL;
}

static cd_error* toy_event_create(int32_t device, uint32_t flags, cd_event** event) {
  toy_object* o;
  TOY_CHECK((flags & ~CD_EVENT_DISABLE_TIMING) == 0, TOY_BAD, "unknown event flags 0x%x",
            (unsigned)flags);
  TOY_CHECK(event != NULL, TOY_BAD, "event is NULL");
  TOY_TRY(toy_create(device, TOY_EVENT, sizeof(cd_event), &o));
  ((cd_event*)o)->flags = flags; /* nobody else has the handle yet */
  *event = (cd_event*)o;
  return NULL;
}
static cd_error* toy_event_destroy(cd_event* event) { return toy_destroy(event, TOY_EVENT); }
static cd_error* toy_event_record(cd_event* event, cd_stream* stream) {
  struct timespec now;
  TOY_TRY(toy_check_handle(stream, TOY_STREAM, -1));
  TOY_TRY(toy_check_handle(event, TOY_EVENT, stream->head.device));
  clock_gettime(CLOCK_MONOTONIC, &now); /* the captured work is done: stamp now */
  pthread_mutex_lock(&toy_lock);
  event->recorded = 1;
  event->time_ms = (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
  pthread_mutex_unlock(&toy_lock);
  return NULL;
}
static cd_error* toy_event_synchronize(cd_event* event) {
  return toy_check_handle(event, TOY_EVENT, -1);
}
static cd_error* toy_event_query(cd_event* event, int32_t* is_complete) {
  return toy_query(event, TOY_EVENT, is_complete);
}
static cd_error* toy_event_elapsed_time(cd_event* start, cd_event* end, float* milliseconds) {
  int timed;
  TOY_TRY(toy_check_handle(start, TOY_EVENT, -1));
  TOY_TRY(toy_check_handle(end, TOY_EVENT, start->head.device));
  TOY_CHECK(milliseconds != NULL, TOY_BAD, "milliseconds is NULL");
  pthread_mutex_lock(&toy_lock);
  timed = start->recorded && end->recorded &&
          ((start->flags | end->flags) & CD_EVENT_DISABLE_TIMING) == 0;
  if (timed) *milliseconds = (float)(end->time_ms - start->time_ms);
  pthread_mutex_unlock(&toy_lock);
  TOY_CHECK(timed, TOY_BAD, "both events need a record with timing enabled");
  return NULL;
}

/* ---- lifecycle and entry ------------------------------------------------- */
/* Called after the core released everything. Whatever is still live leaked
 * in the caller: free it so that a reload starts clean, and say so. */
static cd_error* toy_plugin_shutdown(void) {
  int leaked = 0;
  pthread_mutex_lock(&toy_lock);
  while (toy_live != NULL) {
    toy_object* o = toy_live;
    toy_live = o->next;
    if (o->kind == TOY_ALLOCATION) free(((toy_allocation*)o)->base);
    free(o);
    ++leaked;
  }
  memset(toy_used, 0, sizeof(toy_used));
  pthread_mutex_unlock(&toy_lock);
  TOY_CHECK(leaked == 0, TOY_BAD, "%d allocations, streams or events leaked", leaked);
  return NULL;
}

#ifdef TOY_COPY_KERNEL
/* The backend guide's "copy" kernel (docs/backend_guide.md, Kernels), built
 * by the test variant copy_kernel; the toy itself registers no kernels. */
static const cd_core_api* toy_core; /* set in the entry: toy_core = core; */

static int64_t toy_numel(const cd_tensor_view* v) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < v->ndim; ++d) n *= v->shape[d];
  return n;
}

/* Address of the element whose row-major linear index is `i`. */
static char* toy_element(const cd_tensor_view* v, int64_t i, size_t itemsize) {
  int64_t offset = 0;
  int32_t d;
  for (d = v->ndim - 1; d >= 0; --d) {
    offset += (i % v->shape[d]) * v->strides[d];
    i /= v->shape[d];
  }
  return (char*)v->data + v->byte_offset + offset * (int64_t)itemsize;
}

/* The "copy" op for float32: out = in, same shape, any strides. The core
 * has allocated `out`; the kernel only writes it. */
static cd_error* toy_copy_f32(const cd_kernel_context* ctx) {
  const cd_tensor_view *in, *out;
  float* scratch = NULL;
  int64_t i, n;
  int32_t d;
  TOY_CHECK(ctx != NULL && ctx->num_inputs == 1 && ctx->num_outputs == 1, TOY_BAD,
            "copy takes 1 input and 1 output");
  in = ctx->inputs[0];
  out = ctx->outputs[0];
  TOY_CHECK(in->format == CD_FORMAT_STRIDED && out->format == CD_FORMAT_STRIDED, TOY_BAD,
            "unknown memory format");
  TOY_CHECK(in->ndim == out->ndim, TOY_BAD, "%d-d input, %d-d output", (int)in->ndim,
            (int)out->ndim);
  for (d = 0; d < in->ndim; ++d)
    TOY_CHECK(in->shape[d] == out->shape[d], TOY_BAD, "shapes differ in dim %d", (int)d);
  TOY_TRY(toy_check_handle(ctx->stream, TOY_STREAM, ctx->device));
  n = toy_numel(out);
  if (toy_core->workspace_allocate(ctx, (size_t)n * sizeof(float), (void**)&scratch) !=
      CD_STATUS_OK)
    return toy_error(CD_STATUS_OUT_OF_MEMORY, "no workspace for %lld floats", (long long)n);
  for (i = 0; i < n; ++i) memcpy(&scratch[i], toy_element(in, i, sizeof(float)), sizeof(float));
  for (i = 0; i < n; ++i) memcpy(toy_element(out, i, sizeof(float)), &scratch[i], sizeof(float));
  return NULL;
}

/* The kernels_register slot: one cd_kernel_def per (op, dtype signature). */
static cd_error* toy_kernels_register(cd_kernel_registry* registry) {
  static const cd_dtype_t f32_to_f32[2] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT32};
  cd_kernel_def def;
  /* Both services the kernels use must lie within the core's table (a core
   * may be older or smaller than these headers: ABI versioning). */
  TOY_CHECK(toy_core->struct_size >= CD_STRUCT_SIZE(cd_core_api, workspace_allocate),
            CD_STATUS_UNIMPLEMENTED, "this core's table (%zu bytes) has no kernel_register or "
            "workspace_allocate", toy_core->struct_size);
  memset(&def, 0, sizeof(def));
  def.struct_size = sizeof(def);
  def.op = "copy";
  def.dtypes = f32_to_f32; /* inputs, then outputs */
  def.num_dtypes = 2;
  def.fn = toy_copy_f32;
  TOY_CHECK(toy_core->kernel_register(registry, &def) == CD_STATUS_OK, CD_STATUS_INTERNAL,
            "the core refused copy(float32)");
  return NULL;
}
#endif

#ifdef TOY_ATTRIBUTE_ECHO
/* Test hook (core/tests/test_launch_attributes.py): a float32 "softmax"
 * that reports the attributes it received instead of computing: out[0] =
 * num_attributes, out[1] = the int `axis` (-99 when absent). It shows
 * which attributes each launch path passes. */
static const cd_core_api* toy_echo_core;

static cd_error* toy_echo_softmax(const cd_kernel_context* ctx) {
  const cd_tensor_view* out;
  float* data;
  float axis = -99.0f;
  int32_t i;
  TOY_CHECK(ctx != NULL && ctx->num_outputs == 1 && ctx->outputs[0]->ndim >= 1 &&
                ctx->outputs[0]->shape[ctx->outputs[0]->ndim - 1] >= 2,
            TOY_BAD, "the echo needs an output of at least 2 elements in its last dim");
  out = ctx->outputs[0];
  for (i = 0; i < ctx->num_attributes; ++i) {
    const cd_attribute* a = ctx->attributes[i];
    if (strcmp(a->name, "axis") == 0 && a->type == CD_ATTR_INT) axis = (float)a->value.i;
  }
  data = (float*)((char*)out->data + out->byte_offset);
  data[0] = (float)ctx->num_attributes;
  data[out->strides[out->ndim - 1]] = axis;
  return NULL;
}

static cd_error* toy_echo_register(cd_kernel_registry* registry) {
  static const cd_dtype_t f32_to_f32[2] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT32};
  cd_kernel_def def;
  TOY_CHECK(toy_echo_core->struct_size >= CD_STRUCT_SIZE(cd_core_api, kernel_register),
            CD_STATUS_UNIMPLEMENTED, "this core has no kernel_register");
  memset(&def, 0, sizeof(def));
  def.struct_size = sizeof(def);
  def.op = "softmax";
  def.dtypes = f32_to_f32;
  def.num_dtypes = 2;
  def.fn = toy_echo_softmax;
  TOY_CHECK(toy_echo_core->kernel_register(registry, &def) == CD_STATUS_OK, CD_STATUS_INTERNAL,
            "the core refused softmax(float32)");
  return NULL;
}
#endif

#ifdef TOY_SCALE_KERNEL /* test hook (core/tests/test_opset_versions.py): a kernel of the test op toy_scale */
static const cd_core_api* toy_scale_core;
/* out = x * factor for a contiguous float32 x (the test passes no other); any
 * other attribute is refused, so a test sees every attribute the core hands
 * it. The toy runs synchronously, so the kernel computes at once. */
static cd_error* toy_scale_kernel(const cd_kernel_context* ctx) {
  double factor = 1.0;
  int64_t n = 1, k;
  int32_t i;
  const cd_tensor_view* x = ctx->inputs[0];
  const cd_tensor_view* out = ctx->outputs[0];
  for (i = 0; i < ctx->num_attributes; ++i) {
    const cd_attribute* a = ctx->attributes[i];
    TOY_CHECK(strcmp(a->name, "factor") == 0 && a->type == CD_ATTR_FLOAT, TOY_BAD,
              "toy_scale: handed attribute '%s', which this backend does not know", a->name);
    factor = a->value.f;
  }
  for (i = 0; i < x->ndim; ++i) n *= x->shape[i];
  for (k = 0; k < n; ++k) {
    const float* in = (const float*)((const char*)x->data + x->byte_offset);
    ((float*)((char*)out->data + out->byte_offset))[k] = (float)(in[k] * factor);
  }
  return NULL;
}
static cd_error* toy_scale_register(cd_kernel_registry* registry) {
  static const cd_dtype_t dtypes[2] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT32};
  cd_kernel_def def;
  TOY_CHECK(toy_scale_core->struct_size >= CD_STRUCT_SIZE(cd_core_api, kernel_register),
            CD_STATUS_UNIMPLEMENTED, "this core has no kernel_register");
  memset(&def, 0, sizeof(def));
  def.struct_size = sizeof(def);
  def.op = "toy_scale";
  def.dtypes = dtypes;
  def.fn = toy_scale_kernel;
  def.num_dtypes = 2;
  TOY_CHECK(toy_scale_core->kernel_register(registry, &def) == CD_STATUS_OK, CD_STATUS_INTERNAL,
            "the core refused toy_scale(float32)");
  return NULL;
}
#endif

#ifdef TOY_NO_ENTRY /* test hook: the entry symbol is missing */
#define TOY_ENTRY toy_entry_under_another_name
#else
#define TOY_ENTRY chipdock_plugin_entry
#endif

static cd_plugin_api toy_api; /* static storage, valid until unload */

CD_EXTERN_C CD_EXPORT const cd_plugin_api* TOY_ENTRY(const cd_core_api* core);
CD_EXTERN_C CD_EXPORT const cd_plugin_api* TOY_ENTRY(const cd_core_api* core) {
  /* Refuse a core of another major: its tables mean something else. Use a
   * core service only if the core's table is large enough to hold it. */
  if (core == NULL || core->abi_major != CD_ABI_VERSION_MAJOR) return NULL;
  if (core->struct_size >= CD_STRUCT_SIZE(cd_core_api, log) && core->log != NULL)
    core->log(CD_LOG_DEBUG, "toy backend " TOY_VERSION " loaded");

  toy_api.struct_size = sizeof(cd_plugin_api);
  toy_api.abi_major = CD_ABI_VERSION_MAJOR;
  toy_api.abi_minor = CD_ABI_VERSION_MINOR;
  toy_api.name = "toy";        /* must equal the manifest's "name" */
  toy_api.device_type = "toy"; /* ... and its "device_type" */
  toy_api.version = TOY_VERSION;
  toy_api.error_get_code = toy_error_get_code;
  toy_api.error_get_message = toy_error_get_message;
  toy_api.error_destroy = toy_error_destroy;
  toy_api.plugin_shutdown = toy_plugin_shutdown;
  toy_api.device_get_count = toy_device_get_count;
  toy_api.device_get_properties = toy_device_get_properties;
  toy_api.device_synchronize = toy_device_synchronize;
  toy_api.memory_allocate = toy_memory_allocate;
  toy_api.memory_free = toy_memory_free;
  toy_api.memory_get_info = toy_memory_get_info;
  toy_api.memory_set = toy_memory_set;
  toy_api.memory_set_async = toy_memory_set_async;
  toy_api.memcpy_host_to_device = toy_memcpy_h2d;
  toy_api.memcpy_device_to_host = toy_memcpy_d2h;
  toy_api.memcpy_device_to_device = toy_memcpy_d2d;
  toy_api.memcpy_host_to_device_async = toy_memcpy_h2d_async;
  toy_api.memcpy_device_to_host_async = toy_memcpy_d2h_async;
  toy_api.memcpy_device_to_device_async = toy_memcpy_d2d_async;
  toy_api.stream_create = toy_stream_create;
  toy_api.stream_destroy = toy_stream_destroy;
  toy_api.stream_synchronize = toy_stream_synchronize;
  toy_api.stream_query = toy_stream_query;
  toy_api.stream_wait_event = toy_stream_wait_event;
  toy_api.stream_add_host_callback = toy_stream_add_host_callback;
  toy_api.event_create = toy_event_create;
  toy_api.event_destroy = toy_event_destroy;
  toy_api.event_record = toy_event_record;
  toy_api.event_synchronize = toy_event_synchronize;
  toy_api.event_query = toy_event_query;
  toy_api.event_elapsed_time = toy_event_elapsed_time;
  /* Left NULL, so the core uses its fallback or reports "unimplemented":
   * device_set/get_current, host_memory_*, kernels_register, comm_*. */

  /* ---- test hooks (core/tests/plugins/build.py); a real backend has none */
#ifdef TOY_COPY_KERNEL
  toy_core = core;
  toy_api.kernels_register = toy_kernels_register; /* the guide's copy kernel */
#endif
#ifdef TOY_ATTRIBUTE_ECHO
  toy_echo_core = core;
  toy_api.kernels_register = toy_echo_register; /* softmax(float32) echoes its attributes */
#endif
#ifdef TOY_LOG_UNGUARDED
  core->log(CD_LOG_DEBUG, "logged without checking struct_size"); /* past a small core's table */
#endif
#ifdef TOY_ABI_MAJOR_OVERRIDE
  toy_api.abi_major = TOY_ABI_MAJOR_OVERRIDE; /* claims another major */
#endif
#ifdef TOY_UNDERSIZED_TABLE
  toy_api.struct_size = offsetof(cd_plugin_api, memory_allocate); /* too small */
#endif
#ifdef TOY_NULL_REQUIRED_SLOT
  toy_api.memory_allocate = NULL; /* a required slot is missing */
#endif
#ifdef TOY_NAME_OVERRIDE
  toy_api.name = TOY_NAME_OVERRIDE; /* disagrees with the manifest */
#endif
#ifdef TOY_DEVICE_TYPE_OVERRIDE
  toy_api.device_type = TOY_DEVICE_TYPE_OVERRIDE; /* claims another device type (e.g. "cpu") */
#endif
#ifdef TOY_SCALE_KERNEL
  toy_scale_core = core;
  toy_api.kernels_register = toy_scale_register; /* toy_scale(float32) */
#endif
#ifdef TOY_CRASH_IN_ENTRY /* a crash in the entry: the signal named (SIGSEGV, SIGABRT), after a last word */
  fputs("toy: crashing in the entry (planted by TOY_CRASH_IN_ENTRY)\n", stderr);
  raise(TOY_CRASH_IN_ENTRY);
#endif
#ifdef TOY_HANG_IN_ENTRY
  for (;;) { /* never returns from the entry */
    struct timespec second = {1, 0};
    nanosleep(&second, NULL);
  }
#endif
#ifdef TOY_REFUSE_CORE
  return NULL; /* refuses every core */
#else
  return &toy_api;
#endif
}
