/*
 * chipdock device ABI — base definitions.
 *
 * Everything here is plain C99: fixed-width integers, no bool, no C++ types,
 * enum values carried in int32_t fields (an enum's own width is
 * implementation-defined, a field's is not), alignment at most 8.
 *
 * Versioning rules (read these before changing any file in this directory):
 *   - MAJOR changes when an existing struct field or function slot changes
 *     meaning, type or position, or when one is removed. Plugins built against
 *     another major are refused before they are loaded.
 *   - MINOR changes when something is appended: a field at the end of a
 *     struct, a slot at the end of a function table, a new enum value, a new
 *     flag. Both sides read `struct_size` and never touch what lies beyond the
 *     smaller of the two sizes, so every 1.x plugin loads in every 1.y core.
 *   - Every minor bump has a line in device_api/CHANGELOG.md.
 */
#ifndef CHIPDOCK_CD_BASE_H_
#define CHIPDOCK_CD_BASE_H_

#include <stddef.h>
#include <stdint.h>

#define CD_ABI_VERSION_MAJOR 1
#define CD_ABI_VERSION_MINOR 2

#ifdef __cplusplus
#define CD_EXTERN_C extern "C"
#define CD_EXTERN_C_BEGIN extern "C" {
#define CD_EXTERN_C_END }
#else
#define CD_EXTERN_C
#define CD_EXTERN_C_BEGIN
#define CD_EXTERN_C_END
#endif

#if defined(_WIN32)
#define CD_EXPORT __declspec(dllexport)
#else
#define CD_EXPORT __attribute__((visibility("default")))
#endif

/* Compile-time assertion usable at file scope in C99 and C++ (C99 has no
 * _Static_assert). A failing condition makes an array of size -1. */
#define CD_CONCAT_INNER_(a, b) a##b
#define CD_CONCAT_(a, b) CD_CONCAT_INNER_(a, b)
#define CD_STATIC_ASSERT(cond, tag) \
  typedef char CD_CONCAT_(cd_static_assert_, tag)[(cond) ? 1 : -1]

CD_EXTERN_C_BEGIN

/* ------------------------------------------------------------------------ */
/* Status codes. Numbered explicitly; new codes are only appended.           */
/* ------------------------------------------------------------------------ */
typedef int32_t cd_status_t;
#define CD_STATUS_OK 0
#define CD_STATUS_INVALID_ARGUMENT 1  /* a bad value the caller could check */
#define CD_STATUS_INVALID_HANDLE 2    /* unknown, destroyed or foreign handle */
#define CD_STATUS_OUT_OF_MEMORY 3     /* device or host allocation failed */
#define CD_STATUS_UNIMPLEMENTED 4     /* the slot exists but does nothing here */
#define CD_STATUS_NOT_READY 5         /* work still pending (never an error from query slots) */
#define CD_STATUS_DEVICE_ERROR 6      /* the device or its runtime failed */
#define CD_STATUS_UNAVAILABLE 7       /* runtime/driver missing or too old */
#define CD_STATUS_OUT_OF_RANGE 8      /* an access beyond an allocation */
#define CD_STATUS_INTERNAL 9          /* a bug in the plugin */
#define CD_STATUS_MAX 0x7fffffff

/* ------------------------------------------------------------------------ */
/* Data types. The numbering is part of the ABI.                             */
/* ------------------------------------------------------------------------ */
typedef int32_t cd_dtype_t;
#define CD_DTYPE_INVALID 0
#define CD_DTYPE_FLOAT32 1
#define CD_DTYPE_FLOAT16 2
#define CD_DTYPE_BFLOAT16 3
#define CD_DTYPE_FLOAT64 4
#define CD_DTYPE_INT8 5
#define CD_DTYPE_INT16 6
#define CD_DTYPE_INT32 7
#define CD_DTYPE_INT64 8
#define CD_DTYPE_UINT8 9
#define CD_DTYPE_BOOL 10 /* one byte, 0 or 1 */
#define CD_DTYPE_COUNT 11 /* one past the last defined dtype (grows with minors) */
#define CD_DTYPE_MAX 0x7fffffff

/* Bit for a dtype in a uint64_t dtype mask (see cd_device_properties). */
#define CD_DTYPE_BIT(dtype) (((uint64_t)1) << (dtype))

/* ------------------------------------------------------------------------ */
/* Extension chain. Every ABI struct begins with `struct_size` and `next`;    */
/* `next` points to a NULL-terminated chain of cd_extension-headed structs    */
/* that a later minor version may define. Unknown `type`s are skipped.        */
/* ------------------------------------------------------------------------ */
typedef struct cd_extension {
  size_t struct_size;
  struct cd_extension* next;
  int32_t type;
  int32_t reserved;
} cd_extension;

/* The size of a struct up to and including `field`: what a caller built
 * against an older minor would have put into `struct_size`. */
#define CD_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* ------------------------------------------------------------------------ */
/* Opaque handles. Each is defined by the plugin and means nothing to the    */
/* core, which never dereferences it.                                        */
/* ------------------------------------------------------------------------ */
typedef struct cd_error cd_error;   /* an error: code + message */
typedef struct cd_stream cd_stream; /* an in-order queue of device work */
typedef struct cd_event cd_event;   /* a marker in a stream */
typedef struct cd_comm cd_comm;     /* a collective communicator for one rank */

/* Error ownership rule (used by every function in the ABI that returns
 * `cd_error*`): NULL means success. A non-NULL result is a new error object
 * allocated by the plugin and owned by the caller, who reads it with
 * `error_get_code` / `error_get_message` and releases it exactly once with
 * `error_destroy`. An error outlives the call that made it and may be read
 * and destroyed from any thread. */

/* Log levels for cd_core_api.log. */
typedef int32_t cd_log_level_t;
#define CD_LOG_DEBUG 0
#define CD_LOG_INFO 1
#define CD_LOG_WARNING 2
#define CD_LOG_ERROR 3

CD_EXTERN_C_END

#endif /* CHIPDOCK_CD_BASE_H_ */
