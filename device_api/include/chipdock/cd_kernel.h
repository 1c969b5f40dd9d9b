/*
 * chipdock device ABI — kernels: tensor views, attributes, the kernel
 * context, kernel registration, and the services the core offers plugins.
 *
 * Kernels cross the ABI as C functions over tensor views. The core infers
 * output shapes and allocates outputs before a kernel runs; a kernel never
 * allocates its outputs, and asks the core for scratch space (workspace).
 */
#ifndef CHIPDOCK_CD_KERNEL_H_
#define CHIPDOCK_CD_KERNEL_H_

#include "chipdock/cd_base.h"

CD_EXTERN_C_BEGIN

/* Memory formats of a tensor view. v1 defines only STRIDED; a later minor
 * may add private formats (for example Ascend's NC1HWC0). A kernel must
 * refuse (CD_STATUS_INVALID_ARGUMENT) a format it does not know. */
typedef int32_t cd_format_t;
#define CD_FORMAT_STRIDED 0

/* A view of device memory as an n-dimensional array.
 *
 * Views reach kernels as arrays of POINTERS (cd_kernel_context.inputs), so
 * a later minor may append fields: read `struct_size` before reading past
 * the v1.0 fields.
 *
 * Element (i0, i1, ...) lives at
 *   (char*)data + byte_offset + (i0*strides[0] + i1*strides[1] + ...) * itemsize
 * Strides are in elements and may be zero (broadcast) or negative; shape
 * entries may be zero (an empty tensor; then `data` may be NULL). A scalar
 * has ndim 0 and shape/strides NULL.
 *
 * Ownership: the core owns `shape` and `strides` and the memory behind
 * `data`; all pointers stay valid only for the duration of the call that
 * received the view. A kernel that defers work copies what it needs. */
typedef struct cd_tensor_view {
  size_t struct_size;
  cd_extension* next;
  void* data;            /* device pointer into an allocation (not always its start) */
  int64_t byte_offset;   /* bytes from `data` to element (0, 0, ...) */
  const int64_t* shape;  /* ndim entries */
  const int64_t* strides;/* ndim entries, in elements */
  cd_dtype_t dtype;
  int32_t ndim;
  cd_format_t format;    /* CD_FORMAT_STRIDED in v1 */
  int32_t device;        /* ordinal of the device that owns `data` */
} cd_tensor_view;

/* Extension types a core may chain to a cd_tensor_view's `next`. */
#define CD_EXTENSION_TENSOR_VERSION 1 /* cd_tensor_version */

/* (since 1.2) The identity and write version of the memory behind an INPUT
 * view. The core chains it to an input whose memory only the core writes;
 * it is absent where another framework shares the memory (DLPack, either
 * way) and from older cores.
 *
 * `storage_id` names the allocation the view lies in for the life of the
 * process: it is never reused, even when the core's caching allocator hands
 * the same memory to a later tensor. `version` changes each time the core
 * enqueues a write into that allocation (a kernel output, a copy, a fill).
 * So while (storage_id, version) stay equal, so do the bytes the view reads
 * once the work enqueued before the call has run. A kernel may keep data
 * derived from such an input, e.g. weights reordered into its own blocked
 * layout, keyed by (storage_id, version, byte_offset, shape, strides,
 * dtype), and reuse it on later calls instead of deriving it again.
 * Ownership: the core's, read-only to the kernel and, like the view, valid
 * only during the call (copy the two numbers, never the pointer). Such a
 * cache is the plugin's to bound and to guard: kernels may run on several
 * threads at once. */
typedef struct cd_tensor_version {
  size_t struct_size;
  cd_extension* next;
  int32_t type;     /* CD_EXTENSION_TENSOR_VERSION */
  int32_t reserved; /* 0 */
  uint64_t storage_id;
  uint64_t version;
} cd_tensor_version;

/* Attribute value types. */
typedef int32_t cd_attr_type_t;
#define CD_ATTR_INT 1     /* value.i */
#define CD_ATTR_FLOAT 2   /* value.f */
#define CD_ATTR_STRING 3  /* value.s, NUL-terminated UTF-8 */
#define CD_ATTR_INTS 4    /* value.ints, `count` entries */
#define CD_ATTR_FLOATS 5  /* value.floats, `count` entries */

/* One named attribute of an op call. Owned by the core; valid for the
 * duration of the kernel call only. */
