/*
 * broken_shim.c: the CPU reference backend with exactly one planted bug.
 *
 * The conformance suite must catch every bug a real backend could have; the
 * proof is a set of backends that each carry one known bug and a test that
 * the suite fails each of them in the right group (README.md lists them).
 * Writing fifteen backends by hand would test fifteen toy runtimes; instead
 * each broken backend is the real CPU reference with one slot or one kernel
 * replaced, so everything but the planted bug is known to be conforming.
 *
 * How: this file is compiled once per bug with -DCHIPDOCK_BUG=<id>. The
 * entry dlopens a PRIVATE COPY of libchipdock_cpu.so (a copy made at build
 * time, its file name in BROKEN_IMPL_FILE, next to this library). A copy is
 * a different file, so the dynamic loader maps a second instance with its
 * own globals (allocation table, streams, kernel registry), separate from the
 * real "cpu" backend that the suite loads in the same process as reference.
 * The CPU instance gets a copy of the core's services whose kernel_register
 * is wrapped, so the shim can swap in a buggy kernel for one op; the table
 * the shim returns is the CPU's table with its own name, device type and the
 * buggy slot replaced.
 *
 * Device memory is only ever touched through the CPU instance's own slots
 * (memcpy, memset), which translate device addresses, so the shim works
 * under CHIPDOCK_CPU_STRICT=1. The kernels the shim computes itself (bugs 5
 * and 12) stage data through host buffers inside a host callback: the CPU
 * backend runs callbacks as tasks of the stream, in order with the rest.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chipdock/device_api.h"

#ifndef CHIPDOCK_BUG
#error "compile with -DCHIPDOCK_BUG=<id> (see bugs.json)"
#endif
#if !defined(BROKEN_NAME) || !defined(BROKEN_DEVICE_TYPE) || !defined(BROKEN_IMPL_FILE)
#error "compile with -DBROKEN_NAME=... -DBROKEN_DEVICE_TYPE=... -DBROKEN_IMPL_FILE=..."
#endif
#ifndef BROKEN_VERSION
#define BROKEN_VERSION "0.0.0"
#endif

/* The bugs; the numbers are those of bugs.json. */
enum {
  BUG_COPY_DROPS_LAST_BYTE = 1,
  BUG_ASYNC_COPY_IGNORES_ORDER = 2,
  BUG_EVENT_EARLY = 3,
  BUG_TIMING_BACKWARDS = 4,
  BUG_FP16_ACCUMULATE = 5,
  BUG_BROADCAST_AXIS = 6,
  BUG_REDUCTION_SKIPS_TAIL = 7,
  BUG_WRITES_PAST_OUTPUT = 8,
  BUG_LEAK = 9,
  BUG_CRASH_KERNEL = 10,
  BUG_HANG_KERNEL = 11,
  BUG_WRONG_DTYPE_CLAIM = 12,
  BUG_STREAM_QUERY_IDLE = 13,
  BUG_CALLBACK_RUNS_EARLY = 14,
  BUG_WAIT_EVENT_IGNORED = 15
};

#define SHIM_MAX_DIMS 16 /* views with more dims go to the real kernel untouched */
#define SHIM_PAST_END_BYTES 4
#define SHIM_PAST_END_VALUE 0x5A

static const cd_core_api* g_core;  /* the core's services */
static cd_core_api g_core_for_cpu; /* what the CPU instance sees */
static const cd_plugin_api* g_cpu; /* the private CPU instance's table */
static cd_plugin_api g_table;      /* ours */
static cd_kernel_fn g_original[CD_DTYPE_COUNT]; /* the CPU kernels the bug wraps, by dtype */
static int g_kernels_wrapped;
static const char g_anchor = 0; /* an object in this library, for dladdr */

/* ---- errors --------------------------------------------------------------- */
/* The shim's own errors are a few static objects; every other error comes
 * from the CPU instance, so the error slots forward to it. */
struct cd_error {
  cd_status_t code;
  const char* message;
};
static cd_error g_error_oom = {CD_STATUS_OUT_OF_MEMORY, BROKEN_NAME ": out of host memory"};
static cd_error g_error_rank = {CD_STATUS_INVALID_ARGUMENT,
                                BROKEN_NAME ": the planted kernel handles at most 16 dims"};
