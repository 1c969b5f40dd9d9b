/*
 * mutant_proxy.c: the mutation proxy, a backend that wraps another backend
 * and plants one generic bug (a "mutant") at a time, chosen at run time.
 *
 * The mutation harness (chipdock_conformance/mutation.py) measures how many
 * planted bugs the conformance suite catches. Rebuilding a backend per bug
 * would cost minutes per mutant; instead this one library wraps ANY backend
 * (CHIPDOCK_MUTANT_TARGET, an absolute path) and reads the operator from a
 * shared control file (CHIPDOCK_MUTANT_CONTROL, layout in mutant_control.h)
 * at every call, so one worker process runs many mutants in turn.
 *
 * How (the model is conformance/broken_backends/broken_shim.c):
 *   - The entry dlopens the target and calls its entry with a copy of the
 *     core's services whose kernel_register is wrapped: every kernel the
 *     target registers is registered with the core as one of a fixed table
 *     of trampolines (MUTANT_MAX_KERNELS), each of which calls dispatch()
 *     with its index. dispatch() reads the control record and either calls
 *     the target's kernel unchanged (operator 0, or another kernel) or
 *     applies the kernel operator.
 *   - The table returned is the target's, named mutant-<target name>, device
 *     type "mutant", with the runtime slots wrapped (they forward unchanged
 *     unless a runtime operator is live).
 *   - Device memory is only ever touched through the target's own slots.
 *     Edits after a kernel are queued on the kernel's stream: an async copy
 *     of the output into a host buffer, a host callback that edits it, an
 *     async copy back, a callback that releases it. Host callbacks never call
 *     the runtime (CUDA forbids it): pinned buffers are freed later, by the
 *     next kernel call or at shutdown. A target without async copies or host
 *     callbacks gets stream_synchronize + synchronous copies instead.
 *
 * The harness gives a private copy of the target's library when the target
 * is also the reference (the CPU backend), so the wrapped instance has its
 * own globals.
 */
#define _GNU_SOURCE /* pthread, nanosleep, clock_gettime, strdup */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chipdock/device_api.h"
#include "mutant_control.h"

#ifndef MUTANT_VERSION
#define MUTANT_VERSION "0.1.0"
#endif
#define MUTANT_DEVICE_TYPE "mutant"
#define MUTANT_TRAMPOLINES 4096 /* generated trampolines; see the end of the kernel section */
#ifndef MUTANT_MAX_KERNELS      /* a test builds the proxy with a lower limit to see the refusal */
#define MUTANT_MAX_KERNELS MUTANT_TRAMPOLINES
#endif
#define MUTANT_MAX_DEVICES 64   /* devices with a stream of the proxy's own (other_stream) */
#define MUTANT_LATE_MS 50       /* late_finish: the correct bytes arrive this long after the poison */
#define MUTANT_HOLD_MS 10000    /* other_stream: longest hold when the harness never releases it */
#define MUTANT_SKIP_BYTE 0x7B   /* skip_last: what the last element becomes */
#define MUTANT_SHUTDOWN_WAIT_MS 10000
#define MUTANT_MAX_EDIT_DIMS 64 /* views with more dims are left unmutated */

static const cd_core_api* g_core;   /* the core's services */
static cd_core_api g_core_for_target; /* what the target sees: kernel_register wrapped */
static const cd_plugin_api* g_target; /* the wrapped backend's table */
static cd_plugin_api g_table;       /* ours */
static char g_name[96] = "mutant";  /* mutant-<target name> once known */
static cd_mutant_control* g_control; /* the mapped control file */
static int g_force_sync; /* CHIPDOCK_MUTANT_SYNC_EDITS=1: the fallback path even with async slots (tests) */

/* ---- logging and errors --------------------------------------------------- */
static void proxy_log(cd_log_level_t level, const char* format, ...) {
  char message[1024];
  va_list args;
  int n = snprintf(message, sizeof(message), "%s: ", g_name);
  va_start(args, format);
  if (n > 0 && (size_t)n < sizeof(message)) vsnprintf(message + n, sizeof(message) - (size_t)n, format, args);
  va_end(args);
  if (g_core != NULL && g_core->log != NULL) g_core->log(level, message);
}

/* The proxy's own errors live in a fixed pool (every other error is the
 * target's, so ownership is "is the pointer in the pool"). */
#define MUTANT_ERROR_POOL 64
struct cd_error {
  cd_status_t code;
  int in_use;
  char message[512];
};
static cd_error g_errors[MUTANT_ERROR_POOL];
static cd_error g_error_pool_empty = {CD_STATUS_INTERNAL, 1, "mutant: more than 64 of its errors are alive"};
static pthread_mutex_t g_error_lock = PTHREAD_MUTEX_INITIALIZER;

static int proxy_owns(const cd_error* error) {
  return error == &g_error_pool_empty || (error >= g_errors && error < g_errors + MUTANT_ERROR_POOL);
}

/* A new error "<proxy name>: <call>: <reason>". */
static cd_error* proxy_error(cd_status_t code, const char* call, const char* format, ...) {
  cd_error* error = &g_error_pool_empty;
  va_list args;
  int i, n;
  pthread_mutex_lock(&g_error_lock);
  for (i = 0; i < MUTANT_ERROR_POOL; ++i) {
    if (!g_errors[i].in_use) {
      error = &g_errors[i];
      error->in_use = 1;
      break;
    }
  }
  pthread_mutex_unlock(&g_error_lock);
  if (error == &g_error_pool_empty) return error;
  error->code = code;
  n = snprintf(error->message, sizeof(error->message), "%s: %s: ", g_name, call);
  va_start(args, format);
  if (n > 0 && (size_t)n < sizeof(error->message)) {
    vsnprintf(error->message + n, sizeof(error->message) - (size_t)n, format, args);
  }
  va_end(args);
  return error;
}

static cd_status_t proxy_error_get_code(const cd_error* error) {
  return proxy_owns(error) ? error->code : g_target->error_get_code(error);
}
static const char* proxy_error_get_message(const cd_error* error) {
  return proxy_owns(error) ? error->message : g_target->error_get_message(error);
}
static void proxy_error_destroy(cd_error* error) {
  if (error == NULL || error == &g_error_pool_empty) return;
  if (!proxy_owns(error)) {
    g_target->error_destroy(error);
    return;
  }
  pthread_mutex_lock(&g_error_lock);
  error->in_use = 0;
  pthread_mutex_unlock(&g_error_lock);
}

/* Logs and frees an error of the target that nobody can be given (work the
 * proxy does on its own: write-backs, deferred destroys). */
static void log_and_drop(const char* what, cd_error* error) {
  if (error == NULL) return;
  proxy_log(CD_LOG_ERROR, "%s: %s", what, g_target->error_get_message(error));
  g_target->error_destroy(error);
}

/* ---- the control record --------------------------------------------------- */
static int32_t control_operator(void) { return __atomic_load_n(&g_control->op_code, __ATOMIC_ACQUIRE); }
static int32_t control_k(void) { return __atomic_load_n(&g_control->k, __ATOMIC_ACQUIRE); }
static void count_applied(void) { __atomic_fetch_add(&g_control->applied, 1, __ATOMIC_SEQ_CST); }

/* Work the proxy runs outside the caller's streams: counted in the record
 * (the harness waits for 0) and in the proxy (shutdown waits for 0). */
static int64_t g_in_flight;
static void pending_begin(void) {
  __atomic_fetch_add(&g_in_flight, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_add(&g_control->pending, 1, __ATOMIC_SEQ_CST);
}
static void pending_end(void) {
  __atomic_fetch_sub(&g_control->pending, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&g_in_flight, 1, __ATOMIC_SEQ_CST);
}

static int runtime_operator_is(int32_t op) { return control_operator() == op; }

/* ---- time and threads ----------------------------------------------------- */
static void sleep_ms(int ms) {
  struct timespec nap;
  nap.tv_sec = ms / 1000;
  nap.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {
  }
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Starts a detached thread; 0 if it could not be started. */
static int start_detached(void* (*body)(void*), void* arg) {
  pthread_t thread;
  pthread_attr_t attr;
  int ok;
  if (pthread_attr_init(&attr) != 0) return 0;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  ok = pthread_create(&thread, &attr, body, arg) == 0;
  pthread_attr_destroy(&attr);
  return ok;
}

/* ---- views ---------------------------------------------------------------- */
static size_t dtype_size(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    default: return 1;
  }
}

static int is_float(cd_dtype_t dtype) {
  return dtype == CD_DTYPE_FLOAT32 || dtype == CD_DTYPE_FLOAT64 || dtype == CD_DTYPE_FLOAT16 ||
         dtype == CD_DTYPE_BFLOAT16;
}

static int64_t view_numel(const cd_tensor_view* view) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < view->ndim; ++d) n *= view->shape[d];
  return n;
}

