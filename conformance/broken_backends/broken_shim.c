/*
 * broken_shim.c: the CPU reference backend with exactly one planted bug.
 *
 * The conformance suite must catch every bug a real backend could have; the
 * proof is a set of backends that each carry one known bug and a test that
 * the suite fails each of them in the right group (README.md lists them).
 * Writing thirty backends by hand would test thirty toy runtimes; instead
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
 * under CHIPDOCK_CPU_STRICT=1. The kernels the shim computes itself (bugs
 * 5, 12, 16, 17, 19, 25, 33) stage data through host buffers inside a host
 * callback: the CPU backend runs callbacks as tasks of the stream, in order
 * with the rest. The others run the real CPU kernel, on a view the bug gets
 * wrong (6, 7, 18, 20-24, 26) or followed by work of their own (8, 10, 11,
 * 32); runtime bugs wrap the CPU's slots.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
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
  BUG_WAIT_EVENT_IGNORED = 15,
  BUG_SOFTMAX_NO_MAX_SHIFT = 16,
  BUG_SILU_NAIVE_EXP = 17,
  BUG_EQ_COMPARES_BITS = 18,
  BUG_TANH_LOSES_ZERO_SIGN = 19,
  BUG_RELU_WRITES_INPUT = 20,
  BUG_IGNORES_BYTE_OFFSET = 21,
  BUG_REVERSED_READ_FORWARD = 22,
  BUG_MATMUL_TRANSPOSED_AS_ROW_MAJOR = 23,
  BUG_CONV_IGNORES_DILATION = 24,
  BUG_LOG_SOFTMAX_ONE_TILE = 25,
  BUG_LAYER_NORM_SCALE_LAST_DIM = 26,
  BUG_COPY_WHOLE_CHUNKS = 27,
  BUG_PROPERTIES_MEMORY_DECIMAL = 28,
  BUG_TIMING_AT_RECORD = 29,
  BUG_DEVICE_SYNC_LAST_STREAM = 30,
  BUG_DESTROY_NO_WAIT = 31,
  BUG_KERNEL_FINISHES_LATE = 32,
  BUG_MAX_STARTS_AT_LOWEST = 33
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
  int32_t axis;                      /* softmax-like kernels: the normalized axis, in [0, ndim) */
  float (*unary)(float);             /* float32 elementwise kernels: the function */
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

/* A reduction the shim computes itself (`run` on the host): the job with the
 * output's stride per input axis, 0 on the reduced axes. */
static cd_error* enqueue_reduction(const cd_kernel_context* ctx, cd_host_callback_fn run) {
  staged_job* job;
  int64_t stride = 1;
  int32_t d;
  if (ctx->inputs[0]->ndim > SHIM_MAX_DIMS) return &g_error_rank;
  if ((job = new_job(ctx)) == NULL) return &g_error_oom;
  for (d = job->ndim - 1; d >= 0; --d) { /* C-contiguous output over the kept axes */
    job->out_stride[d] = is_reduced(ctx, d) ? 0 : stride;
    if (!is_reduced(ctx, d)) stride *= job->shape[d];
  }
  return enqueue_job(ctx, job, run);
}

static cd_error* sum_f16_accumulate(const cd_kernel_context* ctx) { return enqueue_reduction(ctx, sum_f16_run); }

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

/* ---- bugs 16, 17, 19, 25, 33: float32 kernels the shim computes itself ---- */
/* Elementwise float32 (the input and output are contiguous and have the
 * same element count). */
static void unary_f32_run(void* user_data) {
  staged_job* job = (staged_job*)user_data;
  float* x = (float*)malloc((size_t)job->in_numel * sizeof(float) + 1);
  int64_t i;
  if (x == NULL) {
    shim_log(CD_LOG_ERROR, g_error_oom.message);
  } else if (stage_in(job, x, (size_t)job->in_numel * sizeof(float))) {
    for (i = 0; i < job->in_numel; ++i) x[i] = job->unary(x[i]);
    stage_out(job, x, (size_t)job->in_numel * sizeof(float));
  }
  free(x);
  free(job);
}

/* Bug 17: silu as x * e^x / (1 + e^x), straight from the definition: past
 * x = 88.7 e^x overflows and the quotient is inf / inf = NaN (the reference
 * computes x / (1 + e^-x)). */
static float silu_naive(float x) {
  float e = expf(x);
  return x * e / (1.0f + e);
}

/* Bug 19: tanh as an odd function of |x|, with the sign restored by a
 * comparison: -0 is not < 0, so tanh(-0) gives +0. */
static float tanh_of_magnitude(float x) {
  float t = tanhf(fabsf(x));
  return x < 0.0f ? -t : t;
}