static cd_error g_error_nothing = {CD_STATUS_INTERNAL,
                                   BROKEN_NAME ": the CPU reference registered no kernel to break"};
static cd_error g_error_no_original = {CD_STATUS_INTERNAL,
                                       BROKEN_NAME ": no CPU kernel was registered for this dtype"};

static int shim_owns(const cd_error* error) {
  return error == &g_error_oom || error == &g_error_rank || error == &g_error_nothing ||
         error == &g_error_no_original;
}
static cd_status_t shim_error_get_code(const cd_error* error) {
  return shim_owns(error) ? error->code : g_cpu->error_get_code(error);
}
static const char* shim_error_get_message(const cd_error* error) {
  return shim_owns(error) ? error->message : g_cpu->error_get_message(error);
}
static void shim_error_destroy(cd_error* error) {
  if (!shim_owns(error)) g_cpu->error_destroy(error);
}

static void shim_log(cd_log_level_t level, const char* message) {
  if (g_core != NULL && g_core->log != NULL) g_core->log(level, message);
}

/* Device address arithmetic without dereferencing (strict mode tags them). */
static void* device_offset(void* data, int64_t bytes) {
  return (void*)((uintptr_t)data + (uintptr_t)bytes);
}

static int64_t view_numel(const cd_tensor_view* view) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < view->ndim; ++d) n *= view->shape[d];
  return n;
}

static size_t dtype_size(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    default: return 1;
  }
}

/* The real kernel for the call's dtype. */
static cd_error* call_original(const cd_kernel_context* ctx) {
  cd_dtype_t dtype = ctx->num_inputs > 0 ? ctx->inputs[0]->dtype : ctx->outputs[0]->dtype;
  if (dtype <= 0 || dtype >= CD_DTYPE_COUNT || g_original[dtype] == NULL) return &g_error_no_original;
  return g_original[dtype](ctx);
}

/* ---- bugs 1, 2, 9: memory ------------------------------------------------- */
static cd_error* h2d_drops_last_byte(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_cpu->memcpy_host_to_device(device, dst, src, bytes > 0 ? bytes - 1 : 0);
}
static cd_error* d2h_drops_last_byte(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_cpu->memcpy_device_to_host(device, dst, src, bytes > 0 ? bytes - 1 : 0);
}

/* The stream is checked (so bad handles still fail), then ignored. */
static cd_error* check_stream(cd_stream* stream) {
  int32_t done = 0;
  return g_cpu->stream_query(stream, &done);
}
static cd_error* h2d_async_now(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) {
  cd_error* e = check_stream(s);
  return e != NULL ? e : g_cpu->memcpy_host_to_device(device, dst, src, bytes);
}
static cd_error* d2h_async_now(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) {
  cd_error* e = check_stream(s);
  return e != NULL ? e : g_cpu->memcpy_device_to_host(device, dst, src, bytes);
}
static cd_error* d2d_async_now(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) {
  cd_error* e = check_stream(s);
  return e != NULL ? e : g_cpu->memcpy_device_to_device(device, dst, src, bytes);
}

static cd_error* free_nothing(int32_t device, void* ptr) {
  (void)device;
  (void)ptr;
  return NULL;
}

/* ---- bugs 3, 4, 13, 14, 15: streams and events ---------------------------- */
static cd_error* event_query_always_done(cd_event* event, int32_t* is_complete) {
  cd_error* e = g_cpu->event_query(event, is_complete);
  if (e == NULL) *is_complete = 1;
  return e;
}
static cd_error* event_synchronize_at_once(cd_event* event) {
  int32_t done = 0;
  return g_cpu->event_query(event, &done);
}
static cd_error* elapsed_negated(cd_event* start, cd_event* end, float* milliseconds) {
  cd_error* e = g_cpu->event_elapsed_time(start, end, milliseconds);
  if (e == NULL) *milliseconds = -*milliseconds;
  return e;
}
static cd_error* stream_query_always_idle(cd_stream* stream, int32_t* is_complete) {
  cd_error* e = g_cpu->stream_query(stream, is_complete);
  if (e == NULL) *is_complete = 1;
  return e;
}
static cd_error* callback_now(cd_stream* stream, cd_host_callback_fn fn, void* user_data) {
  cd_error* e = check_stream(stream);
  if (e == NULL) fn(user_data);
  return e;
}
static cd_error* wait_event_no_wait(cd_stream* stream, cd_event* event) {
  int32_t done = 0;
  cd_error* e = check_stream(stream);
  return e != NULL ? e : g_cpu->event_query(event, &done);
}