/* Device address arithmetic without dereferencing (strict CPU mode tags them). */
static void* device_offset(void* data, int64_t bytes) { return (void*)((uintptr_t)data + (uintptr_t)bytes); }

/* The bytes a non-empty view spans, relative to `data`: [*low, *high). */
static void view_span(const cd_tensor_view* view, int64_t* low, int64_t* high) {
  int64_t item = (int64_t)dtype_size(view->dtype);
  int64_t lo = view->byte_offset, hi = view->byte_offset + item;
  int32_t d;
  for (d = 0; d < view->ndim; ++d) {
    int64_t reach = (view->shape[d] - 1) * view->strides[d] * item;
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  *low = lo;
  *high = hi;
}

/* ---- staged edits: device bytes -> host -> edit -> device, in stream order -- */
struct edit_job;
typedef int (*edit_fn)(struct edit_job* job); /* edits job->host; 1 if it changed something */

typedef struct edit_job {
  struct edit_job* next_free; /* the deferred-free list */
  int32_t device;
  void* device_bytes; /* the first device byte staged */
  size_t bytes;
  unsigned char* host;   /* `bytes` bytes: the staged copy */
  unsigned char* poison; /* late_finish only: what the output reads until the write-back */
  int host_pinned;       /* host (and poison) come from the target's host_memory_allocate */
  int poison_pinned;
  edit_fn edit;
  int32_t k;
  /* The view over `host`: element (i...) at origin + sum(i*strides) * item. */
  cd_dtype_t dtype;
  int32_t ndim;
  int64_t origin;
  int64_t* shape; /* ndim entries, then ndim strides (in `dims`) */
  int64_t* strides;
  int64_t dims[1]; /* 2*ndim entries (at least 1 for C99) */
} edit_job;

static int has_async_path(void) {
  return !g_force_sync && g_target->memcpy_device_to_host_async != NULL &&
         g_target->memcpy_host_to_device_async != NULL &&
         g_target->stream_add_host_callback != NULL;
}

static void* host_buffer(size_t bytes, int* pinned) {
  void* ptr = NULL;
  if (*pinned && g_target->host_memory_allocate != NULL && g_target->host_memory_free != NULL) {
    cd_error* e = g_target->host_memory_allocate(bytes, &ptr);
    if (e == NULL && ptr != NULL) return ptr;
    if (e != NULL) g_target->error_destroy(e);
  }
  *pinned = 0;
  return malloc(bytes);
}

static void release_host(void* ptr, int pinned) {
  if (ptr == NULL) return;
  if (pinned) log_and_drop("host_memory_free", g_target->host_memory_free(ptr));
  else free(ptr);
}

/* Jobs whose host callbacks are done; freed outside callbacks. */
static edit_job* g_free_list;
static pthread_mutex_t g_free_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_free_waiting;

static void job_free_now(edit_job* job) {
  release_host(job->host, job->host_pinned);
  release_host(job->poison, job->poison_pinned);
  free(job);
}

static void drain_free_list(void) {
  edit_job* list;
  if (!__atomic_load_n(&g_free_waiting, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&g_free_lock);
  list = g_free_list;
  g_free_list = NULL;
  __atomic_store_n(&g_free_waiting, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_free_lock);
  while (list != NULL) {
    edit_job* next = list->next_free;
    job_free_now(list);
    list = next;
  }
}

/* A host callback: malloc'd buffers are freed at once, pinned ones later. */
static void job_free_callback(void* user_data) {
  edit_job* job = (edit_job*)user_data;
  if (!job->host_pinned && !job->poison_pinned) {
    job_free_now(job);
    return;
  }
  pthread_mutex_lock(&g_free_lock);
  job->next_free = g_free_list;
  g_free_list = job;
  __atomic_store_n(&g_free_waiting, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_free_lock);
}

/* A job staging `view`'s bytes [low, high) relative to its data (or, with
 * ndim < 0, the raw range only). */
static edit_job* new_job(int32_t device, const cd_tensor_view* view, int64_t low, int64_t high, edit_fn edit) {
  int32_t ndim = view->ndim;
  size_t dims = ndim > 0 ? (size_t)ndim * 2 : 1;
  edit_job* job = (edit_job*)calloc(1, sizeof(edit_job) + dims * sizeof(int64_t));
  if (job == NULL) return NULL;
  job->device = device;
  job->device_bytes = device_offset(view->data, low);
  job->bytes = (size_t)(high - low);
  job->host_pinned = 1;
  job->host = (unsigned char*)host_buffer(job->bytes, &job->host_pinned);
  if (job->host == NULL) {
    free(job);
    return NULL;
  }
  job->edit = edit;
  job->k = control_k();
  job->dtype = view->dtype;
  job->ndim = ndim;
  job->origin = view->byte_offset - low;
  job->shape = job->dims;
  job->strides = job->dims + (ndim > 0 ? ndim : 0);
  if (ndim > 0) {
    memcpy(job->shape, view->shape, (size_t)ndim * sizeof(int64_t));
    memcpy(job->strides, view->strides, (size_t)ndim * sizeof(int64_t));
  }
  return job;
}

static void run_edit_callback(void* user_data) {
  edit_job* job = (edit_job*)user_data;
  if (job->edit(job)) count_applied();
}

/* Queues d2h -> edit -> h2d -> free on `stream`; the job is the queue's. On an
 * enqueue error the stream is drained first (callbacks already queued may
 * still use the job), then the job is freed. */
static cd_error* enqueue_edit(edit_job* job, cd_stream* stream, const char* call) {
  cd_error* e;
  if (!has_async_path()) {
    e = g_target->stream_synchronize(stream);
    if (e == NULL) e = g_target->memcpy_device_to_host(job->device, job->host, job->device_bytes, job->bytes);
    if (e == NULL && job->edit(job)) {
      count_applied();
      e = g_target->memcpy_host_to_device(job->device, job->device_bytes, job->host, job->bytes);
    }
    job_free_now(job);
    return e;
  }
  e = g_target->memcpy_device_to_host_async(job->device, job->host, job->device_bytes, job->bytes, stream);
  if (e == NULL) e = g_target->stream_add_host_callback(stream, run_edit_callback, job);
  if (e == NULL) {
    e = g_target->memcpy_host_to_device_async(job->device, job->device_bytes, job->host, job->bytes, stream);
  }
  if (e == NULL) e = g_target->stream_add_host_callback(stream, job_free_callback, job);
  if (e != NULL) {
    cd_error* wrapped = proxy_error(g_target->error_get_code(e), call, "staging the edit failed: %s",
                                    g_target->error_get_message(e));
    g_target->error_destroy(e);
    log_and_drop("stream_synchronize", g_target->stream_synchronize(stream));
    job_free_now(job);
    return wrapped;
  }
  return NULL;
}

/* ---- element access in a staged buffer ------------------------------------ */
/* Floats as bit patterns: for finite values, (bits & ~sign) grows with the
 * magnitude, so ulps are integer steps of it. */
typedef struct float_format {
  uint64_t sign, exponent, mantissa;
} float_format;

static float_format format_of(cd_dtype_t dtype) {
  float_format f;
  switch (dtype) {
    case CD_DTYPE_FLOAT64:
      f.sign = (uint64_t)1 << 63;
      f.exponent = (uint64_t)0x7ff << 52;
      f.mantissa = ((uint64_t)1 << 52) - 1;
      break;
    case CD_DTYPE_FLOAT16:
      f.sign = 0x8000;
      f.exponent = 0x7c00;
      f.mantissa = 0x03ff;
      break;
    case CD_DTYPE_BFLOAT16:
      f.sign = 0x8000;
      f.exponent = 0x7f80;
      f.mantissa = 0x007f;
      break;
    default: /* float32 */
      f.sign = (uint64_t)1 << 31;
      f.exponent = (uint64_t)0xff << 23;
      f.mantissa = ((uint64_t)1 << 23) - 1;
      break;
  }
  return f;
}

static uint64_t load_bits(const unsigned char* p, size_t size) {
  uint64_t v = 0;
  size_t i;
  for (i = 0; i < size; ++i) v |= (uint64_t)p[i] << (8 * i); /* little-endian, as the record */
  return v;
}

static void store_bits(unsigned char* p, size_t size, uint64_t v) {
  size_t i;
  for (i = 0; i < size; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

/* Calls visit(job, element pointer, state) for every element, row-major. */
typedef void (*visit_fn)(edit_job* job, unsigned char* element, void* state);
static void for_each_element(edit_job* job, visit_fn visit, void* state) {
  int64_t index[MUTANT_MAX_EDIT_DIMS]; /* callers skip views with more dims */
  int64_t item = (int64_t)dtype_size(job->dtype);
  int32_t d;
  for (d = 0; d < job->ndim; ++d) {
    if (job->shape[d] == 0) return;
    index[d] = 0;
  }
  for (;;) {
    int64_t offset = job->origin;
    for (d = 0; d < job->ndim; ++d) offset += index[d] * job->strides[d] * item;
    visit(job, job->host + offset, state);
    for (d = job->ndim - 1; d >= 0; --d) {
      if (++index[d] < job->shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

/* perturb_ulp: the finite element of largest magnitude moves k ulps away
 * from zero (integers: +k with wrap; bool: flipped). */
typedef struct largest {
  unsigned char* element;
  uint64_t magnitude;
} largest;

static uint64_t integer_magnitude(cd_dtype_t dtype, uint64_t bits) {
  switch (dtype) {
    case CD_DTYPE_INT8: return bits & 0x80 ? (uint64_t)(0x100 - bits) : bits;
    case CD_DTYPE_INT16: return bits & 0x8000 ? (uint64_t)(0x10000 - bits) : bits;
    case CD_DTYPE_INT32: return bits & 0x80000000u ? (uint64_t)(0x100000000ull - bits) : bits;
    case CD_DTYPE_INT64: return bits >> 63 ? (uint64_t)(0 - bits) : bits;
    default: return bits; /* uint8, bool */
  }
}

static void visit_largest(edit_job* job, unsigned char* element, void* state) {
  largest* best = (largest*)state;
  size_t size = dtype_size(job->dtype);
  uint64_t bits = load_bits(element, size), magnitude;
  if (is_float(job->dtype)) {
    float_format f = format_of(job->dtype);
    if ((bits & f.exponent) == f.exponent) return; /* inf or NaN */
    magnitude = bits & ~f.sign;
  } else {
    magnitude = integer_magnitude(job->dtype, bits);
  }
  if (best->element == NULL || magnitude > best->magnitude) {
    best->element = element;
    best->magnitude = magnitude;
  }
}

static int edit_perturb_ulp(edit_job* job) {
  largest best = {NULL, 0};
  size_t size = dtype_size(job->dtype);
  uint64_t bits, changed;
  for_each_element(job, visit_largest, &best);
  if (best.element == NULL) return 0;
  bits = load_bits(best.element, size);
  if (job->dtype == CD_DTYPE_BOOL) {
    changed = bits != 0 ? 0 : 1;
  } else if (is_float(job->dtype)) {
    float_format f = format_of(job->dtype);
    uint64_t magnitude = bits & ~f.sign;
    int64_t k = job->k;
    magnitude = k >= 0 ? magnitude + (uint64_t)k : (magnitude > (uint64_t)-k ? magnitude - (uint64_t)-k : 0);
    if (magnitude > f.exponent) magnitude = f.exponent; /* past the largest finite value: infinity */
    changed = (bits & f.sign) | magnitude;
  } else {
    changed = bits + (uint64_t)(int64_t)job->k; /* wraps at the dtype's width in store_bits */
  }
  store_bits(best.element, size, changed);
  return load_bits(best.element, size) != bits;
}

/* flip_zero_sign / drop_nan: every element of a float output. */
static void visit_flip_zero(edit_job* job, unsigned char* element, void* state) {
  size_t size = dtype_size(job->dtype);
  float_format f = format_of(job->dtype);
  uint64_t bits = load_bits(element, size);
  if ((bits & ~f.sign) == 0) {
    store_bits(element, size, bits ^ f.sign);
    *(int*)state = 1;
  }
}
static int edit_flip_zero_sign(edit_job* job) {
  int changed = 0;
  for_each_element(job, visit_flip_zero, &changed);
  return changed;
}

static void visit_drop_nan(edit_job* job, unsigned char* element, void* state) {
  size_t size = dtype_size(job->dtype);
  float_format f = format_of(job->dtype);
  uint64_t bits = load_bits(element, size);
  if ((bits & f.exponent) == f.exponent && (bits & f.mantissa) != 0) {
    store_bits(element, size, 0);
    *(int*)state = 1;
  }
}
static int edit_drop_nan(edit_job* job) {
  int changed = 0;
  for_each_element(job, visit_drop_nan, &changed);
  return changed;
}

/* write_input: the first staged byte (input 0's element 0) inverted. */
static int edit_invert_first_byte(edit_job* job) {
  job->host[0] = (unsigned char)~job->host[0];
  return 1;
}

/* skip_last: the staged element (output 0's last) becomes 0x7B bytes, or a
 * flipped bool. */
static int edit_skip_last(edit_job* job) {
  size_t i;
  int changed = 0;
  if (job->dtype == CD_DTYPE_BOOL) {
    job->host[0] = job->host[0] != 0 ? 0 : 1;
    return 1;
  }
  for (i = 0; i < job->bytes; ++i) {
    changed |= job->host[i] != MUTANT_SKIP_BYTE;
    job->host[i] = MUTANT_SKIP_BYTE;
  }
  return changed;
}

/* ---- kernel operators ----------------------------------------------------- */
typedef struct wrapped_kernel {
  char* op;
  cd_dtype_t dtypes[CD_MUTANT_MAX_DTYPES];
  int32_t num_dtypes;
  cd_kernel_fn fn;
} wrapped_kernel;

static wrapped_kernel g_kernels[MUTANT_MAX_KERNELS];
static int32_t g_kernel_count;
static int32_t g_kernels_refused; /* registrations past MUTANT_MAX_KERNELS */

/* 1 if the record names this kernel. */
static int record_targets(const wrapped_kernel* kernel) {
  char op[CD_MUTANT_OP_NAME_SIZE];
  int32_t n, i;
  memcpy(op, g_control->op, sizeof(op));
  op[sizeof(op) - 1] = '\0';
  if (strcmp(op, kernel->op) != 0) return 0;
  n = g_control->num_dtypes;
  if (n == 0) return 1;
  if (n != kernel->num_dtypes || n > CD_MUTANT_MAX_DTYPES) return 0;
  for (i = 0; i < n; ++i) {
    if (g_control->dtypes[i] != kernel->dtypes[i]) return 0;
  }
  return 1;
}

/* Stages all of `view` through `edit` after the work already on ctx's stream. */
static cd_error* edit_view(const cd_kernel_context* ctx, const cd_tensor_view* view, edit_fn edit, const char* call) {
  int64_t low, high;
  edit_job* job;
  if (view_numel(view) == 0 || view->ndim > MUTANT_MAX_EDIT_DIMS) return NULL;
  view_span(view, &low, &high);
  if ((job = new_job(ctx->device, view, low, high, edit)) == NULL) {
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, call, "out of host memory for %lld staged bytes",
                       (long long)(high - low));
  }
  return enqueue_edit(job, ctx->stream, call);
}

/* Stages the single element at `element_offset` bytes from view->data. */
static cd_error* edit_element(const cd_kernel_context* ctx, const cd_tensor_view* view, int64_t element_offset,
                              int64_t bytes, edit_fn edit, const char* call) {
  cd_tensor_view scalar = *view;
  edit_job* job;
  scalar.ndim = 0;
  scalar.byte_offset = element_offset;
  if ((job = new_job(ctx->device, &scalar, element_offset, element_offset + bytes, edit)) == NULL) {
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, call, "out of host memory");
  }
  return enqueue_edit(job, ctx->stream, call);
}

static cd_error* after_kernel(const wrapped_kernel* kernel, const cd_kernel_context* ctx, int32_t op) {
  int32_t i;
  cd_error* e;
  char call[128];
  snprintf(call, sizeof(call), "%s kernel (mutant %d)", kernel->op, (int)op);
  switch (op) {
    case CD_MUTANT_PERTURB_ULP:
      return ctx->num_outputs > 0 ? edit_view(ctx, ctx->outputs[0], edit_perturb_ulp, call) : NULL;
    case CD_MUTANT_FLIP_ZERO_SIGN:
    case CD_MUTANT_DROP_NAN:
      for (i = 0; i < ctx->num_outputs; ++i) {
        if (!is_float(ctx->outputs[i]->dtype)) continue;
        e = edit_view(ctx, ctx->outputs[i], op == CD_MUTANT_DROP_NAN ? edit_drop_nan : edit_flip_zero_sign, call);
        if (e != NULL) return e;
      }
      return NULL;
    case CD_MUTANT_WRITE_INPUT:
      if (ctx->num_inputs == 0 || view_numel(ctx->inputs[0]) == 0) return NULL;
      return edit_element(ctx, ctx->inputs[0], ctx->inputs[0]->byte_offset, 1, edit_invert_first_byte, call);
    case CD_MUTANT_SKIP_LAST: {
      const cd_tensor_view* out;
      int64_t item, offset;
      int32_t d;
      if (ctx->num_outputs == 0 || view_numel(ctx->outputs[0]) == 0) return NULL;
      out = ctx->outputs[0];
      item = (int64_t)dtype_size(out->dtype);
      offset = out->byte_offset;
      for (d = 0; d < out->ndim; ++d) offset += (out->shape[d] - 1) * out->strides[d] * item;
      return edit_element(ctx, out, offset, item, edit_skip_last, call);
    }
    default: return NULL;
  }
}

/* ignore_byte_offset: the kernel sees every input view with byte_offset 0.
 * Only views without a negative stride are changed: moving one of those to
 * offset 0 would reach before its allocation (a crash, not a mutant). */
static cd_error* call_ignoring_byte_offset(const wrapped_kernel* kernel, const cd_kernel_context* ctx) {
  cd_tensor_view* views;
  const cd_tensor_view** pointers;
  cd_kernel_context copy = *ctx;
  int32_t i, d, changed = 0;
  cd_error* e;
  if (ctx->num_inputs <= 0) return kernel->fn(ctx);
  views = (cd_tensor_view*)malloc((size_t)ctx->num_inputs * sizeof(cd_tensor_view));
  pointers = (const cd_tensor_view**)malloc((size_t)ctx->num_inputs * sizeof(cd_tensor_view*));
  if (views == NULL || pointers == NULL) {
    free(views);
    free((void*)pointers);
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, kernel->op, "out of host memory");
  }
  for (i = 0; i < ctx->num_inputs; ++i) {
    int negative = 0;
    views[i] = *ctx->inputs[i];
    for (d = 0; d < views[i].ndim; ++d) negative |= views[i].shape[d] > 1 && views[i].strides[d] < 0;
    if (views[i].byte_offset != 0 && !negative) {
      views[i].byte_offset = 0;
      changed = 1;
    }
    pointers[i] = &views[i];
  }
  copy.inputs = pointers;
  if (changed) count_applied();
  e = kernel->fn(&copy);
  free(views);
  free((void*)pointers);
  return e;
}

/* late_finish: after the kernel, output 0's bytes are saved, replaced by
 * their inverse in stream order, and written back 50 ms later by a detached
 * thread (pending until it has written). */
static void* late_write_back(void* user_data) {
  edit_job* job = (edit_job*)user_data;
  sleep_ms(MUTANT_LATE_MS);
  if (g_target->device_set_current != NULL) { /* thread-bound runtimes copy on the current device */
    log_and_drop("device_set_current", g_target->device_set_current(job->device));
  }
  log_and_drop("late_finish write-back",
               g_target->memcpy_host_to_device(job->device, job->device_bytes, job->host, job->bytes));
  job_free_now(job);
  pending_end();
  return NULL;
}

/* The poison never equals the result: inverted bytes, or for bool (bytes 0
 * and 1; ~ would give 0xFE/0xFF, which read as True) the inverted value. */
static int edit_poison(edit_job* job) {
  size_t i;
  for (i = 0; i < job->bytes; ++i) {
    job->poison[i] = job->dtype == CD_DTYPE_BOOL ? (unsigned char)(job->host[i] != 0 ? 0 : 1)
                                                 : (unsigned char)~job->host[i];
  }
  return job->bytes > 0;
}

static void late_poison_callback(void* user_data) {
  if (edit_poison((edit_job*)user_data)) count_applied();
}

static void late_spawn_callback(void* user_data) {
  edit_job* job = (edit_job*)user_data;
  if (!start_detached(late_write_back, job)) {
    /* No thread: the output stays poisoned (still a mutant); the buffers
     * are freed outside the callback. */
    proxy_log(CD_LOG_ERROR, "late_finish: cannot start the write-back thread");
    job_free_callback(job);
    pending_end();
  }
}

static cd_error* late_finish(const wrapped_kernel* kernel, const cd_kernel_context* ctx) {
  const cd_tensor_view* out;
  int64_t low, high;
  edit_job* job;
  cd_error* e;
  if (ctx->num_outputs == 0 || view_numel(ctx->outputs[0]) == 0 || ctx->outputs[0]->ndim > MUTANT_MAX_EDIT_DIMS) {
    return NULL;
  }
  out = ctx->outputs[0];
  view_span(out, &low, &high);
  job = new_job(ctx->device, out, low, high, edit_poison);
  if (job != NULL) {
    job->poison_pinned = 1;
    job->poison = (unsigned char*)host_buffer(job->bytes, &job->poison_pinned);
  }
  if (job == NULL || job->poison == NULL) {
    if (job != NULL) job_free_now(job);
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, kernel->op, "late_finish: out of host memory");
  }
  pending_begin();
  if (!has_async_path()) {
    e = g_target->stream_synchronize(ctx->stream);
    if (e == NULL) e = g_target->memcpy_device_to_host(job->device, job->host, job->device_bytes, job->bytes);
    if (e == NULL && edit_poison(job)) count_applied();
    if (e == NULL) e = g_target->memcpy_host_to_device(job->device, job->device_bytes, job->poison, job->bytes);
    if (e == NULL && start_detached(late_write_back, job)) return NULL;
  } else {
    e = g_target->memcpy_device_to_host_async(job->device, job->host, job->device_bytes, job->bytes, ctx->stream);
    if (e == NULL) e = g_target->stream_add_host_callback(ctx->stream, late_poison_callback, job);
    if (e == NULL) {
      e = g_target->memcpy_host_to_device_async(job->device, job->device_bytes, job->poison, job->bytes, ctx->stream);
    }
    if (e == NULL) e = g_target->stream_add_host_callback(ctx->stream, late_spawn_callback, job);
    if (e == NULL) return NULL;
    log_and_drop("stream_synchronize", g_target->stream_synchronize(ctx->stream));
  }
  job_free_now(job);
  pending_end();
  if (e == NULL) return proxy_error(CD_STATUS_INTERNAL, kernel->op, "late_finish: cannot start the write-back thread");
  {
    cd_error* wrapped = proxy_error(g_target->error_get_code(e), kernel->op, "late_finish: %s",
                                    g_target->error_get_message(e));
    g_target->error_destroy(e);
    return wrapped;
  }
}

/* other_stream: the kernel runs on a stream of the proxy's own, held behind
 * a host callback until the case is over (the harness bumps the record's
 * `release`; the proxy's own device_synchronize bumps g_local_release),
 * unordered with the caller's stream (pending until done). A fixed delay
 * would race with the case's own download on a loaded machine. */
static cd_stream* g_own_streams[MUTANT_MAX_DEVICES];
static pthread_mutex_t g_own_lock = PTHREAD_MUTEX_INITIALIZER;

static cd_error* own_stream(int32_t device, cd_stream** stream) {
  cd_error* e = NULL;
  if (device < 0 || device >= MUTANT_MAX_DEVICES) {
    return proxy_error(CD_STATUS_INVALID_ARGUMENT, "other_stream", "device %d is past the proxy's %d",
                       (int)device, MUTANT_MAX_DEVICES);
  }
  pthread_mutex_lock(&g_own_lock);
  if (g_own_streams[device] == NULL) {
    e = g_target->stream_create(device, CD_STREAM_FLAGS_DEFAULT, &g_own_streams[device]);
  }
  *stream = g_own_streams[device];
  pthread_mutex_unlock(&g_own_lock);
  return e;
}

static uint64_t g_local_release;
static cd_event* g_own_events[MUTANT_MAX_DEVICES]; /* orders the launch poison before the held kernel */

/* Whether [low, high) meets the bytes of an input (an in-place kernel). */
static int overlaps_an_input(const cd_kernel_context* ctx, uintptr_t low, uintptr_t high) {
  int32_t i;
  for (i = 0; i < ctx->num_inputs; ++i) {
    int64_t in_low, in_high;
    if (view_numel(ctx->inputs[i]) == 0) continue;
    view_span(ctx->inputs[i], &in_low, &in_high);
    if ((uintptr_t)ctx->inputs[i]->data + (uintptr_t)in_low < high &&
        low < (uintptr_t)ctx->inputs[i]->data + (uintptr_t)in_high) {
      return 1;
    }
  }
  return 0;
}

/* Output 0 (when dense) reads 0x7B bytes (bool: False) in the caller's
 * stream order until the held kernel runs: without it a block the allocator
 * reused may still hold the same result from an earlier case, and whether
 * the mutant is seen would depend on which case ran before. The proxy's
 * stream waits for an event recorded after the poison, so a release never
 * lets the poison land after the kernel. Best effort: where it cannot
 * (strided output, in place, missing slots), the kernel is still unordered. */
static void poison_at_launch(const cd_kernel_context* ctx, cd_stream* own) {
  const cd_tensor_view* out;
  int64_t low, high;
  cd_error* e;
  if (ctx->num_outputs == 0 || view_numel(ctx->outputs[0]) == 0) return;
  out = ctx->outputs[0];
  view_span(out, &low, &high);
  if ((size_t)(high - low) != (size_t)view_numel(out) * dtype_size(out->dtype)) return; /* gaps: not ours */
  /* in place: the poison would reach the kernel's own input */
  if (overlaps_an_input(ctx, (uintptr_t)out->data + (uintptr_t)low, (uintptr_t)out->data + (uintptr_t)high)) return;
  if (g_target->memory_set_async == NULL || g_target->stream_wait_event == NULL) return;
  pthread_mutex_lock(&g_own_lock);
  e = g_own_events[ctx->device] != NULL ? NULL : g_target->event_create(ctx->device, 0, &g_own_events[ctx->device]);
  if (e == NULL) {
    /* bool: False (0x7B reads as True, what most bool results of the suites are) */
    int32_t poison = out->dtype == CD_DTYPE_BOOL ? 0 : MUTANT_SKIP_BYTE;
    e = g_target->memory_set_async(ctx->device, device_offset(out->data, low), poison, (size_t)(high - low),
                                   ctx->stream);
  }
  if (e == NULL) e = g_target->event_record(g_own_events[ctx->device], ctx->stream);
  if (e == NULL) e = g_target->stream_wait_event(own, g_own_events[ctx->device]);
  pthread_mutex_unlock(&g_own_lock);
  if (e != NULL) log_and_drop("other_stream poison", e);
}

typedef struct held_work {
  uint64_t release; /* the record's `release` when the kernel was enqueued */
  uint64_t local;   /* g_local_release then */
} held_work;

/* Lets every held kernel run (device_synchronize, error paths, shutdown). */
static void release_held_work(void) { __atomic_fetch_add(&g_local_release, 1, __ATOMIC_SEQ_CST); }

static int held_released(const held_work* held) {
  return __atomic_load_n(&g_control->release, __ATOMIC_ACQUIRE) != held->release ||
         __atomic_load_n(&g_local_release, __ATOMIC_ACQUIRE) != held->local;
}

static void hold_callback(void* user_data) {
  held_work* held = (held_work*)user_data;
  double deadline = now_ms() + MUTANT_HOLD_MS;
  while (!held_released(held) && now_ms() < deadline) sleep_ms(1);
  free(held);
}
static void pending_end_callback(void* user_data) {
  (void)user_data;
  pending_end();
}

static cd_error* on_other_stream(const wrapped_kernel* kernel, const cd_kernel_context* ctx) {
  cd_kernel_context copy = *ctx;
  cd_stream* stream = NULL;
  cd_error* e;
  cd_error* done;
  held_work* held;
  if (g_target->stream_add_host_callback == NULL) return kernel->fn(ctx); /* cannot delay: transparent */
  if ((e = own_stream(ctx->device, &stream)) != NULL) return e;
  if ((held = (held_work*)malloc(sizeof(held_work))) == NULL) {
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, kernel->op, "other_stream: out of host memory");
  }
  held->release = __atomic_load_n(&g_control->release, __ATOMIC_ACQUIRE);
  held->local = __atomic_load_n(&g_local_release, __ATOMIC_ACQUIRE);
  poison_at_launch(ctx, stream);
  pending_begin();
  e = g_target->stream_add_host_callback(stream, hold_callback, held);
  if (e != NULL) free(held);
  if (e == NULL) {
    copy.stream = stream;
    count_applied();
    e = kernel->fn(&copy);
  }
  done = g_target->stream_add_host_callback(stream, pending_end_callback, NULL);
  if (done != NULL) {
    g_target->error_destroy(done);
    release_held_work(); /* else this wait lasts the whole hold */
    log_and_drop("stream_synchronize", g_target->stream_synchronize(stream));
    pending_end();
  }
  return e;
}

static cd_error* dispatch(int32_t index, const cd_kernel_context* ctx) {
  const wrapped_kernel* kernel = &g_kernels[index];
  int32_t op = control_operator();
  cd_error* e;
  drain_free_list();
  if (op <= CD_MUTANT_NONE || op > CD_MUTANT_SKIP_LAST || !record_targets(kernel)) return kernel->fn(ctx);
  switch (op) {
    case CD_MUTANT_IGNORE_BYTE_OFFSET: return call_ignoring_byte_offset(kernel, ctx);
    case CD_MUTANT_LATE_FINISH:
      e = kernel->fn(ctx);
      return e != NULL ? e : late_finish(kernel, ctx);
    case CD_MUTANT_OTHER_STREAM: return on_other_stream(kernel, ctx);
    default:
      e = kernel->fn(ctx);
      return e != NULL ? e : after_kernel(kernel, ctx, op);
  }
}

/* The trampolines: one function per registration slot, generated in hex
 * digits (tr_000 ... tr_fff), each a dispatch() with its own index. */
#define MUTANT_TR1(X, Y, Z) \
  static cd_error* tr_##X##Y##Z(const cd_kernel_context* ctx) { return dispatch(0x##X##Y##Z, ctx); }
#define MUTANT_TR16(X, Y) \
  MUTANT_TR1(X, Y, 0) MUTANT_TR1(X, Y, 1) MUTANT_TR1(X, Y, 2) MUTANT_TR1(X, Y, 3) MUTANT_TR1(X, Y, 4) \
  MUTANT_TR1(X, Y, 5) MUTANT_TR1(X, Y, 6) MUTANT_TR1(X, Y, 7) MUTANT_TR1(X, Y, 8) MUTANT_TR1(X, Y, 9) \
  MUTANT_TR1(X, Y, a) MUTANT_TR1(X, Y, b) MUTANT_TR1(X, Y, c) MUTANT_TR1(X, Y, d) MUTANT_TR1(X, Y, e) \
  MUTANT_TR1(X, Y, f)
#define MUTANT_TR256(X) \
  MUTANT_TR16(X, 0) MUTANT_TR16(X, 1) MUTANT_TR16(X, 2) MUTANT_TR16(X, 3) MUTANT_TR16(X, 4) MUTANT_TR16(X, 5) \
  MUTANT_TR16(X, 6) MUTANT_TR16(X, 7) MUTANT_TR16(X, 8) MUTANT_TR16(X, 9) MUTANT_TR16(X, a) MUTANT_TR16(X, b) \
  MUTANT_TR16(X, c) MUTANT_TR16(X, d) MUTANT_TR16(X, e) MUTANT_TR16(X, f)
MUTANT_TR256(0) MUTANT_TR256(1) MUTANT_TR256(2) MUTANT_TR256(3) MUTANT_TR256(4) MUTANT_TR256(5) \
MUTANT_TR256(6) MUTANT_TR256(7) MUTANT_TR256(8) MUTANT_TR256(9) MUTANT_TR256(a) MUTANT_TR256(b) \
MUTANT_TR256(c) MUTANT_TR256(d) MUTANT_TR256(e) MUTANT_TR256(f)

#define MUTANT_PTR1(X, Y, Z) tr_##X##Y##Z,
#define MUTANT_PTR16(X, Y) \
  MUTANT_PTR1(X, Y, 0) MUTANT_PTR1(X, Y, 1) MUTANT_PTR1(X, Y, 2) MUTANT_PTR1(X, Y, 3) MUTANT_PTR1(X, Y, 4) \
  MUTANT_PTR1(X, Y, 5) MUTANT_PTR1(X, Y, 6) MUTANT_PTR1(X, Y, 7) MUTANT_PTR1(X, Y, 8) MUTANT_PTR1(X, Y, 9) \
  MUTANT_PTR1(X, Y, a) MUTANT_PTR1(X, Y, b) MUTANT_PTR1(X, Y, c) MUTANT_PTR1(X, Y, d) MUTANT_PTR1(X, Y, e) \
  MUTANT_PTR1(X, Y, f)
#define MUTANT_PTR256(X) \
  MUTANT_PTR16(X, 0) MUTANT_PTR16(X, 1) MUTANT_PTR16(X, 2) MUTANT_PTR16(X, 3) MUTANT_PTR16(X, 4) \
  MUTANT_PTR16(X, 5) MUTANT_PTR16(X, 6) MUTANT_PTR16(X, 7) MUTANT_PTR16(X, 8) MUTANT_PTR16(X, 9) \
  MUTANT_PTR16(X, a) MUTANT_PTR16(X, b) MUTANT_PTR16(X, c) MUTANT_PTR16(X, d) MUTANT_PTR16(X, e) \
  MUTANT_PTR16(X, f)
CD_MUTANT_ASSERT_(MUTANT_MAX_KERNELS <= MUTANT_TRAMPOLINES, kernel_limit_within_the_trampolines);
static const cd_kernel_fn g_trampolines[MUTANT_TRAMPOLINES] = {
    MUTANT_PTR256(0) MUTANT_PTR256(1) MUTANT_PTR256(2) MUTANT_PTR256(3) MUTANT_PTR256(4) MUTANT_PTR256(5) \
    MUTANT_PTR256(6) MUTANT_PTR256(7) MUTANT_PTR256(8) MUTANT_PTR256(9) MUTANT_PTR256(a) MUTANT_PTR256(b) \
    MUTANT_PTR256(c) MUTANT_PTR256(d) MUTANT_PTR256(e) MUTANT_PTR256(f)};

/* The target's registrations: each kernel gets the next trampoline. */
static cd_status_t proxy_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) {
  cd_kernel_def copy;
  wrapped_kernel* kernel;
  cd_status_t status;
  int32_t n;
  if (def == NULL || def->op == NULL || def->fn == NULL || def->num_dtypes < 0) {
    return g_core->kernel_register(registry, def); /* the core's own refusal */
  }
  if (g_kernel_count >= MUTANT_MAX_KERNELS) {
    if (g_kernels_refused++ == 0) {
      proxy_log(CD_LOG_ERROR, "kernel_register: the target registers more than %d kernels, the proxy's limit "
                "(MUTANT_MAX_KERNELS); '%s' and every later kernel are refused", MUTANT_MAX_KERNELS, def->op);
    }
    return CD_STATUS_OUT_OF_MEMORY;
  }
  kernel = &g_kernels[g_kernel_count];
  if ((kernel->op = strdup(def->op)) == NULL) return CD_STATUS_OUT_OF_MEMORY;
  kernel->fn = def->fn;
  kernel->num_dtypes = def->num_dtypes;
  n = def->num_dtypes < CD_MUTANT_MAX_DTYPES ? def->num_dtypes : CD_MUTANT_MAX_DTYPES;
  if (n > 0) memcpy(kernel->dtypes, def->dtypes, (size_t)n * sizeof(cd_dtype_t));
  copy = *def;
  copy.fn = g_trampolines[g_kernel_count];
  status = g_core->kernel_register(registry, &copy);
  if (status == CD_STATUS_OK) {
    ++g_kernel_count;
  } else {
    free(kernel->op);
    kernel->op = NULL;
  }
  return status;
}

static cd_error* proxy_kernels_register(cd_kernel_registry* registry) {
  cd_error* e = g_target->kernels_register(registry);
  cd_error* refused;
  if (g_kernels_refused == 0) return e;
  /* The proxy's refusal replaces whatever the target made of it (the CPU
   * backend stops at the first failed registration). */
  refused = proxy_error(CD_STATUS_OUT_OF_MEMORY, "kernels_register",
                        "the target registers more kernels than the %d the proxy wraps (MUTANT_MAX_KERNELS; %d "
                        "registered, %d refused)%s%s",
                        MUTANT_MAX_KERNELS, (int)g_kernel_count, (int)g_kernels_refused, e != NULL ? ": " : "",
                        e != NULL ? g_target->error_get_message(e) : "");
  if (e != NULL) g_target->error_destroy(e);
  return refused;
}

/* ---- runtime operators: streams the core created -------------------------- */
/* Live streams in creation order (device_sync_last_stream, and the device
 * synchronize of a target without one). */
typedef struct tracked_stream {
  cd_stream* stream;
  int32_t device;
} tracked_stream;
static tracked_stream* g_streams;
static size_t g_stream_count, g_stream_capacity;
static pthread_mutex_t g_stream_lock = PTHREAD_MUTEX_INITIALIZER;

static int track_stream(cd_stream* stream, int32_t device) {
  int ok = 1;
  pthread_mutex_lock(&g_stream_lock);
  if (g_stream_count == g_stream_capacity) {
    size_t capacity = g_stream_capacity ? g_stream_capacity * 2 : 64;
    tracked_stream* grown = (tracked_stream*)realloc(g_streams, capacity * sizeof(tracked_stream));
    if (grown == NULL) {
      ok = 0;
    } else {
      g_streams = grown;
      g_stream_capacity = capacity;
    }
  }
  if (ok) {
    g_streams[g_stream_count].stream = stream;
    g_streams[g_stream_count].device = device;
    ++g_stream_count;
  }
  pthread_mutex_unlock(&g_stream_lock);
  return ok;
}

static void untrack_stream(cd_stream* stream) {
  size_t i;
  pthread_mutex_lock(&g_stream_lock);
  for (i = 0; i < g_stream_count; ++i) {
    if (g_streams[i].stream == stream) {
      memmove(&g_streams[i], &g_streams[i + 1], (g_stream_count - i - 1) * sizeof(tracked_stream));
      --g_stream_count;
      break;
    }
  }
  pthread_mutex_unlock(&g_stream_lock);
}

/* A snapshot of the live streams of `device` (malloc'd; the caller frees). */
static cd_stream** streams_of(int32_t device, size_t* count) {
  cd_stream** list;
  size_t i, n = 0;
  pthread_mutex_lock(&g_stream_lock);
  list = (cd_stream**)malloc((g_stream_count + 1) * sizeof(cd_stream*));
  if (list != NULL) {
    for (i = 0; i < g_stream_count; ++i) {
      if (g_streams[i].device == device) list[n++] = g_streams[i].stream;
    }
  }
  pthread_mutex_unlock(&g_stream_lock);
  *count = n;
  return list;
}

static int stream_busy(cd_stream* stream) {
  int32_t done = 1;
  cd_error* e = g_target->stream_query != NULL ? g_target->stream_query(stream, &done) : NULL;
  if (e != NULL) {
    g_target->error_destroy(e);
    return 0;
  }
  return !done;
}

static cd_error* proxy_stream_create(int32_t device, uint32_t flags, cd_stream** stream) {
  cd_error* e = g_target->stream_create(device, flags, stream);
  if (e == NULL && !track_stream(*stream, device)) {
    log_and_drop("stream_destroy", g_target->stream_destroy(*stream));
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, "stream_create", "out of host memory");
  }
  return e;
}

/* destroy_no_wait: a busy stream is destroyed by a detached thread. */
static void* destroy_later(void* user_data) {
  log_and_drop("stream_destroy (destroy_no_wait)", g_target->stream_destroy((cd_stream*)user_data));
  pending_end();
  return NULL;
}

static cd_error* proxy_stream_destroy(cd_stream* stream) {
  if (stream != NULL && runtime_operator_is(CD_MUTANT_DESTROY_NO_WAIT) && stream_busy(stream)) {
    pending_begin();
    if (start_detached(destroy_later, stream)) {
      untrack_stream(stream);
      count_applied();
      return NULL;
    }
    pending_end();
  }
  {
    cd_error* e = g_target->stream_destroy(stream);
    if (e == NULL) untrack_stream(stream);
    return e;
  }
}

static cd_error* proxy_stream_query(cd_stream* stream, int32_t* is_complete) {
  cd_error* e = g_target->stream_query(stream, is_complete);
  if (e == NULL && !*is_complete && runtime_operator_is(CD_MUTANT_STREAM_QUERY_IDLE)) {
    *is_complete = 1;
    count_applied();
  }
  return e;
}

static cd_error* proxy_stream_wait_event(cd_stream* stream, cd_event* event) {
  if (runtime_operator_is(CD_MUTANT_WAIT_EVENT_IGNORED) && stream != NULL) {
    int32_t event_done = 1, idle = 1;
    cd_error* e = g_target->event_query(event, &event_done);
    if (e != NULL) return e;
    if (!event_done) {
      if (g_target->stream_query != NULL) e = g_target->stream_query(stream, &idle); /* checks the handle */
      if (e != NULL) return e;
      count_applied();
      return NULL;
    }
  }
  return g_target->stream_wait_event(stream, event);
}

static cd_error* proxy_stream_add_host_callback(cd_stream* stream, cd_host_callback_fn fn, void* user_data) {
  if (runtime_operator_is(CD_MUTANT_CALLBACK_EARLY) && stream != NULL && fn != NULL && stream_busy(stream)) {
    count_applied();
    fn(user_data);
    return NULL;
  }
  return g_target->stream_add_host_callback(stream, fn, user_data);
}

/* device_sync_last_stream: only the most recently created live stream. */
static cd_error* synchronize_streams(cd_stream** list, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) {
    cd_error* e = g_target->stream_synchronize(list[i]);
    if (e != NULL) return e;
  }
  return NULL;
}