static cd_error* unary_f32_host(const cd_kernel_context* ctx, float (*fn)(float)) {
  staged_job* job;
  if (ctx->inputs[0]->ndim > SHIM_MAX_DIMS) return &g_error_rank;
  if ((job = new_job(ctx)) == NULL) return &g_error_oom;
  job->unary = fn;
  return enqueue_job(ctx, job, unary_f32_run);
}
static cd_error* silu_f32_naive(const cd_kernel_context* ctx) { return unary_f32_host(ctx, silu_naive); }
static cd_error* tanh_f32_magnitude(const cd_kernel_context* ctx) {
  return unary_f32_host(ctx, tanh_of_magnitude);
}

#define SHIM_TILE 4096 /* bug 25: the elements one work-group's tile holds */

/* Bug 16: softmax of one row (n elements, `step` apart) as e^x / sum e^x,
 * without subtracting the row's max first: a logit above 88.7 overflows to
 * inf / inf = NaN, a row below -103.9 underflows to 0 / 0 = NaN. */
static void softmax_row_unshifted(float* row, int64_t n, int64_t step) {
  double total = 0.0;
  int64_t i;
  for (i = 0; i < n; ++i) total += expf(row[i * step]);
  for (i = 0; i < n; ++i) row[i * step] = (float)(expf(row[i * step]) / total);
}

/* Bug 25: log_softmax of one row whose max and normalizer come from its
 * first SHIM_TILE elements only (one tile's reduction, never combined with
 * the next tiles'); every element is written with them. Rows up to
 * SHIM_TILE long are right. */
static void log_softmax_row_one_tile(float* row, int64_t n, int64_t step) {
  int64_t tile = n < SHIM_TILE ? n : SHIM_TILE;
  float max = -INFINITY;
  double total = 0.0, shift;
  int64_t i;
  for (i = 0; i < tile; ++i) {
    float v = row[i * step];
    if (v > max || isnan(v)) max = isnan(max) ? max : v; /* NaN, once seen, stays */
  }
  for (i = 0; i < tile; ++i) total += exp((double)row[i * step] - (double)max);
  shift = (double)max + log(total);
  for (i = 0; i < n; ++i) row[i * step] = (float)((double)row[i * step] - shift);
}

/* Softmax-like float32 kernels over `axis` of a contiguous input. */
static void rows_f32_run(void* user_data) {
  staged_job* job = (staged_job*)user_data;
  float* x = (float*)malloc((size_t)job->in_numel * sizeof(float) + 1);
  int64_t n = job->ndim == 0 ? 1 : job->shape[job->axis];
  int64_t outer = 1, inner = 1, o, k;
  int32_t d;
  for (d = 0; d < job->ndim; ++d) {
    if (d < job->axis) outer *= job->shape[d];
    if (d > job->axis) inner *= job->shape[d];
  }
  if (x == NULL) {
    shim_log(CD_LOG_ERROR, g_error_oom.message);
  } else if (job->in_numel > 0 && stage_in(job, x, (size_t)job->in_numel * sizeof(float))) {
    for (o = 0; o < outer; ++o) {
      for (k = 0; k < inner; ++k) {
        float* row = x + o * n * inner + k;
        if (CHIPDOCK_BUG == BUG_SOFTMAX_NO_MAX_SHIFT) {
          softmax_row_unshifted(row, n, inner);
        } else {
          log_softmax_row_one_tile(row, n, inner);
        }
      }
    }
    stage_out(job, x, (size_t)job->in_numel * sizeof(float));
  }
  free(x);
  free(job);
}

static cd_error* rows_f32_host(const cd_kernel_context* ctx) {
  const cd_attribute* axis = find_attribute(ctx, "axis");
  staged_job* job;
  if (ctx->inputs[0]->ndim > SHIM_MAX_DIMS) return &g_error_rank;
  if ((job = new_job(ctx)) == NULL) return &g_error_oom;
  job->axis = axis != NULL && axis->type == CD_ATTR_INT ? (int32_t)axis->value.i : -1;
  if (job->axis < 0) job->axis += job->ndim;
  if (job->ndim == 0 || job->axis < 0 || job->axis >= job->ndim) job->axis = 0; /* the core checked it */
  return enqueue_job(ctx, job, rows_f32_run);
}

/* Bug 33: float32 max reduction whose accumulator starts at the lowest
 * finite float (-FLT_MAX) instead of -inf: a reduced slice that holds only
 * -inf gives -3.4e38. NaN propagates as it should. */