typedef struct cd_attribute {
  size_t struct_size;
  cd_extension* next;
  const char* name;
  cd_attr_type_t type;
  int32_t count; /* 1 for scalars, the array length for INTS and FLOATS */
  union {
    int64_t i;
    double f;
    const char* s;
    const int64_t* ints;
    const double* floats;
  } value;
} cd_attribute;

/* Everything a kernel gets. Owned by the core, valid for the duration of the
 * kernel call only (including the arrays it points to).
 *
 * `core_private` belongs to the core: pass the context back unchanged to
 * cd_core_api.workspace_allocate and do not read it. */
typedef struct cd_kernel_context {
  size_t struct_size;
  cd_extension* next;
  const char* op;                            /* op name from the opset, e.g. "add" */
  const cd_tensor_view* const* inputs;       /* num_inputs pointers to views */
  const cd_tensor_view* const* outputs;      /* num_outputs pointers; outputs are allocated */
  const cd_attribute* const* attributes;     /* num_attributes pointers, any order */
  cd_stream* stream;              /* enqueue the work here */
  void* core_private;
  int32_t num_inputs;
  int32_t num_outputs;
  int32_t num_attributes;
  int32_t device;                 /* the device ordinal the call runs on */
} cd_kernel_context;

/* A kernel. Validates its arguments, then enqueues the work on
 * `ctx->stream` and returns; it need not wait for the work to finish.
 * Errors found before enqueueing are returned (the outputs are then left
 * untouched); errors found while the work runs are reported by the next
 * synchronization of that stream.
 * Blocking: should not block on device work. Thread-safety: may be called
 * concurrently from several threads on different streams. */
typedef cd_error* (*cd_kernel_fn)(const cd_kernel_context* ctx);

/* A kernel registration: one function for one op and one dtype signature.
 * `dtypes` lists one dtype per input the opset declares for the op (an
 * absent optional input and a variadic input count once, with the dtype of
 * their type variable), then one per declared output
 * (`num_dtypes` = declared inputs + declared outputs). The core copies
 * everything it needs during cd_core_api.kernel_register. */
typedef struct cd_kernel_def {
  size_t struct_size;
  cd_extension* next;
  const char* op;
  const cd_dtype_t* dtypes;
  cd_kernel_fn fn;
  int32_t num_dtypes;
  uint32_t flags; /* CD_KERNEL_* flags; 0 in 1.0 */
} cd_kernel_def;

/* Flags of cd_kernel_def (bitwise OR; a 1.0 core ignores them).
 * CD_KERNEL_CONTIGUOUS_INPUTS (since 1.1): the core makes every input
 * C-contiguous before calling the kernel (broadcast operands are then
 * materialized). Without it a kernel receives arbitrary strided views. */
#define CD_KERNEL_FLAGS_DEFAULT 0u
#define CD_KERNEL_CONTIGUOUS_INPUTS 1u

/* A registry handle the core passes to plugin kernels_register. */
typedef struct cd_kernel_registry cd_kernel_registry;

/* Services the core offers a plugin. The core passes this table to the
 * plugin's entry function; the table and every pointer in it stay valid
 * until the plugin library is unloaded. All functions are thread-safe.
 * They return a cd_status_t (the core's own errors never need freeing). */
typedef struct cd_core_api {
  size_t struct_size;
  cd_extension* next;
  int32_t abi_major; /* the ABI version the core was built against */
  int32_t abi_minor;
  const char* core_version; /* e.g. "0.1.0"; static storage */

  /* Registers one kernel. Only valid inside plugin kernels_register, with
   * the registry it received. A second registration of the same (op,
   * dtypes) replaces the first. Returns CD_STATUS_INVALID_ARGUMENT for a
   * NULL op or fn or an unknown dtype. */
  cd_status_t (*kernel_register)(cd_kernel_registry* registry, const cd_kernel_def* def);

  /* Scratch memory for the kernel running under `ctx`: `bytes` on the
   * context's device, aligned to 256 bytes, usable by work enqueued on
   * ctx->stream until that work completes; the core frees it itself,
   * ordered after the stream's work. `*out` is NULL for 0 bytes. Returns
   * CD_STATUS_OUT_OF_MEMORY if it cannot be had. */
  cd_status_t (*workspace_allocate)(const cd_kernel_context* ctx, size_t bytes, void** out);

  /* Forwards a message to the core's log (shown by `chipdock doctor`).
   * `message` is copied. */
  void (*log)(cd_log_level_t level, const char* message);
} cd_core_api;

CD_EXTERN_C_END

#endif /* CHIPDOCK_CD_KERNEL_H_ */