static int target_has_device(int32_t device) {
  int32_t count = 0;
  cd_error* e = g_target->device_get_count(&count);
  if (e != NULL) {
    g_target->error_destroy(e);
    return 0;
  }
  return device >= 0 && device < count;
}

/* The newest of `list` the target still knows: a tracked stream it refuses
 * (its entry ran again and forgot its streams, say) is untracked and
 * skipped, so the mutant never fails by syncing a dead handle. */
static size_t newest_live(cd_stream** list, size_t count) {
  while (count > 0 && g_target->stream_query != NULL) {
    int32_t done = 1;
    cd_error* e = g_target->stream_query(list[count - 1], &done);
    if (e == NULL) break;
    g_target->error_destroy(e);
    untrack_stream(list[--count]);
  }
  return count; /* the newest live one is list[count - 1]; 0: none */
}

/* The mutant waits for the newest live stream only; every other argument
 * and path is the target's, so only that planted semantics can kill it. */
static cd_error* sync_last_stream(int32_t device) {
  size_t count = 0, i;
  int skipped_busy = 0;
  cd_stream** list;
  cd_error* e;
  if (!target_has_device(device) && g_target->device_synchronize != NULL) {
    return g_target->device_synchronize(device); /* the target's own refusal */
  }
  if ((list = streams_of(device, &count)) == NULL) {
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, "device_synchronize", "out of host memory");
  }
  count = newest_live(list, count);
  if (count == 0) {
    free(list);
    return g_target->device_synchronize != NULL ? g_target->device_synchronize(device) : NULL;
  }
  for (i = 0; i + 1 < count; ++i) skipped_busy |= stream_busy(list[i]);
  if (skipped_busy) count_applied();
  e = synchronize_streams(list + count - 1, 1);
  free(list);
  return e;
}