static void max_f32_run(void* user_data) {
  staged_job* job = (staged_job*)user_data;
  float* x = (float*)malloc((size_t)job->in_numel * sizeof(float) + 1);
  float* y = (float*)malloc((size_t)job->out_numel * sizeof(float) + 1);
  int64_t i;
  if (x == NULL || y == NULL) {
    shim_log(CD_LOG_ERROR, g_error_oom.message);
  } else if (stage_in(job, x, (size_t)job->in_numel * sizeof(float))) {
    for (i = 0; i < job->out_numel; ++i) y[i] = -FLT_MAX;
    for (i = 0; i < job->in_numel; ++i) {
      int64_t rest = i, o = 0;
      int32_t d;
      for (d = job->ndim - 1; d >= 0; --d) {
        o += (rest % job->shape[d]) * job->out_stride[d];
        rest /= job->shape[d];
      }
      if (!isnan(y[o]) && (isnan(x[i]) || x[i] > y[o])) y[o] = x[i];
    }
    stage_out(job, y, (size_t)job->out_numel * sizeof(float));
  }
  free(x);
  free(y);
  free(job);
}

static cd_error* max_f32_from_lowest(const cd_kernel_context* ctx) { return enqueue_reduction(ctx, max_f32_run); }

/* ---- bugs 18, 20-24, 26: the real kernel on a wrong view ------------------ */
/* A context whose views the bug may rewrite: copies of the call's views
 * (and of their strides and shapes), pointed to by `context`. */
typedef struct view_copies {
  cd_kernel_context context;
  cd_tensor_view views[4];
  const cd_tensor_view* pointers[4];
  int64_t shapes[4][SHIM_MAX_DIMS];
  int64_t strides[4][SHIM_MAX_DIMS];
} view_copies;

/* Copies the inputs of `ctx` into `c`; 0 (nothing copied) when the call has
 * more inputs or dims than a view_copies holds. */
static int copy_inputs(const cd_kernel_context* ctx, view_copies* c) {
  int32_t i;
  if (ctx->num_inputs > 4) return 0;
  c->context = *ctx;
  for (i = 0; i < ctx->num_inputs; ++i) {
    const cd_tensor_view* v = ctx->inputs[i];
    if (v->ndim > SHIM_MAX_DIMS) return 0;
    c->views[i] = *v;
    if (v->ndim > 0) {
      memcpy(c->shapes[i], v->shape, (size_t)v->ndim * sizeof(int64_t));
      memcpy(c->strides[i], v->strides, (size_t)v->ndim * sizeof(int64_t));
      c->views[i].shape = c->shapes[i];
      c->views[i].strides = c->strides[i];
    }
    c->pointers[i] = &c->views[i];
  }
  c->context.inputs = c->pointers;
  return 1;
}

/* Bug 18: float eq compares the bit patterns with the integer kernel of the
 * same width: NaN == NaN (same bits) is true, +0 == -0 is false. */
static cd_error* eq_compares_bits(const cd_kernel_context* ctx) {
  view_copies c;
  cd_dtype_t as_int;
  int32_t i;
  if (ctx->num_inputs != 2 || !copy_inputs(ctx, &c)) return call_original(ctx);
  switch (ctx->inputs[0]->dtype) {
    case CD_DTYPE_FLOAT64: as_int = CD_DTYPE_INT64; break;
    case CD_DTYPE_FLOAT32: as_int = CD_DTYPE_INT32; break;
    default: as_int = CD_DTYPE_INT16; break; /* float16, bfloat16 */
  }
  for (i = 0; i < 2; ++i) c.views[i].dtype = as_int;
  return call_original(&c.context);
}

/* Bug 20: relu also runs in place on its input (a fast path meant for
 * x.relu_() taken for every call): the output is right, the input is
 * clamped too. */
static cd_error* relu_writes_input(const cd_kernel_context* ctx) {
  cd_kernel_context in_place = *ctx;
  cd_error* e = call_original(ctx);
  if (e != NULL) return e;
  in_place.outputs = ctx->inputs;
  e = call_original(&in_place);
  if (e != NULL) g_cpu->error_destroy(e); /* an input the CPU cannot write (overlapping): left alone */
  return NULL;
}

/* Bug 21: sub reads every input from the start of its allocation, as if
 * byte_offset were always 0 (a view x[6:] reads x[0:]). */
static cd_error* sub_ignores_byte_offset(const cd_kernel_context* ctx) {
  view_copies c;
  int32_t i;
  if (!copy_inputs(ctx, &c)) return call_original(ctx);
  for (i = 0; i < ctx->num_inputs; ++i) c.views[i].byte_offset = 0;
  return call_original(&c.context);
}

/* Bug 22: mul reads a dim with a negative stride forward from its lowest
 * address (it takes |stride|, as for a dense span): x[::-1] reads as x. */