/* ---- float16 by hand (C99 has no half type) -------------------------------- */
static float half_to_float(uint16_t h) {
  int exponent = (h >> 10) & 0x1f;
  float mantissa = (float)(h & 0x3ff);
  float value;
  if (exponent == 0) {
    value = ldexpf(mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa != 0.0f ? NAN : INFINITY;
  } else {
    value = ldexpf(mantissa + 1024.0f, exponent - 25);
  }
  return (h & 0x8000) ? -value : value;
}

/* Round to nearest even, as a float16 unit would. */
static uint16_t float_to_half(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  float a = fabsf(f);
  int exponent;
  long q;
  if (isnan(f)) return (uint16_t)(sign | 0x7e00);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
  if (a < 6.103515625e-05f) {                           /* subnormal: units of 2^-24 */
    return (uint16_t)(sign | (uint16_t)lrintf(a * 16777216.0f));
  }
  q = lrintf(ldexpf(frexpf(a, &exponent), 11)); /* 11 significant bits: [1024, 2048] */
  exponent += 14;
  if (q == 2048) {
    q = 1024;
    ++exponent;
  }
  if (exponent >= 31) return (uint16_t)(sign | 0x7c00);
  return (uint16_t)(sign | (uint16_t)(exponent << 10) | (uint16_t)(q - 1024));
}

/* ---- bugs 5 and 12: kernels the shim computes itself ----------------------- */
/* Both run in a host callback on the kernel's stream: it copies the input to
 * the host, computes, and copies the result back with the CPU instance's
 * synchronous copies. The job carries everything (the context dies with the
 * kernel call). */
typedef struct staged_job {
  int32_t device;
  int32_t ndim;
  void* in;  /* device address of the first input element (contiguous) */
  void* out; /* device address of the output (contiguous) */
  int64_t in_numel;
  int64_t out_numel;
  int64_t shape[SHIM_MAX_DIMS];
  int64_t out_stride[SHIM_MAX_DIMS]; /* output elements per input index step; 0 on reduced axes */
} staged_job;

static int stage_in(const staged_job* job, void* host, size_t bytes) {
  cd_error* e = bytes == 0 ? NULL : g_cpu->memcpy_device_to_host(job->device, host, job->in, bytes);
  if (e == NULL) return 1;
  shim_log(CD_LOG_ERROR, g_cpu->error_get_message(e));
  g_cpu->error_destroy(e);
  return 0;
}
static void stage_out(const staged_job* job, const void* host, size_t bytes) {
  cd_error* e = g_cpu->memcpy_host_to_device(job->device, job->out, host, bytes);
  if (e == NULL) return;
  shim_log(CD_LOG_ERROR, g_cpu->error_get_message(e));
  g_cpu->error_destroy(e);
}

/* Bug 5: sum over float16, accumulating in float16 (rounded after every
 * add) in input order, where the reference accumulates in float32. */
static void sum_f16_run(void* user_data) {
  staged_job* job = (staged_job*)user_data;
  uint16_t* x = (uint16_t*)malloc((size_t)job->in_numel * 2 + 2);
  uint16_t* y = (uint16_t*)calloc((size_t)job->out_numel + 1, 2); /* +0.0 */
  if (x == NULL || y == NULL) {
    shim_log(CD_LOG_ERROR, g_error_oom.message);
  } else if (stage_in(job, x, (size_t)job->in_numel * 2)) {
    int64_t i;
    for (i = 0; i < job->in_numel; ++i) {
      int64_t rest = i, o = 0;
      int32_t d;
      for (d = job->ndim - 1; d >= 0; --d) {
        o += (rest % job->shape[d]) * job->out_stride[d];
        rest /= job->shape[d];
      }
      y[o] = float_to_half(half_to_float(y[o]) + half_to_float(x[i]));
    }
    stage_out(job, y, (size_t)job->out_numel * 2);
  }
  free(x);
  free(y);
  free(job);
}

static const cd_attribute* find_attribute(const cd_kernel_context* ctx, const char* name) {
  int32_t i;
  for (i = 0; i < ctx->num_attributes; ++i) {
    if (strcmp(ctx->attributes[i]->name, name) == 0) return ctx->attributes[i];
  }
  return NULL;
}

/* 1 if `axis` is in the (normalized) `axes` attribute of a reduction. */
static int is_reduced(const cd_kernel_context* ctx, int32_t axis) {
  const cd_attribute* axes = find_attribute(ctx, "axes");
  int32_t i;
  if (axes == NULL || axes->type != CD_ATTR_INTS) return 0;
  for (i = 0; i < axes->count; ++i) {
    if (axes->value.ints[i] == axis) return 1;
  }
  return 0;
}

static cd_error* enqueue_job(const cd_kernel_context* ctx, staged_job* job, cd_host_callback_fn run) {
  cd_error* e = g_cpu->stream_add_host_callback(ctx->stream, run, job);
  if (e != NULL) free(job);
  return e;
}

static staged_job* new_job(const cd_kernel_context* ctx) {
  const cd_tensor_view* in = ctx->inputs[0];
  const cd_tensor_view* out = ctx->outputs[0];
  staged_job* job;
  if (in->ndim > SHIM_MAX_DIMS) return NULL;
  job = (staged_job*)calloc(1, sizeof(staged_job));
  if (job == NULL) return NULL;
  job->device = ctx->device;
  job->ndim = in->ndim;
  job->in_numel = view_numel(in);
  job->out_numel = view_numel(out);
  job->in = device_offset(in->data, in->byte_offset);
  job->out = device_offset(out->data, out->byte_offset);
  if (in->ndim > 0) memcpy(job->shape, in->shape, (size_t)in->ndim * sizeof(int64_t));
  return job;
}

static cd_error* sum_f16_accumulate(const cd_kernel_context* ctx) {
  staged_job* job;
  int64_t stride = 1;
  int32_t d;
  if (ctx->inputs[0]->ndim > SHIM_MAX_DIMS) return &g_error_rank;
  if ((job = new_job(ctx)) == NULL) return &g_error_oom;
  for (d = job->ndim - 1; d >= 0; --d) { /* C-contiguous output over the kept axes */
    job->out_stride[d] = is_reduced(ctx, d) ? 0 : stride;
    if (!is_reduced(ctx, d)) stride *= job->shape[d];
  }
  return enqueue_job(ctx, job, sum_f16_run);
}

/* Bug 12: exp registered for float64 but computed in float32. */
static void exp_f64_run(void* user_data) {
  staged_job* job = (staged_job*)user_data;
  double* x = (double*)malloc((size_t)job->in_numel * sizeof(double) + 1);
  int64_t i;
  if (x == NULL) {
    shim_log(CD_LOG_ERROR, g_error_oom.message);
  } else if (stage_in(job, x, (size_t)job->in_numel * sizeof(double))) {
    for (i = 0; i < job->in_numel; ++i) x[i] = (double)expf((float)x[i]);
    stage_out(job, x, (size_t)job->in_numel * sizeof(double));
  }
  free(x);
  free(job);
}

static cd_error* exp_f64_in_f32(const cd_kernel_context* ctx) {
  staged_job* job;
  if (ctx->inputs[0]->ndim > SHIM_MAX_DIMS) return &g_error_rank;
  if ((job = new_job(ctx)) == NULL) return &g_error_oom;
  return enqueue_job(ctx, job, exp_f64_run);
}

/* ---- bugs 6 and 7: the real kernel on a wrong view ------------------------- */
/* Bug 6: an input broadcast along dim 0 (stride 0, size > 1) is also read
 * as broadcast along the last dim: every row repeats its first element. */
static cd_error* add_wrong_broadcast(const cd_kernel_context* ctx) {
  cd_tensor_view views[3];
  const cd_tensor_view* pointers[3];
  int64_t strides[3][SHIM_MAX_DIMS];
  cd_kernel_context copy = *ctx;
  int32_t i;
  if (ctx->num_inputs > 3) return call_original(ctx);
  for (i = 0; i < ctx->num_inputs; ++i) {
    const cd_tensor_view* v = ctx->inputs[i];
    int32_t last = v->ndim - 1;
    views[i] = *v;
    pointers[i] = &views[i];
    if (v->ndim >= 2 && v->ndim <= SHIM_MAX_DIMS && v->shape[0] > 1 && v->strides[0] == 0 &&
        v->shape[last] > 1) {
      memcpy(strides[i], v->strides, (size_t)v->ndim * sizeof(int64_t));
      strides[i][last] = 0;
      views[i].strides = strides[i];
    }
  }
  copy.inputs = pointers;
  return call_original(&copy);
}

/* Bug 7: float32 sum drops the last element of the reduced last axis when
 * that axis is not a multiple of 8 long (a vector loop without its tail). */
static cd_error* sum_skips_tail(const cd_kernel_context* ctx) {
  const cd_tensor_view* in = ctx->inputs[0];
  int32_t last = in->ndim - 1;
  cd_tensor_view view = *in;
  const cd_tensor_view* pointers[1];
  int64_t shape[SHIM_MAX_DIMS];
  cd_kernel_context copy = *ctx;
  if (in->ndim < 1 || in->ndim > SHIM_MAX_DIMS || !is_reduced(ctx, last) || in->shape[last] % 8 == 0) {
    return call_original(ctx);
  }
  memcpy(shape, in->shape, (size_t)in->ndim * sizeof(int64_t));
  shape[last] -= 1;
  view.shape = shape;
  pointers[0] = &view;
  copy.inputs = pointers;
  copy.num_inputs = 1;
  return call_original(&copy);
}

/* ---- bugs 8, 10, 11: kernels that misbehave after the real work ----------- */
/* Bug 8: a few bytes written just past the end of the (contiguous) output,
 * silently, as a device without memory protection would. */
static cd_error* relu_writes_past_end(const cd_kernel_context* ctx) {
  const cd_tensor_view* out = ctx->outputs[0];
  size_t itemsize = dtype_size(out->dtype);
  int64_t end = out->byte_offset + view_numel(out) * (int64_t)itemsize;
  cd_error* e = call_original(ctx);
  if (e != NULL || view_numel(out) == 0) return e;
  e = g_cpu->memory_set_async(ctx->device, device_offset(out->data, end), SHIM_PAST_END_VALUE,
                              SHIM_PAST_END_BYTES, ctx->stream);
  if (e != NULL) g_cpu->error_destroy(e); /* past the whole allocation: the CPU refused */
  return NULL;
}

static void crash_now(void* user_data) {
  volatile int* volatile target = NULL; /* volatile: the store really happens */
  (void)user_data;
  *target = 1;
}
static cd_error* abs_crashes(const cd_kernel_context* ctx) {
  cd_error* e = call_original(ctx);
  return e != NULL ? e : g_cpu->stream_add_host_callback(ctx->stream, crash_now, NULL);
}

static void hang_forever(void* user_data) {
  struct timespec nap = {1, 0};
  (void)user_data;
  for (;;) nanosleep(&nap, NULL);
}
static cd_error* neg_hangs(const cd_kernel_context* ctx) {
  cd_error* e = call_original(ctx);
  return e != NULL ? e : g_cpu->stream_add_host_callback(ctx->stream, hang_forever, NULL);
}

/* ---- kernel registration -------------------------------------------------- */
/* The planted kernel for a registration of the CPU instance, or NULL to keep
 * the CPU's. `*flags` may gain flags the planted kernel needs. */
static cd_kernel_fn planted_kernel(const cd_kernel_def* def, uint32_t* flags) {
  const char* op = def->op;
  cd_dtype_t dtype = def->num_dtypes > 0 ? def->dtypes[0] : CD_DTYPE_INVALID;
  switch (CHIPDOCK_BUG) {
    case BUG_FP16_ACCUMULATE:
      if (strcmp(op, "sum") != 0 || dtype != CD_DTYPE_FLOAT16) return NULL;
      *flags |= CD_KERNEL_CONTIGUOUS_INPUTS;
      return sum_f16_accumulate;
    case BUG_WRONG_DTYPE_CLAIM:
      if (strcmp(op, "exp") != 0 || dtype != CD_DTYPE_FLOAT64) return NULL;
      *flags |= CD_KERNEL_CONTIGUOUS_INPUTS;
      return exp_f64_in_f32;
    case BUG_REDUCTION_SKIPS_TAIL:
      return strcmp(op, "sum") == 0 && dtype == CD_DTYPE_FLOAT32 ? sum_skips_tail : NULL;
    case BUG_BROADCAST_AXIS: return strcmp(op, "add") == 0 ? add_wrong_broadcast : NULL;
    case BUG_WRITES_PAST_OUTPUT: return strcmp(op, "relu") == 0 ? relu_writes_past_end : NULL;
    case BUG_CRASH_KERNEL: return strcmp(op, "abs") == 0 ? abs_crashes : NULL;
    case BUG_HANG_KERNEL: return strcmp(op, "neg") == 0 ? neg_hangs : NULL;
    default: return NULL;
  }
}

/* 1 if the bug lives in a kernel (then one must have been replaced). */
static int bug_is_in_a_kernel(void) {
  switch (CHIPDOCK_BUG) {
    case BUG_FP16_ACCUMULATE: case BUG_WRONG_DTYPE_CLAIM: case BUG_REDUCTION_SKIPS_TAIL:
    case BUG_BROADCAST_AXIS: case BUG_WRITES_PAST_OUTPUT: case BUG_CRASH_KERNEL: case BUG_HANG_KERNEL:
      return 1;
    default: return 0;
  }
}

static cd_status_t shim_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) {
  cd_kernel_def copy = *def;
  cd_dtype_t dtype = def->num_dtypes > 0 ? def->dtypes[0] : CD_DTYPE_INVALID;
  cd_kernel_fn planted = def->op != NULL && def->fn != NULL && dtype > 0 && dtype < CD_DTYPE_COUNT
                             ? planted_kernel(def, &copy.flags)
                             : NULL;
  if (planted != NULL) {
    g_original[dtype] = def->fn;
    copy.fn = planted;
    ++g_kernels_wrapped;
  }
  return g_core->kernel_register(registry, &copy);
}