static cd_error* proxy_device_synchronize(int32_t device) {
  size_t count = 0;
  cd_stream** list;
  cd_error* e;
  release_held_work(); /* a device-wide wait includes other_stream's held kernels: never a stall */
  if (runtime_operator_is(CD_MUTANT_DEVICE_SYNC_LAST_STREAM)) return sync_last_stream(device);
  if (g_target->device_synchronize != NULL) return g_target->device_synchronize(device);
  if ((list = streams_of(device, &count)) == NULL) {
    return proxy_error(CD_STATUS_OUT_OF_MEMORY, "device_synchronize", "out of host memory");
  }
  e = synchronize_streams(list, count);
  free(list);
  return e;
}

/* ---- runtime operators: events -------------------------------------------- */
/* Host times of each event's latest record (timing_at_record). */
typedef struct event_time {
  cd_event* event;
  double ms;
} event_time;
static event_time* g_event_times;
static size_t g_event_count, g_event_capacity;
static pthread_mutex_t g_event_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember_record(cd_event* event, double ms) {
  size_t i;
  pthread_mutex_lock(&g_event_lock);
  for (i = 0; i < g_event_count && g_event_times[i].event != event; ++i) {
  }
  if (i == g_event_count && g_event_count == g_event_capacity) {
    size_t capacity = g_event_capacity ? g_event_capacity * 2 : 64;
    event_time* grown = (event_time*)realloc(g_event_times, capacity * sizeof(event_time));
    if (grown != NULL) {
      g_event_times = grown;
      g_event_capacity = capacity;
    }
  }
  if (i < g_event_capacity) {
    g_event_times[i].event = event;
    g_event_times[i].ms = ms;
    if (i == g_event_count) ++g_event_count;
  }
  pthread_mutex_unlock(&g_event_lock);
}