static cd_error* mul_reads_reversed_forward(const cd_kernel_context* ctx) {
  view_copies c;
  int32_t i, d;
  if (!copy_inputs(ctx, &c)) return call_original(ctx);
  for (i = 0; i < ctx->num_inputs; ++i) {
    cd_tensor_view* v = &c.views[i];
    for (d = 0; d < v->ndim; ++d) {
      if (c.strides[i][d] < 0 && c.shapes[i][d] > 1) {
        v->byte_offset += (c.shapes[i][d] - 1) * c.strides[i][d] * (int64_t)dtype_size(v->dtype);
        c.strides[i][d] = -c.strides[i][d];
      }
    }
  }
  return call_original(&c.context);
}

/* Bug 23: matmul takes an operand whose matrices are dense as row-major: a
 * transposed operand (column-major: strides (1, rows)) is read as if its
 * strides were (cols, 1). */
static cd_error* matmul_transposed_as_row_major(const cd_kernel_context* ctx) {
  view_copies c;
  int32_t i;
  if (!copy_inputs(ctx, &c)) return call_original(ctx);
  for (i = 0; i < ctx->num_inputs; ++i) {
    int32_t n = c.views[i].ndim;
    int64_t* shape = c.shapes[i];
    int64_t* strides = c.strides[i];
    if (n >= 2 && shape[n - 2] > 1 && shape[n - 1] > 1 && strides[n - 2] == 1 &&
        strides[n - 1] == shape[n - 2]) {
      strides[n - 2] = shape[n - 1];
      strides[n - 1] = 1;
    }
  }
  return call_original(&c.context);
}

/* Bug 24: conv2d ignores `dilation`: each output element is the undilated
 * R x S window at the same position. Computed by the real kernel with
 * dilation 1 and the bottom/right padding reduced by (d - 1) * (R - 1) (the
 * input cropped where that goes below 0), which keeps the output shape the
 * core allocated and puts every window where the buggy kernel reads it. */
static cd_error* conv2d_ignores_dilation(const cd_kernel_context* ctx) {
  view_copies c;
  const cd_attribute* dilation = find_attribute(ctx, "dilation");
  const cd_attribute* padding = find_attribute(ctx, "padding");
  const cd_attribute* attributes[16];
  cd_attribute new_dilation, new_padding;
  int64_t ones[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
  int32_t i, k;
  if (dilation == NULL || dilation->type != CD_ATTR_INTS || dilation->count != 2 ||
      (dilation->value.ints[0] == 1 && dilation->value.ints[1] == 1) || ctx->num_attributes >= 16 ||
      ctx->num_inputs < 2 || !copy_inputs(ctx, &c) || c.views[0].ndim != 4 || c.views[1].ndim != 4) {
    return call_original(ctx);
  }
  if (padding != NULL && padding->type == CD_ATTR_INTS && padding->count == 4) {
    memcpy(pads, padding->value.ints, sizeof(pads));
  }
  for (k = 0; k < 2; ++k) { /* k = 0: height (pads top 0, bottom 2); k = 1: width (1, 3) */
    int64_t window = c.shapes[1][2 + k] - 1; /* R - 1 or S - 1 */
    int64_t end_pad = pads[2 + k] - (dilation->value.ints[k] - 1) * window;
    if (end_pad < 0) c.shapes[0][2 + k] += end_pad; /* crop the input instead */
    pads[2 + k] = end_pad < 0 ? 0 : end_pad;
  }
  new_dilation = *dilation;
  new_dilation.value.ints = ones;
  new_padding = padding != NULL ? *padding : *dilation;
  new_padding.name = "padding";
  new_padding.count = 4;
  new_padding.value.ints = pads;
  for (i = 0; i < ctx->num_attributes; ++i) {
    attributes[i] = ctx->attributes[i] == dilation  ? &new_dilation
                    : ctx->attributes[i] == padding ? &new_padding
                                                    : ctx->attributes[i];
  }
  if (padding == NULL) attributes[c.context.num_attributes++] = &new_padding;
  c.context.attributes = attributes;
  return call_original(&c.context);
}

/* Bug 26: layer_norm reads its scale (and bias) as if normalized over the
 * last dim only: with a 2-d scale (A, B), every row uses scale[0, :]. */
static cd_error* layer_norm_scale_last_dim(const cd_kernel_context* ctx) {
  view_copies c;
  int32_t i, d;
  if (!copy_inputs(ctx, &c)) return call_original(ctx);
  for (i = 1; i < ctx->num_inputs; ++i) {
    for (d = 0; d + 1 < c.views[i].ndim; ++d) c.strides[i][d] = 0;
  }
  return call_original(&c.context);
}

/* ---- bug 32: a kernel that finishes after its stream says done ------------ */
/* sqrt runs on a stream of the shim's own, ordered after the caller's earlier
 * work (an event) but with nothing ordering the caller's stream after it: a
 * launch on an internal queue that the stream's completion does not track.
 * The internal stream starts each kernel behind a SHIM_LATE_MS host
 * callback (the launch latency), so the caller's synchronize returns first. */
#define SHIM_LATE_MS 50
#define SHIM_MAX_DEVICES 64

static pthread_mutex_t g_late_lock = PTHREAD_MUTEX_INITIALIZER;
static cd_stream* g_late_stream[SHIM_MAX_DEVICES];
static cd_event* g_late_event[SHIM_MAX_DEVICES];

static void sleep_ms(long ms) {
  struct timespec nap;
  nap.tv_sec = ms / 1000;
  nap.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&nap, &nap) != 0) {
  }
}
static void launch_latency(void* user_data) {
  (void)user_data;
  sleep_ms(SHIM_LATE_MS);
}