static cd_error* shim_kernels_register(cd_kernel_registry* registry) {
  cd_error* e = g_cpu->kernels_register(registry);
  if (e == NULL && g_kernels_wrapped == 0 && bug_is_in_a_kernel()) return &g_error_nothing;
  return e;
}

/* ---- the table ------------------------------------------------------------ */
/* Replaces the slot(s) that carry this build's bug. */
static void plant_bug(cd_plugin_api* t) {
  switch (CHIPDOCK_BUG) {
    case BUG_COPY_DROPS_LAST_BYTE:
      t->memcpy_host_to_device = h2d_drops_last_byte;
      t->memcpy_device_to_host = d2h_drops_last_byte;
      break;
    case BUG_ASYNC_COPY_IGNORES_ORDER:
      t->memcpy_host_to_device_async = h2d_async_now;
      t->memcpy_device_to_host_async = d2h_async_now;
      t->memcpy_device_to_device_async = d2d_async_now;
      break;
    case BUG_EVENT_EARLY:
      t->event_query = event_query_always_done;
      t->event_synchronize = event_synchronize_at_once;
      break;
    case BUG_TIMING_BACKWARDS: t->event_elapsed_time = elapsed_negated; break;
    case BUG_LEAK: t->memory_free = free_nothing; break;
    case BUG_STREAM_QUERY_IDLE: t->stream_query = stream_query_always_idle; break;
    case BUG_CALLBACK_RUNS_EARLY: t->stream_add_host_callback = callback_now; break;
    case BUG_WAIT_EVENT_IGNORED: t->stream_wait_event = wait_event_no_wait; break;
    default: t->kernels_register = shim_kernels_register; break; /* a kernel bug */
  }
}