static void forget_event(cd_event* event) {
  size_t i;
  pthread_mutex_lock(&g_event_lock);
  for (i = 0; i < g_event_count; ++i) {
    if (g_event_times[i].event == event) {
      g_event_times[i] = g_event_times[--g_event_count];
      break;
    }
  }
  pthread_mutex_unlock(&g_event_lock);
}

static int recorded_at(cd_event* event, double* ms) {
  size_t i;
  int found = 0;
  pthread_mutex_lock(&g_event_lock);
  for (i = 0; i < g_event_count; ++i) {
    if (g_event_times[i].event == event) {
      *ms = g_event_times[i].ms;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&g_event_lock);
  return found;
}

static cd_error* proxy_event_destroy(cd_event* event) {
  cd_error* e = g_target->event_destroy(event);
  if (e == NULL) forget_event(event);
  return e;
}

static cd_error* proxy_event_record(cd_event* event, cd_stream* stream) {
  double ms = now_ms();
  cd_error* e = g_target->event_record(event, stream);
  if (e == NULL) remember_record(event, ms);
  return e;
}

static cd_error* proxy_event_elapsed_time(cd_event* start, cd_event* end, float* milliseconds) {
  cd_error* e = g_target->event_elapsed_time(start, end, milliseconds);
  double t0, t1;
  if (e == NULL && runtime_operator_is(CD_MUTANT_TIMING_AT_RECORD) && recorded_at(start, &t0) &&
      recorded_at(end, &t1)) {
    float host = (float)(t1 - t0);
    if (host != *milliseconds) count_applied();
    *milliseconds = host;
  }
  return e;
}

static cd_error* proxy_event_query(cd_event* event, int32_t* is_complete) {
  cd_error* e = g_target->event_query(event, is_complete);
  if (e == NULL && !*is_complete && runtime_operator_is(CD_MUTANT_EVENT_EARLY)) {
    *is_complete = 1;
    count_applied();
  }
  return e;
}

static cd_error* proxy_event_synchronize(cd_event* event) {
  if (runtime_operator_is(CD_MUTANT_EVENT_EARLY)) {
    int32_t done = 1;
    cd_error* e = g_target->event_query(event, &done);
    if (e != NULL) return e;
    if (!done) count_applied();
    return NULL;
  }
  return g_target->event_synchronize(event);
}

/* ---- runtime operators: memory -------------------------------------------- */
static cd_error* proxy_memory_get_info(int32_t device, size_t* free_bytes, size_t* total_bytes) {
  cd_error* e = g_target->memory_get_info(device, free_bytes, total_bytes);
  if (e == NULL && runtime_operator_is(CD_MUTANT_MEMORY_INFO_TOTAL) && *total_bytes > 0) {
    *total_bytes *= 2;
    count_applied();
  }
  return e;
}

/* copy_truncated: a copy of more than k KiB moves only the first k KiB. */
static size_t copy_size(size_t bytes) {
  if (runtime_operator_is(CD_MUTANT_COPY_TRUNCATED)) {
    int32_t k = control_k();
    size_t limit = k > 0 ? (size_t)k * 1024 : 0;
    if (bytes > limit) {
      count_applied();
      return limit;
    }
  }
  return bytes;
}

static cd_error* proxy_h2d(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_target->memcpy_host_to_device(device, dst, src, copy_size(bytes));
}
static cd_error* proxy_d2h(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_target->memcpy_device_to_host(device, dst, src, copy_size(bytes));
}
static cd_error* proxy_d2d(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_target->memcpy_device_to_device(device, dst, src, copy_size(bytes));
}

/* async_copy_now: the copy happens at once, ignoring the stream's queue (the
 * stream is still checked, so a bad handle fails as before). */
static cd_error* copy_now_check(cd_stream* stream) {
  int32_t done = 1;
  cd_error* e;
  if (stream == NULL) return proxy_error(CD_STATUS_INVALID_ARGUMENT, "async copy", "stream is NULL");
  if (g_target->stream_query == NULL) return NULL;
  e = g_target->stream_query(stream, &done);
  if (e == NULL && !done) count_applied();
  return e;
}

static cd_error* proxy_h2d_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* stream) {
  if (runtime_operator_is(CD_MUTANT_ASYNC_COPY_NOW)) {
    cd_error* e = copy_now_check(stream);
    return e != NULL ? e : g_target->memcpy_host_to_device(device, dst, src, bytes);
  }
  return g_target->memcpy_host_to_device_async(device, dst, src, copy_size(bytes), stream);
}
static cd_error* proxy_d2h_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* stream) {
  if (runtime_operator_is(CD_MUTANT_ASYNC_COPY_NOW)) {
    cd_error* e = copy_now_check(stream);
    return e != NULL ? e : g_target->memcpy_device_to_host(device, dst, src, bytes);
  }
  return g_target->memcpy_device_to_host_async(device, dst, src, copy_size(bytes), stream);
}
static cd_error* proxy_d2d_async(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* stream) {
  if (runtime_operator_is(CD_MUTANT_ASYNC_COPY_NOW)) {
    cd_error* e = copy_now_check(stream);
    return e != NULL ? e : g_target->memcpy_device_to_device(device, dst, src, bytes);
  }
  return g_target->memcpy_device_to_device_async(device, dst, src, copy_size(bytes), stream);
}