/* Enqueues the real kernel on the device's internal stream; called with
 * g_late_lock held. */
static cd_error* launch_on_internal_stream(const cd_kernel_context* ctx) {
  int32_t device = ctx->device;
  cd_kernel_context launched = *ctx;
  cd_error* e = NULL;
  if (g_late_stream[device] == NULL) {
    e = g_cpu->stream_create(device, CD_STREAM_FLAGS_DEFAULT, &g_late_stream[device]);
  }
  if (e == NULL && g_late_event[device] == NULL) {
    e = g_cpu->event_create(device, CD_EVENT_DISABLE_TIMING, &g_late_event[device]);
  }
  if (e == NULL) e = g_cpu->event_record(g_late_event[device], ctx->stream);
  if (e == NULL) e = g_cpu->stream_wait_event(g_late_stream[device], g_late_event[device]);
  if (e == NULL) e = g_cpu->stream_add_host_callback(g_late_stream[device], launch_latency, NULL);
  if (e != NULL) return e;
  launched.stream = g_late_stream[device];
  return call_original(&launched);
}

static cd_error* sqrt_finishes_late(const cd_kernel_context* ctx) {
  cd_error* e;
  if (ctx->device < 0 || ctx->device >= SHIM_MAX_DEVICES) return call_original(ctx);
  pthread_mutex_lock(&g_late_lock);
  e = launch_on_internal_stream(ctx);
  pthread_mutex_unlock(&g_late_lock);
  return e;
}

/* Releases the internal streams (before the CPU instance shuts down). */
static void release_internal_streams(void) {
  int32_t d;
  pthread_mutex_lock(&g_late_lock);
  for (d = 0; d < SHIM_MAX_DEVICES; ++d) {
    if (g_late_event[d] != NULL) g_cpu->error_destroy(g_cpu->event_destroy(g_late_event[d]));
    if (g_late_stream[d] != NULL) g_cpu->error_destroy(g_cpu->stream_destroy(g_late_stream[d]));
    g_late_event[d] = NULL;
    g_late_stream[d] = NULL;
  }
  pthread_mutex_unlock(&g_late_lock);
}

/* ---- bug 27: copies above one DMA chunk ----------------------------------- */
/* A copy larger than one 64 KiB DMA descriptor is issued as whole chunks
 * only: the remainder (bytes % 64 KiB) is never copied. */
#define SHIM_DMA_CHUNK ((size_t)64 * 1024)

static size_t dma_bytes(size_t bytes) {
  return bytes <= SHIM_DMA_CHUNK ? bytes : bytes - bytes % SHIM_DMA_CHUNK;
}
static cd_error* h2d_chunks(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_cpu->memcpy_host_to_device(device, dst, src, dma_bytes(bytes));
}
static cd_error* d2h_chunks(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_cpu->memcpy_device_to_host(device, dst, src, dma_bytes(bytes));
}
static cd_error* d2d_chunks(int32_t device, void* dst, const void* src, size_t bytes) {
  return g_cpu->memcpy_device_to_device(device, dst, src, dma_bytes(bytes));
}
static cd_error* h2d_async_chunks(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) {
  return g_cpu->memcpy_host_to_device_async(device, dst, src, dma_bytes(bytes), s);
}
static cd_error* d2h_async_chunks(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) {
  return g_cpu->memcpy_device_to_host_async(device, dst, src, dma_bytes(bytes), s);
}
static cd_error* d2d_async_chunks(int32_t device, void* dst, const void* src, size_t bytes, cd_stream* s) {
  return g_cpu->memcpy_device_to_device_async(device, dst, src, dma_bytes(bytes), s);
}