/* Opens this library's private copy of the CPU backend (BROKEN_IMPL_FILE in
 * the same folder) and returns its entry, or NULL after logging why. */
static cd_plugin_entry_fn open_cpu_copy(void) {
  Dl_info self;
  char path[4096];
  const char* slash;
  void* handle;
  void* symbol;
  cd_plugin_entry_fn entry;
  if (dladdr(&g_anchor, &self) == 0 || self.dli_fname == NULL) {
    shim_log(CD_LOG_ERROR, BROKEN_NAME ": cannot find its own library path (dladdr failed)");
    return NULL;
  }
  slash = strrchr(self.dli_fname, '/');
  if (snprintf(path, sizeof(path), "%.*s%s", slash == NULL ? 0 : (int)(slash - self.dli_fname + 1),
               self.dli_fname, BROKEN_IMPL_FILE) >= (int)sizeof(path)) {
    shim_log(CD_LOG_ERROR, BROKEN_NAME ": the path of its CPU copy is too long");
    return NULL;
  }
  handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    char message[4352];
    snprintf(message, sizeof(message), BROKEN_NAME ": cannot load its CPU copy: %s", dlerror());
    shim_log(CD_LOG_ERROR, message);
    return NULL;
  }
  symbol = dlsym(handle, CD_PLUGIN_ENTRY_SYMBOL);
  if (symbol == NULL) {
    shim_log(CD_LOG_ERROR, BROKEN_NAME ": its CPU copy exports no " CD_PLUGIN_ENTRY_SYMBOL);
    return NULL;
  }
  memcpy(&entry, &symbol, sizeof(entry)); /* ISO C has no object-to-function pointer cast */
  return entry;
}