/* ---- lifecycle ------------------------------------------------------------ */
static cd_error* proxy_plugin_shutdown(void) {
  double deadline = now_ms() + MUTANT_SHUTDOWN_WAIT_MS;
  int32_t d, i;
  /* Detached work (late write-backs, deferred destroys) must end before the
   * target's shutdown: it still uses the target. */
  release_held_work();
  while (__atomic_load_n(&g_in_flight, __ATOMIC_SEQ_CST) > 0 && now_ms() < deadline) sleep_ms(1);
  if (__atomic_load_n(&g_in_flight, __ATOMIC_SEQ_CST) > 0) {
    return proxy_error(CD_STATUS_INTERNAL, "plugin_shutdown", "work the proxy started did not finish in %d ms",
                       MUTANT_SHUTDOWN_WAIT_MS);
  }
  for (d = 0; d < MUTANT_MAX_DEVICES; ++d) {
    if (g_own_streams[d] != NULL) log_and_drop("stream_destroy", g_target->stream_destroy(g_own_streams[d]));
    if (g_own_events[d] != NULL) log_and_drop("event_destroy", g_target->event_destroy(g_own_events[d]));
    g_own_streams[d] = NULL;
    g_own_events[d] = NULL;
  }
  __atomic_store_n(&g_free_waiting, 1, __ATOMIC_RELEASE);
  drain_free_list();
  for (i = 0; i < g_kernel_count; ++i) {
    free(g_kernels[i].op);
    g_kernels[i].op = NULL;
  }
  free(g_streams);
  g_streams = NULL;
  g_stream_count = g_stream_capacity = 0;
  free(g_event_times);
  g_event_times = NULL;
  g_event_count = g_event_capacity = 0;
  return g_target->plugin_shutdown != NULL ? g_target->plugin_shutdown() : NULL;
}