/* ---- bug 28: the device's total memory in decimal megabytes --------------- */
/* The driver reports memory in MiB; the properties convert it with 10^6
 * (MB) instead of 2^20, so total_memory is 4.6 % below memory_get_info's. */
static cd_error* properties_decimal_memory(int32_t device, cd_device_properties* props) {
  cd_error* e = g_cpu->device_get_properties(device, props);
  if (e == NULL && props->struct_size >= CD_STRUCT_SIZE(cd_device_properties, total_memory)) {
    props->total_memory = (props->total_memory >> 20) * 1000000u;
  }
  return e;
}

/* ---- bug 29: event timestamps taken on the host at record time ------------ */
/* event_record notes the host clock when it is called, and elapsed_time
 * answers from those notes (after the real slot checked the pair): work
 * queued ahead of a record on a busy stream is not measured. */
#define SHIM_MAX_EVENTS 4096

typedef struct record_time {
  cd_event* event;
  double ms;
} record_time;

static pthread_mutex_t g_times_lock = PTHREAD_MUTEX_INITIALIZER;
static record_time g_times[SHIM_MAX_EVENTS];

static double host_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec * 1e3 + (double)now.tv_nsec / 1e6;
}

/* The slot of `event` in g_times (or a free one when `event` is NULL), or
 * NULL; called with g_times_lock held. */
static record_time* find_time(const cd_event* event) {
  int i;
  for (i = 0; i < SHIM_MAX_EVENTS; ++i) {
    if (g_times[i].event == event) return &g_times[i];
  }
  return NULL;
}

static cd_error* record_with_host_time(cd_event* event, cd_stream* stream) {
  cd_error* e = g_cpu->event_record(event, stream);
  record_time* slot;
  if (e != NULL) return e;
  pthread_mutex_lock(&g_times_lock);
  if ((slot = find_time(event)) == NULL) slot = find_time(NULL);
  if (slot != NULL) {
    slot->event = event;
    slot->ms = host_ms();
  }
  pthread_mutex_unlock(&g_times_lock);
  return NULL;
}
static cd_error* destroy_forgets_time(cd_event* event) {
  record_time* slot;
  pthread_mutex_lock(&g_times_lock);
  if ((slot = find_time(event)) != NULL) slot->event = NULL;
  pthread_mutex_unlock(&g_times_lock);
  return g_cpu->event_destroy(event);
}
static cd_error* elapsed_from_record_times(cd_event* start, cd_event* end, float* milliseconds) {
  cd_error* e = g_cpu->event_elapsed_time(start, end, milliseconds);
  record_time *a, *b;
  if (e != NULL) return e;
  pthread_mutex_lock(&g_times_lock);
  a = find_time(start);
  b = find_time(end);
  if (a != NULL && b != NULL) *milliseconds = (float)(b->ms - a->ms);
  pthread_mutex_unlock(&g_times_lock);
  return NULL;
}

/* ---- bug 30: device_synchronize waits for the newest stream only ---------- */
/* The backend keeps a "current stream" per device, set by stream_create,
 * and device_synchronize synchronizes that one. */
static pthread_mutex_t g_newest_lock = PTHREAD_MUTEX_INITIALIZER;
static cd_stream* g_newest_stream[SHIM_MAX_DEVICES];

static cd_error* create_sets_newest(int32_t device, uint32_t flags, cd_stream** stream) {
  cd_error* e = g_cpu->stream_create(device, flags, stream);
  if (e == NULL && device >= 0 && device < SHIM_MAX_DEVICES) {
    pthread_mutex_lock(&g_newest_lock);
    g_newest_stream[device] = *stream;
    pthread_mutex_unlock(&g_newest_lock);
  }
  return e;
}
static cd_error* destroy_clears_newest(cd_stream* stream) {
  int32_t d;
  pthread_mutex_lock(&g_newest_lock);
  for (d = 0; d < SHIM_MAX_DEVICES; ++d) {
    if (g_newest_stream[d] == stream) g_newest_stream[d] = NULL;
  }
  pthread_mutex_unlock(&g_newest_lock);
  return g_cpu->stream_destroy(stream);
}
/* Holds the lock while synchronizing, so the newest stream cannot be
 * destroyed meanwhile (stream_create waits; the work it waits for does
 * not create streams). */
static cd_error* synchronize_newest_stream(int32_t device) {
  int32_t count = 0;
  cd_error* e = g_cpu->device_get_count(&count);
  if (e != NULL) return e;
  if (device < 0 || device >= count) return g_cpu->device_synchronize(device); /* its error */
  pthread_mutex_lock(&g_newest_lock);
  e = device < SHIM_MAX_DEVICES && g_newest_stream[device] != NULL
          ? g_cpu->stream_synchronize(g_newest_stream[device])
          : NULL;
  pthread_mutex_unlock(&g_newest_lock);
  return e;
}