CD_EXPORT const cd_plugin_api* chipdock_plugin_entry(const cd_core_api* core) {
  cd_plugin_entry_fn cpu_entry;
  size_t core_size, table_size;
  if (core == NULL || core->struct_size < CD_STRUCT_SIZE(cd_core_api, log) ||
      core->abi_major != CD_ABI_VERSION_MAJOR) {
    return NULL;
  }
  g_core = core;
  if ((cpu_entry = open_cpu_copy()) == NULL) return NULL;
  core_size = core->struct_size < sizeof(g_core_for_cpu) ? core->struct_size : sizeof(g_core_for_cpu);
  memset(&g_core_for_cpu, 0, sizeof(g_core_for_cpu));
  memcpy(&g_core_for_cpu, core, core_size);
  g_core_for_cpu.struct_size = core_size;
  g_core_for_cpu.kernel_register = shim_kernel_register;
  g_cpu = cpu_entry(&g_core_for_cpu);
  if (g_cpu == NULL || g_cpu->struct_size < CD_PLUGIN_API_SIZE_V1_0) {
    shim_log(CD_LOG_ERROR, BROKEN_NAME ": its CPU copy refused this core");
    return NULL;
  }
  table_size = g_cpu->struct_size < sizeof(g_table) ? g_cpu->struct_size : sizeof(g_table);
  memset(&g_table, 0, sizeof(g_table));
  memcpy(&g_table, g_cpu, table_size);
  g_table.struct_size = table_size;
  g_table.abi_major = CD_ABI_VERSION_MAJOR; /* what this library's manifest says */
  g_table.abi_minor = CD_ABI_VERSION_MINOR;
  g_table.name = BROKEN_NAME;
  g_table.device_type = BROKEN_DEVICE_TYPE;
  g_table.version = BROKEN_VERSION;
  g_table.error_get_code = shim_error_get_code;
  g_table.error_get_message = shim_error_get_message;
  g_table.error_destroy = shim_error_destroy;
  plant_bug(&g_table);
  return &g_table;
}