/* ---- entry ---------------------------------------------------------------- */
/* Maps the control file; NULL after logging why. */
static cd_mutant_control* map_control(const char* path) {
  struct stat info;
  void* mapped;
  cd_mutant_control* control;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    proxy_log(CD_LOG_ERROR, "cannot open CHIPDOCK_MUTANT_CONTROL '%s': %s", path, strerror(errno));
    return NULL;
  }
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size < CD_MUTANT_FILE_SIZE) {
    proxy_log(CD_LOG_ERROR, "CHIPDOCK_MUTANT_CONTROL '%s' is not a regular file of at least %d bytes", path,
              CD_MUTANT_FILE_SIZE);
    close(fd);
    return NULL;
  }
  mapped = mmap(NULL, CD_MUTANT_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    proxy_log(CD_LOG_ERROR, "cannot map CHIPDOCK_MUTANT_CONTROL '%s': %s", path, strerror(errno));
    return NULL;
  }
  control = (cd_mutant_control*)mapped;
  if (control->magic != CD_MUTANT_MAGIC || control->version != CD_MUTANT_LAYOUT_VERSION) {
    proxy_log(CD_LOG_ERROR,
              "CHIPDOCK_MUTANT_CONTROL '%s' is not a version-%u control record (magic 0x%08x, version %u)", path,
              CD_MUTANT_LAYOUT_VERSION, control->magic, control->version);
    munmap(mapped, CD_MUTANT_FILE_SIZE);
    return NULL;
  }
  return control;
}