/* ---- bug 31: stream_destroy does not wait --------------------------------- */
/* stream_destroy hands the stream to a reaper thread, which waits for its
 * work and releases it, and returns at once. plugin_shutdown waits for the
 * reapers (the core's contract: every stream released before it). */
static pthread_mutex_t g_reaper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_reapers_done = PTHREAD_COND_INITIALIZER;
static int g_reapers;

static void* reap_stream(void* stream) {
  g_cpu->error_destroy(g_cpu->stream_destroy((cd_stream*)stream));
  pthread_mutex_lock(&g_reaper_lock);
  if (--g_reapers == 0) pthread_cond_broadcast(&g_reapers_done);
  pthread_mutex_unlock(&g_reaper_lock);
  return NULL;
}
static cd_error* destroy_in_background(cd_stream* stream) {
  cd_error* e = check_stream(stream);
  pthread_t reaper;
  if (e != NULL) return e;
  pthread_mutex_lock(&g_reaper_lock);
  ++g_reapers;
  pthread_mutex_unlock(&g_reaper_lock);
  if (pthread_create(&reaper, NULL, reap_stream, stream) != 0) {
    reap_stream(stream); /* no thread to be had: destroy it here, waiting */
    return NULL;
  }
  pthread_detach(reaper);
  return NULL;
}
static void wait_for_reapers(void) {
  pthread_mutex_lock(&g_reaper_lock);
  while (g_reapers > 0) pthread_cond_wait(&g_reapers_done, &g_reaper_lock);
  pthread_mutex_unlock(&g_reaper_lock);
}

/* The shim's own threads and streams end before the CPU instance's. */
static cd_error* shim_plugin_shutdown(void) {
  wait_for_reapers();
  release_internal_streams();
  return g_cpu->plugin_shutdown != NULL ? g_cpu->plugin_shutdown() : NULL;
}

/* ---- kernel registration -------------------------------------------------- */
/* The op whose kernels this build's bug replaces, or NULL for a bug in a
 * runtime slot. Every CPU kernel of that op is kept in g_original (by the
 * first dtype), planted or not: some planted kernels call another dtype's. */
static const char* planted_op(void) {
  switch (CHIPDOCK_BUG) {
    case BUG_FP16_ACCUMULATE: case BUG_REDUCTION_SKIPS_TAIL: return "sum";
    case BUG_WRONG_DTYPE_CLAIM: return "exp";
    case BUG_BROADCAST_AXIS: return "add";
    case BUG_WRITES_PAST_OUTPUT: case BUG_RELU_WRITES_INPUT: return "relu";
    case BUG_CRASH_KERNEL: return "abs";
    case BUG_HANG_KERNEL: return "neg";
    case BUG_SOFTMAX_NO_MAX_SHIFT: return "softmax";
    case BUG_SILU_NAIVE_EXP: return "silu";
    case BUG_EQ_COMPARES_BITS: return "eq";
    case BUG_TANH_LOSES_ZERO_SIGN: return "tanh";
    case BUG_IGNORES_BYTE_OFFSET: return "sub";
    case BUG_REVERSED_READ_FORWARD: return "mul";
    case BUG_MATMUL_TRANSPOSED_AS_ROW_MAJOR: return "matmul";
    case BUG_CONV_IGNORES_DILATION: return "conv2d";
    case BUG_LOG_SOFTMAX_ONE_TILE: return "log_softmax";
    case BUG_LAYER_NORM_SCALE_LAST_DIM: return "layer_norm";
    case BUG_KERNEL_FINISHES_LATE: return "sqrt";
    case BUG_MAX_STARTS_AT_LOWEST: return "max";
    default: return NULL;
  }
}

static int is_float(cd_dtype_t dtype) {
  return dtype == CD_DTYPE_FLOAT32 || dtype == CD_DTYPE_FLOAT16 || dtype == CD_DTYPE_BFLOAT16 ||
         dtype == CD_DTYPE_FLOAT64;
}

/* The planted kernel for a registration of planted_op() with first dtype
 * `dtype`, or NULL to keep the CPU's. `*flags` may gain flags the planted
 * kernel needs (the host-computed ones read contiguous inputs). */