/* Opens the target library; its entry, or NULL after logging why. */
static cd_plugin_entry_fn open_target(const char* path) {
  void* handle;
  void* symbol;
  cd_plugin_entry_fn entry;
  if (path[0] != '/') {
    proxy_log(CD_LOG_ERROR, "CHIPDOCK_MUTANT_TARGET '%s' is not an absolute path", path);
    return NULL;
  }
  if ((handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
    proxy_log(CD_LOG_ERROR, "cannot load CHIPDOCK_MUTANT_TARGET: %s", dlerror());
    return NULL;
  }
  if ((symbol = dlsym(handle, CD_PLUGIN_ENTRY_SYMBOL)) == NULL) {
    proxy_log(CD_LOG_ERROR, "CHIPDOCK_MUTANT_TARGET '%s' exports no " CD_PLUGIN_ENTRY_SYMBOL, path);
    return NULL;
  }
  memcpy(&entry, &symbol, sizeof(entry)); /* ISO C has no object-to-function pointer cast */
  return entry;
}

/* Wraps the target's slots that mutants change; NULL slots stay NULL (the
 * core's fallback), except device_synchronize (its fallback is the proxy's). */
static void wrap_slots(cd_plugin_api* t) {
  t->error_get_code = proxy_error_get_code;
  t->error_get_message = proxy_error_get_message;
  t->error_destroy = proxy_error_destroy;
  t->plugin_shutdown = proxy_plugin_shutdown;
  t->device_synchronize = proxy_device_synchronize;
  if (t->memory_get_info != NULL) t->memory_get_info = proxy_memory_get_info;
  t->memcpy_host_to_device = proxy_h2d;
  t->memcpy_device_to_host = proxy_d2h;
  t->memcpy_device_to_device = proxy_d2d;
  if (t->memcpy_host_to_device_async != NULL) t->memcpy_host_to_device_async = proxy_h2d_async;
  if (t->memcpy_device_to_host_async != NULL) t->memcpy_device_to_host_async = proxy_d2h_async;
  if (t->memcpy_device_to_device_async != NULL) t->memcpy_device_to_device_async = proxy_d2d_async;
  t->stream_create = proxy_stream_create;
  t->stream_destroy = proxy_stream_destroy;
  if (t->stream_query != NULL) t->stream_query = proxy_stream_query;
  if (t->stream_wait_event != NULL) t->stream_wait_event = proxy_stream_wait_event;
  if (t->stream_add_host_callback != NULL) t->stream_add_host_callback = proxy_stream_add_host_callback;
  t->event_destroy = proxy_event_destroy;
  t->event_record = proxy_event_record;
  t->event_synchronize = proxy_event_synchronize;
  t->event_query = proxy_event_query;
  if (t->event_elapsed_time != NULL) t->event_elapsed_time = proxy_event_elapsed_time;
  if (t->kernels_register != NULL) t->kernels_register = proxy_kernels_register;
}

CD_EXPORT const cd_plugin_api* chipdock_plugin_entry(const cd_core_api* core) {
  const char* target_path = getenv("CHIPDOCK_MUTANT_TARGET");
  const char* control_path = getenv("CHIPDOCK_MUTANT_CONTROL");
  const char* sync_edits = getenv("CHIPDOCK_MUTANT_SYNC_EDITS");
  cd_plugin_entry_fn target_entry;
  size_t core_size, table_size;
  if (core == NULL || core->struct_size < CD_STRUCT_SIZE(cd_core_api, log) ||
      core->abi_major != CD_ABI_VERSION_MAJOR) {
    return NULL;
  }
  g_core = core;
  if (target_path == NULL || target_path[0] == '\0') {
    proxy_log(CD_LOG_ERROR, "CHIPDOCK_MUTANT_TARGET is not set (the absolute path of the backend library to wrap)");
    return NULL;
  }
  if (control_path == NULL || control_path[0] == '\0') {
    proxy_log(CD_LOG_ERROR, "CHIPDOCK_MUTANT_CONTROL is not set (the path of the 4096-byte control file)");
    return NULL;
  }
  if ((g_control = map_control(control_path)) == NULL) return NULL;
  g_force_sync = sync_edits != NULL && strcmp(sync_edits, "1") == 0;
  if ((target_entry = open_target(target_path)) == NULL) return NULL;

  core_size = core->struct_size < sizeof(g_core_for_target) ? core->struct_size : sizeof(g_core_for_target);
  memset(&g_core_for_target, 0, sizeof(g_core_for_target));
  memcpy(&g_core_for_target, core, core_size);
  g_core_for_target.struct_size = core_size;
  g_core_for_target.kernel_register = proxy_kernel_register;
  g_target = target_entry(&g_core_for_target);
  if (g_target == NULL || g_target->struct_size < CD_PLUGIN_API_SIZE_V1_0 ||
      g_target->abi_major != CD_ABI_VERSION_MAJOR || g_target->name == NULL) {
    proxy_log(CD_LOG_ERROR, "CHIPDOCK_MUTANT_TARGET '%s' refused this core or returned an unusable table",
              target_path);
    return NULL;
  }
  if (snprintf(g_name, sizeof(g_name), "mutant-%s", g_target->name) > 64) {
    proxy_log(CD_LOG_ERROR, "the target's name '%s' is too long for a backend name", g_target->name);
    return NULL;
  }
  snprintf(g_error_pool_empty.message, sizeof(g_error_pool_empty.message), "%s: more than %d of its errors are alive",
           g_name, MUTANT_ERROR_POOL);

  table_size = g_target->struct_size < sizeof(g_table) ? g_target->struct_size : sizeof(g_table);
  memset(&g_table, 0, sizeof(g_table));
  memcpy(&g_table, g_target, table_size);
  g_table.struct_size = sizeof(g_table); /* slots the target lacks are NULL: unimplemented */
  g_table.abi_major = CD_ABI_VERSION_MAJOR; /* what this library's manifest says */
  g_table.abi_minor = CD_ABI_VERSION_MINOR;
  g_table.name = g_name;
  g_table.device_type = MUTANT_DEVICE_TYPE;
  g_table.version = MUTANT_VERSION;
  wrap_slots(&g_table);
  return &g_table;
}