static cd_kernel_fn planted_kernel(cd_dtype_t dtype, uint32_t* flags) {
  uint32_t contiguous = *flags | CD_KERNEL_CONTIGUOUS_INPUTS;
  int f32 = dtype == CD_DTYPE_FLOAT32;
  switch (CHIPDOCK_BUG) {
    case BUG_FP16_ACCUMULATE:
      if (dtype != CD_DTYPE_FLOAT16) return NULL;
      *flags = contiguous;
      return sum_f16_accumulate;
    case BUG_WRONG_DTYPE_CLAIM:
      if (dtype != CD_DTYPE_FLOAT64) return NULL;
      *flags = contiguous;
      return exp_f64_in_f32;
    case BUG_SOFTMAX_NO_MAX_SHIFT: case BUG_LOG_SOFTMAX_ONE_TILE:
      if (!f32) return NULL;
      *flags = contiguous;
      return rows_f32_host;
    case BUG_SILU_NAIVE_EXP:
      if (!f32) return NULL;
      *flags = contiguous;
      return silu_f32_naive;
    case BUG_TANH_LOSES_ZERO_SIGN:
      if (!f32) return NULL;
      *flags = contiguous;
      return tanh_f32_magnitude;
    case BUG_MAX_STARTS_AT_LOWEST:
      if (!f32) return NULL;
      *flags = contiguous;
      return max_f32_from_lowest;
    case BUG_REDUCTION_SKIPS_TAIL: return f32 ? sum_skips_tail : NULL;
    case BUG_BROADCAST_AXIS: return add_wrong_broadcast;
    case BUG_WRITES_PAST_OUTPUT: return relu_writes_past_end;
    case BUG_CRASH_KERNEL: return abs_crashes;
    case BUG_HANG_KERNEL: return neg_hangs;
    case BUG_EQ_COMPARES_BITS: return is_float(dtype) ? eq_compares_bits : NULL;
    case BUG_RELU_WRITES_INPUT: return relu_writes_input;
    case BUG_IGNORES_BYTE_OFFSET: return sub_ignores_byte_offset;
    case BUG_REVERSED_READ_FORWARD: return mul_reads_reversed_forward;
    case BUG_MATMUL_TRANSPOSED_AS_ROW_MAJOR: return matmul_transposed_as_row_major;
    case BUG_CONV_IGNORES_DILATION: return conv2d_ignores_dilation;
    case BUG_LAYER_NORM_SCALE_LAST_DIM: return layer_norm_scale_last_dim;
    case BUG_KERNEL_FINISHES_LATE: return sqrt_finishes_late;
    default: return NULL;
  }
}

static cd_status_t shim_kernel_register(cd_kernel_registry* registry, const cd_kernel_def* def) {
  cd_kernel_def copy = *def;
  cd_dtype_t dtype = def->num_dtypes > 0 ? def->dtypes[0] : CD_DTYPE_INVALID;
  const char* op = planted_op();
  cd_kernel_fn planted = NULL;
  if (op != NULL && def->op != NULL && strcmp(def->op, op) == 0 && def->fn != NULL && dtype > 0 &&
      dtype < CD_DTYPE_COUNT) {
    g_original[dtype] = def->fn;
    planted = planted_kernel(dtype, &copy.flags);
  }
  if (planted != NULL) {
    copy.fn = planted;
    ++g_kernels_wrapped;
  }
  return g_core->kernel_register(registry, &copy);
}

static cd_error* shim_kernels_register(cd_kernel_registry* registry) {
  cd_error* e = g_cpu->kernels_register(registry);
  if (e == NULL && g_kernels_wrapped == 0 && planted_op() != NULL) return &g_error_nothing;
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
    case BUG_COPY_WHOLE_CHUNKS:
      t->memcpy_host_to_device = h2d_chunks;
      t->memcpy_device_to_host = d2h_chunks;
      t->memcpy_device_to_device = d2d_chunks;
      t->memcpy_host_to_device_async = h2d_async_chunks;
      t->memcpy_device_to_host_async = d2h_async_chunks;
      t->memcpy_device_to_device_async = d2d_async_chunks;
      break;
    case BUG_PROPERTIES_MEMORY_DECIMAL: t->device_get_properties = properties_decimal_memory; break;
    case BUG_TIMING_AT_RECORD:
      t->event_record = record_with_host_time;
      t->event_destroy = destroy_forgets_time;
      t->event_elapsed_time = elapsed_from_record_times;
      break;
    case BUG_DEVICE_SYNC_LAST_STREAM:
      t->stream_create = create_sets_newest;
      t->stream_destroy = destroy_clears_newest;
      t->device_synchronize = synchronize_newest_stream;
      break;
    case BUG_DESTROY_NO_WAIT:
      t->stream_destroy = destroy_in_background;
      t->plugin_shutdown = shim_plugin_shutdown;
      break;
    default: /* a kernel bug */
      t->kernels_register = shim_kernels_register;
      if (CHIPDOCK_BUG == BUG_KERNEL_FINISHES_LATE) t->plugin_shutdown = shim_plugin_shutdown;
      break;
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
